"""``fusebisect dump convert``: dump tensors to .npy files, optionally in their original layout."""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from fusebisect.cli import common
from fusebisect.errors import DumpFormatError, UsageError

if TYPE_CHECKING:  # numpy is imported by the command that needs it, not at CLI start-up
    import numpy as np

HELP = (
    "Write every input and output of a dump file (or of every dump under a directory) as "
    "[bold]{dumpfile}.{input|output}.{i}.npy[/bold] in OUT, and its L1 buffers and workspaces as raw "
    "[bold]{dumpfile}.l1buffer.{i}.bin[/bold] / [bold]{dumpfile}.space.{i}.bin[/bold] (msaccucmp's naming).\n\n"
    "Tensors stay in device layout unless [bold]--format[/bold] is given: ORIGINAL undoes the private format "
    "(NC1HWC0 -> NCHW, FRACTAL_Z -> NCHW, FRACTAL_NZ -> ND, NDC1HWC0 -> NCDHW, C1HWNCoC0 -> HWCN) and removes "
    "padding using the dump's original shape; a layout name (NCHW, NHWC, HWCN, ...) converts to ORIGINAL and "
    "then permutes, and the names end with the converted shape as msaccucmp's -f names them "
    "([bold]{dumpfile}.output.0.2x3x5x7.npy[/bold]). Without --format, an automatic-mode FFTS+ thread dump's tensors take the shapes of its "
    "thread's slice (as msaccucmp's convert gives them). bfloat16, float8 and hifloat8 are written as float32. Unreadable files in a directory are "
    "reported and skipped.\n\n"
    "Example: fusebisect dump convert dump/20240101000000 --out npy --format ORIGINAL"
)


def convert_tensor(rec, fmt: str | None) -> np.ndarray:
    """Return record ``rec``'s array converted per ``--format`` (None = device layout). Raises DumpFormatError."""
    import numpy as np

    from fusebisect.compare.formats import DEFAULT_TARGET, PLAIN_LAYOUTS, record_to_original, to_original

    arr = rec.array()
    if arr.dtype.isbuiltin != 1:
        arr = arr.astype(np.float32)  # ml_dtypes low-precision floats, which np.load cannot read back
    if fmt is None:
        return arr
    name = rec.format_name
    if name in DEFAULT_TARGET:
        # an NHWC graph's NC1HWC0 output goes back to NHWC; an input's original shape is read in --format's layout
        arr, layout = record_to_original(rec, arr, prefer=None if fmt == "ORIGINAL" else fmt)
    elif name not in PLAIN_LAYOUTS:   # a device layout without a conversion: never written as if converted
        raise DumpFormatError(f"format {name} cannot be converted (the device layout is kept only without "
                              "--format)")
    else:
        # A plain layout is stored as its shape says; the original shape may be in another layout (an NHWC
        # tensor of an NCHW graph), so it is not reshaped to it (msaccucmp's convert does not either).
        layout = name
    if fmt != "ORIGINAL" and fmt != layout:
        arr = to_original(arr, layout, None, target=fmt)
    return arr


def _npy_bytes(arr: np.ndarray) -> bytes:
    import numpy as np

    buf = io.BytesIO()
    # (np.ascontiguousarray makes a 0-d array 1-d: a scalar keeps its shape ())
    np.save(buf, arr if arr.flags.c_contiguous else np.ascontiguousarray(arr), allow_pickle=False)
    return buf.getvalue()


def _write(target: Path, data: bytes, inputs: Path, files: frozenset = frozenset()) -> None:
    """Write one output atomically, never into the input dumps: a link in --out to an input file would be followed
    (its target replaced). ``files``: the input files as resolved (a tree reaches some through linked
    directories). Raises UsageError for such a target."""
    from fusebisect.fsutil import atomic_write_bytes

    if target.is_symlink() or target.exists():
        real, home = target.resolve(), inputs.resolve()
        if real == home or real in files or (inputs.is_dir() and real.is_relative_to(home)):
            raise UsageError(f"--out: {target} is a link to {real}, an input dump: writing it would replace that "
                             "file (remove the link, or give another --out)")
    atomic_write_bytes(target, data)


def convert_file(path: Path, out: Path, fmt: str | None, skipped: list[dict] | None = None,
                 inputs: Path | None = None, files: frozenset = frozenset()) -> list[dict]:
    """Convert one dump file (tensors as .npy, buffers and workspaces as raw .bin); return one
    {"source","tensor","path","shape","dtype"} per file written.

    A tensor that cannot be decoded or converted (an E8M0 scale, a FRACTAL_Z_3D weight) is appended to
    ``skipped`` as {"path","tensor","reason"} and the others are still written, as msaccucmp's convert does;
    without ``skipped`` it raises. Raises DumpFormatError if the dump cannot be read; OSError on write failure;
    UsageError for an output that is a link into ``inputs`` (default: the dump file itself).
    """
    from fusebisect.compare.dumpfile import read_dump

    inputs = path if inputs is None else inputs

    dump = read_dump(path)
    # an automatic-mode FFTS+ thread dump's tensors take the shapes of its slice (as msaccucmp's convert does)
    sliced = {} if fmt is not None else _thread_shapes(dump, path)
    arrays = []
    for rec in [*dump.inputs, *dump.outputs]:
        try:
            arr = convert_tensor(rec, fmt)
            shape = sliced.get((rec.kind, rec.index))
            if shape is not None:
                if math.prod(shape) != arr.size or any(d < 0 for d in shape):
                    raise DumpFormatError(f"{arr.size} elements do not fill its FFTS+ slice shape {list(shape)}")
                arr = arr.reshape(shape)
            arrays.append((rec, arr))
        except DumpFormatError as exc:
            where = f"{rec.kind} {rec.index}"
            reason = exc.reason if exc.reason.startswith(where + ":") else f"{where}: {exc.reason}"
            if skipped is None:
                raise DumpFormatError(reason, path=path) from None
            skipped.append({"path": str(path), "tensor": f"{rec.kind}.{rec.index}", "reason": reason})
    written = []
    for rec, arr in arrays:
        # with a target format msaccucmp's convert puts the converted shape in the name: NAME.output.0.2x3x5x7.npy
        shape = "" if fmt is None else "." + "x".join(map(str, arr.shape))
        target = out / _out_name(out, f"{path.name}.{rec.kind}.{rec.index}{shape}.npy", ".npy")
        _write(target, _npy_bytes(arr), inputs, files)
        written.append({"source": str(path), "tensor": f"{rec.kind}.{rec.index}", "path": str(target),
                        "shape": list(arr.shape), "dtype": str(arr.dtype)})
    # buffers (L1, the only buffer type) and workspaces as raw bytes, named as msaccucmp's convert names them
    for rec, label in [(b, f"l1buffer.{b.index}") for b in dump.buffers] + [(w, f"space.{w.index}")
                                                                            for w in dump.spaces]:
        data = rec.raw()
        target = out / _out_name(out, f"{path.name}.{label}.bin", ".bin")
        _write(target, data.tobytes(), inputs, files)
        written.append({"source": str(path), "tensor": label, "path": str(target), "shape": [int(data.size)],
                        "dtype": "uint8"})
    return written


NAME_MAX = 255   # msaccucmp's LINUX_FILE_NAME_MAX_LEN


def _out_name(out: Path, name: str, suffix: str) -> str:
    """``name``, or for a name of NAME_MAX characters or more msaccucmp's replacement (uuid3 of the name, hex,
    plus ``suffix``) recorded as ``new,old`` in OUT/mapping.csv (FileUtils.handle_too_long_file_name)."""
    if len(name) < NAME_MAX:
        return name
    import uuid

    from fusebisect.compare.tree import MAPPING_FILE
    from fusebisect.fsutil import atomic_write_text

    new = uuid.uuid3(uuid.NAMESPACE_DNS, name).hex + suffix
    mapping = out / MAPPING_FILE
    row = f"{new},{name}\n"
    text = mapping.read_text(encoding="utf-8") if mapping.is_file() else ""
    if row not in text:
        atomic_write_text(mapping, text + row)
    return new


def _thread_shapes(dump, path: Path) -> dict:
    """Slice shapes of an automatic-mode FFTS+ thread dump (thread id: the file name's second-to-last field)."""
    from fusebisect.compare import ffts

    if not ffts.is_ffts_dump(dump):
        return {}
    try:
        thread = int(path.name.split(".")[-2])
    except (IndexError, ValueError):
        raise DumpFormatError("cannot read the FFTS+ thread id from the file name", path=path) from None
    return ffts.thread_shapes(dump, thread)


def register(app: typer.Typer) -> None:
    group = common.group(app, "dump", "Work with CANN dump files.")

    @group.command("convert", help=HELP)
    def convert_cmd(
        path: Annotated[Path, typer.Argument(help="A dump file or a dump directory (root, timestamp or leaf).")],
        out_text: Annotated[str, typer.Option("--out", "-o", help="Directory for the .npy files (created).")],
        fmt: Annotated[Optional[str], typer.Option(
            "--format", "-f", help="ORIGINAL, or a layout such as NCHW, NHWC, HWCN, ND.")] = None,
        json_out: Annotated[bool, typer.Option("--json", help="Print JSON: files written and files skipped.")] = False,
    ) -> None:
        from fusebisect.compare.tree import scan_dumps

        fmt = fmt.upper() if fmt else None
        if fmt is not None and fmt != "ORIGINAL":
            from fusebisect.compare.dumpfile import format_value
            from fusebisect.compare.formats import PLAIN_LAYOUTS

            try:
                format_value(fmt)
            except DumpFormatError:
                raise UsageError(f"--format {fmt}: not ORIGINAL or a known layout name") from None
            # every format but a host layout is a device one (FRACTAL_Z_3D, FRACTAL_ZN_LSTM, C1HWC0, ...)
            if fmt not in PLAIN_LAYOUTS or fmt == "RESERVED":
                raise UsageError(f"--format {fmt}: a device format; convert writes host layouts (ORIGINAL, NCHW, "
                                 f"NHWC, HWCN, ND, ...), not into device formats")
        if not path.exists():
            from fusebisect.fsutil import missing_reason

            raise DumpFormatError(missing_reason(path), path=path)
        from fusebisect.fsutil import check_output_file, refuse_inside_inputs
        if not out_text.strip():   # (as a Path it would be '.')
            raise UsageError("--out: empty path")
        out = Path(out_text)
        check_output_file(out, "--out", directory=True)
        # a single dump file's own directory is input data too: .npy files there would mix into the dumps (and
        # compare reads a directory holding .npy files as golden data)
        if path.is_file():
            home = path.parent.resolve()
            where = out.resolve()
            if where == home or where.is_relative_to(home):
                what = "is the directory" if where == home else "is inside the directory"
                raise UsageError(f"--out {out_text}: {what} of {path}, a dump directory; the .npy files would mix "
                                 "into its dumps (and make compare read it as golden data): write them elsewhere")
        else:
            refuse_inside_inputs(out, "--out", [path], new_file_ok=False)
        files, bad = [], []
        if path.is_file():
            files = convert_file(path, out, fmt, bad)
        else:
            tree = scan_dumps(path)
            bad = [{"path": str(p), "reason": r} for p, r in tree.bad]
            if not tree.entries and not bad:
                raise DumpFormatError("no op dump files found", path=path)
            # dumps in several directories (devices, iterations, runs): the tree's layout is kept, which says
            # which step and device each file is of
            mirror = len({entry.path.parent for entry in tree.entries}) > 1
            if mirror:
                common.log(f"note: dump files in several directories of {path}: the .npy files keep their "
                           f"directories under {out}")
            # every input file as the kernel finds it: a linked directory in the tree reaches dumps outside it
            sources = frozenset(entry.path.resolve() for entry in tree.entries)
            for entry in tree.entries:
                try:
                    files += convert_file(entry.path, out / entry.path.parent.relative_to(path) if mirror else out,
                                          fmt, bad, inputs=path, files=sources)
                except DumpFormatError as exc:
                    bad.append({"path": str(entry.path), "reason": exc.reason})
                    common.log(f"skipped {entry.path}: {exc.reason}")
        for item in bad:
            if "tensor" in item:
                common.log(f"skipped {item['path']} {item['reason']}")
        if json_out:
            common.print_json({"out": str(out), "files": files, "skipped": bad})
        else:
            whole = sum("tensor" not in item for item in bad)
            parts = [f"{whole} files (unreadable or not convertible)"] if whole else []
            parts += [f"{len(bad) - whole} tensors (not convertible)"] if len(bad) > whole else []
            npy = sum(f["path"].endswith(".npy") for f in files)   # L1 buffers and workspaces are raw .bin files
            what = f"{npy} .npy files" + (f" and {len(files) - npy} .bin files" if len(files) > npy else "")
            common.out().print(f"wrote {what} to {out}"
                               + (f"; skipped {' and '.join(parts)}" if parts else ""))
        if bad and not files:
            sources = len({item["path"] for item in bad})
            what = f"{sources} dump file{'s' if sources > 1 else ''}" if path.is_dir() else \
                f"{len(bad)} tensor{'s' if len(bad) > 1 else ''}"
            raise DumpFormatError(f"nothing in the {what} could be converted (first: {bad[0]['path']}: "
                                  f"{bad[0]['reason']})", path=path)
