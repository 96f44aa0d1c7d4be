"""msaccucmp's result CSV: same header, column order, cell formatting and Address-column rules.

Header: ``Index,OpType,NPUDump,DataType,Address,GroundTruth,DataType,Address,TensorIndex,Shape,<algorithms>,
CompareFailReason``; each ``Address`` column is dropped when that side holds ``.npy`` data. Metric cells are
``'{:.6f}'`` (or ``NaN``/``1.0`` exactly as msaccucmp writes them); ``Shape`` is ``[d0,d1,...]``.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from fusebisect.compare.metrics import NAN_TEXT, cell_text
from fusebisect.fsutil import atomic_write_text


def header(report) -> list[str]:
    """Returns the CSV header for ``report`` (a CompareReport)."""
    cols = ["Index", "OpType", "NPUDump", "DataType"]
    if report.my_address_column:
        cols.append("Address")
    cols += ["GroundTruth", "DataType"]
    if report.golden_address_column:
        cols.append("Address")
    return cols + ["TensorIndex", "Shape", *report.algorithms, "CompareFailReason"]


def _addr(value) -> str:
    return str(value) if value else NAN_TEXT


def row_cells(report, row) -> list[str]:
    """Returns one row's cells in header order."""
    cells = [str(row.index), row.op_type or NAN_TEXT, row.my_op, row.my_dtype or NAN_TEXT]
    if report.my_address_column:
        cells.append(_addr(row.my_address))
    cells += [",".join(row.golden_ops) if row.golden_ops else "*", row.golden_dtype or NAN_TEXT]
    if report.golden_address_column:
        cells.append(_addr(row.golden_address))
    shape = "[%s]" % ",".join(map(str, row.shape)) if row.shape is not None else NAN_TEXT
    cells += [row.tensor or NAN_TEXT, shape]
    cells += [cell_text(row.metrics.get(name)) for name in report.algorithms]
    cells.append(row.fail_reason or "")
    return cells


def render_csv(report) -> str:
    """Returns the whole CSV text (header + rows, msaccucmp order)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\r\n")
    writer.writerow(header(report))
    for row in report.rows:
        writer.writerow(row_cells(report, row))
    return buf.getvalue()


def write_csv(report, path) -> Path:
    """Writes the CSV atomically to ``path``; returns the path. Raises OSError on I/O failure."""
    return atomic_write_text(path, render_csv(report))


def read_msaccucmp_csv(path) -> tuple[list[str], list[list[str]]]:
    """Reads a msaccucmp result CSV: (header, rows). Raises OSError/ValueError on unreadable files."""
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    if not rows:
        raise ValueError(f"{path}: empty CSV")
    return rows[0], rows[1:]
