"""compare --jobs N runs ops in forked workers: rows and unmatched entries equal a serial run, in order."""

import os
import subprocess
import sys

from fusebisect.compare.engine import compare_dumps


def test_forked_workers_give_the_serial_result(tmp_path):
    on, off = tmp_path / "on", tmp_path / "off"
    cfg = tmp_path / "off.cfg"
    cfg.write_text('{"Switch":{"GraphFusion":{"ALL":"off"},"UBFusion":{"ALL":"off"}}}')
    for root, extra in ((on, ["--faulty", "GeluFusionPass"]), (off, ["--fusion-switch-file", str(cfg)])):
        root.mkdir()
        subprocess.run([sys.executable, "-m", "fusebisect.sim", "train", "--steps", "1", "--dump-step", "0",
                        "--dump-path", "d", *extra], cwd=root, check=True, capture_output=True,
                       env={**os.environ, "DUMP_GE_GRAPH": "2", "DUMP_GRAPH_PATH": "g"})
    args = dict(my_graph=on / "g", golden_graph=off / "g")
    serial = compare_dumps(on / "d", off / "d", **args)
    forked = compare_dumps(on / "d", off / "d", jobs=3, **args)
    assert serial.unmatched, "the case must exercise unmatched entries coming back from workers"
    assert forked.unmatched == serial.unmatched

    def cells(report):  # tensor and the exact CSV text of every metric (NaN compares as text)
        return [(r.tensor, [repr(v) for v in r.metrics.values()]) for r in report.rows]

    assert cells(forked) == cells(serial)
    assert forked.first_divergence == serial.first_divergence


def test_a_worker_that_cannot_hand_its_result_over_has_its_share_compared_here(tmp_path, monkeypatch):
    """A full temporary directory (or a file size limit) fails a worker's write of its result: its share is
    compared by the parent, never an internal error."""
    import errno
    import pickle

    import numpy as np

    from fusebisect.compare.dumpfile import write_dump

    for side, shift in (("a", 0.0), ("b", 1e-3)):
        for i in range(12):
            x = np.arange(64, dtype=np.float32) + i
            write_dump(tmp_path / side / f"Add.op{i}.{i}.0.{1700000000000000 + i}", op_name=f"op{i}", inputs=[],
                       outputs=[x + shift])
    serial = compare_dumps(tmp_path / "a", tmp_path / "b")

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pickle, "dump", full)   # (the forked workers inherit it)
    forked = compare_dumps(tmp_path / "a", tmp_path / "b", jobs=3)
    assert [(r.tensor, r.cosine) for r in forked.rows] == [(r.tensor, r.cosine) for r in serial.rows]
    assert len(forked.rows) == 12
