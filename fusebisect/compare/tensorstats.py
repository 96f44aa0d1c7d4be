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
    saturated: int = 0  # finite values at or beyond the ``saturation`` magnitude asked for (e.g. float16's 65504)


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


CHUNK = 1 << 24   # elements summarised at a time: a tensor of any size costs a few chunk-sized temporaries


def summarize(array, saturation: float | None = None) -> Summary:
    """Return the :class:`Summary` of ``array``, chunk by chunk above :data:`CHUNK` elements (a memory-mapped
    tensor is then never copied whole); ``saturation``: also count the finite values whose magnitude reaches it.
    Raises TypeError/ValueError as :func:`widen` does."""
    a = np.asarray(array)
    flat = a.reshape(-1)
    if flat.size <= CHUNK:
        return _summarize(widen(flat), saturation)
    parts = [_summarize(widen(flat[i:i + CHUNK]), saturation) for i in range(0, flat.size, CHUNK)]
    finite = [(p, p.count - p.nan - p.pos_inf - p.neg_inf) for p in parts]
    n_finite = sum(n for _, n in finite)

    def pick(values, fn):
        values = [v for v in values if v is not None]
        return fn(values) if values else None

    return Summary(count=sum(p.count for p in parts), nan=sum(p.nan for p in parts),
                   pos_inf=sum(p.pos_inf for p in parts), neg_inf=sum(p.neg_inf for p in parts),
                   min=pick([p.min for p in parts], min), max=pick([p.max for p in parts], max),
                   finite_min=pick([p.finite_min for p in parts], min),
                   finite_max=pick([p.finite_max for p in parts], max),
                   mean=sum(p.mean * n for p, n in finite if n) / n_finite if n_finite else None,
                   saturated=sum(p.saturated for p in parts))


def _summarize(flat: np.ndarray, saturation: float | None) -> Summary:
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
    saturated = int(np.count_nonzero(np.abs(finite) >= saturation)) if saturation is not None else 0
    return Summary(count=int(flat.size), nan=nan, pos_inf=pos_inf, neg_inf=neg_inf, min=lo, max=hi,
                   finite_min=flo, finite_max=fhi, mean=mean, saturated=saturated)
