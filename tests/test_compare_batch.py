"""Batched comparison and worker split: the same values, bit for bit, as one pair at a time and a serial run."""

from __future__ import annotations

import os
import threading

import ml_dtypes
import numpy as np
import pytest

from fusebisect.compare import dumpfile, engine, metrics
from fusebisect.compare.dumpfile import TensorSpec, read_dump, write_dump
from fusebisect.compare.metrics import ALGORITHMS, compare_arrays, compare_batch


def _pairs(seed: int) -> list[tuple]:
    """Pairs of many kinds, most of them small and sharing a size so that they are stacked together."""
    rng = np.random.default_rng(seed)
    items = []
    with np.errstate(all="ignore"):
        for i in range(160):
            items.append(_pair(rng, i))
    return items


def _pair(rng, i: int) -> tuple:
    """One pair of kind ``i % 10`` (plain, zeros, NaN, Inf, low precision, bool, equal, size mismatch, ints)."""
    n = int(rng.choice([1, 7, 64, 512, 512, 512, 4096, 4096, metrics.BATCH_MAX_SIZE,
                        metrics.BATCH_MAX_SIZE + 1, 0]))
    golden = (rng.standard_normal(n) * rng.choice([1e-3, 1.0, 1e20])).astype(np.float32)
    my = golden + rng.standard_normal(n).astype(np.float32) * np.float32(rng.choice([0, 1e-3, 0.5]))
    kind = i % 10
    if kind == 1:
        golden[rng.random(n) < 0.1] = 0
    elif kind == 2:
        my[rng.random(n) < 0.05] = np.nan
    elif kind == 3:
        golden[rng.random(n) < 0.05] = np.inf
    elif kind == 4:
        my, golden = my.astype(np.float16), golden.astype(ml_dtypes.bfloat16)
    elif kind == 5:
        my = np.zeros(n, np.float32)
    elif kind == 6:
        my, golden = my > 0, golden > 0
    elif kind == 7:
        my = golden = np.full(n, 2.5, np.float32)
    elif kind == 8:
        my = my[:-1] if n else my
    elif kind == 9:
        my, golden = (my * 20).astype(np.int32), (golden * 20).astype(np.int8)
    shape = [None, (1, n), (n, 1), (1,)][int(rng.integers(0, 4))] if n else None
    return my, golden, shape, f"my{i}", f"golden{i}"


def _exact(metric) -> list:
    """Each value as (float bits or text, CSV text): NaN equals NaN, 0.0 differs from -0.0."""
    return [(v if isinstance(v, str) else np.float64(v).tobytes(), metrics.cell_text(v))
            for v in metric.values.values()]


@pytest.mark.parametrize("algorithms", [None, ["MaxAbsoluteError", "CosineSimilarity"],
                                        ["KullbackLeiblerDivergence", "StandardDeviation", "RootMeanSquareError"],
                                        ["MeanRelativeError", "RelativeEuclideanDistance"]])
def test_batch_equals_one_pair_at_a_time(algorithms):
    items = _pairs(7)
    assert sum(metrics.batchable(np.asarray(m), np.asarray(g)) for m, g, *_ in items) > 60, "must stack pairs"
    batched = compare_batch(items, algorithms)
    assert len(batched) == len(items)
    for i, ((my, golden, shape, my_name, golden_name), got) in enumerate(zip(items, batched)):
        one = compare_arrays(my, golden, algorithms, shape=shape, my_name=my_name, golden_name=golden_name)
        assert list(got.values) == list(one.values), i
        assert _exact(got) == _exact(one), (i, my.dtype, my.size, shape)
        assert got.messages == one.messages, i


def test_rows_do_not_depend_on_the_batch_they_are_in(monkeypatch):
    items = [item for item in _pairs(11) if metrics.batchable(np.asarray(item[0]), np.asarray(item[1]))]
    wide = compare_batch(items)
    monkeypatch.setattr(metrics, "BATCH_ELEMENTS", 1)       # one pair per stack
    narrow = compare_batch(items)
    assert [_exact(m) for m in wide] == [_exact(m) for m in narrow]
    assert [m.messages for m in wide] == [m.messages for m in narrow]


def test_value_text_is_formatted_like_msaccucmp():
    for raw in (np.float32(0.1234567), np.float32("nan"), np.float32("-inf"), np.float32(-0.0), np.float64(3.25)):
        value = metrics._fmt(raw)
        assert value.text == "{:.6f}".format(raw)
        assert repr(value) == value.text
    assert metrics.Value(1.0, "1.0").text == "1.0"


def _tree(root, ops: int, seed: int, noise: float, elements: int = 300) -> None:
    rng = np.random.default_rng(seed)
    base = np.random.default_rng(1)
    root.mkdir()
    for i in range(ops):
        out = base.standard_normal(elements).astype(np.float32)
        out += rng.standard_normal(elements).astype(np.float32) * np.float32(noise)
        inp = base.standard_normal(16).astype(np.float32)
        write_dump(root / f"Add.op{i}.{i}.0.{1700000000000000 + i}", op_name=f"op{i}", inputs=[TensorSpec(inp)],
                   outputs=[TensorSpec(out, original_shape=out.shape)], encoding="nano" if i % 2 else "binary")


def _cells(report):
    return [(r.tensor, r.fail_reason, [metrics.cell_text(v) for v in r.metrics.values()]) for r in report.rows]


def test_split_over_forked_children_gives_the_serial_rows(tmp_path, monkeypatch):
    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    my, golden = tmp_path / "my", tmp_path / "golden"
    _tree(my, 40, 2, 0.5)
    _tree(golden, 37, 3, 0.0)          # three ops only in my dump: unmatched entries from every share
    serial = engine.compare_dumps(my, golden)
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    split = engine.compare_dumps(my, golden, jobs=3)
    assert _cells(split) == _cells(serial)
    assert split.unmatched == serial.unmatched and len(serial.unmatched) == 3
    assert split.first_divergence == serial.first_divergence


def test_a_failing_child_share_raises_in_the_caller():
    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")

    def boom(ctx):
        raise RuntimeError("share failed")

    ctx = engine._Context(list(ALGORITHMS), None, None, False, jobs=2)
    tasks = [engine._Task(["a"], lambda c: []), engine._Task(["b"], boom)]
    with pytest.raises(RuntimeError, match="share failed"):
        engine._run_split(tasks, ctx, 2)


def test_auto_jobs_uses_every_cpu_only_for_many_ops(monkeypatch):
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    assert engine.auto_jobs(engine.AUTO_JOBS_MIN_OPS - 1) == 1
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert engine.auto_jobs(engine.AUTO_JOBS_MIN_OPS) == cpus
    monkeypatch.setattr(threading, "active_count", lambda: 2)   # forking next to other threads is unsafe
    assert engine.auto_jobs(10 * engine.AUTO_JOBS_MIN_OPS) == 1


def test_small_files_read_in_one_go_equal_mapped_reads(tmp_path, monkeypatch):
    rng = np.random.default_rng(5)
    for encoding in ("binary", "protobuf", "nano"):
        path = write_dump(tmp_path / f"Add.op.1.0.{encoding}", op_name="op", encoding=encoding,
                          inputs=[TensorSpec(rng.standard_normal((3, 5)).astype(np.float16))],
                          outputs=[TensorSpec(rng.standard_normal(1000).astype(np.float32)),
                                   TensorSpec(np.arange(7, dtype=np.int64))])
        whole = read_dump(path)
        monkeypatch.setattr(dumpfile, "_READ_WHOLE_BYTES", 0)
        mapped = read_dump(path)
        monkeypatch.undo()
        assert whole == mapped
        for a, b in zip(whole.tensors(), mapped.tensors()):
            assert a.array().dtype == b.array().dtype
            assert a.array().tobytes() == b.array().tobytes()
            assert not a.array().flags.writeable
