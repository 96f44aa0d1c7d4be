"""The append-only, crash-safe journal of one bisection: ``WORKDIR/journal.jsonl``.

One JSON object per line; the first is the ``start`` record (command, candidates, options, version), then
``trial``, ``prior``, ``dumps`` and ``result`` events (format in the project contracts). Every line is written
with flush + fsync, so a ``kill -9`` loses at most the executions in flight; a torn last line is ignored when
loading. The search state is a fold over these events, so rerunning the same command resumes.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any, Iterable

from fusebisect.errors import FusebisectError, UsageError

JOURNAL_NAME = "journal.jsonl"
VERSION = 1


class JournalError(FusebisectError):
    """The journal cannot be read (corrupt in the middle) or does not belong to this command."""


def encode_float(value: float | None) -> float | str | None:
    """A float for JSON: NaN/Inf become the strings 'nan'/'inf'/'-inf' (a NaN loss is a verdict, not nothing)."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else str(value)


def decode_float(value: Any) -> float | None:
    """Inverse of :func:`encode_float`. Returns None for None."""
    if value is None:
        return None
    return float(value)


class Journal:
    """Append-only JSON-lines file. ``append`` is thread-safe and durable (flush + fsync per line)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def exists(self) -> bool:
        """True when the journal file exists and holds at least one complete record."""
        return bool(self.load())

    def load(self) -> list[dict]:
        """Return every complete record in order. A torn (unparsable) last line is ignored; an unterminated one
        that parses is a record (its newline is added by the next append).

        Raises JournalError when a line other than the last one is not valid JSON."""
        from fusebisect.fsutil import not_regular

        if why := not_regular(self.path):
            raise JournalError(why, path=self.path)
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        lines = data.split(b"\n")
        records: list[dict] = []
        last = len(lines) - 1
        for number, raw in enumerate(lines):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except RecursionError:
                raise JournalError(f"line {number + 1} is nested too deeply to be a journal event; fix or move the "
                                   f"journal aside (--fresh)", path=self.path) from None
            except ValueError:
                if number == last:
                    break  # torn last line (no newline): the write in flight when the process died
                raise JournalError(f"line {number + 1} is not valid JSON; fix or move the journal aside "
                                   f"(--fresh)", path=self.path) from None
            if not isinstance(obj, dict) or "event" not in obj:
                raise JournalError(f"line {number + 1} is not a journal event", path=self.path)
            problem = _field_problem(obj) or _schema_problem(obj)
            if problem:
                raise JournalError(f"line {number + 1}: {problem}; fix or move the journal aside (--fresh)",
                                   path=self.path)
            records.append(obj)
        return records

    def append(self, record: dict) -> None:
        """Append one record durably. Raises JournalError (naming the journal, saying a rerun resumes) on I/O
        failure: a full disk, a file-size limit."""
        line = json.dumps(record, ensure_ascii=False, allow_nan=False, separators=(",", ":")) + "\n"
        with self._lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._repair_torn_tail()
                with open(self.path, "ab") as handle:
                    # a non-UTF-8 byte of a path (a lone surrogate) as its \uXXXX escape: the same string in JSON
                    handle.write(line.encode("utf-8", errors="backslashreplace"))
                    handle.flush()
                    os.fsync(handle.fileno())
            except OSError as exc:
                raise JournalError(f"cannot append to it ({exc.strerror or exc}); the runs judged before are kept: "
                                   "once it can be written (free space), rerun the same command to resume",
                                   path=self.path) from None

    def _repair_torn_tail(self) -> None:
        """Make the next record start on a fresh line: an unterminated last line that parses as a record (which
        ``load`` returns) gets its newline; a torn one (never a complete record) is cut off."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return
        if size == 0:
            return
        with open(self.path, "rb+") as handle:
            handle.seek(size - 1)
            if handle.read(1) != b"\n":
                handle.seek(0)
                data = handle.read()
                cut = data.rfind(b"\n") + 1
                try:
                    whole = isinstance(json.loads(data[cut:]), dict)
                except (ValueError, RecursionError):
                    whole = False
                if whole:
                    handle.seek(size)
                    handle.write(b"\n")
                else:   # drop the torn fragment: it was never a complete record
                    handle.truncate(cut)
                handle.flush()
                os.fsync(handle.fileno())


def production_digest(path: str | os.PathLike[str]) -> str:
    """The SHA-256 (hex) of a production switch file: result.json keeps it as ``switch_file_sha256``. Raises
    OSError."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def journaled_workdir(workdir: str | os.PathLike[str]) -> Path | None:
    """The workdir as the journal's start record names it (where the run began: ``workdir`` may be a copy, or
    the workdir renamed since), or None without a readable start record."""
    try:
        with open(Path(workdir) / JOURNAL_NAME, encoding="utf-8") as handle:
            start = json.loads(handle.readline())
        return Path(start["workdir"]) if start.get("event") == "start" and start.get("workdir") else None
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        return None


def previous_production(workdir: str | os.PathLike[str]) -> tuple[Path, bool | None] | None:
    """The production switch file the previous run in ``workdir`` wrote (its result.json's ``switch_file``), and
    whether it still holds what that run wrote (None when result.json has no digest); None without one. A file
    inside the workdir the run began in (the default ``WORKDIR/fusion_switch.cfg``) is this workdir's: a copy or
    a renamed workdir holds its own, and the original's belongs to the original."""
    try:
        previous = json.loads((Path(workdir) / "result.json").read_text(encoding="utf-8"))
        path = Path(previous["switch_file"])
        began = journaled_workdir(workdir)
        here = Path(workdir).absolute()
        if began is not None and began != here and path.is_relative_to(began):
            path = here / path.relative_to(began)
        digest = previous.get("switch_file_sha256")
        return path, (None if not digest else path.is_file() and production_digest(path) == digest)
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        return None


LOCK_NAME = ".lock"


@contextlib.contextmanager
def workdir_lock(workdir: Path):
    """Hold an exclusive lock on WORKDIR/.lock for the whole run: a second run in the same workdir would take the
    first one's running execution for a leftover, kill it, and interleave the journal. Raises UsageError when
    another run holds it. (flock: released by the kernel when the process dies, even by kill -9.)"""
    import fcntl

    path = workdir / LOCK_NAME
    with open(path, "a+", encoding="ascii") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip()
            raise UsageError(f"--workdir {workdir}: another fusebisect run is using it"
                             + (f" (pid {holder})" if holder else "") + "; wait for it, or use another --workdir")
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


_FINISHING: set[str] = set()   # workdirs whose run, in this process, holds the lock to write its reports


@contextlib.contextmanager
def finishing(workdir: Path):
    """While a run writes its own reports (still holding its lock), :func:`workdir_holder` calls it not running:
    its result is final."""
    key = str(Path(workdir).absolute())
    _FINISHING.add(key)
    try:
        yield
    finally:
        _FINISHING.discard(key)


def workdir_holder(workdir: Path) -> str | None:
    """The pid of the fusebisect run holding WORKDIR's lock ('?' when it did not say), or None when none does
    (no lock file, or its lock is free: a run that ended, or was killed, or one of this process's writing its
    own reports)."""
    import fcntl

    if str(Path(workdir).absolute()) in _FINISHING:
        return None

    try:
        handle = open(Path(workdir) / LOCK_NAME, encoding="ascii", errors="replace")
    except OSError:
        return None
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return handle.read().strip() or "?"
        except OSError:
            return None
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        return None


# What one run leaves in its workdir besides the content-hashed switch/ files (which any run may share)
RUN_OUTPUTS = (JOURNAL_NAME, "result.json", "report.html", "report.md", "fusion_switch.cfg", "trials", "repro")
PREVIOUS_DIR = "previous"


_OUTCOMES = ("good", "bad", "invalid", "unknown")


def _names(value) -> bool:
    return value is None or (isinstance(value, list) and all(isinstance(v, str) for v in value))


def _field_problem(record: dict) -> str | None:
    """What is wrong with the type of a field that resuming or reporting relies on (a hand-edited journal), or
    None."""
    event = record.get("event")
    if event == "start":
        if not _names(record.get("command")):
            return "'command' must be a list of strings"
    elif event in ("trial", "executed", "verdict"):
        index = record.get("index")
        if isinstance(index, bool) or not isinstance(index, int) or index < 1:
            return f"'index' must be a run number (a positive integer), not {index!r}"
        for key in ("off", "on", "ignored"):
            if not _names(record.get(key)):
                return f"'{key}' must be a list of rule names"
        if record.get("outcome") not in (None, *_OUTCOMES):
            return f"'outcome' must be one of {', '.join(_OUTCOMES)}, not {record.get('outcome')!r}"
    elif event in ("prior", "exclude"):
        if not _names(record.get("rules")):
            return "'rules' must be a list of rule names"
    elif event == "result":
        culprits = record.get("culprits")
        if culprits is not None and not (isinstance(culprits, list) and all(
                isinstance(c, dict) and _names(c.get("rules")) for c in culprits)):
            return "'culprits' must be a list of {\"rules\": [...]} objects"
        for key in ("trials", "notes", "excluded"):
            if record.get(key) is not None and not isinstance(record.get(key), list):
                return f"'{key}' must be a list"
    return None


@functools.cache
def _event_validator():
    """The validator of ``data/journal_event.schema.json`` (the types of the fields a resume or report reads)."""
    import importlib.resources

    import jsonschema

    text = importlib.resources.files("fusebisect").joinpath("data/journal_event.schema.json").read_text("utf-8")
    return jsonschema.Draft202012Validator(json.loads(text))


def _schema_problem(record: dict) -> str | None:
    """The first field of ``record`` whose type the journal's schema does not allow (a hand edit), or None."""
    errors = sorted(_event_validator().iter_errors(record), key=lambda e: list(map(str, e.absolute_path)))
    if not errors:
        return None
    error = errors[0]
    path = list(error.absolute_path)
    if not path:
        return error.message
    where = str(path[0]) + "".join(f"[{p!r}]" for p in path[1:])
    described = error.schema.get("description") if isinstance(error.schema, dict) else None
    if described:
        return f"'{where}' must be {described}, not {_short(error.instance)}"
    return f"'{where}': {error.message}"


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:39] + "…"


def set_aside_previous_run(workdir: str | os.PathLike[str],
                           extra: Iterable[Path] = ()) -> tuple[Path, list[str]] | None:
    """Move the previous run's outputs (:data:`RUN_OUTPUTS`, plus ``extra`` paths, e.g. the production switch file
    written with -o) into ``WORKDIR/previous/<timestamp>/``, keeping their paths relative to the workdir (a path
    outside it goes to ``outside/<name>``), for ``--fresh``: nothing is deleted, and neither the workdir nor the
    -o path then shows a verdict of the old run. ``switch/`` stays and is copied there too.

    An ``extra`` path that is a symbolic link is kept (the next run writes through it); the file it points to is
    moved. Returns (that directory, the paths moved: relative to the workdir, or, when outside, as given (the
    file a symbolic link points to for a link)), or None when there was nothing to move. Raises OSError."""
    workdir = Path(workdir).absolute()
    moving: list[Path] = []
    # an -o path that is a symbolic link stays (the run writes through it): its target's content moves
    extra = [Path(p).resolve() if Path(p).is_symlink() else Path(p).absolute() for p in extra]
    for path in [workdir / name for name in RUN_OUTPUTS] + extra:
        if path == workdir or path.is_relative_to(workdir / PREVIOUS_DIR) or path in moving:
            continue
        if not path.is_relative_to(workdir) and path.is_dir():
            continue     # an -o path is a file; never move a directory from outside the workdir
        if path.exists() or path.is_symlink():
            moving.append(path)
    if not moving:
        return None
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = workdir / PREVIOUS_DIR / stamp
    n = 1
    while target.exists():
        target = workdir / PREVIOUS_DIR / f"{stamp}.{n}"
        n += 1
    target.mkdir(parents=True)
    moved = []
    for path in moving:
        inside = path.is_relative_to(workdir)
        rel = path.relative_to(workdir) if inside else Path("outside") / path.name
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        if inside:
            os.replace(path, target / rel)
        else:   # may be on another filesystem
            shutil.move(str(path), str(target / rel))
        moved.append(str(rel) if inside else str(path))
    # the switch files stay (content-hashed, the next run may write the same ones); the run set aside keeps a copy,
    # so its report's repro commands name files that exist
    if (workdir / "switch").is_dir() and not (workdir / "switch").is_symlink():
        shutil.copytree(workdir / "switch", target / "switch", symlinks=True)
    return target, moved


def events(records: Iterable[dict], kind: str) -> list[dict]:
    """Return the records whose ``event`` is ``kind``, in order."""
    return [r for r in records if r.get("event") == kind]


def moved_run_dir(began_in: str, cwd: str, workdir: Path) -> Path | None:
    """Where the directory a run began in (``cwd``, holding its workdir ``began_in``) is, the workdir being at
    ``workdir`` (absolute) now: the directory that holds it where it sat relative to ``cwd``, as when both were
    moved (or copied) together. None when the workdir was not inside ``cwd``, or does not sit that way now."""
    try:
        inside = Path(began_in).relative_to(cwd)
    except ValueError:
        return None
    depth = len(inside.parts)
    if depth and workdir.parts[-depth:] != inside.parts:
        return None
    return Path(*workdir.parts[:len(workdir.parts) - depth]) if depth else workdir
