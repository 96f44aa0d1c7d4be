"""The ten msaccucmp comparison algorithms, bit-for-bit, computed in bounded memory.

Each metric follows CANN msaccucmp's ``algorithm_manager/builtin_algorithm/alg_*.py`` exactly: both tensors are
flattened and cast to float32 (unless both are bool), every reduction is done in float32 with numpy's pairwise
summation, and the result is printed with ``'{:.6f}'``. Large tensors are processed in slices that follow numpy's
own pairwise-summation tree, so the float32 sums are identical to a whole-array ``np.sum`` while only one slice
of temporaries is alive at a time.

Values are returned as :class:`Value` (a ``float`` that also carries the exact CSV cell text, e.g. ``"1.0"``,
``"NaN"`` or ``"0.999998"``); ``StandardDeviation`` is the string ``"(%.3f;%.3f),(%.3f;%.3f)"``.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
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
    """A metric value: a float that also keeps the exact text msaccucmp writes in its CSV cell."""

    text: str

    def __new__(cls, value: float, text: str | None = None) -> "Value":
        obj = super().__new__(cls, float(value))
        obj.text = text if text is not None else "{:.6f}".format(value)
        return obj

    def __repr__(self) -> str:
        return self.text

    def __reduce__(self):
        return (Value, (float(self), self.text))


def _fmt(value) -> Value:
    """``utils.format_value``: the numpy value formatted '{:.6f}' (nan -> 'nan', inf -> 'inf')."""
    return Value(float(value), "{:.6f}".format(value))


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
_SUM64 = "d"   # float64 sums (StandardDeviation; order-insensitive at 3 decimals)
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
    algorithms = normalize_algorithms(algorithms)
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


def _compare_streamed(x, y, algorithms, shape, my_name, golden_name, chunk) -> Metrics:
    want = set(algorithms)
    n = x.size
    if n <= chunk:  # one leaf: cast once for all passes instead of once per pass
        x, y = _f32(x), _f32(y)
    scalar = is_scalar_shape(shape)
    need_cos = "CosineSimilarity" in want and not scalar
    need_kl = "KullbackLeiblerDivergence" in want
    need_std = "StandardDeviation" in want
    need_red = "RelativeEuclideanDistance" in want
    need_rel = bool(want & {"AccumulatedRelativeError", "MaxRelativeError", "MeanRelativeError"})

    # ---- pass 1: everything that needs no global statistic
    def leaf1(lo: int, hi: int) -> dict:
        a = _f32(x[lo:hi])
        b = _f32(y[lo:hi])
        out: dict = {}
        if need_cos:
            out["sxx"] = np.add.reduce((a.conj() * a).real)
            out["syy"] = np.add.reduce((b.conj() * b).real)
        if need_red:
            out["sgt2"] = (b ** 2).sum()
            out["sd2"] = ((a - b) ** 2).sum()
        elif "RootMeanSquareError" in want:
            out["sd2"] = ((a - b) ** 2).sum()
        if "MaxAbsoluteError" in want or "MeanAbsoluteError" in want:
            d = np.abs(a - b)
            out["Mabs"] = d.max()
            out["sabs"] = d.sum()
        if need_rel:
            r = np.where(np.abs(b) > FLOAT_EPSILON, np.abs(a / b - 1), 0)
            out["srel"] = r.sum()
            out["Mrel"] = r.max()
        if need_kl:
            out["Mx"], out["mx"] = a.max(), a.min()
            out["My"], out["my"] = b.max(), b.min()
        if need_std:
            out["dx"] = np.add.reduce(a, dtype=np.float64)
            out["dy"] = np.add.reduce(b, dtype=np.float64)
        return out

    p1 = _tree_reduce(0, n, leaf1, _combine, chunk)
    values: dict[str, object] = {}
    messages: list[str] = []

    nx = ny = None
    cos_early = None
    cos_msg = ""
    if need_cos:
        nx = np.sqrt(p1["sxx"])
        ny = np.sqrt(p1["syy"])
        cos_early, cos_msg = _cosine_zero_checks(nx, ny, my_name, golden_name)
    kl_params = None
    kl_msg = ""
    if need_kl:
        kl_params = (_kl_range(p1["Mx"], p1["mx"]), _kl_range(p1["My"], p1["my"]))
    mean_x = mean_y = None
    if need_std:
        mean_x = p1["dx"] / n
        mean_y = p1["dy"] / n

    # ---- pass 2: cosine dot product, KL normaliser sums, std squared deviations
    need_pass2 = (need_cos and cos_early is None) or need_kl or need_std
    p2: dict = {}
    if need_pass2:
        def leaf2(lo: int, hi: int) -> dict:
            a = _f32(x[lo:hi])
            b = _f32(y[lo:hi])
            out: dict = {}
            if need_cos and cos_early is None:
                out["scos"] = ((a / nx) * (b / ny)).sum()
            if need_kl:
                pa = _kl_normalized(a, *kl_params[0])
                pb = _kl_normalized(b, *kl_params[1])
                out["sp"] = pa.sum()
                out["sq"] = pb.sum()
                out["Mp0"] = np.logical_not(np.all(pa == 0))   # any non-zero
                out["Mq0"] = np.logical_not(np.all(pb == 0))
            if need_std:
                dxa = a - mean_x
                dyb = b - mean_y
                out["dvx"] = np.add.reduce(dxa * dxa)
                out["dvy"] = np.add.reduce(dyb * dyb)
            return out

        p2 = _tree_reduce(0, n, leaf2, _combine, chunk)

    kl_value = None
    if need_kl:
        x_zero = not bool(p2["Mp0"])
        y_zero = not bool(p2["Mq0"])
        if x_zero and y_zero:
            kl_value = nan_value()
            kl_msg = f"Cannot compare by KL Divergence. All the data is zero in {my_name!r} and {golden_name!r}."
        elif x_zero:
            kl_value = nan_value()
            kl_msg = f"Cannot compare by KL Divergence. All the data is zero in {my_name}."
        elif y_zero:
            kl_value = nan_value()
            kl_msg = f"Cannot compare by KL Divergence. All the data is zero in {golden_name}."
        else:
            sp, sq = p2["sp"], p2["sq"]

            def leaf3(lo: int, hi: int) -> dict:
                a = _f32(x[lo:hi])
                b = _f32(y[lo:hi])
                px = _kl_normalized(a, *kl_params[0]) / sp
                qy = _kl_normalized(b, *kl_params[1]) / sq
                return {"skl": (px * np.log(px / qy)).sum()}

            result = _tree_reduce(0, n, leaf3, _combine, chunk)["skl"]
            if abs(result) < FLOAT_EPSILON:
                result = 0.0
            if str(result) == "inf":
                kl_msg = f"Cannot compare by KL Divergence. The data contains 0 in {golden_name!r}."
            kl_value = _fmt(result)

    for name in algorithms:
        if name == "CosineSimilarity":
            if scalar:
                values[name] = _fmt(1)
                messages.append("This tensor is scalar.")
            elif cos_early is not None:
                values[name] = cos_early
                if cos_msg:
                    messages.append(cos_msg)
            else:
                values[name] = _fmt(min(p2["scos"], 1.0))
        elif name == "MaxAbsoluteError":
            values[name] = _fmt(p1["Mabs"])
        elif name == "AccumulatedRelativeError":
            values[name] = _fmt(p1["srel"])
        elif name == "RelativeEuclideanDistance":
            gt_sq = p1["sgt2"]
            result = 0.0 if gt_sq ** 0.5 <= FLOAT_EPSILON else p1["sd2"] / gt_sq
            values[name] = _fmt(result ** 0.5)
        elif name == "KullbackLeiblerDivergence":
            values[name] = kl_value
            if kl_msg:
                messages.append(kl_msg)
        elif name == "StandardDeviation":
            values[name] = _std_cell(mean_x, mean_y, math.sqrt(p2["dvx"] / n), math.sqrt(p2["dvy"] / n))
        elif name == "MeanAbsoluteError":
            values[name] = _fmt(_mean32(p1["sabs"], n))
        elif name == "RootMeanSquareError":
            values[name] = _fmt(np.sqrt(_mean32(p1["sd2"], n)))
        elif name == "MaxRelativeError":
            values[name] = _fmt(p1["Mrel"])
        elif name == "MeanRelativeError":
            values[name] = _fmt(_mean32(p1["srel"], n))
    return Metrics(values, messages)


def _mean32(total, n: int):
    """numpy ``_mean`` for float32: ``ret.dtype.type(ret / rcount)``."""
    total = np.float32(total)
    return total.dtype.type(total / n)


def _kl_range(max_value, min_value):
    return min_value, max_value - min_value


def _kl_normalized(data: np.ndarray, min_value, range_value) -> np.ndarray:
    if range_value != 0:
        data = (data - min_value) / range_value
    return np.maximum(data, KL_EPSILON)


def _std_cell(left_mean, right_mean, left_std, right_std) -> str:
    left_std = 0.0 if abs(left_std) < MINIMUM_VALUE else left_std
    left_mean = 0.0 if abs(left_mean) < MINIMUM_VALUE else left_mean
    right_std = 0.0 if abs(right_std) < MINIMUM_VALUE else right_std
    right_mean = 0.0 if abs(right_mean) < MINIMUM_VALUE else right_mean
    return "(%.3f;%.3f),(%.3f;%.3f)" % (left_mean, left_std, right_mean, right_std)
