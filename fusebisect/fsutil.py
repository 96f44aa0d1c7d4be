"""Atomic file writes: a temp file in the target's directory, fsync, then ``os.replace``.

A reader never sees a half-written output, and a crash leaves the previous file intact.
"""

from __future__ import annotations

import errno
import os
import re
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from fusebisect.errors import UsageError


# outputs a dump, golden or graph scan never reads: one written earlier may be written again
_REPORT_SUFFIXES = (".csv", ".html", ".htm", ".md")


def missing_reason(path: str | os.PathLike[str], absent: str = "no such file or directory") -> str:
    """Why an input path that is neither a file nor a directory cannot be read: ``absent`` when nothing is there,
    a broken symbolic link, a symbolic link loop, a FIFO or device, or the system's reason (a permission)."""
    p = Path(path)
    try:
        os.stat(p)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symbolic link loop (too many levels of symbolic links)"
        if exc.errno == errno.ENOENT:
            return "a broken symbolic link" if p.is_symlink() else absent
        return (exc.strerror or str(exc)).lower()
    return not_regular(p) or "not a file or directory"


def not_regular(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` cannot be read as an input file without blocking (a FIFO, a socket, a device), or None (a
    regular file, a missing one, a directory: their readers say so themselves)."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISFIFO(mode):
        return "not a regular file (a FIFO: reading it would wait for a writer)"
    if stat.S_ISSOCK(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "not a regular file (a socket or a device)"
    return None


def real_path(path: str | os.PathLike[str]) -> Path:
    """``path`` resolved, or made absolute when it cannot be (a symbolic link loop: its reader says so); for
    telling whether two paths name one file, where :func:`resolved_path` would stop the command."""
    try:
        return Path(path).resolve()
    except (OSError, RuntimeError):   # RuntimeError: a symbolic link loop (Python < 3.13)
        return Path(path).absolute()


def resolved_path(path: str | os.PathLike[str], flag: str) -> Path:
    """``path`` resolved; a symbolic link loop or an unreadable component is a UsageError naming ``flag``."""
    try:
        return Path(path).resolve()
    except (OSError, RuntimeError) as exc:   # RuntimeError: a symbolic link loop (Python < 3.13)
        raise UsageError(f"{flag} {path}: cannot resolve the path ({exc})") from None


def refuse_inside_inputs(out: str | os.PathLike[str] | None, flag: str,
                         inputs: Iterable[str | os.PathLike[str] | None], *, new_file_ok: bool = True) -> None:
    """Raise UsageError when output ``out`` (given with option ``flag``) would replace an input: it is one of the
    ``inputs``, or an existing file inside an input directory that is not a report (a dump, a golden .npy, a
    graph, mapping.csv; a .csv/.html/.md written there before may be written again), or a new file there that
    would read as data (mapping.csv, .npy). With ``new_file_ok`` False anything inside an input directory is
    refused (outputs that would mix into the data). An input file's own directory holds the user's data too
    (the dumps beside it, which some readers match it against): an existing file there other than a report is
    refused as well. Symlinks are followed."""
    if out is None:
        return
    where = resolved_path(out, flag)
    report = where.suffix.lower() in _REPORT_SUFFIXES and where.name != "mapping.csv" and where.is_file()
    # a new file the readers of a dump tree would take for data: hashed names' mapping.csv, golden .npy files
    data = where.name == "mapping.csv" or where.suffix.lower() == ".npy"
    for given in inputs:
        if given is None:
            continue
        source = resolved_path(given, flag)
        inside = source.is_dir() and where.is_relative_to(source)
        beside = source.is_file() and where.parent == source.parent and where.is_file() and not report
        if where == source or beside or (inside and ((where.exists() and not report) or not new_file_ok or data)):
            what = ("is" if where == source else "would replace a file beside" if beside
                    else "would replace a file in" if where.exists() else "is inside")
            why = ", where a file of that name would be read as data" if data and not where.exists() else \
                ", which is only read"
            raise UsageError(f"{flag} {out}: {what} the input {given}{why}; write it elsewhere")


def check_output_file(out: str | os.PathLike[str] | None, flag: str, *, directory: bool = False) -> None:
    """Raise UsageError unless ``out`` (given with option ``flag``) can name an output file (``directory``: an
    output directory): not a directory (not a file), in a directory that exists (a mistyped path must not create
    directories)."""
    if out is None:
        return
    path = Path(out)
    if directory and stream_fd(path) is not None:
        raise UsageError(f"{flag} {out}: names {'stdout' if str(out) == '-' else 'a stream'}; give a directory")
    if not directory and path.is_dir():
        raise UsageError(f"{flag} {out}: is a directory; give a file path")
    if directory and path.exists() and not path.is_dir():
        raise UsageError(f"{flag} {out}: exists and is not a directory")
    parent = resolved_path(path, flag).parent
    if not parent.is_dir():
        raise UsageError(f"{flag} {out}: directory {parent} does not exist")
    if not directory and stream_fd(path) is None and not (path.exists() and not path.is_file()):
        probe_writable(parent, flag)


def probe_writable(directory: Path, flag: str) -> None:
    """Raise UsageError (naming ``flag``) unless a file can be created in ``directory``: outputs are written
    atomically through a temporary file beside them, which /proc or a read-only mount refuses (said before the
    work, not after it)."""
    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".fusebisect-probe-"):
            pass
    except OSError as exc:
        raise UsageError(f"{flag}: cannot write in {directory} ({exc.strerror or exc})") from None


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; return the path. Raises OSError on I/O failure.

    A symbolic link is followed: its target is replaced and the link stays; the directory is the one the
    kernel finds (``link/..`` is the link target's parent). A path that is not a regular file (``/dev/null``, a
    FIFO) is written into as it is: replacing it would turn a device into a plain file. So is another process's
    descriptor named through ``/proc/PID/fd/N`` (a stream redirected to a file): replacing the file behind it
    would leave that process writing into an unlinked one; it is appended to, never truncated. Files on a
    filesystem mounted under ``/dev`` (``/dev/shm``) are plain files, replaced like any other."""
    path = Path(path)
    fd = stream_fd(path)
    if fd is not None:   # our own stdout/stderr/fd: written through that descriptor, in order with the rest
        if fd == 1 and sys.stdout is None:   # stdout closed (>&-): nothing is written, as for the other output
            return path
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(fd, view):]
        except BrokenPipeError:   # its reader went away (| head): exit as SIGPIPE would, as the other output does
            from fusebisect.console import exit_pipe_closed

            exit_pipe_closed()
        except OSError as exc:   # a descriptor that is not open: named by the path asked for
            raise OSError(exc.errno, f"cannot write it ({exc.strerror or exc})", str(path)) from None
        return path
    if _FD_PATH.fullmatch(str(path)) and path.exists():
        with open(path, "ab") as handle:
            handle.write(data)
        return path
    if path.is_symlink():
        path = path.resolve()
    else:   # the kernel resolves "link/.." through the link; the temporary file must go where it goes
        path = path.parent.resolve() / path.name
    if path.is_dir():   # else the error would name the temporary file
        raise IsADirectoryError(errno.EISDIR, "is a directory, not a file", str(path))
    if path.exists() and not path.is_file():
        with open(path, "wb") as handle:
            handle.write(data)
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o7777  # replacing a file keeps its permissions
    except FileNotFoundError:
        mode = 0o666 & ~_UMASK  # a new file gets what open() would give it
    # the temporary name must fit NAME_MAX (255) even when the target's name nearly fills it
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:200]}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:   # named by the file asked for, not by the temporary one
        raise OSError(exc.errno, f"cannot write it ({exc.strerror or exc})", str(path)) from None
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):   # a full disk, a file size limit: the file asked for, not the temporary one
            raise OSError(exc.errno, f"cannot write it ({exc.strerror or exc}); left as it was",
                          str(path)) from None
        raise
    return path


_FD_PATH = re.compile(r"/(?:dev/fd|proc/[^/]+/fd)/\d+")   # a path naming a process's open descriptor


def is_stream_path(path: str | os.PathLike[str]) -> bool:
    """True for a path naming this process's stdout or stderr (/dev/stdout, /dev/fd/1, /proc/self/fd/2, ...):
    written into, no existing-file check or backup applies to it. Another descriptor (/dev/fd/3,
    /proc/PID/fd/N) may stand for a user's file: it is no stream here."""
    return stream_fd(Path(path)) in (1, 2)


def names_descriptor(path: str | os.PathLike[str]) -> bool:
    """True for a path naming an open descriptor (/dev/stdout, /dev/fd/N, /proc/PID/fd/N, ...)."""
    return stream_fd(Path(path)) is not None or bool(_FD_PATH.fullmatch(str(path)))


def stream_fd(path: Path) -> int | None:
    """The descriptor ``-`` (stdout, as an output path), ``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N`` or
    ``/proc/self/fd/N`` names, else None. (A file named ``-`` is given by its full path: ``Path('./-')`` is
    ``-``.)"""
    text = str(path)
    named = {"-": 1, "/dev/stdout": 1, "/dev/stderr": 2}.get(text)
    if named is not None:
        return named
    for prefix in ("/dev/fd/", "/proc/self/fd/"):
        if text.startswith(prefix) and text[len(prefix):].isdigit():
            return int(text[len(prefix):])
    return None


def _read_umask() -> int:
    # os.umask can only be read by setting it; do it once, at import, before any thread writes files
    current = os.umask(0o022)
    os.umask(current)
    return current


_UMASK = _read_umask()


def atomic_write_text(path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically; return the path. Raises OSError on I/O failure.

    A character the encoding cannot hold (a file name's non-UTF-8 byte, which Python reads as a lone surrogate)
    is written as its ``\\uXXXX`` escape: in a JSON string that is the same text again."""
    return atomic_write_bytes(path, text.encode(encoding, errors="backslashreplace"))
