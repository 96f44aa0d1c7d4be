"""``fusebisect overflow`` end to end on dump directories written with write_dump (binary, protobuf, nano)."""

from __future__ import annotations

import json
import re
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from fusebisect.cli.app import main
from fusebisect.compare.dumpfile import TensorSpec, write_dump
from fusebisect.compare.overflow import analyse

MAGIC = 0x5A5A5A5A
DT_UINT8 = 4
T0 = 1700000000000000


def new_record(task_id: int, stream_id: int, status: int, *, acc_type: int = 0, context_id: int = 0xFFFFFFFF,
               thread_id: int = 0xFFFFFFFF) -> bytes:
    values = (1, stream_id, task_id, 0, context_id, thread_id, 0x1234, 0x5678, 0, 0, status)
    return struct.pack("<IIIIII", MAGIC, 0, 1, acc_type, 0, 88) + struct.pack("<11Q", *values)


def old_record(task_id: int, stream_id: int, status: int) -> bytes:
    buf = bytearray(2048)
    struct.pack_into("<6Q", buf, 256, 1, stream_id, task_id, 0, 0, 0)
    struct.pack_into("<3Q", buf, 1024, 0x99, 0, status)
    return bytes(buf)


def write_opdebug(leaf: Path, record: bytes, ts: int, encoding: str, debug_task: int = 1) -> Path:
    arr = np.frombuffer(record, dtype=np.uint8)
    return write_dump(leaf / f"Opdebug.Node_OpDebug.{debug_task}.0.{ts}", op_name="Node_OpDebug", inputs=[],
                      outputs=[TensorSpec(arr, dtype=DT_UINT8)], encoding=encoding, dump_time=ts)


def write_op(leaf: Path, op_type: str, op_name: str, task: int, stream: int, ts: int, inputs, outputs,
             encoding: str, extra: str = "") -> Path:
    name = f"{op_type}.{op_name}.{task}.{stream}.{ts}{extra}"
    return write_dump(leaf / name, op_name=op_name, inputs=[TensorSpec(np.asarray(a)) for a in inputs],
                      outputs=[TensorSpec(np.asarray(a)) for a in outputs], encoding=encoding, dump_time=ts)


def leaf_dir(root: Path, iteration: int) -> Path:
    d = root / "20240101000000" / "0" / "ge_default" / "1" / str(iteration)
    d.mkdir(parents=True, exist_ok=True)
    return d


CLEAN = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float16)
SATURATED = np.array([[65504.0, 2.0], [np.inf, 4.0]], dtype=np.float16)
WITH_NAN = np.array([[np.nan, 2.0], [3.0, 4.0]], dtype=np.float16)


def build_two_iterations(root: Path, encoding: str, layout: str = "new") -> None:
    """Iterations 0 and 1 both run Mul as task 3 stream 0 and Add as task 4; both overflow in Mul.

    Iteration 0: clean inputs, saturated output. Iteration 1: NaN input (upstream problem). Iteration 2 did not dump
    Mul at all: its overflow record must stay unmatched rather than borrow another iteration's Mul.
    """
    rec = new_record if layout == "new" else old_record
    for it, (inp, out) in enumerate([(CLEAN, SATURATED), (WITH_NAN, WITH_NAN)]):
        leaf = leaf_dir(root, it)
        base = T0 + it * 1000
        write_op(leaf, "Add", "add1", 4, 0, base + 1, [CLEAN, CLEAN], [CLEAN], encoding)
        write_op(leaf, "Mul", "mul1", 3, 0, base + 2, [inp, CLEAN], [out], encoding)
        write_opdebug(leaf, rec(3, 0, 0x20), base + 3, encoding)
    leaf = leaf_dir(root, 2)
    write_op(leaf, "Add", "add1", 4, 0, T0 + 2001, [CLEAN, CLEAN], [CLEAN], encoding)
    write_opdebug(leaf, rec(3, 0, 0x20), T0 + 2003, encoding)


@pytest.mark.parametrize("encoding", ["binary", "nano", "protobuf"])
@pytest.mark.parametrize("layout", ["new", "old"])
def test_per_iteration_matching_end_to_end(tmp_path, encoding, layout):
    build_two_iterations(tmp_path, encoding, layout)
    report = analyse(tmp_path)
    assert report.problems == []
    assert report.opdebug_files == 3 and report.total == 3
    first, second, third = report.overflows
    assert [o.timestamp for o in report.overflows] == [T0 + 2, T0 + 1002, T0 + 2003]
    unit = "AIC" if layout == "new" else "AI Core"
    for ov in report.overflows:
        assert (ov.unit, ov.task_id, ov.stream_id, ov.status) == (unit, 3, 0, 0x20)
        assert ov.meanings == ["0x20: floating-point computation overflow"]
    # iteration 0: clean inputs, float16 output saturating
    assert first.dump_file.parent.name == "0" and (first.op_type, first.op_name) == ("Mul", "mul1")
    assert [s.abnormal for s in first.inputs] == [False, False]
    out = first.outputs[0]
    assert (out.shape, out.dtype, out.saturated, out.pos_inf, out.nan, out.max) == ((2, 2), "float16", 1, 1, 0,
                                                                                     np.inf)
    assert "keep Mul in float32" in first.diagnosis
    # iteration 1: its own Mul, whose input holds NaN
    assert second.dump_file.parent.name == "1" and second.inputs[0].nan == 1
    assert second.diagnosis.startswith("Input already abnormal (input 0: 1 NaN)")
    # iteration 2 has no Mul dump: not matched to another iteration's file
    assert not third.matched and third.dump_file is None and "task_id 3, stream_id 0" in third.diagnosis


def test_json_output_and_exit_codes(tmp_path, capsys):
    build_two_iterations(tmp_path, "binary")
    assert main(["overflow", str(tmp_path), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["overflows"]) == 3 and doc["total"] == 3
    ov = doc["overflows"][0]
    for key in ("op_type", "op_name", "task_id", "stream_id", "timestamp", "unit", "status", "meanings", "inputs",
                "outputs", "pass_names", "diagnosis"):
        assert key in ov
    assert (ov["op_type"], ov["op_name"], ov["task_id"], ov["stream_id"], ov["unit"], ov["status"]) == (
        "Mul", "mul1", 3, 0, "AIC", 32)
    stats = ov["outputs"][0]
    assert (stats["shape"], stats["dtype"], stats["min"], stats["max"], stats["pos_inf"], stats["saturated"]) == (
        [2, 2], "float16", 2.0, None, 1, 1)
    assert stats["max_is_inf"] is True and ov["pass_names"] == []


@pytest.mark.parametrize("limit", [1, 2])
def test_limit_prints_exactly_limit_entries(tmp_path, capsys, limit):
    build_two_iterations(tmp_path, "nano")
    assert main(["overflow", str(tmp_path), "--json", "--limit", str(limit)]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["overflows"]) == limit and doc["total"] == 3
    assert main(["overflow", str(tmp_path), "--limit", str(limit)]) == 1
    text = capsys.readouterr().out
    assert text.count("[Mul] mul1") + text.count("[?] ?") == limit
    assert f"3 overflowing ops in all; showing the first {limit}" in text


def test_limit_counts_ops_and_an_ops_records_stay_together(tmp_path, capsys):
    """One old-layout Opdebug record can name a task twice (AI Core and DHA atomic add): --limit 2 must still
    show the second overflowing op, with the first op's records under one number."""
    leaf = leaf_dir(tmp_path, 0)
    write_op(leaf, "Add", "first", 5, 0, T0 + 1, [CLEAN], [SATURATED], "nano")
    write_op(leaf, "Mul", "second", 6, 0, T0 + 2, [CLEAN], [SATURATED], "nano")
    both = bytearray(old_record(5, 0, 0x20))
    struct.pack_into("<6Q", both, 0, 1, 0, 5, 0, 0, 0)     # the DHA block names the same task
    struct.pack_into("<3Q", both, 512, 0x99, 0, 0x900)      # ... and its status block a DHA code
    write_opdebug(leaf, bytes(both), T0 + 10, "nano")
    write_opdebug(leaf, old_record(6, 0, 0x20), T0 + 20, "nano", debug_task=2)
    report = analyse(tmp_path, limit=2)
    assert report.total == 2 and report.records == 3
    assert [(o.op_index, o.op_name) for o in report.overflows] == [(1, "first"), (1, "first"), (2, "second")]
    assert main(["overflow", str(tmp_path), "--limit", "1"]) == 1
    text = capsys.readouterr().out
    assert text.count("[1] [Add] first") == 2 and "second" not in text
    assert "2 overflowing ops in all (3 records); showing the first 1 (--limit 1)." in " ".join(text.split())


def test_html_shows_the_sign_of_an_infinite_min_or_max(tmp_path, capsys):
    leaf = leaf_dir(tmp_path, 0)
    minus, plus = np.full((2,), -np.inf, np.float16), np.full((2,), np.inf, np.float16)
    write_op(leaf, "Add", "inf_op", 5, 0, T0 + 1, [minus], [plus], "nano")
    write_opdebug(leaf, old_record(5, 0, 0x20), T0 + 10, "nano")
    assert main(["overflow", str(tmp_path), "--html", str(tmp_path / "o.html")]) == 1
    cells = re.findall(r"<td>([^<]*)</td>", (tmp_path / "o.html").read_text())
    at = cells.index("float16")   # input row: ... dtype, shape, min, max
    assert cells[at + 2:at + 4] == ["-inf", "-inf"]
    at = cells.index("float16", at + 1)
    assert cells[at + 2:at + 4] == ["inf", "inf"]


def test_rich_panel_text(tmp_path, capsys):
    build_two_iterations(tmp_path, "binary")
    assert main(["overflow", str(tmp_path)]) == 1
    text = capsys.readouterr().out
    assert "[1] [Mul] mul1" in text and "[AIC][Status:0x20 (32)][TaskId:3][StreamId:0]" in text
    assert "floating-point computation overflow" in text and "keep Mul in float32" in text
    assert "[3] [?] ?" in text and "3 overflow records" not in text  # all three shown with the default limit 5


def test_op_dumps_without_opdebug_records_are_not_no_overflow(tmp_path, capsys):
    """Overflow detection writes an Opdebug record beside each overflowing op's dump: op dumps without any are
    an ordinary data dump, in which nothing was checked. Like --scan on records alone, that is exit 2, never
    "no overflowing ops found" (even when a tensor there holds Inf)."""
    leaf = leaf_dir(tmp_path, 0)
    write_op(leaf, "Add", "add1", 4, 0, T0 + 1, [CLEAN], [SATURATED], "binary")
    for extra in ([], ["--json"]):
        assert main(["overflow", str(tmp_path), *extra]) == 2
        captured = capsys.readouterr()
        assert "No overflowing ops" not in captured.out and captured.err.count("\n") == 1
        assert "no Opdebug records here, only 1 op dump" in captured.err and "--scan" in captured.err
    assert main(["overflow", str(tmp_path), "--scan"]) == 1


def test_all_zero_record_is_no_overflow(tmp_path, capsys):
    leaf = leaf_dir(tmp_path, 0)
    write_op(leaf, "Add", "add1", 4, 0, T0 + 1, [CLEAN], [CLEAN], "binary")
    write_opdebug(leaf, bytes(2048), T0 + 2, "binary")
    write_opdebug(leaf, new_record(4, 0, 0), T0 + 3, "nano", debug_task=2)
    assert main(["overflow", str(tmp_path), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["overflows"] == []
    assert "2 Opdebug file(s) hold only zero status words" in captured.err


def test_garbage_opdebug_is_a_per_file_problem(tmp_path, capsys):
    build_two_iterations(tmp_path, "binary")
    leaf = leaf_dir(tmp_path, 0)
    bad = write_opdebug(leaf, b"\x07" * 100, T0 + 5, "binary", debug_task=9)
    (leaf / f"Opdebug.Node_OpDebug.8.0.{T0 + 6}").write_bytes(b"not a dump at all")
    report = analyse(tmp_path)
    assert report.total == 3
    messages = {p.name: m for p, m in report.problems}
    assert "100 bytes" in messages[bad.name] and "neither the new layout" in messages[bad.name]
    assert f"Opdebug.Node_OpDebug.8.0.{T0 + 6}" in messages and len(report.unreadable) == 2
    assert main(["overflow", str(tmp_path), "--json"]) == 1
    err = capsys.readouterr().err
    assert f"warning: {bad}" in err.replace("\n", "")


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
@pytest.mark.parametrize("json_out", [False, True])
def test_unreadable_opdebug_file_is_never_no_overflow(tmp_path, capsys, damage, json_out):
    leaf = leaf_dir(tmp_path, 0)
    write_op(leaf, "Mul", "mul1", 3, 0, T0 + 1, [CLEAN], [SATURATED], "binary")
    debug = write_opdebug(leaf, new_record(3, 0, 0x20), T0 + 2, "binary")
    debug.write_bytes(debug.read_bytes()[:100] if damage == "truncate" else b"xx\n")
    assert main(["overflow", str(tmp_path)] + (["--json"] if json_out else [])) == 2
    out, err = capsys.readouterr()
    error = err.strip().splitlines()[-1]
    assert error.startswith("fusebisect: error: 1 of 1 Opdebug files could not be read (first: ")
    assert debug.name in error and error.endswith("overflow cannot be ruled out") and "Traceback" not in err
    if json_out:
        doc = json.loads(out)
        assert doc["overflows"] == [] and [u["path"] for u in doc["unreadable"]] == [str(debug)]
    else:
        assert "No overflow" not in out and "1 of 1 Opdebug files could not be read" in out


def test_unreadable_opdebug_file_next_to_readable_ones(tmp_path, capsys):
    leaf = leaf_dir(tmp_path, 0)
    write_op(leaf, "Mul", "mul1", 3, 0, T0 + 1, [CLEAN], [SATURATED], "binary")
    write_opdebug(leaf, new_record(3, 0, 0), T0 + 2, "binary")                        # read: no overflow
    (leaf / f"Opdebug.Node_OpDebug.2.0.{T0 + 3}").write_bytes(b"not a dump at all")   # unreadable
    # the readable record holds no overflow: that does not rule out one in the unreadable file
    assert main(["overflow", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert "No overflow" not in out and "1 of 2 Opdebug files could not be read" in out
    assert "the 1 read hold no overflow, but overflow cannot be ruled out" in err
    # an overflow in a readable record: exit 1 as usual, still saying a record was unreadable
    write_opdebug(leaf, new_record(3, 0, 0x20), T0 + 4, "binary", debug_task=4)
    assert main(["overflow", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "1 of 3 Opdebug files could not be read" in out and "[1] [Mul] mul1" in out
    assert main(["overflow", str(tmp_path), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["total"] == 1 and len(doc["unreadable"]) == 1 and doc["opdebug_files"] == 3


def test_opdebug_file_with_an_unparsable_name_is_unreadable_not_absent(tmp_path, capsys):
    leaf = leaf_dir(tmp_path, 0)
    write_op(leaf, "Mul", "mul1", 3, 0, T0 + 1, [CLEAN], [SATURATED], "binary")
    write_opdebug(leaf, new_record(3, 0, 0x20), T0 + 2, "binary").rename(leaf / "Opdebug.Node_OpDebug.copy")
    assert main(["overflow", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert "1 of 1 Opdebug files could not be read" in out and "no Opdebug" not in err


def test_missing_dir_and_bad_limit_are_errors(tmp_path, capsys):
    assert main(["overflow", str(tmp_path / "nope")]) == 2
    assert "fusebisect: error:" in capsys.readouterr().err
    assert main(["overflow", str(tmp_path), "--limit", "0"]) == 2
    assert "--limit" in capsys.readouterr().err


def test_several_units_and_entries_in_one_file_are_ordered(tmp_path):
    leaf = leaf_dir(tmp_path, 0)
    write_op(leaf, "Cast", "cast1", 5, 1, T0 + 10, [CLEAN], [SATURATED], "binary")
    write_op(leaf, "Mul", "mul1", 3, 1, T0 + 5, [CLEAN], [SATURATED], "binary")
    entry = new_record(5, 1, 0x100)[8:] + new_record(3, 1, 0x20, acc_type=1)[8:]
    write_opdebug(leaf, struct.pack("<II", MAGIC, 0) + entry, T0 + 20, "binary")
    report = analyse(tmp_path)
    assert [(o.op_name, o.unit, o.status) for o in report.overflows] == [("mul1", "AIV", 0x20),
                                                                          ("cast1", "AIC", 0x100)]


def test_ffts_context_and_thread_ids_pick_the_right_dump(tmp_path):
    leaf = leaf_dir(tmp_path, 0)
    # FFTS+ names (msaccucmp's positions): {type}.{name}.{task}.{stream}.{ts}.{task_type}.{context_id}.{thread_id}.{n}
    write_op(leaf, "Add", "ctx1", 7, 0, T0 + 1, [CLEAN], [CLEAN], "binary", extra=".4.1.0.0")
    write_op(leaf, "Add", "ctx2", 7, 0, T0 + 2, [CLEAN], [SATURATED], "binary", extra=".4.2.0.0")
    write_op(leaf, "Add", "ctx3", 7, 0, T0 + 3, [CLEAN], [CLEAN], "binary", extra=".4.3.0.0")
    write_op(leaf, "Add", "thr1", 8, 0, T0 + 4, [CLEAN], [SATURATED], "binary", extra=".4.2.1.0")
    write_op(leaf, "Add", "thr0", 8, 0, T0 + 5, [CLEAN], [CLEAN], "binary", extra=".4.2.0.0")
    write_opdebug(leaf, new_record(7, 0, 0x20, context_id=2, thread_id=0), T0 + 9, "binary")
    write_opdebug(leaf, new_record(8, 0, 0x20, context_id=2, thread_id=1), T0 + 10, "binary", debug_task=2)
    first, second = analyse(tmp_path).overflows
    assert first.op_name == "ctx2" and (first.context_id, first.thread_id) == (2, 0)
    assert second.op_name == "thr1" and (second.context_id, second.thread_id) == (2, 1)


def test_flat_directory_matches_nearest_earlier_dump(tmp_path):
    # no iteration structure: the same task id twice; each record takes the dump just before it
    write_op(tmp_path, "Mul", "mul1", 3, 0, T0 + 1, [CLEAN], [CLEAN], "binary")
    write_opdebug(tmp_path, new_record(3, 0, 0x20), T0 + 2, "binary")
    write_op(tmp_path, "Mul", "mul1", 3, 0, T0 + 3, [CLEAN], [SATURATED], "binary")
    write_opdebug(tmp_path, new_record(3, 0, 0x20), T0 + 4, "binary", debug_task=2)
    first, second = analyse(tmp_path).overflows
    assert first.dump_file.name.endswith(str(T0 + 1)) and second.dump_file.name.endswith(str(T0 + 3))
    assert not first.outputs[0].abnormal and second.outputs[0].saturated == 1


def test_scan_mode_reports_first_abnormal_tensors_in_execution_order(tmp_path, capsys):
    leaf = leaf_dir(tmp_path, 0)
    write_op(leaf, "Add", "add1", 1, 0, T0 + 1, [CLEAN], [CLEAN], "binary")
    write_op(leaf, "Mul", "mul1", 2, 0, T0 + 2, [CLEAN], [SATURATED], "nano")
    write_op(leaf, "Relu", "relu1", 3, 0, T0 + 3, [SATURATED], [SATURATED], "binary")
    write_op(leaf, "Exp", "exp1", 4, 0, T0 + 4, [np.array([1.0], np.float32)],
             [np.array([np.inf], np.float32)], "binary")
    report = analyse(tmp_path, scan=True, limit=2)
    assert [o.op_name for o in report.overflows] == ["mul1", "relu1"]
    assert report.overflows[0].meanings == ["output 0: 1 +Inf, 1 saturated (|x|>=65504)"]
    assert "keep Mul in float32" in report.overflows[0].diagnosis
    assert report.overflows[1].diagnosis.startswith("Input already abnormal")
    assert main(["overflow", str(tmp_path), "--scan", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert [o["op_name"] for o in doc["overflows"]] == ["mul1", "relu1", "exp1"]
    assert doc["overflows"][2]["unit"] == "scan" and "computation of Exp overflowed" in doc["overflows"][2][
        "diagnosis"]


def test_ops_dumped_at_the_same_time_are_ordered_by_task_not_by_file_name(tmp_path):
    """Two dumps with one timestamp (microseconds): the task launched first ran first. By file name, 'Add.late'
    (task 10, fed by the other) came before 'Mul.early' (task 2), and the report blamed the wrong op, in --scan
    and for Opdebug records alike."""
    leaf = leaf_dir(tmp_path, 0)
    write_op(leaf, "Add", "late", 10, 0, T0 + 5, [SATURATED], [SATURATED], "binary")
    write_op(leaf, "Mul", "early", 2, 0, T0 + 5, [CLEAN], [SATURATED], "binary")
    assert [o.op_name for o in analyse(tmp_path, scan=True, limit=1).overflows] == ["early"]
    write_opdebug(leaf, new_record(10, 0, 0x20), T0 + 6, "binary", debug_task=1)
    write_opdebug(leaf, new_record(2, 0, 0x20), T0 + 7, "binary", debug_task=2)
    assert [o.op_name for o in analyse(tmp_path, limit=1).overflows] == ["early"]


def test_scan_clean_dumps_exit_zero(tmp_path, capsys):
    leaf = leaf_dir(tmp_path, 0)
    write_op(leaf, "Add", "add1", 1, 0, T0 + 1, [CLEAN], [CLEAN], "binary")
    assert main(["overflow", str(tmp_path), "--scan"]) == 0
    assert "No abnormal ops (scan) found" in capsys.readouterr().out


def test_scan_with_an_unreadable_dump_never_says_none_found(tmp_path, capsys):
    leaf = leaf_dir(tmp_path, 0)
    write_op(leaf, "Add", "add1", 1, 0, T0 + 1, [CLEAN], [CLEAN], "binary")
    (leaf / f"Mul.mul1.2.0.{T0 + 2}").write_bytes(b"truncated")   # may have held the abnormal values
    assert main(["overflow", str(tmp_path), "--scan"]) == 2
    captured = capsys.readouterr()
    assert "No abnormal ops" not in captured.out
    assert "1 of 2 op dump files could not be read (first: " in " ".join(captured.err.split())
    assert "the 1 read hold no abnormal values, but abnormal values cannot be ruled out" in " ".join(
        captured.err.split())
    write_op(leaf, "Relu", "relu1", 3, 0, T0 + 3, [CLEAN], [SATURATED], "binary")
    assert main(["overflow", str(tmp_path), "--scan", "--json"]) == 1    # found one: still says what it missed
    doc = json.loads(capsys.readouterr().out)
    assert [o["op_name"] for o in doc["overflows"]] == ["relu1"] and len(doc["unreadable"]) == 1


def test_a_header_at_odds_with_its_data_len_is_read_whole_not_called_unreadable(tmp_path, capsys):
    # version 0 header, data_len of a four-word status, every word zero: fully read, no overflow
    leaf = leaf_dir(tmp_path, 0)
    write_op(leaf, "Add", "add1", 4, 0, T0 + 1, [CLEAN], [CLEAN], "binary")
    values = (1, 0, 4, 0, 0xFFFFFFFF, 0xFFFFFFFF, 0x12C0, 0x1000, 0, 0, 0, 0, 0, 0)
    record = struct.pack("<IIIIII", MAGIC, 0, 1, 0, 0, 112) + struct.pack("<14Q", *values)
    write_opdebug(leaf, record, T0 + 2, "binary")
    assert main(["overflow", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "could not be read" not in captured.err + captured.out
    assert "version 0 but data_len 112 fits a four-word status: read as four" in " ".join(captured.err.split())


def test_scan_leaves_out_files_that_are_not_dumps_by_name_but_not_nameless_ones(tmp_path, capsys):
    leaf = leaf_dir(tmp_path, 0)
    write_op(leaf, "Add", "add1", 1, 0, T0 + 1, [CLEAN], [CLEAN], "binary")
    (leaf / "nohup.out").write_text("log\n")     # a log and a model beside the dumps are not op dumps
    (leaf / "model.pb").write_bytes(b"")
    assert main(["overflow", str(tmp_path), "--scan"]) == 0
    captured = capsys.readouterr()
    assert "No abnormal ops (scan) found" in captured.out
    assert "2 file(s) here are not op dumps by their names and were not read" in " ".join(captured.err.split())
    (leaf / "Mul.mul.1.2.0").write_bytes(b"x")    # a name that ends like a dump's may be one (a dotted op name)
    assert main(["overflow", str(tmp_path), "--scan"]) == 2
    assert "No abnormal ops" not in capsys.readouterr().out
    (leaf / "Mul.mul.1.2.0").unlink()
    write_opdebug(leaf, new_record(3, 0, 0x20), T0 + 2, "binary")
    (leaf / f"Add.add1.1.0.{T0 + 1}").unlink()
    assert main(["overflow", str(tmp_path), "--scan"]) == 2     # strays do not count as op dumps to scan
    assert "no op dumps to scan" in capsys.readouterr().err


@pytest.mark.parametrize("encoding", ["binary", "nano"])
def test_without_graph_the_dump_origin_is_not_called_the_original_ops(tmp_path, capsys, encoding):
    # a fused MatMul+BiasAdd: the dump records only which original op its output stands for (fc1_BiasAdd)
    leaf = leaf_dir(tmp_path, 0)
    write_dump(leaf / f"MatMulV2.fc1_MatMul.3.0.{T0 + 1}", op_name="fc1_MatMul",
               inputs=[TensorSpec(CLEAN), TensorSpec(CLEAN)],
               outputs=[TensorSpec(SATURATED, original_op=("fc1_BiasAdd", 0))], encoding=encoding, dump_time=T0 + 1)
    assert main(["overflow", str(tmp_path), "--scan", "--json"]) == 1
    (ov,) = json.loads(capsys.readouterr().out)["overflows"]
    assert ov["original_ops"] == [] and ov["output_origins"] == ["fc1_BiasAdd"]
    assert "probably a fused op: pass --graph" in ov["diagnosis"]
    assert main(["overflow", str(tmp_path), "--scan"]) == 1
    text = capsys.readouterr().out
    assert "output's origin: fc1_BiasAdd" in text and "original ops:" not in text


def write_build_graph(directory: Path) -> Path:
    from google.protobuf import text_format

    from fusebisect.proto import ge_ir_pb2 as ge

    model = ge.ModelDef(name="m")
    graph = model.graph.add(name="g")
    op = graph.op.add(name="block1/conv1.fused", type="Conv2D", id=1)   # dump names mangle '/' and '.' to '_'
    op.attr["pass_name"].list.s.extend([b"ConvBatchnormFusionPass"])
    op.attr["pass_name_ub"].s = b"TbeConvAddFusion"
    op.attr["_datadump_original_op_names"].list.s.extend([b"block1/conv1", b"block1/bn1"])
    graph.op.add(name="relu1", type="Relu", id=2)
    path = directory / "ge_proto_00000001_graph_1_Build.txt"
    path.write_text(text_format.MessageToString(model))
    return path


@pytest.mark.parametrize("as_dir", [False, True])
def test_graph_adds_type_pass_names_and_originals(tmp_path, capsys, as_dir):
    dump = tmp_path / "dump"
    leaf = leaf_dir(dump, 0)
    write_op(leaf, "Conv2D", "block1_conv1_fused", 3, 0, T0 + 1, [CLEAN, CLEAN], [SATURATED], "binary")
    write_op(leaf, "Relu", "relu1", 4, 0, T0 + 2, [SATURATED], [SATURATED], "binary")
    write_opdebug(leaf, new_record(3, 0, 0x20), T0 + 3, "binary")
    write_opdebug(leaf, old_record(4, 0, 0x100), T0 + 4, "nano", debug_task=2)
    graphs = tmp_path / "graphs"
    graphs.mkdir()
    gfile = write_build_graph(graphs)
    target = graphs if as_dir else gfile
    assert main(["overflow", str(dump), "--graph", str(target), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    conv, relu = doc["overflows"]
    assert conv["op_type"] == "Conv2D" and conv["pass_names"] == ["ConvBatchnormFusionPass", "TbeConvAddFusion"]
    assert conv["original_ops"] == ["block1/conv1", "block1/bn1"]
    assert "keep Conv2D in float32" in conv["diagnosis"]
    assert conv["diagnosis"].endswith(
        "Fused by ConvBatchnormFusionPass, TbeConvAddFusion: test with "
        "`fusebisect cfg off ConvBatchnormFusionPass TbeConvAddFusion`.")
    assert (relu["unit"], relu["status"], relu["pass_names"]) == ("AI Core", 0x100, [])
    assert relu["meanings"] == ["0x100: overflow converting FP32 or INT32 to FP16"]
    assert relu["diagnosis"].startswith("Input already abnormal")
    # the rich view names the rules too
    assert main(["overflow", str(dump), "--graph", str(target)]) == 1
    text = capsys.readouterr().out
    assert "fusion rules: ConvBatchnormFusionPass, TbeConvAddFusion" in text


def test_unreadable_graph_is_an_error(tmp_path, capsys):
    build_two_iterations(tmp_path / "dump", "binary")
    bad = tmp_path / "ge_proto_bad_Build.txt"
    bad.write_text("graph { op { name: ")
    assert main(["overflow", str(tmp_path / "dump"), "--graph", str(bad)]) == 2
    assert "fusebisect: error:" in capsys.readouterr().err


@pytest.mark.parametrize("scan", [False, True])
def test_a_directory_without_any_dump_is_an_error_not_no_overflow(tmp_path, capsys, scan):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("not a dump")
    assert main(["overflow", str(tmp_path / "empty"), *(["--scan"] if scan else [])]) == 2
    captured = capsys.readouterr()
    assert "no dump files here" in captured.err and "No overflow" not in captured.out


def test_an_op_dump_from_another_iteration_is_never_matched(tmp_path, monkeypatch):
    # iteration 0's record has no op dump there; iteration 1's op has its task id. However the path is typed
    # (a relative '.', inside the timestamp dir), that op is not the one that overflowed.
    write_opdebug(leaf_dir(tmp_path, 0), new_record(3, 0, 0x20), T0 + 5, "binary")
    write_op(leaf_dir(tmp_path, 1), "Mul", "other_iter", 3, 0, T0 + 1_000_010, [CLEAN], [SATURATED], "binary")
    monkeypatch.chdir(tmp_path / "20240101000000")
    [found] = analyse(".").overflows
    assert found.dump_file is None


def test_the_task_dumped_after_its_record_is_matched_with_a_note_the_last_one_before_wins(tmp_path):
    # the only dump of the task is timestamped after the Opdebug file: it is still that task's op (msaccucmp
    # takes the earliest dump of the task id), and the report says how it was matched
    later = tmp_path / "later"
    later.mkdir()
    write_opdebug(later, new_record(3, 0, 0x20), T0 + 12, "binary")
    write_op(later, "Add", "y_later", 3, 0, T0 + 30, [CLEAN], [SATURATED], "binary")
    write_op(later, "Add", "y_later_still", 3, 0, T0 + 40, [CLEAN], [CLEAN], "binary")
    report = analyse(later)
    [found] = report.overflows
    assert found.op_name == "y_later" and found.matched
    assert any("matched an op dump timestamped after the Opdebug file" in n for n in report.notes), report.notes
    # of dumps on both sides of the record (the task ran in a loop), the last one before it
    write_op(later, "Add", "y_before", 3, 0, T0 + 5, [CLEAN], [SATURATED], "binary")
    write_op(later, "Add", "y_long_before", 3, 0, T0 + 1, [CLEAN], [CLEAN], "binary")
    report = analyse(later)
    assert [o.op_name for o in report.overflows] == ["y_before"]
    assert not any("timestamped after" in n for n in report.notes)


def test_an_op_dump_from_another_run_of_the_same_dump_root_is_never_matched(tmp_path):
    # one dump_path, two runs: each run has its own timestamp dir with the same device/model/iteration numbers
    run1 = tmp_path / "20240101000000" / "0" / "net" / "1" / "0"
    run2 = tmp_path / "20240102000000" / "0" / "net" / "1" / "0"
    run1.mkdir(parents=True)
    run2.mkdir(parents=True)
    write_op(run1, "MatMulV2", "run1_op", 5, 0, T0 + 1, [CLEAN], [SATURATED], "binary")
    write_op(run2, "Add", "run2_other", 3, 0, T0 + 1_000_000, [CLEAN], [CLEAN], "binary")
    write_opdebug(run2, new_record(5, 0, 0x20), T0 + 1_000_010, "binary")
    [found] = analyse(tmp_path).overflows
    assert found.dump_file is None and found.op_name == "?"
    write_op(run2, "Mul", "run2_op", 5, 0, T0 + 1_000_005, [CLEAN], [SATURATED], "binary")
    [found] = analyse(tmp_path).overflows
    assert found.op_name == "run2_op"


def test_an_unreadable_matched_op_dump_is_said_so_not_empty(tmp_path):
    leaf = leaf_dir(tmp_path, 0)
    write_op(leaf, "MatMulV2", "mm", 3, 0, T0 + 1, [CLEAN], [SATURATED], "binary")
    write_opdebug(leaf, new_record(3, 0, 0x20), T0 + 5, "binary")
    victim = next(leaf.glob("MatMulV2.*"))
    victim.write_bytes(victim.read_bytes()[:-3])
    [found] = analyse(tmp_path).overflows
    assert found.op_name == "mm" and "could not be read" in found.diagnosis and "no tensors" not in found.diagnosis


def test_a_partly_unreadable_opdebug_file_is_no_verdict(tmp_path, capsys):
    # output 0 holds a zero status, output 1 cannot be decoded: the overflow may be in it
    good = np.frombuffer(new_record(3, 0, 0), dtype=np.uint8)
    bad = np.frombuffer(bytes(range(100)), dtype=np.uint8)
    leaf = leaf_dir(tmp_path, 0)
    write_dump(leaf / f"Opdebug.Node_OpDebug.1.0.{T0 + 2}", op_name="Node_OpDebug", inputs=[],
               outputs=[TensorSpec(good, dtype=DT_UINT8), TensorSpec(bad, dtype=DT_UINT8)], dump_time=T0 + 2)
    html = tmp_path / "r.html"
    assert main(["overflow", str(tmp_path), "--json", "--html", str(html)]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["total"] == 0 and doc["unreadable"][0]["message"].startswith("partly unreadable: output 1:")
    text = html.read_text()
    assert "No overflow found in what could be read" in text and "No overflow found.</b>" not in text
    # a directory of files that are not dumps at all is not "no overflow"
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "README").write_text("x")
    assert main(["overflow", str(tmp_path / "notes")]) == 2
    assert "no dump files here (1 files whose names are not dump file names)" in capsys.readouterr().err


def test_a_version_1_record_shows_every_status_word(tmp_path, capsys):
    record = struct.pack("<IIIIII", MAGIC, 1, 1, 0, 0, 112) + struct.pack(
        "<14Q", 1, 0, 3, 0, 0xFFFFFFFF, 0xFFFFFFFF, 0x1234, 0x5678, 0, 0, 0, 0x20, 0, 0)
    leaf = leaf_dir(tmp_path, 0)
    write_op(leaf, "Mul", "m", 3, 0, T0 + 1, [CLEAN], [SATURATED], "binary")
    write_opdebug(leaf, record, T0 + 2, "binary")
    assert main(["overflow", str(tmp_path)]) == 1
    assert "[AIC][Status:0x0,0x20,0x0,0x0][TaskId:3]" in capsys.readouterr().out
    assert main(["overflow", str(tmp_path), "--json"]) == 1
    [ov] = json.loads(capsys.readouterr().out)["overflows"]
    [out] = ov["outputs"]
    assert out["max_is_inf"] and not out["min_is_inf"]
    # the status is the non-zero word (an overflow in word 1 is no status 0)
    assert ov["status"] == 0x20 and ov["status_words"] == [0, 0x20, 0, 0]


@pytest.mark.parametrize("unset", [0xFFFFFFFFFFFFFFFF, 0xFFFFFFFF, 0xFFFF])
def test_an_unset_stream_id_is_the_opdebug_file_names_else_reads_invalid(tmp_path, capsys, unset):
    """The panel, the JSON and the diagnosis show the ids the op dump was looked for by: an unset (all ones) one is
    read from the Opdebug file's name, with a note; without one there, 'invalid' and any stream."""
    leaf = leaf_dir(tmp_path / "named", 0)
    write_opdebug(leaf, new_record(3, unset, 0x20), T0 + 2, "binary")   # Opdebug.Node_OpDebug.1.0.<ts>: stream 0
    assert main(["overflow", str(tmp_path / "named"), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    [ov] = doc["overflows"]
    assert (ov["task_id"], ov["stream_id"]) == (3, 0)
    assert "No op dump with task_id 3, stream_id 0 in this iteration directory" in ov["diagnosis"]
    assert any("left their task or stream id unset (all ones): read from the Opdebug file's name" in n
               for n in doc["notes"])
    leaf = leaf_dir(tmp_path / "bare", 0)
    arr = np.frombuffer(new_record(3, unset, 0x20), dtype=np.uint8)
    write_dump(leaf / f"Opdebug.Node_OpDebug.1.{T0 + 2}", op_name="Node_OpDebug", inputs=[],
               outputs=[TensorSpec(arr, dtype=DT_UINT8)], encoding="binary", dump_time=T0 + 2)
    assert main(["overflow", str(tmp_path / "bare")]) == 1
    out = capsys.readouterr().out
    assert "[StreamId:invalid]" in out and "task_id 3, any stream" in " ".join(out.split())


def test_an_unset_task_id_is_the_opdebug_file_names_as_precision_tool_reads_it(tmp_path, capsys):
    """precision_tool replaces a task id of all ones by the Opdebug file name's: the record is matched to the op
    dump of that task, not shown as '[?] ?' with an 18-digit task id."""
    unset = 0xFFFFFFFFFFFFFFFF
    leaf = leaf_dir(tmp_path, 0)
    write_op(leaf, "Add", "add_a", 5, 0, T0 + 1, [CLEAN], [SATURATED], "binary")
    write_opdebug(leaf, old_record(unset, unset, 0x20), T0 + 2, "binary", debug_task=5)
    assert main(["overflow", str(tmp_path), "--json"]) == 1
    [ov] = json.loads(capsys.readouterr().out)["overflows"]
    assert ov["matched"] and ov["op_name"] == "add_a" and (ov["task_id"], ov["stream_id"]) == (5, 0)


def test_matching_when_the_dump_name_or_the_record_lacks_a_stream_id(tmp_path):
    """Some runtimes name op dumps without a stream id (TransData.trans_1170.327.<ts>): the task id matches;
    a record's stream id of all ones is the Opdebug file's own; a known stream still tells two ops apart."""
    leaf = leaf_dir(tmp_path / "a", 0)
    write_dump(leaf / f"Mul.mul1.3.{T0 + 1}", op_name="mul1", inputs=[TensorSpec(CLEAN)],
               outputs=[TensorSpec(SATURATED)], encoding="binary", dump_time=T0 + 1)
    write_opdebug(leaf, new_record(3, 1, 0x20), T0 + 2, "binary")
    [ov] = analyse(tmp_path / "a").overflows
    assert ov.matched and ov.op_name == "mul1"
    leaf = leaf_dir(tmp_path / "b", 0)
    write_op(leaf, "Mul", "on_stream_0", 3, 0, T0 + 1, [CLEAN], [SATURATED], "binary")
    write_op(leaf, "Add", "on_stream_5", 3, 5, T0 + 2, [CLEAN], [CLEAN], "binary")
    write_opdebug(leaf, new_record(3, 0xFFFFFFFFFFFFFFFF, 0x20), T0 + 3, "binary")   # file name: stream 0
    [ov] = analyse(tmp_path / "b").overflows
    assert ov.matched and ov.op_name == "on_stream_0"
    write_opdebug(leaf, new_record(3, 5, 0x20), T0 + 4, "binary")
    assert [o.op_name for o in analyse(tmp_path / "b").overflows] == ["on_stream_0", "on_stream_5"]


def test_an_op_dump_that_cannot_be_opened_leaves_the_overflow_reported(tmp_path, capsys):
    leaf = leaf_dir(tmp_path, 0)
    (leaf / f"Mul.mul1.3.0.{T0 + 1}").symlink_to(tmp_path / "gone")
    write_opdebug(leaf, new_record(3, 0, 0x20), T0 + 2, "binary")
    assert main(["overflow", str(tmp_path), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["total"] == 1 and doc["overflows"][0]["op_name"] == "mul1"
    assert "No such file or directory" in doc["overflows"][0]["diagnosis"] or doc["problems"]


def test_scan_never_reads_opdebug_records_as_no_overflow(tmp_path, capsys):
    leaf = leaf_dir(tmp_path / "only", 0)
    write_opdebug(leaf, new_record(3, 0, 0x20), T0 + 2, "binary")
    assert main(["overflow", str(tmp_path / "only"), "--scan"]) == 2
    assert "no op dumps to scan" in capsys.readouterr().err
    leaf = leaf_dir(tmp_path / "clean", 0)
    write_op(leaf, "Mul", "mul1", 3, 0, T0 + 1, [CLEAN], [CLEAN], "binary")
    write_opdebug(leaf, new_record(3, 0, 0x20), T0 + 2, "binary")
    assert main(["overflow", str(tmp_path / "clean"), "--scan"]) == 0
    assert "run without --scan to read them" in capsys.readouterr().err   # (notes go to stderr)


def test_only_the_latest_run_of_a_dump_path_is_read(tmp_path, capsys):
    for run, name, ts in (("20240101000000", "oldrun_mul", T0 + 1), ("20240102000000", "newrun_add", T0 + 10)):
        leaf = tmp_path / run / "0" / "ge_default" / "1" / "0"
        leaf.mkdir(parents=True)
        write_op(leaf, "Mul", name, 3, 0, ts, [CLEAN], [SATURATED], "binary")
        write_opdebug(leaf, new_record(3, 0, 0x20), ts + 1, "binary")
    assert main(["overflow", str(tmp_path), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert [o["op_name"] for o in doc["overflows"]] == ["newrun_add"]
    assert any("only the latest, 20240102000000, is read" in n for n in doc["notes"])
    # a file of the earlier run that cannot be read is not the latest run's problem
    (tmp_path / "20240101000000" / "0" / "ge_default" / "1" / "0" / "Opdebug.garbled_name").write_bytes(b"x")
    assert main(["overflow", str(tmp_path), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["unreadable"] == []


def test_an_op_in_a_train_and_an_eval_graph_takes_the_rules_of_its_dumps_model(tmp_path):
    from google.protobuf import text_format

    from fusebisect.proto import ge_ir_pb2 as ge

    graphs = tmp_path / "graphs"
    graphs.mkdir()
    for idx, (gname, rule) in enumerate((("train_graph", "TrainMatMulPass"), ("eval_graph", "EvalMatMulPass"))):
        model = ge.ModelDef(name="m")
        op = model.graph.add(name=gname).op.add(name="fc1_MatMul", type="MatMulV2", id=1)
        op.attr["pass_name"].list.s.extend([rule.encode()])
        (graphs / f"ge_proto_0000000{idx}_graph_{idx + 1}_Build.txt").write_text(text_format.MessageToString(model))
    leaf = tmp_path / "dump" / "20240101000000" / "0" / "eval_graph" / "2" / "0"
    leaf.mkdir(parents=True)
    write_op(leaf, "MatMulV2", "fc1_MatMul", 3, 0, T0 + 1, [CLEAN], [SATURATED], "binary")
    write_opdebug(leaf, new_record(3, 0, 0x20), T0 + 2, "binary")
    report = analyse(tmp_path / "dump", graph=graphs)
    assert report.overflows[0].pass_names == ["EvalMatMulPass"] and not report.notes


def test_timestamp_directories_of_other_devices_are_the_ranks_of_one_run(tmp_path, capsys):
    """Each rank's process names its own timestamp directory: rank 0's earlier overflow is the first one, not
    dropped as "an older run"; a device's own older run is still left out."""
    for run, device, name, ts in (("20240101120000", "0", "mul_rank0", T0 + 1),
                                  ("20240101120001", "1", "mul_rank1", T0 + 10),
                                  ("20240101110000", "1", "mul_old_run", T0 - 50)):
        leaf = tmp_path / run / device / "ge_default" / "1" / "0"
        leaf.mkdir(parents=True)
        write_op(leaf, "Mul", name, 3, 0, ts, [CLEAN], [SATURATED], "binary")
        write_opdebug(leaf, new_record(3, 0, 0x20), ts + 1, "binary")
        write_op(leaf, "Add", f"{name}_later", 4, 0, ts + 20, [CLEAN], [CLEAN], "binary")   # ranks run together
    assert main(["overflow", str(tmp_path), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert [o["op_name"] for o in doc["overflows"]] == ["mul_rank0", "mul_rank1"]
    assert any("only each device's latest (20240101120000, 20240101120001) is read" in n for n in doc["notes"])
    shutil.rmtree(tmp_path / "20240101110000")
    assert main(["overflow", str(tmp_path), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert [o["op_name"] for o in doc["overflows"]] == ["mul_rank0", "mul_rank1"]
    assert any("each of other devices: read as the ranks of one run" in n for n in doc["notes"])


def test_an_input_that_cannot_be_decoded_is_shown_whole_and_never_called_clean(tmp_path, capsys, monkeypatch):
    """An E8M0 scale input next to an overflowing float16 output: in 80 columns its row says it was not read and
    its reason stands on a line of its own (in a cell it squeezed every column to '…'); the diagnosis names the
    input once and does not call the inputs clean."""
    leaf = leaf_dir(tmp_path, 0)
    write_dump(leaf / f"Mul.mul1.3.0.{T0 + 1}", op_name="mul1", encoding="binary",
               inputs=[TensorSpec(np.array([1, 2, 3, 4], np.uint8), dtype=36)],   # DT_FLOAT8_E8M0
               outputs=[TensorSpec(np.full((2, 2), np.inf, np.float16))])
    write_opdebug(leaf, new_record(3, 0, 0x20), T0 + 2, "binary")
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["overflow", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "output 0" in out and "input 0" in out and "not read" in out and "…" not in out
    assert "input 0: unsupported data type float8_e8m0 (36)" in out
    text = " ".join(line.strip(" │") for line in out.splitlines())
    assert "Input 0 could not be inspected (unsupported data type float8_e8m0 (36)), so a problem" in text
    assert "Inputs are clean" not in text


def write_runs(root: Path, runs, *, clean_record: bool = False) -> None:
    """One Mul per (timestamp dir, device, op name, dump time, output): an Opdebug record beside each saturated
    output (``clean_record``: a record of status 0 beside each clean one too)."""
    for run, device, name, ts, out in runs:
        leaf = root / run / device / "ge_default" / "1" / "0"
        leaf.mkdir(parents=True)
        write_op(leaf, "Mul", name, 3, 0, ts, [CLEAN], [out], "binary")
        if out is SATURATED or clean_record:
            write_opdebug(leaf, new_record(3, 0, 0x20 if out is SATURATED else 0), ts + 1, "binary")


def test_a_device_whose_dumps_ended_before_the_latest_run_began_is_an_earlier_jobs(tmp_path, capsys):
    """A two-device job overflowed (each rank naming its own timestamp directory), then a one-device clean job
    reused the dump path: device 1's directory is the earlier job's (its ops ended before the latest run began),
    not a rank of the latest run."""
    write_runs(tmp_path, (("20240101120000", "0", "old_rank0", T0 + 1, SATURATED),
                          ("20240101120001", "1", "old_rank1", T0 + 2, SATURATED),
                          ("20240101130000", "0", "new_rank0", T0 + 3_600_000_000, CLEAN)), clean_record=True)
    assert main(["overflow", str(tmp_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["overflows"] == []
    assert any("device 1: its latest dumps under" in n and "an earlier job's, left out" in n for n in doc["notes"])


def test_ranks_that_overflow_seconds_apart_are_both_read(tmp_path, capsys):
    """With overflow detection a rank dumps only what overflowed: rank 0's dumps can end before rank 1's begin.
    Their timestamp directories are seconds apart: ranks of one job, both read (the earlier overflow first)."""
    write_runs(tmp_path, (("20240101120000", "0", "mul_rank0", T0 + 1, SATURATED),
                          ("20240101120003", "1", "mul_rank1", T0 + 3_000_000, SATURATED)))
    assert main(["overflow", str(tmp_path), "--json"]) == 1
    assert [o["op_name"] for o in json.loads(capsys.readouterr().out)["overflows"]] == ["mul_rank0", "mul_rank1"]


def test_a_timestamp_directory_replaced_on_one_device_is_an_earlier_run_on_all(tmp_path, capsys):
    """Run A dumped devices 0 and 1 (both overflowed); run B, five minutes later, dumped device 0 only, clean.
    One process wrote A: B replaced it, so A's device 1 is the earlier job's too, not the first overflow of the
    latest run (and no note may call the directories ranks of one run)."""
    write_runs(tmp_path, (("20260101000000", "0", "runA_dev0", T0 + 1, SATURATED),
                          ("20260101000000", "1", "runA_dev1", T0 + 2, SATURATED),
                          ("20260101000500", "0", "runB_dev0", T0 + 300_000_000, CLEAN)), clean_record=True)
    assert main(["overflow", str(tmp_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["overflows"] == []
    assert not any("ranks of one run" in n for n in doc["notes"])
    assert any("only the latest, 20260101000500, is read" in n for n in doc["notes"])
    assert any(n.startswith("device 1: only in timestamp directories a later run replaced") for n in doc["notes"])


def test_the_panel_title_shows_op_types_and_names_holding_brackets(tmp_path, capsys):
    """Dump names allow '[': the title is the literal type and name, not rich markup (which ate '[my_op]' and
    '[red]')."""
    leaf = leaf_dir(tmp_path, 0)
    write_op(leaf, "my_custom_op", "layer[0]_x", 5, 0, T0 + 1, [CLEAN], [SATURATED], "binary")
    write_op(leaf, "MatMul", "blk[red]_mm", 6, 0, T0 + 2, [CLEAN], [SATURATED], "binary")
    write_opdebug(leaf, new_record(5, 0, 0x20), T0 + 3, "binary", debug_task=20)
    write_opdebug(leaf, new_record(6, 0, 0x20), T0 + 4, "binary", debug_task=21)
    assert main(["overflow", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "[1] [my_custom_op] layer[0]_x" in out and "[2] [MatMul] blk[red]_mm" in out


def test_the_html_report_says_how_many_ops_the_limit_left_out_and_where_each_op_is(tmp_path):
    """The HTML holds what the terminal shows: the total beyond --limit, each op's iteration directory, and its
    dump and Opdebug files."""
    leaf = leaf_dir(tmp_path, 0)
    for i in range(4):
        write_op(leaf, "Mul", f"mul{i}", 10 + i, 0, T0 + 10 * i, [CLEAN], [SATURATED], "binary")
        write_opdebug(leaf, new_record(10 + i, 0, 0x20), T0 + 10 * i + 1, "binary", debug_task=30 + i)
    html = tmp_path / "o.html"
    assert main(["overflow", str(tmp_path), "--limit", "2", "--html", str(html)]) == 1
    text = " ".join(html.read_text(encoding="utf-8").split())
    assert "4 overflowing ops in all; showing the first 2 (--limit 2)." in text
    assert "dumped on: device 0, model ge_default (id 1), iteration 0" in text
    assert f"Mul.mul0.10.0.{T0}</code>" in text and "Opdebug.Node_OpDebug.30.0." in text
    assert "mul2" not in text


def test_one_opdebug_file_given_is_matched_against_the_op_dumps_of_its_directory(tmp_path, capsys):
    """`overflow DIR/Opdebug.Node_OpDebug...`: that file's record, matched to the op dump beside it (not
    'No op dump with task_id 5' when the dump is right there); the directory's other records are not read."""
    leaf = leaf_dir(tmp_path, 0)
    write_op(leaf, "Add", "add1", 5, 0, T0 + 1, [CLEAN], [SATURATED], "binary")
    write_op(leaf, "Mul", "mul1", 6, 0, T0 + 3, [CLEAN], [SATURATED], "binary")
    first = write_opdebug(leaf, new_record(5, 0, 0x20), T0 + 2, "binary", debug_task=20)
    second = write_opdebug(leaf, new_record(6, 0, 0x20), T0 + 4, "binary", debug_task=21)
    assert main(["overflow", str(second), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert [(o["op_name"], o["matched"]) for o in doc["overflows"]] == [("mul1", True)]
    assert any(n.startswith(f"{second.name}: only this Opdebug file's records are read") for n in doc["notes"])
    assert main(["overflow", str(first), "--json"]) == 1
    assert [o["op_name"] for o in json.loads(capsys.readouterr().out)["overflows"]] == ["add1"]
