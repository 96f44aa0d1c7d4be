"""FFTS+ thread dumps are merged the way msaccucmp merges them, checked against the real msaccucmp.

One network is dumped twice: "my" run with FFTS+ thread slicing (binary dumps carrying the slice JSON as CANN
writes it) and a plain golden run (binary dumps of the whole tensors, plus golden .npy files):

* ``conv``: automatic mode, 3 threads cut along axis 0; each thread's output is stored flat and reshaped by
  ``output_tensor_slice``; a second output has no cut axis (the first thread's is used). Thread files are
  written in an order their timestamps alone would get wrong.
* ``relu``: manual mode, 2 slices (``_lxsliceN``) cut along axis 1, op names under an ``sgt_graph_0`` prefix.
* ``scope/fb``: automatic mode without any cut axis: msaccucmp compares the thread file with the greatest
  timestamp field (thread 1 here) instead of merging.
* ``mm``: manual mode, 2 of its 3 slices dumped (thread-count mismatch).
* ``input``, ``add``: plain dumps (``add`` dumped twice; the newest counts).

msaccucmp parses binary dumps with CANN's ``libascend_dump_parser.so`` (header protobuf -> JSON), which is not
installed here; the peer runs the real msaccucmp with only that one function replaced by the same conversion
in Python (``Msaccucmp.run_parsing_binary`` in conftest). Every FFTS+ rule under test (file grouping, sorting, merging, fallback) is its own code.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fusebisect.cli.app import main
from fusebisect.compare import ffts
from fusebisect.compare.csvout import read_msaccucmp_csv
from fusebisect.compare.dumpfile import TensorSpec, dump_bytes, read_dump, write_dump
from fusebisect.compare.engine import FFTS_FILE_COUNT_REASON, compare_dumps
from fusebisect.compare.mapping import index_tree
from fusebisect.compare.metrics import ALGORITHMS
from fusebisect.compare.tree import DumpEntry, parse_dump_name, scan_dumps
from fusebisect.errors import DumpFormatError

TS = 1700000000000000
SGT = "partition0_sub_graph1_sgt_graph_0_"
ATTR = "_sgt_json_info"

def _peer_csv(msaccucmp, tmp: Path, *args: str) -> list[list[str]]:
    out = tmp / "peer"
    proc = msaccucmp.run_parsing_binary("compare", *args, "-out", str(out), timeout=300)
    csvs = sorted(out.glob("result_*.csv")) if out.is_dir() else []
    # a nonzero status only passes on the error code of an op that could not be compared (mm here)
    assert csvs and "Traceback" not in proc.stderr and "Basic error" not in proc.stdout, \
        proc.stdout[-3000:] + proc.stderr[-3000:]
    return _read(csvs[-1])


def _read(path: Path) -> list[list[str]]:
    head, rows = read_msaccucmp_csv(path)
    return [head, *rows]


def _same(a: str, b: str, column: str) -> bool:
    """Equal cells; metric cells within 1e-6 (NaN equals NaN)."""
    if column not in ALGORITHMS or column == "StandardDeviation" or a == b:
        return a == b
    try:
        return math.isclose(float(a), float(b), rel_tol=0, abs_tol=1e-6)
    except ValueError:
        return False


def _assert_same_csv(ours: list[list[str]], peer: list[list[str]]) -> None:
    """Same header, rows and cells (metrics to 1e-6; CompareFailReason word for word)."""
    assert ours[0] == peer[0]
    assert len(ours) == len(peer), ([r[:9] for r in ours], [r[:9] for r in peer])
    for got, want in zip(ours[1:], peer[1:]):
        for column, a, b in zip(peer[0], got, want):
            assert _same(a, b, column), (column, got, want)


# ------------------------------------------------------------------------------------------------ the data

def _slice_json(mode_auto: bool, count: int, thread: int, cut_list, out_slices, in_slices=None) -> str:
    """The op attribute CANN writes for an FFTS+ thread: the sgt slice JSON."""
    return json.dumps({"threadMode": mode_auto, "slice_instance_num": count, "thread_id": thread,
                       "parallel_window_size": 0, "thread_scopeId": 7,
                       "inputCutList": [], "outputCutList": cut_list,
                       "input_tensor_slice": in_slices or [], "output_tensor_slice": out_slices,
                       "ori_input_tensor_slice": [], "ori_output_tensor_slice": []})


def _ranges(*bounds) -> list[dict]:
    return [{"lower": int(lo), "higher": int(hi)} for lo, hi in bounds]


def _spec(array, full_shape=None, address=0x1000) -> TensorSpec:
    return TensorSpec(np.asarray(array), format=2, address=address,
                      original_shape=tuple(full_shape) if full_shape is not None else tuple(np.shape(array)))


class Net:
    """The tensors of the network (the golden run's values) and what each thread of my run holds."""

    def __init__(self) -> None:
        rng = np.random.default_rng(11)
        self.x = rng.standard_normal((6, 4)).astype(np.float32)
        self.conv0 = rng.standard_normal((6, 4)).astype(np.float32)
        self.conv1 = [rng.standard_normal((1, 4)).astype(np.float32) for _ in range(3)]   # per thread
        self.relu = np.maximum(self.conv0, 0).astype(np.float16)
        self.fb = [rng.standard_normal((2, 3)).astype(np.float32) for _ in range(3)]      # per thread
        self.mm = rng.standard_normal((6, 4)).astype(np.float32)
        self.add = self.x + np.float32(1)


def _write_my(directory: Path, net: Net, *, drop: tuple[str, ...] = ()) -> None:
    """My FFTS+ run (file names and attributes as CANN writes them)."""
    directory.mkdir()

    def put(name, **kw):
        if name not in drop:
            write_dump(directory / name, **kw)

    put(f"Data.input.0.2.{TS + 1}", op_name="input", inputs=[], outputs=[_spec(net.x)])
    # conv: automatic mode; thread k stores rows 2k..2k+2 of output 0 flat; output 1 is not cut
    stamps = {0: TS + 13, 1: TS + 11, 2: TS + 12}
    for k in range(3):
        attr = _slice_json(True, 3, k, [[3, 1], [1, 1]],
                           [[_ranges((2 * t, 2 * t + 2), (0, 4)), _ranges((0, 1), (0, 4))] for t in range(3)])
        put(f"Conv2D.conv.1.2.{stamps[k]}.4.10.{k}.0", op_name="conv", inputs=[_spec(net.x)],
            outputs=[_spec(net.conv0[2 * k:2 * k + 2].reshape(-1), (6, 4)), _spec(net.conv1[k], (1, 4))],
            attrs=[(ATTR, attr)])
    # relu: manual mode, slices along axis 1, slice 1 dumped first
    for k, stamp in ((0, TS + 22), (1, TS + 21)):
        cols = slice(2 * k, 2 * k + 2)
        attr = _slice_json(False, 2, k, [[1, 2]], [])
        put(f"Relu.{SGT}relu_lxslice{k}.3.2.{stamp}.4.11.0.0", op_name=f"{SGT}relu_lxslice{k}",
            inputs=[_spec(net.conv0[:, cols])], outputs=[_spec(net.relu[:, cols], (6, 4))], attrs=[(ATTR, attr)])
    # scope/fb: automatic mode, no cut axis: thread 1 has the greatest timestamp field
    for k, stamp in ((0, TS + 31), (1, TS + 39), (2, TS + 33)):
        attr = _slice_json(True, 3, k, [[1, 1]], [[_ranges((0, 2), (0, 3))] for _ in range(3)])
        put(f"Add.scope_fb.4.2.{stamp}.4.12.{k}.0", op_name="scope/fb", inputs=[_spec(net.x)],
            outputs=[_spec(net.fb[k])], attrs=[(ATTR, attr)])
    # mm: manual mode, 3 slices along axis 0 but only two files
    for k in range(2):
        rows = slice(2 * k, 2 * k + 2)
        attr = _slice_json(False, 3, k, [[3, 1]], [])
        put(f"MatMul.mm_lxslice{k}.5.2.{TS + 41 + k}.4.13.0.0", op_name=f"mm_lxslice{k}",
            inputs=[_spec(net.x[rows])], outputs=[_spec(net.mm[rows], (6, 4))], attrs=[(ATTR, attr)])
    # add: plain, dumped twice (an older, wrong dump first)
    put(f"Add.add.6.2.{TS + 50}", op_name="add", inputs=[_spec(net.x)], outputs=[_spec(net.x * 0)])
    put(f"Add.add.6.2.{TS + 51}", op_name="add", inputs=[_spec(net.x)], outputs=[_spec(net.add)])


def _write_golden(directory: Path, npy: Path, net: Net) -> None:
    """The golden run without FFTS+ (whole tensors), as NPU dumps and as golden .npy files."""
    directory.mkdir()
    npy.mkdir()
    ops = [("Data", "input", [], [net.x]), ("Conv2D", "conv", [net.x], [net.conv0, net.conv1[0]]),
           ("Relu", "relu", [net.conv0], [net.relu]), ("Add", "scope_fb", [net.x], [net.fb[1]]),
           ("MatMul", "mm", [net.x], [net.mm]), ("Add", "add", [net.x], [net.add])]
    for i, (op_type, name, ins, outs) in enumerate(ops):
        stamp = TS + 100 + i
        write_dump(directory / f"{op_type}.{name}.{i}.2.{stamp}", op_name=name.replace("scope_", "scope/"),
                   inputs=[_spec(a) for a in ins], outputs=[_spec(a) for a in outs])
        for k, out in enumerate(outs):
            np.save(npy / f"{name}.{k}.{stamp}.npy", out)


def _desc(shape, origin, index):
    attr = [{"key": "origin_format", "value": {"s": "ND"}},
            {"key": "origin_shape", "value": {"list": {"val_type": 2, "i": list(shape)}}},
            {"key": "_datadump_origin_name", "value": {"s": origin}},
            {"key": "_datadump_origin_output_index", "value": {"i": index}}]
    return {"dtype": "DT_FLOAT", "shape": {"dim": list(shape)}, "layout": "ND", "attr": attr}


def _graph_op(name, op_type, i, inputs, origin, shapes):
    attr = [] if op_type == "Data" else [
        {"key": "_datadump_original_op_names", "value": {"list": {"val_type": 1, "s": [origin]}}}]
    return {"name": name, "type": op_type, "id": i, "input": inputs, "attr": attr,
            "output_desc": [_desc(shape, origin, k) for k, shape in enumerate(shapes)]}


def _write_graph(path: Path) -> None:
    """My graph (atc JSON): op names as msaccucmp files the FFTS+ dumps under with -f."""
    ops = [_graph_op("input", "Data", 0, [], "input", [(6, 4)]),
           _graph_op("conv", "Conv2D", 1, ["input:0"], "conv", [(6, 4), (1, 4)]),
           _graph_op(f"{SGT}relu", "Relu", 2, ["conv:0"], "relu", [(6, 4)]),
           _graph_op("scope/fb", "Add", 3, ["input:0"], "scope/fb", [(2, 3)]),
           _graph_op("mm", "MatMul", 4, ["input:0"], "mm", [(6, 4)]),
           _graph_op("add", "Add", 5, ["input:0"], "add", [(6, 4)])]
    path.write_text(json.dumps({"graph": [{"name": "g", "op": ops}]}))


@pytest.fixture(scope="module")
def net(tmp_path_factory) -> tuple[Path, Net]:
    root = tmp_path_factory.mktemp("ffts")
    data = Net()
    _write_my(root / "my", data)
    _write_golden(root / "golden", root / "golden_npy", data)
    _write_graph(root / "graph.json")
    return root, data


# ------------------------------------------------------------------------------------------------ tests

def test_attrs_round_trip_in_binary_and_protobuf(tmp_path):
    attrs = [(ATTR, '{"threadMode": true}'), ("other", "x")]
    for encoding in ("binary", "protobuf"):
        path = write_dump(tmp_path / f"Add.a.1.2.{TS}.{encoding}", op_name="a", inputs=[],
                          outputs=[np.ones(3, np.float32)], encoding=encoding, attrs=attrs)
        dump = read_dump(path)
        assert dump.encoding == encoding and dump.attrs == attrs
        assert np.array_equal(dump.outputs[0].array(), np.ones(3, np.float32))
    plain = read_dump(write_dump(tmp_path / f"Add.b.1.2.{TS}", op_name="b", inputs=[], outputs=[np.ones(2)]))
    nano = read_dump(write_dump(tmp_path / f"Add.c.1.2.{TS}", op_name="c", inputs=[], outputs=[np.ones(2)],
                                encoding="nano"))
    assert plain.attrs == [] and nano.attrs == []
    with pytest.raises(DumpFormatError, match="no op attributes"):
        dump_bytes(op_name="c", inputs=[], outputs=[np.ones(2)], encoding="nano", attrs=attrs)


def test_threads_are_grouped_ordered_and_merged_into_the_whole_tensor(net):
    root, data = net
    index = index_tree(scan_dumps(root / "my"))
    assert set(index.threads) == {"conv", "relu", "scope_fb", "mm"}
    conv = index.newest("conv")
    assert conv.mode == ffts.AUTO and [e.name.extra[2] for e in conv.entries] == [0, 1, 2]
    relu = index.newest("relu")
    assert relu.mode == ffts.MANUAL and [e.op_name[-1] for e in relu.entries] == ["0", "1"]
    read = conv.read()
    assert read.merged and read.files_match and read.notes == []
    dump = read.dump
    assert [o.shape for o in dump.outputs] == [(6, 4), (1, 4)]
    assert np.array_equal(dump.outputs[0].array(), data.conv0)
    assert np.array_equal(dump.outputs[1].array(), data.conv1[0])       # no cut axis: the first thread's
    assert np.array_equal(dump.inputs[0].array(), data.x)               # inputs of the first thread
    relu_dump = relu.read().dump
    assert relu_dump.op_name == f"{SGT}relu" and relu_dump.outputs[0].dtype_name == "float16"
    assert np.array_equal(relu_dump.outputs[0].array(), data.relu)
    assert relu_dump.inputs[0].shape == (6, 2)
    assert index.newest("add").path.name == f"Add.add.6.2.{TS + 51}"      # plain op: the newest file
    by_name = compare_dumps(root / "my", root / "golden_npy")               # merged outputs vs golden .npy
    cosines = {r.tensor: r.cosine for r in by_name.rows}
    assert by_name.mode == "npy_by_name"
    assert cosines["conv:output:0"] == pytest.approx(1.0) and cosines["relu:output:0"] == pytest.approx(1.0)


def test_cut_axis_fallback_and_thread_count_mismatch_are_reported(net):
    root, data = net
    index = index_tree(scan_dumps(root / "my"))
    fallback = index.newest("scope_fb").read()
    assert not fallback.merged and fallback.files_match
    assert fallback.dump.path.name == f"Add.scope_fb.4.2.{TS + 39}.4.12.1.0"
    assert np.array_equal(fallback.dump.outputs[0].array(), data.fb[1])
    assert any("no cut axis" in note and fallback.dump.path.name in note for note in fallback.notes)
    partial = index.newest("mm").read()
    assert partial.merged and not partial.files_match
    assert np.array_equal(partial.dump.outputs[0].array(), data.mm[:4])
    assert any("2 thread dump files but slice_instance_num is 3" in note for note in partial.notes)
    report = compare_dumps(root / "my", root / "golden")
    assert any("FFTS+ op mm" in n and "slice_instance_num is 3" in n for n in report.notes)
    assert any("FFTS+ op scope_fb" in n and "no cut axis" in n for n in report.notes)
    mm_rows = [r for r in report.rows if r.my_op == "mm"]
    assert len(mm_rows) == 1 and mm_rows[0].fail_reason.startswith(FFTS_FILE_COUNT_REASON + ",")
    forked = compare_dumps(root / "my", root / "golden", jobs=3)         # notes come back from the workers
    assert forked.notes == report.notes and len(forked.rows) == len(report.rows)


def test_the_html_report_carries_the_notes(net, tmp_path):
    root, _ = net
    out = tmp_path / "report.html"
    assert main(["--quiet", "compare", str(root / "my"), str(root / "golden"), "--html", str(out)]) in (0, 1)
    html = out.read_text()
    assert ">Notes<" in html
    assert "slice_instance_num is 3" in html and "no cut axis" in html


def test_npu_vs_npu_rows_equal_msaccucmp(msaccucmp, net, tmp_path):
    root, _ = net
    peer = _peer_csv(msaccucmp, tmp_path, "-m", str(root / "my"), "-g", str(root / "golden"))
    rc = main(["compare", str(root / "my"), str(root / "golden"), "--csv", str(tmp_path / "ours.csv"), "--json"])
    assert rc in (0, 1)
    ours = _read(tmp_path / "ours.csv")
    _assert_same_csv(ours, peer)
    tensors = {row[8] for row in ours[1:]}
    assert {"conv:output:0", "conv:output:1", "conv:input:0", "relu:output:0", "scope/fb:output:0",
            "add:output:0"} <= tensors
    by_tensor = {row[8]: row for row in ours[1:]}
    cosine = ours[0].index("CosineSimilarity")
    for tensor in ("conv:output:0", "conv:output:1", "relu:output:0", "scope/fb:output:0", "add:output:0"):
        assert float(by_tensor[tensor][cosine]) == pytest.approx(1.0), tensor
    mm_reason = next(row for row in peer[1:] if row[2] == "mm")[-1]
    assert mm_reason.startswith(FFTS_FILE_COUNT_REASON + ",")           # the peer reports it the same way


def test_graph_vs_npy_rows_equal_msaccucmp(msaccucmp, net, tmp_path):
    """With -f and golden .npy, an FFTS+ op's input row takes the producing FFTS+ op's output row."""
    root, _ = net
    peer = _peer_csv(msaccucmp, tmp_path, "-m", str(root / "my"), "-g", str(root / "golden_npy"),
                     "-f", str(root / "graph.json"))
    rc = main(["compare", str(root / "my"), str(root / "golden_npy"), "--my-graph", str(root / "graph.json"),
               "--csv", str(tmp_path / "ours.csv")])
    assert rc in (0, 1)
    ours = _read(tmp_path / "ours.csv")
    _assert_same_csv(ours, peer)
    head = ours[0]
    tensor_col, shape_col = head.index("TensorIndex"), head.index("Shape")
    rows = {row[tensor_col]: row for row in ours[1:]}
    relu_in, conv_out = rows[f"{SGT}relu:input:0"], rows["conv:output:0"]
    assert relu_in[shape_col:] == conv_out[shape_col:]      # shape, metrics and reason of the producer's row
    assert relu_in[head.index("DataType")] == "NaN"        # the input row itself could not be compared (a slice)


def test_ffts_flag_keeps_slice_names_like_msaccucmp(msaccucmp, net, tmp_path):
    root, _ = net
    peer = _peer_csv(msaccucmp, tmp_path, "-m", str(root / "my"), "-g", str(root / "golden"), "-ffts")
    rc = main(["compare", str(root / "my"), str(root / "golden"), "--ffts", "--csv", str(tmp_path / "ours.csv")])
    assert rc in (0, 1)
    ours = _read(tmp_path / "ours.csv")
    _assert_same_csv(ours, peer)
    mine, golden = {row[2] for row in ours[1:]}, {row[5] for row in ours[1:]}
    assert {f"{SGT}relu_lxslice0", f"{SGT}relu_lxslice1", "mm_lxslice0", "conv"} <= mine   # slices one to one
    assert {"relu", "mm"} <= golden and "relu" not in mine


def test_plain_tree_is_unaffected(msaccucmp, tmp_path, net):
    _, data = net
    my, golden = tmp_path / "my", tmp_path / "golden"
    my.mkdir()
    golden.mkdir()
    for directory, scale in ((my, 1.001), (golden, 1.0)):
        for i, name in enumerate(("a", "b_sub", "c")):
            write_dump(directory / f"Add.{name}.{i}.2.{TS + i}", op_name=name, inputs=[_spec(data.x * scale)],
                       outputs=[_spec(data.x * (i + 1) * scale)])
    index = index_tree(scan_dumps(my))
    assert index.threads == {} and index.notes == []
    assert isinstance(index.newest("b_sub"), DumpEntry)
    report = compare_dumps(my, golden)
    assert report.notes == [] and len(report.rows) == 6
    peer = _peer_csv(msaccucmp, tmp_path, "-m", str(my), "-g", str(golden))
    rc = main(["compare", str(my), str(golden), "--csv", str(tmp_path / "ours.csv")])
    assert rc == 0
    _assert_same_csv(_read(tmp_path / "ours.csv"), peer)


NAMES = [f"Conv2D.conv.1.2.{TS + 3}.4.10.0.0", f"Conv2D.conv.1.2.{TS + 1}.4.10.2.0",
         f"Conv2D.conv.1.2.{TS + 2}.4.10.1.0",
         f"Relu.{SGT}relu_lxslice1.3.2.{TS + 5}.4.11.0.0", f"Relu.{SGT}relu_lxslice0.3.2.{TS + 6}.4.11.0.0",
         f"Relu.a_lxslice0_b_lxslice1.3.2.{TS}.4.11.0.0", f"Relu.x_sgt_graph_3_y_sgt_graph_12_z.3.2.{TS}.0.11.0.0",
         f"Add.add.6.2.{TS}", f"Add.add.6.2.{TS}.0.1.2.3", f"Cast.ab.4.1.{TS}.4.3.0.0", f"Mul.s_lxslice7.1.1.{TS}"]

_PEER_NAMES = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
from dump_parse.dump import DumpInfo, handle_op_name
from dump_parse import dump_utils
names = json.loads(sys.argv[2])
out = {"key": {}, "key_graph": {}, "mode": {}, "order": {}}
info = DumpInfo(".", 0)
for name in names:
    op = name.split(".")[1]
    for label, graph in (("key", ""), ("key_graph", "graph.json")):
        key = handle_op_name(op, graph)
        out[label][name] = None if "_lxslice" in key else key
    info._check_task_type(op, name)
    out["mode"][name] = info.op_name_to_task_mode_map[op]
for mode, group in ((1, names[0:3]), (2, names[3:5])):
    out["order"][str(mode)] = dump_utils.sort_dump_file_list(mode, list(group))
print(json.dumps(out))
'''


def test_names_modes_and_order_agree_with_msaccucmp(msaccucmp):
    proc = subprocess.run([sys.executable, "-c", _PEER_NAMES, str(msaccucmp.script.parent), json.dumps(NAMES)],
                          env=msaccucmp.env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    peer = json.loads(proc.stdout.strip().splitlines()[-1])
    modes = {0: ffts.NORMAL, 1: ffts.AUTO, 2: ffts.MANUAL}
    for name in NAMES:
        parsed = parse_dump_name(name)
        assert ffts.op_key(parsed.op_name) == peer["key"][name], name
        assert ffts.op_key(parsed.op_name, graph=True) == peer["key_graph"][name], name
        assert ffts.task_mode(parsed) == modes[peer["mode"][name]], name
    assert ffts.op_key(f"{SGT}relu_lxslice0") == "relu" and ffts.op_key("a_lxslice0_b_lxslice1") is None
    for mode, group in ((ffts.AUTO, NAMES[0:3]), (ffts.MANUAL, NAMES[3:5])):
        entries = [DumpEntry(Path(n), parse_dump_name(n), None, None, None, None) for n in group]
        want = peer["order"]["1" if mode == ffts.AUTO else "2"]
        assert [e.path.name for e in ffts.thread_order(entries, mode)] == want


def test_bad_slice_json_is_a_clear_error_not_a_crash(tmp_path, net, capsys):
    _, data = net
    my = tmp_path / "my"
    my.mkdir()
    for k in range(2):
        write_dump(my / f"Conv2D.conv.1.2.{TS + k}.4.10.{k}.0", op_name="conv", inputs=[],
                   outputs=[_spec(data.conv0[:3])], attrs=[(ATTR, "{not json")])
    group = index_tree(scan_dumps(my)).newest("conv")
    with pytest.raises(DumpFormatError, match=r"Conv2D\.conv\.1\.2\.\d+\.4\.10\.0\.0: .*not the FFTS\+ slice JSON"):
        group.read()
    golden = tmp_path / "golden"
    golden.mkdir()
    write_dump(golden / f"Conv2D.conv.1.2.{TS}", op_name="conv", inputs=[], outputs=[_spec(data.conv0)])
    report = compare_dumps(my, golden)
    assert len(report.rows) == 1 and "not the FFTS+ slice JSON" in report.rows[0].fail_reason
    # an automatic-mode thread whose output does not fit its output_tensor_slice
    bad = tmp_path / "bad"
    bad.mkdir()
    for k in range(2):
        attr = _slice_json(True, 2, k, [[2, 1]], [[_ranges((0, 4), (0, 4))] for _ in range(2)])
        write_dump(bad / f"Conv2D.conv.1.2.{TS + k}.4.10.{k}.0", op_name="conv", inputs=[],
                   outputs=[_spec(data.conv0[:3])], attrs=[(ATTR, attr)])
    with pytest.raises(DumpFormatError, match="12 elements do not fit the thread shape"):
        index_tree(scan_dumps(bad)).newest("conv").read()
    rc = main(["compare", str(bad), str(golden), "--json"])
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    # the JSON is still written, but a compare that compared nothing is an error, not a clean result
    assert rc == 2 and out["rows"] == 1 and out["compared"] == 0 and out["not_compared"] == 1
    assert "none of the 1 tensors could be compared" in captured.err
    assert [u["side"] for u in out["unmatched"]] == ["my"] and "do not fit" in out["unmatched"][0]["reason"]
