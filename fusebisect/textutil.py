"""How numbers read in tables and reports (one formatting for the CLI, the run report and the HTML pages)."""

from __future__ import annotations

from typing import Any


def fmt_number(value: Any, digits: int = 6) -> str:
    """``value`` for people: a float to ``digits`` significant digits, None as '-', anything else as str()."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)
