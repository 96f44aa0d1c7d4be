"""One summary of a tensor's values, shared by ``inspect dump`` and the overflow analysis.

Complex tensors are summarised by magnitude, bool as 0/1, and low-precision floats (bfloat16, float8) widened to
float32; integer and float16/32/64 values are used as they are, so extremes come back as exact Python numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Summary:
    """Counts and extremes of a tensor (extremes are Python numbers, None when there is no such value)."""

    count: int
    nan: int
    pos_inf: int
    neg_inf: int
    min: float | int | None  # over every non-NaN value (infinities included)
    max: float | int | None
    finite_min: float | int | None  # over the finite values only
    finite_max: float | int | None
    mean: float | None  # of the finite values, accumulated in float64


def widen(array) -> np.ndarray:
    """``array`` as values numpy can reduce: magnitudes for complex, 0/1 for bool, float32 for ml_dtypes floats.

    Raises TypeError or ValueError for element types that have no numeric reading."""
    a = np.asarray(array)
    if a.dtype.kind == "c":
        return np.abs(a)
    if a.dtype.kind == "b":
        return a.astype(np.uint8)
    if a.dtype.kind in "iuf":
        return a
    return a.astype(np.float32)


def summarize(array) -> Summary:
    """Return the :class:`Summary` of ``array``. Raises TypeError/ValueError as :func:`widen` does."""
    flat = widen(array).reshape(-1)
    if flat.dtype.kind == "f":
        nan_mask = np.isnan(flat)
        nan = int(np.count_nonzero(nan_mask))
        pos_inf = int(np.count_nonzero(flat == np.inf))
        neg_inf = int(np.count_nonzero(flat == -np.inf))
    else:
        nan_mask, nan, pos_inf, neg_inf = None, 0, 0, 0
    present = flat[~nan_mask] if nan else flat
    finite = flat[np.isfinite(flat)] if (nan or pos_inf or neg_inf) else flat
    lo = hi = flo = fhi = mean = None
    if present.size:
        lo, hi = present.min().item(), present.max().item()
    if finite.size:
        flo, fhi = finite.min().item(), finite.max().item()
        mean = float(finite.mean(dtype=np.float64))
    return Summary(count=int(flat.size), nan=nan, pos_inf=pos_inf, neg_inf=neg_inf, min=lo, max=hi,
                   finite_min=flo, finite_max=fhi, mean=mean)
