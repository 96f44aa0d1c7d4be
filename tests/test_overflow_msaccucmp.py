"""Side by side with the real msaccucmp ``overflow``: the same new-layout records, the same answers.

msaccucmp decodes the new record layout only from a nano Opdebug file, and finds the op's dump only as a
``<digits>.npy`` listed in ``mapping.csv`` (its nano op-dump path crashes). Both tools read the same directory.
"""

from __future__ import annotations

import re
import struct

import numpy as np
import pytest

from fusebisect.compare.dumpfile import TensorSpec, write_dump
from fusebisect.compare.overflow import analyse

MAGIC = 0x5A5A5A5A
T0 = 1700000000000000
FIELDS = {  # acc_type -> number of u64 fields before the status
    0: 10, 1: 10, 3: 9, 2: 7,
}


def record(version: int, acc_type: int, task_id: int, stream_id: int, status: tuple[int, ...]) -> bytes:
    head = [1, stream_id, task_id, 0, 0, 0]   # model, stream, task, task_type, context_id 0, then thread/cpu id 0
    values = head + [0] * (FIELDS[acc_type] - len(head)) + list(status)
    return (struct.pack("<IIIIII", MAGIC, version, 1, acc_type, 0, 8 * len(values))
            + struct.pack(f"<{len(values)}Q", *values))


CASES = [  # version, acc_type, unit, task, stream, status words
    (0, 0, "AIC", 3, 0, (8,)),
    (0, 1, "AIV", 5, 1, (0x20,)),
    (0, 2, "AICPU", 7, 2, (0x100,)),
    (0, 3, "SDMA", 9, 0, (0x900,)),
    (1, 0, "AIC", 11, 3, (0x20, 0, 0x4, 0)),
]


def build(root, cases):
    mapping = []
    for n, (version, acc_type, _unit, task, stream, status) in enumerate(cases):
        ts = T0 + 10 * n
        out = np.array([[2.0, 65504.0], [np.inf, 3.0 + n]], dtype=np.float16)
        np.save(root / f"{1000 + n}.npy", out)
        mapping.append(f"{1000 + n}.npy,Mul.mul{n}.{task}.{stream}.{ts + 1}")
        data = np.frombuffer(record(version, acc_type, task, stream, status), dtype=np.uint8)
        write_dump(root / f"Opdebug.Node_OpDebug.{n}.{stream}.{ts + 2}", op_name="Node_OpDebug", inputs=[],
                   outputs=[TensorSpec(data, dtype=4)], encoding="nano")
    (root / "mapping.csv").write_text("\n".join(mapping) + "\n")


def parse_msaccucmp_summary(text: str) -> list[dict]:
    """Each ``[n]`` block of overflow_summary_*.txt -> op, unit, task, stream, status, output stats."""
    blocks = []
    for block in re.split(r"=+\[\d+\]=+\n", text)[1:]:
        op = re.search(r"^\[(\w+)\] (\S*)", block, re.M)
        info = re.search(r"\[(\w+)\]\[TaskId:(\d+)\]\[StreamId:(\d+)\]\[Status:([^\]]+\]?)\]", block)
        stats = re.search(r"\[Shape: \(([^)]*)\)\] \[Dtype: (\w+)\] \[Max: (\S+)\] \[Min: (\S+)\]", block)
        status = info.group(4)
        blocks.append({
            "op_type": op.group(1), "unit": info.group(1), "task_id": int(info.group(2)),
            "stream_id": int(info.group(3)),
            "status": [int(v) for v in re.findall(r"\d+", status)],
            "shape": tuple(int(d) for d in stats.group(1).split(",") if d.strip()),
            "dtype": stats.group(2), "max": float(stats.group(3)), "min": float(stats.group(4)),
        })
    return blocks


@pytest.mark.msaccucmp
@pytest.mark.slow
def test_units_task_stream_status_agree_with_msaccucmp(tmp_path, msaccucmp):
    dump = tmp_path / "overflow_dump_npy"
    dump.mkdir()
    build(dump, CASES)
    out = tmp_path / "out"
    proc = msaccucmp.run("overflow", "-d", str(dump), "-out", str(out), "-n", "5")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summaries = list(out.glob("overflow_summary_*.txt"))
    assert len(summaries) == 1, proc.stdout + proc.stderr
    theirs = parse_msaccucmp_summary(summaries[0].read_text())
    assert len(theirs) == len(CASES)

    report = analyse(dump)
    assert report.problems == []
    ours = report.overflows
    assert len(ours) == len(CASES)
    for case, mine, peer in zip(CASES, ours, theirs):
        _version, _acc, unit, task, stream, status = case
        assert (mine.unit, mine.task_id, mine.stream_id, list(mine.status_words)) == (unit, task, stream,
                                                                                       list(status))
        assert (peer["unit"], peer["task_id"], peer["stream_id"], peer["status"]) == (unit, task, stream,
                                                                                       list(status))
        assert mine.op_type == peer["op_type"] == "Mul"
        (st,) = mine.outputs
        assert (st.shape, st.dtype, st.max, st.min) == (peer["shape"], peer["dtype"], peer["max"], peer["min"])
        assert st.pos_inf == 1 and st.saturated == 1


@pytest.mark.msaccucmp
@pytest.mark.slow
def test_msaccucmp_matches_the_simulators_overflow_record_to_its_op_dump(tmp_path, msaccucmp):
    """msaccucmp takes only 65535 as an unset context/thread id: the simulator wrote 0xFFFFFFFF, and msaccucmp
    looked for a dump of that FFTS+ context ("Can't find the dump file"). Its op dump is handed to msaccucmp as
    mapping.csv + .npy (it reads nano Opdebug files, not nano op dumps)."""
    import os
    import subprocess
    import sys

    from fusebisect.compare.dumpfile import read_dump

    env = {k: v for k, v in os.environ.items() if not k.startswith("FUSEBISECT_")}
    proc = subprocess.run([sys.executable, "-m", "fusebisect.sim", "train", "--overflow", "--steps", "1",
                           "--dump-path", "dump", "--dump-encoding", "nano"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    (leaf,) = {p.parent for p in (tmp_path / "dump").rglob("Opdebug.Node_OpDebug.*")}
    ours = analyse(leaf)
    assert ours.problems == [] and len(ours.overflows) == 1
    mapping = []
    for n, op in enumerate(sorted(p for p in leaf.iterdir() if not p.name.startswith("Opdebug."))):
        np.save(leaf / f"{1000 + n}.npy", read_dump(op).outputs[0].array())
        mapping.append(f"{1000 + n}.npy,{op.name}")
        op.unlink()
    (leaf / "mapping.csv").write_text("\n".join(mapping) + "\n")
    out = tmp_path / "out"
    proc = msaccucmp.run("overflow", "-d", str(leaf), "-out", str(out))
    assert proc.returncode == 0 and "Can't find the dump file" not in proc.stdout + proc.stderr, \
        proc.stdout + proc.stderr
    (summary,) = out.glob("overflow_summary_*.txt")
    (peer,) = parse_msaccucmp_summary(summary.read_text())
    (mine,) = ours.overflows
    assert (peer["unit"], peer["task_id"], peer["stream_id"], peer["op_type"]) == \
        ("AIC", mine.task_id, mine.stream_id, mine.op_type)
