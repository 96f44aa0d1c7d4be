"""``fusebisect inspect dump``: what one dump file holds (thin CLI over compare.dumpfile)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fusebisect.cli import common
from fusebisect.textutil import fmt_number

HELP = (
    "Show the op name, encoding and every input/output of one dump file: index, dtype, format, shape, "
    "original shape, size in bytes, min/max/mean of the finite values and NaN/Inf counts (for device formats "
    "such as FRACTAL_NZ or NC1HWC0 with an original shape: of the original tensor, padding removed).\n\n"
    "Reads binary, protobuf, nano and .npy dumps (detected by content).\n\n"
    "Example: fusebisect inspect dump dump/20240101000000/0/resnet/1/0/Conv2D.conv1.1.0.1700000000000002 --json"
)


def tensor_stats(array) -> dict:
    """Return {"min","max","mean","nan","inf"} of ``array``; min/max/mean over finite values (None if none).

    Complex tensors are summarised by magnitude; low-precision floats are widened to float32 first.
    """
    from fusebisect.compare.tensorstats import summarize

    s = summarize(array)
    return {"min": s.finite_min, "max": s.finite_max, "mean": s.mean, "nan": s.nan, "inf": s.pos_inf + s.neg_inf}


def describe(path: Path) -> dict:
    """Return the ``inspect dump`` JSON document for the dump at ``path``. Raises DumpFormatError."""
    from fusebisect.compare.dumpfile import read_dump
    from fusebisect.compare.formats import record_original
    from fusebisect.errors import DumpFormatError

    dump = read_dump(path)

    def one(rec) -> dict:
        try:
            dtype = rec.dtype_name
        except DumpFormatError:   # an enum value the dtype table does not know
            dtype = f"dtype {rec.dtype}"
        row = {"index": rec.index, "dtype": dtype, "format": rec.format_name, "shape": list(rec.shape),
               "original_shape": list(rec.original_shape) if rec.original_shape is not None else None,
               "size": rec.size}
        try:
            array = rec.array()
        except DumpFormatError as exc:   # one tensor that cannot be decoded (E8M0, FP4) leaves the others shown
            row.update({"min": None, "max": None, "mean": None, "nan": None, "inf": None, "stats_of": None,
                        "error": exc.reason})
            return row
        row["shape"] = list(array.shape)   # as read: no dims but several elements is 1-D (what convert writes)
        # The padding of a device layout (zeros) is not data: summarise the original tensor when the dump says
        # what it is. A shape that does not fit leaves the stored tensor (and says so).
        original = record_original(rec, array)
        row.update(tensor_stats(array if original is None else original))
        row["stats_of"] = "stored" if original is None else "original"
        row["error"] = None
        return row

    return {"path": str(dump.path), "op_name": dump.op_name, "encoding": dump.encoding,
            "inputs": [one(r) for r in dump.inputs], "outputs": [one(r) for r in dump.outputs]}



def _render(doc: dict) -> None:
    from rich.table import Table

    console = common.out()
    if not console.is_terminal:
        console.width = max(console.width, 160)  # a pipe or file: don't squeeze the table to 80 columns
    from rich.markup import escape

    console.print(f"[bold]{escape(doc['op_name'])}[/bold]  ({doc['encoding']})  {escape(str(doc['path']))}",
                  markup=True)
    table = Table(show_edge=False)
    for col in ("tensor", "dtype", "format", "shape", "original", "bytes", "min", "max", "mean", "nan", "inf"):
        table.add_column(col, justify="right" if col in ("bytes", "min", "max", "mean", "nan", "inf") else "left")
    for kind in ("inputs", "outputs"):
        for row in doc[kind]:
            orig = row["original_shape"]
            table.add_row(f"{kind[:-1]} {row['index']}", row["dtype"], row["format"], str(tuple(row["shape"])),
                          str(tuple(orig)) if orig is not None else "-", str(row["size"]),
                          *(fmt_number(row[k]) for k in ("min", "max", "mean", "nan", "inf")))
    console.print(table)
    for kind in ("inputs", "outputs"):
        for row in doc[kind]:
            if row["error"]:
                console.print(row["error"], markup=False, highlight=False)
    converted = sorted({row["format"] for kind in ("inputs", "outputs") for row in doc[kind]
                        if row["stats_of"] == "original"})
    if converted:
        console.print(f"min/max/mean/nan/inf of {', '.join(converted)} tensors are of the original layout "
                      "(padding removed).")
    from fusebisect.compare.formats import PLAIN_LAYOUTS

    stored = sorted({row["format"] for kind in ("inputs", "outputs") for row in doc[kind]
                     if row["stats_of"] == "stored" and row["format"] not in PLAIN_LAYOUTS})
    if stored:
        console.print(f"min/max/mean/nan/inf of {', '.join(stored)} tensors are of the stored device layout, "
                      "padding included (no original shape, one the tensor does not fit, or a layout not converted).")


def register(app: typer.Typer) -> None:
    group = common.group(app, "inspect", "Look inside CANN artifacts (dump files, graphs).")

    @group.command("dump", help=HELP)
    def dump_cmd(
        file: Annotated[Path, typer.Argument(help="A dump file (binary, protobuf, nano or .npy).")],
        json_out: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    ) -> None:
        doc = describe(file)
        if json_out:
            common.print_json(doc)
        else:
            _render(doc)
