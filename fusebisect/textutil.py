"""How numbers read in tables and reports (one formatting for the CLI, the run report and the HTML pages)."""

from __future__ import annotations

import math
from typing import Any


def fmt_metric(value: Any) -> str:
    """A compare metric as msaccucmp's CSV and the compare table print it: 6 decimals, None as '-', NaN as
    'NaN'."""
    if value is None:
        return "-"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = float(value)
        return "NaN" if math.isnan(value) else f"{value:.6f}"
    return str(value)


def fmt_number(value: Any, digits: int = 6) -> str:
    """``value`` for people: a float to ``digits`` significant digits, None as '-', anything else as str()."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def window_start(at: int, total: int, size: int) -> int:
    """The first of ``size`` rows out of ``total`` to show so that row ``at`` (a first divergence) sits in their
    middle, or as near as the ends allow (0 when all fit)."""
    return max(0, min(at - size // 2, total - size))
