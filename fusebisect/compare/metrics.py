"""The ten msaccucmp comparison algorithms, bit-for-bit, computed in bounded memory.

Each metric follows CANN msaccucmp's ``algorithm_manager/builtin_algorithm/alg_*.py`` exactly: both tensors are
flattened and cast to float32 (unless both are bool), every reduction is done in float32 with numpy's pairwise
summation, and the result is printed with ``'{:.6f}'``. Large tensors are processed in slices that follow numpy's
own pairwise-summation tree, so the float32 sums are identical to a whole-array ``np.sum`` while only one slice
of temporaries is alive at a time. Small pairs of one size can be stacked (:func:`compare_batch`): numpy sums
each contiguous row of a 2-D array along the last axis with the same pairwise tree as a 1-D sum of that row, so
a stack costs one numpy call per statistic and gives every pair its own exact values.

Values are returned as :class:`Value` (a ``float`` that also carries the exact CSV cell text, e.g. ``"1.0"``,
``"NaN"`` or ``"0.999998"``); ``StandardDeviation`` is the string ``"(%.3f;%.3f),(%.3f;%.3f)"``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Iterable, Sequence

import numpy as np

ALGORITHMS = ["CosineSimilarity", "MaxAbsoluteError", "AccumulatedRelativeError", "RelativeEuclideanDistance",
              "KullbackLeiblerDivergence", "StandardDeviation", "MeanAbsoluteError", "RootMeanSquareError",
              "MaxRelativeError", "MeanRelativeError"]
BOOL_ALGORITHMS = ("CosineSimilarity", "RelativeEuclideanDistance")
FLOAT_EPSILON = np.finfo(float).eps          # msaccucmp ConstManager.FLOAT_EPSILON (float64 eps)
KL_EPSILON = np.finfo(np.float32).eps        # alg_KullbackLeiblerDivergence.FLOAT_EPSILON
MINIMUM_VALUE = 0.001                        # StandardDeviation: |v| < this prints as 0
NAN_TEXT = "NaN"
CHUNK = 1 << 16                              # elements per slice (leaves of the pairwise tree; L2-sized)

_ALIASES = {str(i): name for i, name in enumerate(ALGORITHMS)}


class Value(float):
    """A metric value: a float that also keeps the exact text msaccucmp writes in its CSV cell.

    The text is ``'{:.6f}'`` of the value unless given (``"1.0"``, ``"NaN"``); it is formatted when first read.
    """

    __slots__ = ("_text",)

    def __new__(cls, value: float, text: str | None = None) -> "Value":
        obj = super().__new__(cls, value)
        obj._text = text
        return obj

    @property
    def text(self) -> str:
        """The CSV cell text."""
        text = self._text
        if text is None:
            text = self._text = "{:.6f}".format(float(self))
        return text

    def __repr__(self) -> str:
        return self.text

    def __reduce__(self):
        return (Value, (float(self), self._text))


def _fmt(value) -> Value:
    """``utils.format_value``: the numpy value formatted '{:.6f}' (nan -> 'nan', inf -> 'inf')."""
    return Value(value)


def nan_value() -> Value:
    """The ``NaN`` cell msaccucmp writes when an algorithm cannot be computed."""
    return Value(float("nan"), NAN_TEXT)


def cell_text(value: object) -> str:
    """Returns the CSV text of a metric value (``Value.text``, a string as is, ``None`` -> ``NaN``)."""
    if value is None:
        return NAN_TEXT
    if isinstance(value, Value):
        return value.text
    if isinstance(value, float):
        return "{:.6f}".format(value)
    return str(value)


def normalize_algorithms(algorithms: Iterable[str | int] | str | None) -> list[str]:
    """Returns algorithm names in msaccucmp order from names, indexes or ``"all"``; raises ValueError if unknown."""
    if algorithms is None or algorithms == "all":
        return list(ALGORITHMS)
    if isinstance(algorithms, str):
        algorithms = [a.strip() for a in algorithms.split(",") if a.strip()]
    out: list[str] = []
    for item in algorithms:
        name = _ALIASES.get(str(item), str(item))
        if name.lower() == "all":
            return list(ALGORITHMS)
        if name not in ALGORITHMS:
            raise ValueError(f"unknown algorithm {item!r} (known: {', '.join(ALGORITHMS)})")
        if name not in out:
            out.append(name)
    return out


@lru_cache(maxsize=64)
def _normalized_tuple(algorithms: tuple) -> tuple[str, ...]:
    return tuple(normalize_algorithms(algorithms))


def _algorithm_list(algorithms) -> Sequence[str]:
    """``normalize_algorithms`` for the per-tensor path: list/tuple inputs are normalised once and cached."""
    if isinstance(algorithms, (list, tuple)):
        try:
            return _normalized_tuple(tuple(algorithms))
        except TypeError:   # unhashable items: normalise without the cache
            pass
    return normalize_algorithms(algorithms)


def is_scalar_shape(shape: Sequence[int]) -> bool:
    """msaccucmp ``get_shape_type``: a shape is 'scalar' when sum(dims) == len(dims) (e.g. (), (1,), (1, 1))."""
    return sum(int(d) for d in shape) == len(shape)


@dataclass
class Metrics:
    """Result of one tensor-pair comparison: values in algorithm order and the CompareFailReason messages."""

    values: dict[str, object]
    messages: list[str] = field(default_factory=list)

    @property
    def fail_reason(self) -> str:
        """The CompareFailReason cell: messages joined by ','."""
        return ",".join(self.messages)


# --------------------------------------------------------------------------------------------------------------
# pairwise tree over [0, n): leaves of at most CHUNK elements, split exactly as numpy's pairwise_sum splits

def _tree_reduce(lo: int, hi: int, leaf: Callable[[int, int], dict], combine: Callable[[dict, dict], dict],
                 chunk: int) -> dict:
    n = hi - lo
    if n <= chunk:
        return leaf(lo, hi)
    n2 = n // 2
    n2 -= n2 % 8
    return combine(_tree_reduce(lo, lo + n2, leaf, combine, chunk),
                   _tree_reduce(lo + n2, hi, leaf, combine, chunk))


_SUM32 = "s"   # key prefixes: float32 pairwise sums
_SUM64 = "d"   # float64 sums
_BUFSIZE = 8192   # numpy's default ufunc buffer (np.getbufsize()): the blocks of a casting reduction
_MAX = "M"
_MIN = "m"


def _combine(a: dict, b: dict) -> dict:
    out = {}
    for key, va in a.items():
        vb = b[key]
        kind = key[0]
        if kind == _SUM32:
            out[key] = np.float32(va + vb)
        elif kind == _SUM64:
            out[key] = va + vb
        elif kind == _MAX:
            out[key] = np.maximum(va, vb)
        else:
            out[key] = np.minimum(va, vb)
    return out


def _f32(arr: np.ndarray) -> np.ndarray:
    """``arr`` as float32, copied only when it is not float32 already (callers never write into it)."""
    return np.asarray(arr, dtype=np.float32)


def compare_arrays(my: np.ndarray, golden: np.ndarray, algorithms: Sequence[str] | None = None, *,
                   shape: Sequence[int] | None = None, my_name: str = "my output",
                   golden_name: str = "ground truth", chunk: int = CHUNK) -> Metrics:
    """Compares two tensors with msaccucmp's algorithms.

    ``shape`` decides the 'scalar' rule of CosineSimilarity (default: ``my.shape``). ``my_name``/``golden_name``
    appear in messages as msaccucmp puts file paths there. Returns :class:`Metrics`; never raises for data
    problems (a size mismatch gives NaN values and a message).
    """
    algorithms = _algorithm_list(algorithms)
    my = np.asarray(my)
    golden = np.asarray(golden)
    if shape is None:
        shape = my.shape
    x = my.reshape(-1)
    y = golden.reshape(-1)
    if x.size != y.size:
        msg = (f"The my output dump data size ({x.size}) in '{my_name}' does not match the ground truth dump data "
               f"size ({y.size}) in '{golden_name}'.")
        return Metrics({name: nan_value() for name in algorithms}, [msg])
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if x.dtype == np.bool_ and y.dtype == np.bool_:
            return _compare_bool(x, y, algorithms, shape, my_name, golden_name)
        if x.size == 0:
            return _compare_empty(algorithms, shape)
        return _compare_streamed(x, y, algorithms, shape, my_name, golden_name, chunk)


def compute(my: np.ndarray, golden: np.ndarray, algorithms: Sequence[str] | None = None) -> dict[str, object]:
    """Returns {algorithm: Value | str} exactly as msaccucmp computes them (see :func:`compare_arrays`)."""
    return compare_arrays(my, golden, algorithms).values


def _cosine_zero_checks(nx, ny, my_name, golden_name):
    if nx <= FLOAT_EPSILON and ny < FLOAT_EPSILON:
        return Value(1.0, "1.0"), ""
    if nx ** 0.5 <= FLOAT_EPSILON:
        return nan_value(), f"Cannot compare by Cosine Similarity. All the data is zero in {my_name}."
    if ny ** 0.5 <= FLOAT_EPSILON:
        return nan_value(), f"Cannot compare by Cosine Similarity. All the data is zero in {golden_name}."
    return None, ""


def _compare_bool(x, y, algorithms, shape, my_name, golden_name) -> Metrics:
    values: dict[str, object] = {}
    messages: list[str] = []
    for name in algorithms:
        if name not in BOOL_ALGORITHMS:
            values[name] = nan_value()
            messages.append(f"Algorithm {name} does not support Boolean types.")
            continue
        if name == "CosineSimilarity":
            if is_scalar_shape(shape):
                values[name] = _fmt(1)
                messages.append("This tensor is scalar.")
                continue
            xf = x.astype(float)
            yf = y.astype(float)
            nx = np.sqrt(np.add.reduce(xf * xf))
            ny = np.sqrt(np.add.reduce(yf * yf))
            early, msg = _cosine_zero_checks(nx, ny, my_name, golden_name)
            if early is not None:
                values[name] = early
                if msg:
                    messages.append(msg)
                continue
            values[name] = _fmt(min(((xf / nx) * (yf / ny)).sum(), 1.0))
        else:  # RelativeEuclideanDistance: bool ** 2 -> int8, sum -> int64; bool subtraction raises in numpy
            gt_sq = (y ** 2).sum()
            if gt_sq ** 0.5 <= FLOAT_EPSILON:
                values[name] = _fmt(0.0 ** 0.5)
            else:
                values[name] = nan_value()
                messages.append("Failed to execute 'compare' in 'RelativeEuclideanDistance'. numpy boolean "
                                "subtract, the `-` operator, is not supported, use the bitwise_xor, the `^` "
                                "operator, or the logical_xor function instead.")
    return Metrics(values, messages)


def _compare_empty(algorithms, shape) -> Metrics:
    values: dict[str, object] = {}
    messages: list[str] = []
    for name in algorithms:
        if name == "CosineSimilarity":
            if is_scalar_shape(shape):
                values[name] = _fmt(1)
                messages.append("This tensor is scalar.")
            else:
                values[name] = Value(1.0, "1.0")
        elif name in ("MaxAbsoluteError", "MaxRelativeError", "KullbackLeiblerDivergence"):
            values[name] = nan_value()
            op = "maximum"
            messages.append(f"Failed to execute 'compare' in '{name}'. zero-size array to reduction operation "
                            f"{op} which has no identity")
        elif name in ("AccumulatedRelativeError", "RelativeEuclideanDistance"):
            values[name] = _fmt(np.float32(0.0))
        elif name == "StandardDeviation":
            values[name] = "(nan;nan),(nan;nan)"
        else:
            values[name] = _fmt(np.float32("nan"))
    return Metrics(values, messages)


@dataclass(frozen=True)
class _Plan:
    """What one comparison must compute, decided once per algorithm list (and scalar-ness)."""

    cos: bool       # CosineSimilarity over the data (not the scalar rule)
    kl: bool
    std: bool
    red: bool
    d2: bool        # sum of squared differences (RED, RMSE)
    absd: bool      # |a - b| max and sum
    rel: bool


@lru_cache(maxsize=64)
def _plan(algorithms: tuple[str, ...], scalar: bool) -> _Plan:
    want = set(algorithms)
    return _Plan(cos="CosineSimilarity" in want and not scalar,
                 kl="KullbackLeiblerDivergence" in want,
                 std="StandardDeviation" in want,
                 red="RelativeEuclideanDistance" in want,
                 d2=bool(want & {"RelativeEuclideanDistance", "RootMeanSquareError"}),
                 absd=bool(want & {"MaxAbsoluteError", "MeanAbsoluteError"}),
                 rel=bool(want & {"AccumulatedRelativeError", "MaxRelativeError", "MeanRelativeError"}))


def _compare_streamed(x, y, algorithms, shape, my_name, golden_name, chunk) -> Metrics:
    n = x.size
    scalar = is_scalar_shape(shape)
    plan = _plan(tuple(algorithms), scalar)
    if n <= chunk:
        p1, p2, skl = _rows_stats(_f32(x)[None], _f32(y)[None], plan)
    else:
        p1, p2, skl = _tree_stats(x, y, plan, n, chunk)
        p1, p2 = _as_rows(p1), _as_rows(p2)      # one row, so that both paths finish alike
        skl = None if skl is None else np.array([skl])
    return _finish(p1, p2, skl, _derived(p1, p2, plan, n), 0, algorithms, scalar, my_name, golden_name)


def _as_rows(stats: dict) -> dict:
    return {key: np.array([value]) for key, value in stats.items()}


def _pass1_norms(p1: dict, plan: _Plan) -> tuple:
    """(cosine norms nx, ny; KL (min, range) of each side) from the pass-1 statistics."""
    nx = ny = None
    if plan.cos:
        nx = np.sqrt(p1["sxx"])
        ny = np.sqrt(p1["syy"])
    kl_params = None
    if plan.kl:
        kl_params = (_kl_range(p1["Mx"], p1["mx"]), _kl_range(p1["My"], p1["my"]))
    return nx, ny, kl_params


def _rows_stats(a: np.ndarray, b: np.ndarray, plan: _Plan) -> tuple[dict, dict, object]:
    """The statistics of each row pair of two (k, n) float32 arrays whose rows fit one pairwise leaf.

    Every per-row sum is one numpy reduction along the last axis, which sums each contiguous row exactly as a
    1-D ``np.sum`` of that row does (same pairwise tree), so a row's statistics do not depend on the other rows.
    Shared intermediates are computed once. Returns (pass-1 stats, pass-2 stats, KL sums), each per row.
    """
    p1: dict = {}
    if plan.cos or plan.red:
        syy = np.add.reduce(b * b, axis=-1)     # b ** 2 is b * b: the RED denominator is the cosine's syy
        if plan.cos:
            p1["sxx"] = np.add.reduce(a * a, axis=-1)
            p1["syy"] = syy
        if plan.red:
            p1["sgt2"] = syy
    if plan.d2 or plan.absd:
        d = a - b
        if plan.d2:
            p1["sd2"] = np.add.reduce(d * d, axis=-1)
        if plan.absd:
            np.abs(d, out=d)
            p1["Mabs"] = d.max(axis=-1)
            p1["sabs"] = np.add.reduce(d, axis=-1)
    if plan.rel:
        r = _relative_errors(a, b)
        p1["srel"] = np.add.reduce(r, axis=-1)
        p1["Mrel"] = r.max(axis=-1)
    if plan.kl:
        p1["Mx"], p1["mx"] = a.max(axis=-1), a.min(axis=-1)
        p1["My"], p1["my"] = b.max(axis=-1), b.min(axis=-1)
    if plan.std:
        p1["dx"] = np.add.reduce(a, axis=-1, dtype=np.float64)
        p1["dy"] = np.add.reduce(b, axis=-1, dtype=np.float64)

    n = a.shape[-1]
    nx, ny, kl_params = _pass1_norms(p1, plan)
    p2: dict = {}
    if plan.cos:        # rows whose norms are ~0 take msaccucmp's early exits; their dot product is unused
        t = a / nx[:, None]
        t *= b / ny[:, None]
        p2["scos"] = np.add.reduce(t, axis=-1)
    skl = None
    if plan.kl:
        pa = _kl_normalized_rows(a, *kl_params[0])
        pb = _kl_normalized_rows(b, *kl_params[1])
        pa /= np.add.reduce(pa, axis=-1)[:, None]     # px
        pb /= np.add.reduce(pb, axis=-1)[:, None]     # qy
        t = pa / pb
        np.log(t, out=t)
        t *= pa
        skl = np.add.reduce(t, axis=-1)
    if plan.std:
        dxa = a - (p1["dx"] / n)[:, None]             # float64, as a float32 array minus a float64 mean
        np.multiply(dxa, dxa, out=dxa)
        p2["dvx"] = np.add.reduce(dxa, axis=-1)
        dyb = b - (p1["dy"] / n)[:, None]
        np.multiply(dyb, dyb, out=dyb)
        p2["dvy"] = np.add.reduce(dyb, axis=-1)
    return p1, p2, skl


_FLOAT_EPSILON32 = np.float32(FLOAT_EPSILON)   # 2**-52 is a float32: comparing in float32 is exact
assert float(_FLOAT_EPSILON32) == float(FLOAT_EPSILON)


def _relative_errors(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """msaccucmp's ``np.where(np.abs(b) > FLOAT_EPSILON, np.abs(a / b - 1), 0)`` (a new float32 array)."""
    r = a / b
    r -= 1
    np.abs(r, out=r)
    magnitude = np.abs(b)
    if not magnitude.min() > _FLOAT_EPSILON32:      # some |b| <= eps (or NaN): those errors count as 0
        small = magnitude > _FLOAT_EPSILON32
        np.logical_not(small, out=small)
        np.copyto(r, 0, where=small)
    return r


def _kl_normalized_rows(data: np.ndarray, min_value: np.ndarray, range_value: np.ndarray) -> np.ndarray:
    """:func:`_kl_normalized` of each row (a new array): rows whose range is 0 are kept as they are."""
    out = data - min_value[:, None]
    out /= range_value[:, None]
    flat = range_value == 0
    if flat.any():
        out[flat] = data[flat]
    np.maximum(out, _kl_epsilon_row(out.shape[-1]), out=out)
    return out


@lru_cache(maxsize=8)
def _kl_epsilon_row(n: int) -> np.ndarray:
    """``n`` copies of KL_EPSILON: np.maximum against a row runs the vector loop, against a scalar a slow one
    (the values are the same)."""
    row = np.full(n, KL_EPSILON, dtype=np.float32)
    row.flags.writeable = False
    return row


# pairs stacked into one batch: at most this many elements per side (temporaries stay in the CPU caches)
BATCH_ELEMENTS = 1 << 17
BATCH_MAX_SIZE = 1 << 14    # larger tensors gain nothing from stacking (the copy costs what the calls save)


def batchable(my: np.ndarray, golden: np.ndarray) -> bool:
    """True when :func:`compare_batch` stacks this pair with others (non-empty, same size, at most
    ``BATCH_MAX_SIZE`` elements, not a bool pair); other pairs are compared one by one there."""
    n = my.size
    return (0 < n <= BATCH_MAX_SIZE and n == golden.size
            and not (my.dtype == np.bool_ and golden.dtype == np.bool_))


def compare_batch(items: Sequence[tuple], algorithms: Sequence[str] | None = None) -> list[Metrics]:
    """Compares many tensor pairs; returns what ``[compare_arrays(my, golden, algorithms, shape=shape,
    my_name=my_name, golden_name=golden_name) for my, golden, shape, my_name, golden_name in items]`` returns,
    bit for bit.

    Small pairs of the same size are stacked into (k, n) arrays and reduced row by row, so k pairs cost one
    numpy call per statistic instead of k. ``shape`` None means ``my.shape``. Never raises for data problems.
    """
    algorithms = _algorithm_list(algorithms)
    results: list[Metrics | None] = [None] * len(items)
    groups: dict[tuple[int, bool], list[int]] = {}
    for i, (my, golden, shape, my_name, golden_name) in enumerate(items):
        my = np.asarray(my)
        golden = np.asarray(golden)
        if batchable(my, golden):
            scalar = is_scalar_shape(my.shape if shape is None else shape)
            groups.setdefault((my.size, scalar), []).append(i)
        else:
            results[i] = compare_arrays(my, golden, algorithms, shape=shape, my_name=my_name,
                                        golden_name=golden_name)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for (n, scalar), members in groups.items():
            plan = _plan(tuple(algorithms), scalar)
            per = max(1, BATCH_ELEMENTS // n)
            for start in range(0, len(members), per):
                part = members[start:start + per]
                a = np.empty((len(part), n), np.float32)
                b = np.empty((len(part), n), np.float32)
                for row, i in enumerate(part):
                    a[row] = _f32(np.asarray(items[i][0]).reshape(-1))
                    b[row] = _f32(np.asarray(items[i][1]).reshape(-1))
                p1, p2, skl = _rows_stats(a, b, plan)
                del a, b
                derived = _derived(p1, p2, plan, n)
                for row, i in enumerate(part):
                    results[i] = _finish(p1, p2, skl, derived, row, algorithms, scalar, items[i][3], items[i][4])
    return results  # type: ignore[return-value]


def _tree_stats(x, y, plan: _Plan, n: int, chunk: int) -> tuple[dict, dict, object]:
    """The statistics of :func:`_leaf_stats` for tensors larger than one leaf, slice by slice along numpy's
    pairwise tree (so float32 sums are bit-identical) with only one slice of temporaries alive."""

    # ---- pass 1: everything that needs no global statistic
    def leaf1(lo: int, hi: int) -> dict:
        a = _f32(x[lo:hi])
        b = _f32(y[lo:hi])
        out: dict = {}
        if plan.cos:
            out["sxx"] = np.add.reduce(a * a)
            out["syy"] = np.add.reduce(b * b)
        if plan.red:
            out["sgt2"] = np.add.reduce(b * b)
        if plan.d2 or plan.absd:
            d = a - b
            if plan.d2:
                out["sd2"] = np.add.reduce(d * d)
            if plan.absd:
                np.abs(d, out=d)
                out["Mabs"] = d.max()
                out["sabs"] = d.sum()
        if plan.rel:
            r = _relative_errors(a, b)
            out["srel"] = r.sum()
            out["Mrel"] = r.max()
        if plan.kl:
            out["Mx"], out["mx"] = a.max(), a.min()
            out["My"], out["my"] = b.max(), b.min()
        if plan.std:
            # numpy's float64 sum of float32 data casts it in buffers of _BUFSIZE elements and adds their
            # pairwise sums one after the other: the buffers starting in this slice, in order
            for start in range(-(-lo // _BUFSIZE) * _BUFSIZE, hi, _BUFSIZE):
                end = min(start + _BUFSIZE, n)
                inside = end <= hi
                bx = a[start - lo:end - lo] if inside else _f32(x[start:end])
                by = b[start - lo:end - lo] if inside else _f32(y[start:end])
                buffers.append((np.add.reduce(bx, dtype=np.float64), np.add.reduce(by, dtype=np.float64)))
        return out

    buffers: list[tuple[np.float64, np.float64]] = []   # leaves run in order: so do their buffers
    p1 = _tree_reduce(0, n, leaf1, _combine, chunk)
    if plan.std:
        p1["dx"], p1["dy"] = buffers[0]
        for bx, by in buffers[1:]:
            p1["dx"] += bx
            p1["dy"] += by
    nx, ny, kl_params = _pass1_norms(p1, plan)
    need_cos = plan.cos and _cosine_zero_checks(nx, ny, "", "")[0] is None
    mean_x = mean_y = None
    if plan.std:
        mean_x = p1["dx"] / n
        mean_y = p1["dy"] / n

    # ---- pass 2: cosine dot product, KL normaliser sums, std squared deviations
    p2: dict = {}
    if need_cos or plan.kl or plan.std:
        def leaf2(lo: int, hi: int) -> dict:
            a = _f32(x[lo:hi])
            b = _f32(y[lo:hi])
            out: dict = {}
            if need_cos:
                out["scos"] = ((a / nx) * (b / ny)).sum()
            if plan.kl:
                out["sp"] = _kl_normalized(a, *kl_params[0]).sum()
                out["sq"] = _kl_normalized(b, *kl_params[1]).sum()
            if plan.std:
                dxa = a - mean_x
                dyb = b - mean_y
                out["dvx"] = np.add.reduce(dxa * dxa)
                out["dvy"] = np.add.reduce(dyb * dyb)
            return out

        p2 = _tree_reduce(0, n, leaf2, _combine, chunk)

    # ---- pass 3: KL divergence itself (needs both normaliser sums); the normalised data is never all zero
    skl = None
    if plan.kl:
        sp, sq = p2["sp"], p2["sq"]

        def leaf3(lo: int, hi: int) -> dict:
            a = _f32(x[lo:hi])
            b = _f32(y[lo:hi])
            px = _kl_normalized(a, *kl_params[0]) / sp
            qy = _kl_normalized(b, *kl_params[1]) / sq
            return {"skl": (px * np.log(px / qy)).sum()}

        skl = _tree_reduce(0, n, leaf3, _combine, chunk)["skl"]
    return p1, p2, skl


def _derived(p1: dict, p2: dict, plan: _Plan, n: int) -> dict:
    """Per-row values computed from the sums for a whole stack at once (elementwise, so exactly the per-pair
    values): cosine norms, float32 means as numpy's ``_mean`` computes them, std means and deviations."""
    d: dict = {}
    if plan.cos:
        d["nx"] = np.sqrt(p1["sxx"])
        d["ny"] = np.sqrt(p1["syy"])
    if plan.absd:
        d["mae"] = _mean32(p1["sabs"], n)
    if plan.d2:
        d["rmse"] = np.sqrt(_mean32(p1["sd2"], n))
    if plan.rel:
        d["mre"] = _mean32(p1["srel"], n)
    if plan.std:
        d["mean_x"] = p1["dx"] / n
        d["mean_y"] = p1["dy"] / n
        d["std_x"] = np.sqrt(p2["dvx"] / n)      # float64: the same correctly rounded root as math.sqrt
        d["std_y"] = np.sqrt(p2["dvy"] / n)
    # values that are only compared with Python floats or formatted: as Python floats (the same numbers)
    for key in ("mae", "rmse", "mre", "mean_x", "mean_y", "std_x", "std_y"):
        if key in d:
            d[key] = d[key].tolist()
    for key in ("Mabs", "srel", "Mrel"):
        if key in p1:
            d[key] = p1[key].tolist()
    if "scos" in p2:
        d["scos"] = p2["scos"].tolist()
    return d


def _finish(p1: dict, p2: dict, skl, d: dict, i: int, algorithms, scalar: bool, my_name: str,
            golden_name: str) -> Metrics:
    """The metric values and messages of row ``i``, in algorithm order, from the per-row statistics."""
    values: dict[str, object] = {}
    messages: list[str] = []
    for name in algorithms:
        if name == "CosineSimilarity":
            if scalar:
                values[name] = _fmt(1)
                messages.append("This tensor is scalar.")
                continue
            early, msg = _cosine_zero_checks(d["nx"][i], d["ny"][i], my_name, golden_name)
            if early is not None:
                values[name] = early
                if msg:
                    messages.append(msg)
            else:
                values[name] = _fmt(min(d["scos"][i], 1.0))
        elif name == "MaxAbsoluteError":
            values[name] = _fmt(d["Mabs"][i])
        elif name == "AccumulatedRelativeError":
            values[name] = _fmt(d["srel"][i])
        elif name == "RelativeEuclideanDistance":
            gt_sq = p1["sgt2"][i]
            result = 0.0 if gt_sq ** 0.5 <= FLOAT_EPSILON else p1["sd2"][i] / gt_sq
            values[name] = _fmt(result ** 0.5)
        elif name == "KullbackLeiblerDivergence":
            # msaccucmp's "all the data is zero" checks look at the normalised data, which is >= eps: they
            # never fire
            result = skl[i].item()
            if abs(result) < FLOAT_EPSILON:
                result = 0.0
            values[name] = _fmt(result)
            if str(result) == "inf":
                messages.append(f"Cannot compare by KL Divergence. The data contains 0 in {golden_name!r}.")
        elif name == "StandardDeviation":
            values[name] = _std_cell(d["mean_x"][i], d["mean_y"][i], d["std_x"][i], d["std_y"][i])
        elif name == "MeanAbsoluteError":
            values[name] = _fmt(d["mae"][i])
        elif name == "RootMeanSquareError":
            values[name] = _fmt(d["rmse"][i])
        elif name == "MaxRelativeError":
            values[name] = _fmt(d["Mrel"][i])
        elif name == "MeanRelativeError":
            values[name] = _fmt(d["mre"][i])
    return Metrics(values, messages)


def _mean32(total, n: int):
    """numpy ``_mean`` for float32 sums (scalars or arrays): ``ret.dtype.type(ret / rcount)``."""
    return np.asarray(total, dtype=np.float32) / n


def _kl_range(max_value, min_value):
    return min_value, max_value - min_value


def _kl_normalized(data: np.ndarray, min_value, range_value) -> np.ndarray:
    if range_value != 0:
        data = (data - min_value) / range_value
    return np.maximum(data, _kl_epsilon_row(data.shape[-1]))


def _std_cell(left_mean, right_mean, left_std, right_std) -> str:
    left_std = 0.0 if abs(left_std) < MINIMUM_VALUE else left_std
    left_mean = 0.0 if abs(left_mean) < MINIMUM_VALUE else left_mean
    right_std = 0.0 if abs(right_std) < MINIMUM_VALUE else right_std
    right_mean = 0.0 if abs(right_mean) < MINIMUM_VALUE else right_mean
    return "(%.3f;%.3f),(%.3f;%.3f)" % (left_mean, left_std, right_mean, right_std)
