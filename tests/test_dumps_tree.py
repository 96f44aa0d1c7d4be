"""Dump tree discovery: names, layouts, mapping.csv, grouping, ordering, bad files, golden dirs."""

from __future__ import annotations

import os

import numpy as np
import pytest

from fusebisect.compare.dumpfile import TensorSpec, write_dump
from fusebisect.compare.tree import is_golden_dir, parse_dump_name, scan_dumps, scan_golden
from fusebisect.errors import DumpFormatError


def test_parse_plain_ffts_and_streamless_names():
    n = parse_dump_name("Conv2D.conv1.1.0.1700000000000002")
    assert (n.op_type, n.op_name, n.task_id, n.stream_id, n.timestamp, n.extra) == \
        ("Conv2D", "conv1", 1, 0, 1700000000000002, ())
    n = parse_dump_name("Add.partition0_rank1_new_sub_graph1_sgt_graph_0_Add.0.3.1673383728093446.4.1.0.0")
    assert (n.op_name, n.task_id, n.stream_id, n.timestamp, n.extra) == \
        ("partition0_rank1_new_sub_graph1_sgt_graph_0_Add", 0, 3, 1673383728093446, (4, 1, 0, 0))
    assert n.task_type == 4 and n.context_id == 1 and n.thread_id == 0
    n = parse_dump_name("Mul.mul1.3.1700000000000004")
    assert (n.task_id, n.stream_id, n.timestamp) == (3, None, 1700000000000004)
    for bad in ("A.b.c", "conv1.0.1700000000000002.npy", "A.b", "mapping.csv", "A.b.1.2.x"):
        assert parse_dump_name(bad) is None


def _dump(path, op="op"):
    return write_dump(path, op_name=op, inputs=[], outputs=[TensorSpec(np.ones(2, np.float32))])


def _tree(root):
    leaf_a = root / "20240101120000" / "0" / "resnet" / "1" / "0"
    leaf_b = root / "20240101120000" / "0" / "resnet" / "1" / "1"
    _dump(leaf_a / "Conv2D.conv1.2.0.300")
    _dump(leaf_a / "Relu.relu1.3.0.100")
    _dump(leaf_a / "Opdebug.Node_OpDebug.3.0.200")
    _dump(leaf_b / "Conv2D.conv1.2.0.400")
    long_name = "MatMul." + "x" * 200 + ".5.0.250"
    _dump(leaf_a / "12345")
    (leaf_a / "mapping.csv").write_text(f"12345,{long_name}\n")
    (leaf_a / "not_a_dump").write_bytes(b"??")
    (leaf_a / "result.csv").write_text("ignored")
    return leaf_a, leaf_b


def test_scan_root_groups_and_orders(tmp_path):
    leaf_a, leaf_b = _tree(tmp_path)
    before = sorted(os.listdir(leaf_a))
    tree = scan_dumps(tmp_path)
    assert [e.op_name for e in tree.entries] == ["relu1", "Node_OpDebug", "x" * 200, "conv1", "conv1"]
    assert [e.timestamp for e in tree.entries] == sorted(e.timestamp for e in tree.entries)
    groups = tree.groups()
    assert list(groups) == [("0", "resnet", "1", "0", "20240101120000"), ("0", "resnet", "1", "1", "20240101120000")]
    assert [e.op_type for e in groups[("0", "resnet", "1", "0", "20240101120000")]] == \
        ["Relu", "Opdebug", "MatMul", "Conv2D"]
    hashed = next(e for e in tree.entries if e.op_type == "MatMul")
    assert hashed.path == leaf_a / "12345" and hashed.task_id == 5
    assert [(p.name, "not {op_type}" in r) for p, r in tree.bad] == [("not_a_dump", True)]
    assert sorted(os.listdir(leaf_a)) == before  # input never modified


@pytest.mark.parametrize("level", [1, 5])
def test_scan_timestamp_and_leaf_dirs(tmp_path, level):
    leaf_a, _ = _tree(tmp_path)
    start = leaf_a.parents[4 - level] if level < 5 else leaf_a
    tree = scan_dumps(start)
    assert {e.group for e in tree.entries} >= {("0", "resnet", "1", "0", "20240101120000")}
    assert all(e.device == "0" for e in tree.entries)


def test_scan_single_file_and_flat_dir(tmp_path):
    path = _dump(tmp_path / "Add.add1.1.0.7")
    tree = scan_dumps(path)
    assert [(e.op_name, e.device) for e in tree.entries] == [("add1", None)]
    assert scan_dumps(tmp_path).entries[0].group == (None, None, None, None, None)
    with pytest.raises(DumpFormatError, match="no such file"):
        scan_dumps(tmp_path / "missing")


def test_validate_moves_unreadable_files_to_bad(tmp_path):
    _dump(tmp_path / "Add.add1.1.0.7")
    (tmp_path / "Add.add2.1.0.8").write_bytes(b"\x00" * 3)
    tree = scan_dumps(tmp_path, validate=True)
    assert [e.op_name for e in tree.entries] == ["add1"]
    assert [p.name for p, _ in tree.bad] == ["Add.add2.1.0.8"]
    assert len(scan_dumps(tmp_path).entries) == 2


def test_bad_mapping_rows_are_reported(tmp_path):
    _dump(tmp_path / "1")
    (tmp_path / "mapping.csv").write_text("1,Add.add1.1.0.7\nonly_one_field\n")
    tree = scan_dumps(tmp_path)
    assert [e.op_name for e in tree.entries] == ["add1"]
    assert [p.name for p, _ in tree.bad] == ["mapping.csv"]


def test_golden_files_of_several_directories_are_not_one_pool(tmp_path, capsys):
    """Two steps' golden .npy in it0/ and it1/: mixing them compares one op with one step and the next with
    another. One directory below the given one is fine."""
    from fusebisect.cli.app import main
    from fusebisect.errors import DumpFormatError

    for sub, names in (("it0", ("x.0.100.npy", "c.0.101.npy")), ("it1", ("x.0.200.npy",))):
        (tmp_path / "g" / sub).mkdir(parents=True)
        for name in names:
            np.save(tmp_path / "g" / sub / name, np.zeros(1))
    with pytest.raises(DumpFormatError, match=r"golden .npy files in 2 directories \(it0, it1\)"):
        scan_golden(tmp_path / "g")
    assert set(scan_golden(tmp_path / "g" / "it0")) == {("x", 0), ("c", 0)}
    (tmp_path / "one" / "sub").mkdir(parents=True)
    np.save(tmp_path / "one" / "sub" / "x.0.1.npy", np.zeros(1))
    assert set(scan_golden(tmp_path / "one")) == {("x", 0)}
    _dump(tmp_path / "my" / "Add.x.1.0.7")
    assert main(["compare", str(tmp_path / "my"), str(tmp_path / "g")]) == 2
    assert "give the one directory to compare with" in capsys.readouterr().err


def test_golden_newest_wins(tmp_path):
    for name in ("conv1.0.100.npy", "conv1.0.300.npy", "conv1.1.200.npy", "relu.0.50.npy"):
        np.save(tmp_path / name, np.zeros(1))
    golden = scan_golden(tmp_path)
    assert {k: v.timestamp for k, v in golden.items()} == {("conv1", 0): 300, ("conv1", 1): 200, ("relu", 0): 50}
    assert is_golden_dir(tmp_path)
    _dump(tmp_path / "Add.add1.1.0.7")
    assert not is_golden_dir(tmp_path)
    assert not is_golden_dir(tmp_path / "conv1.0.100.npy")
