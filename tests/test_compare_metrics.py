"""Metric fidelity: every value equals the real msaccucmp's, after its 6-decimal formatting."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from fusebisect.compare import metrics
from fusebisect.compare.metrics import ALGORITHMS, cell_text, compare_arrays, compute

HELPER = Path(__file__).parent / "compare_msaccucmp_metrics.py"


def _random_pairs(seed: int = 1234) -> list[tuple[np.ndarray, np.ndarray, tuple]]:
    rng = np.random.default_rng(seed)
    pairs: list[tuple[np.ndarray, np.ndarray, tuple]] = []
    shapes = [(7,), (3, 5), (2, 3, 4), (1, 2, 4, 4), (64, 33), (1,), (1, 1), (), (2, 0, 0)]
    dtypes = [np.float32, np.float16, ml_dtypes.bfloat16, np.float64, np.int32, np.int8, np.uint8, np.int64]
    for shape in shapes:
        for dtype in dtypes:
            golden = (rng.standard_normal(shape) * rng.choice([1e-3, 1, 50])).astype(np.float32)
            my = golden + rng.standard_normal(shape).astype(np.float32) * np.float32(rng.choice([0, 1e-3, 0.5]))
            if np.issubdtype(np.dtype(dtype), np.integer):
                golden = (golden * 20).astype(dtype)
                my = (my * 20).astype(dtype)
            else:
                golden, my = golden.astype(dtype), my.astype(dtype)
            pairs.append((my, golden, shape))
    # special values
    base = rng.standard_normal(100).astype(np.float32)
    zeros = np.zeros(100, np.float32)
    pairs += [
        (zeros, zeros, (100,)), (base, zeros, (100,)), (zeros, base, (100,)),
        (np.full(50, 3.5, np.float32), np.full(50, 3.5, np.float32), (50,)),
        (np.full(50, -2, np.float32), np.full(50, 4, np.float32), (50,)),
        (np.where(base > 1, np.nan, base).astype(np.float32), base, (100,)),
        (base, np.where(base > 1, np.inf, base).astype(np.float32), (100,)),
        (np.where(base > 1, -np.inf, base).astype(np.float32), np.where(base > 1, -np.inf, base).astype(np.float32),
         (100,)),
        (np.where(np.abs(base) < 0.5, 0, base).astype(np.float32), np.where(np.abs(base) < 0.3, 0, base)
         .astype(np.float32), (100,)),
        (base * 1e-20, base * 1e-20, (100,)),
        (base * 1e30, base * 1.0001e30, (100,)),
        (np.array([5.0], np.float32), np.array([7.0], np.float32), (1,)),
        (rng.random(40) > 0.5, rng.random(40) > 0.5, (40,)),
        (rng.random(40) > 0.5, np.zeros(40, bool), (40,)),
        (np.zeros(40, bool), np.zeros(40, bool), (40,)),
        (np.array([True]), np.array([True]), (1,)),
        (rng.random(40) > 0.5, rng.random(40).astype(np.float32), (40,)),
        (base.astype(np.float16), base, (100,)),
        (base[:50], base, (50,)),        # size mismatch
    ]
    # large enough to cross several pairwise leaves (chunk is lowered in the test)
    big = rng.standard_normal(20011).astype(np.float32) * 30
    pairs.append((big + rng.standard_normal(20011).astype(np.float32), big, (20011,)))
    pairs.append((np.abs(big).astype(np.float16), np.abs(big + 1).astype(np.float16), (20011,)))
    # means near 1e14: the float64 sums behind StandardDeviation show their order in the last decimals, and
    # past one leaf of the default chunk too
    huge = (np.random.default_rng(1).standard_normal(100003) * 1e15 + 3e14).astype(np.float32)
    pairs.append((huge, (huge * np.float32(1.0001)).astype(np.float32), (100003,)))
    return pairs


def _run_msaccucmp(msaccucmp, pairs, tmp_path: Path) -> list[dict]:
    arrays = {"count": np.array(len(pairs))}
    for i, (my, golden, shape) in enumerate(pairs):
        for side, arr in (("my", my), ("golden", golden)):
            if arr.dtype == ml_dtypes.bfloat16:
                arrays[f"bf16{side}_{i}"] = np.array(1)
                arr = arr.view(np.uint16)
            arrays[f"{side}_{i}"] = arr
        arrays[f"shape_{i}"] = np.array(shape, dtype=np.int64)
    npz = tmp_path / "pairs.npz"
    np.savez(npz, **arrays)
    out = tmp_path / "out.json"
    proc = subprocess.run([sys.executable, str(HELPER), str(npz), str(out)], env=msaccucmp.env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.parametrize("chunk", [metrics.CHUNK, 1000])
def test_metrics_equal_real_msaccucmp(msaccucmp, tmp_path, chunk):
    pairs = _random_pairs()
    expected = _run_msaccucmp(msaccucmp, pairs, tmp_path)
    for i, ((my, golden, shape), ref) in enumerate(zip(pairs, expected)):
        got = compare_arrays(my, golden, shape=shape, my_name="my", golden_name="golden", chunk=chunk)
        if ref["values"] is None:     # msaccucmp refuses the pair: we give NaN + a reason instead of crashing
            assert all(cell_text(v) == "NaN" for v in got.values.values()), i
            assert "does not match" in got.fail_reason
            continue
        cells = [cell_text(got.values[name]) for name in ALGORITHMS]
        assert cells == ref["values"], (i, my.dtype, shape, cells, ref["values"])
        # messages name the same problems (msaccucmp's list, same order)
        assert [m.split(".")[0] for m in got.messages] == [m.split(".")[0] for m in ref["messages"]], \
            (i, got.messages, ref["messages"])


def test_compute_returns_floats_with_exact_text():
    x = np.arange(1, 9, dtype=np.float32)
    values = compute(x, x)
    assert float(values["CosineSimilarity"]) == pytest.approx(1.0)
    assert values["MaxAbsoluteError"].text == "0.000000"
    assert values["StandardDeviation"] == "(4.500;2.291),(4.500;2.291)"
    zero = compute(np.zeros(4, np.float32), np.zeros(4, np.float32), ["CosineSimilarity"])
    assert zero["CosineSimilarity"].text == "1.0"


def test_size_mismatch_gives_reason_not_crash():
    got = compare_arrays(np.ones(3), np.ones(4))
    assert "does not match" in got.fail_reason
    assert all(np.isnan(float(v)) for v in got.values.values())


def test_algorithm_selection_by_index_and_name():
    assert metrics.normalize_algorithms("0,1") == ["CosineSimilarity", "MaxAbsoluteError"]
    assert metrics.normalize_algorithms(["MeanRelativeError", "0"]) == ["MeanRelativeError", "CosineSimilarity"]
    with pytest.raises(ValueError):
        metrics.normalize_algorithms(["Bogus"])
