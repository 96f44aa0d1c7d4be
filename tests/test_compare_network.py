"""Whole-network fidelity: fusebisect compare --csv and the real msaccucmp.py compare agree row for row.

The same small tensors are written as nano dumps (the format msaccucmp parses without CANN) for four cases:
one-to-one with -f vs golden .npy, fused vs unfused with -f/-cf, NPU vs NPU without graphs, and an NC1HWC0
(5HD) output converted to the golden NCHW layout with its channel padding removed.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest

from fusebisect.cli.app import main
from fusebisect.compare.dumpfile import TensorSpec, write_dump
from fusebisect.compare.engine import compare_dumps
from fusebisect.compare.formats import from_original
from fusebisect.compare.metrics import ALGORITHMS

TS = {"input": 1700000000000001, "conv1": 1700000000000002, "bn1": 1700000000000003, "relu1": 1700000000000004}
TYPES = {"input": "Data", "conv1": "Conv2D", "bn1": "BatchNorm", "relu1": "Relu"}
PRODUCER = {"conv1": "input", "bn1": "conv1", "relu1": "bn1"}
SHAPES = {"input": (1, 3, 4, 4), "conv1": (1, 2, 4, 4), "bn1": (1, 2, 4, 4), "relu1": (1, 2, 4, 4)}


def _spec(array, address, five_hd=False):
    if five_hd:
        return TensorSpec(from_original(array, "NC1HWC0"), format=3, original_shape=array.shape, address=address)
    return TensorSpec(array, format=0, original_shape=array.shape, address=address)


def _desc(shape, origin=None, index=0):
    attr = [{"key": "origin_format", "value": {"s": "NCHW"}},
            {"key": "origin_shape", "value": {"list": {"val_type": 2, "i": list(shape)}}}]
    if origin:
        attr += [{"key": "_datadump_origin_name", "value": {"s": origin}},
                 {"key": "_datadump_origin_output_index", "value": {"i": index}}]
    return {"dtype": "DT_FLOAT", "shape": {"dim": list(shape)}, "layout": "NCHW", "attr": attr}


def _op(name, typ, i, inputs, originals, shape, origin, passes=()):
    attr = []
    if originals:
        attr.append({"key": "_datadump_original_op_names", "value": {"list": {"val_type": 1, "s": originals}}})
    if passes:
        attr.append({"key": "pass_name", "value": {"list": {"val_type": 1, "s": list(passes)}}})
    return {"name": name, "type": typ, "id": i, "input": inputs, "attr": attr, "output_desc": [_desc(shape, origin)]}


@pytest.fixture(scope="module")
def network(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("net")
    rng = np.random.default_rng(7)
    gold = {k: rng.standard_normal(v).astype(np.float32) for k, v in SHAPES.items()}
    gold["relu1"] = np.maximum(gold["bn1"], 0)
    my = {k: v + rng.standard_normal(v.shape).astype(np.float32) * np.float32(1e-3) for k, v in gold.items()}
    my["bn1"] = my["bn1"] + np.float32(0.5) * (rng.random(my["bn1"].shape) > 0.7)   # a real divergence

    def nano(directory: Path, data, ops, five_hd_op=None):
        directory.mkdir()
        for i, name in enumerate(ops):
            ins = [] if name == "input" else [_spec(data[PRODUCER[name]], 0x10000)]
            outs = [_spec(data[name], 0x11000, five_hd=name == five_hd_op)]
            write_dump(directory / f"{TYPES[name]}.{name}.{i}.0.{TS[name]}", op_name=name, inputs=ins,
                       outputs=outs, encoding="nano")

    (root / "golden_npy").mkdir()
    for k, v in gold.items():
        np.save(root / "golden_npy" / f"{k}.0.{TS[k]}.npy", v)
    order = ["input", "conv1", "bn1", "relu1"]
    nano(root / "my_unfused", my, order)
    nano(root / "my_5hd", my, order, five_hd_op="conv1")
    nano(root / "golden_nano", gold, order)
    fused = root / "my_fused"
    fused.mkdir()
    write_dump(fused / f"Data.input.0.0.{TS['input']}", op_name="input", inputs=[],
               outputs=[_spec(my["input"], 0x11000)], encoding="nano")
    write_dump(fused / f"Conv2D.conv1_fused.1.0.{TS['bn1']}", op_name="conv1_fused",
               inputs=[_spec(my["input"], 0x10000)], outputs=[_spec(my["bn1"], 0x11000)], encoding="nano")
    write_dump(fused / f"Relu.relu1.2.0.{TS['relu1']}", op_name="relu1", inputs=[_spec(my["bn1"], 0x10000)],
               outputs=[_spec(my["relu1"], 0x11000)], encoding="nano")
    unfused = {"graph": [{"name": "g", "op": [
        _op("input", "Data", 0, [], None, SHAPES["input"], None),
        _op("conv1", "Conv2D", 1, ["input:0"], ["conv1"], SHAPES["conv1"], "conv1"),
        _op("bn1", "BatchNorm", 2, ["conv1:0", "input:-1"], ["bn1"], SHAPES["bn1"], "bn1"),
        _op("relu1", "Relu", 3, ["bn1:0"], ["relu1"], SHAPES["relu1"], "relu1")]}]}
    fused_graph = {"graph": [{"name": "g", "op": [
        _op("input", "Data", 0, [], None, SHAPES["input"], None),
        _op("conv1_fused", "Conv2D", 1, ["input:0"], ["conv1", "bn1"], SHAPES["bn1"], "bn1",
            passes=["ConvBatchnormFusionPass"]),
        _op("relu1", "Relu", 2, ["conv1_fused:0"], ["relu1"], SHAPES["relu1"], "relu1")]}]}
    (root / "unfused.json").write_text(json.dumps(unfused))
    (root / "fused.json").write_text(json.dumps(fused_graph))
    return root


CASES = {
    "one_to_one_vs_npy": ("my_unfused", "golden_npy", "unfused.json", None),
    "fused_vs_npy": ("my_fused", "golden_npy", "fused.json", None),
    "fused_vs_unfused": ("my_fused", "golden_nano", "fused.json", "unfused.json"),
    "npu_vs_npu": ("my_unfused", "golden_nano", None, None),
    "nc1hwc0_vs_npy": ("my_5hd", "golden_npy", "unfused.json", None),
}


def _read(path: Path) -> list[list[str]]:
    with open(path, newline="") as handle:
        return list(csv.reader(handle))


def _same_cell(a: str, b: str, column: str) -> bool:
    if column in ALGORITHMS and column != "StandardDeviation":
        try:
            fa, fb = float(a), float(b)
        except ValueError:
            return a == b
        if math.isnan(fa) or math.isnan(fb):
            return math.isnan(fa) and math.isnan(fb)
        return abs(fa - fb) <= 1e-6
    return a == b


def _assert_rows_agree(ref, got, label, skip=()) -> None:
    """Every row of our CSV agrees with msaccucmp's, cell for cell (columns in ``skip`` aside)."""
    for ref_row, got_row in zip(ref[1:], got[1:]):
        for column, a, b in zip(ref[0], ref_row, got_row):
            if column not in skip:
                assert _same_cell(a, b, column), (label, column, ref_row, got_row)


def _graph_peer_and_ours(msaccucmp, tmp_path: Path, graph: Path):
    """msaccucmp and fusebisect on tmp_path/my vs tmp_path/gold with -f GRAPH: (peer process, peer rows, our exit
    code, our rows)."""
    proc = msaccucmp.run("compare", "-m", str(tmp_path / "my"), "-g", str(tmp_path / "gold"), "-f", str(graph),
                         "-out", str(tmp_path / "ref"))
    ref = _read(next((tmp_path / "ref").glob("result_*.csv")))
    rc = main(["compare", str(tmp_path / "my"), str(tmp_path / "gold"), "--my-graph", str(graph),
               "--csv", str(tmp_path / "ours.csv")])
    return proc, ref, rc, _read(tmp_path / "ours.csv")


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_csv_agrees_with_real_msaccucmp(msaccucmp, network, tmp_path, case):
    my, golden, graph, close = CASES[case]
    args = ["compare", "-m", str(network / my), "-g", str(network / golden), "-out", str(tmp_path / "ref")]
    ours = ["compare", str(network / my), str(network / golden), "--csv", str(tmp_path / "ours.csv"), "--json"]
    if graph:
        args += ["-f", str(network / graph)]
        ours += ["--my-graph", str(network / graph)]
    if close:
        args += ["-cf", str(network / close)]
        ours += ["--golden-graph", str(network / close)]
    proc = msaccucmp.run(*args)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    ref = _read(next((tmp_path / "ref").glob("result_*.csv")))
    rc = main(ours)
    assert rc in (0, 1)
    got = _read(tmp_path / "ours.csv")
    assert got[0] == ref[0]
    assert len(got) == len(ref) and len(got) > 3
    _assert_rows_agree(ref, got, case)


def test_first_divergence_names_the_fused_op_and_its_pass(network):
    report = compare_dumps(network / "my_fused", network / "golden_nano", my_graph=network / "fused.json",
                           golden_graph=network / "unfused.json")
    fd = report.first_divergence
    assert fd is not None
    assert fd["op"] == "conv1_fused" and fd["tensor"] == "conv1_fused:output:0"
    assert fd["pass_names"] == ["ConvBatchnormFusionPass"]
    assert fd["ground_truth"] == ["conv1", "bn1"]
    assert fd["cosine"] < 0.99
    cosines = [r.cosine for r in report.execution_order()]
    assert len(cosines) == len(report.rows)


def test_a_graph_folder_of_a_train_and_an_eval_graph_maps_through_the_dumps_graph(network, tmp_path):
    """The eval graph (unfused, same op names) dumped after the train graph must not stand for the fused ops."""
    folder = tmp_path / "graph"
    folder.mkdir()
    (folder / "ge_proto_00000001_graph_1_Build.txt").write_bytes((network / "fused.json").read_bytes())
    (folder / "ge_proto_00000002_graph_2_Build.txt").write_bytes((network / "unfused.json").read_bytes())
    report = compare_dumps(network / "my_fused", network / "golden_nano", my_graph=folder,
                           golden_graph=network / "unfused.json")
    assert report.first_divergence["op"] == "conv1_fused"
    assert report.first_divergence["pass_names"] == ["ConvBatchnormFusionPass"]
    assert report.notes == [f"{folder} holds 2 Build graphs sharing op names: the my side uses "
                            "ge_proto_00000001_graph_1_Build.txt, which names 3 of the 3 op dumps (the others: "
                            "ge_proto_00000002_graph_2_Build.txt)"]


def test_jobs_give_the_same_rows(network):
    one = compare_dumps(network / "my_unfused", network / "golden_npy", my_graph=network / "unfused.json")
    many = compare_dumps(network / "my_unfused", network / "golden_npy", my_graph=network / "unfused.json", jobs=4)
    assert [(r.tensor, r.metrics["CosineSimilarity"].text) for r in one.rows] == \
           [(r.tensor, r.metrics["CosineSimilarity"].text) for r in many.rows]


def test_missing_graph_op_dump_is_unmatched_not_a_crash(network, tmp_path):
    partial = tmp_path / "partial"
    partial.mkdir()
    for f in (network / "my_unfused").iterdir():
        if not f.name.startswith("Data."):
            (partial / f.name).write_bytes(f.read_bytes())
    report = compare_dumps(partial, network / "golden_npy", my_graph=network / "unfused.json")
    assert {"op": "input", "side": "my"}.items() <= report.unmatched[0].items()
    assert "There is no dump file for my output operator" in report.rows[0].fail_reason


def test_cli_json_and_exit_codes(network, capsys):
    rc = main(["compare", str(network / "my_fused"), str(network / "golden_npy"), "--my-graph",
               str(network / "fused.json"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 1
    assert out["first_divergence"]["op"] == "conv1_fused"
    assert out["rows"] == 5 and out["unmatched"] == []
    rc = main(["compare", str(network / "my_fused"), str(network / "golden_npy"), "--my-graph",
               str(network / "fused.json"), "--cosine", "0.5", "--json"])
    assert rc == 0 and json.loads(capsys.readouterr().out)["first_divergence"] is None
    rc = main(["compare", str(network / "nope"), str(network / "golden_npy")])
    assert rc == 2
    rc = main(["compare", str(network / "my_fused"), str(network / "golden_npy"), "--engine", "bogus"])
    assert rc == 2


def test_cli_table_highlights_the_first_divergence(network, capsys):
    rc = main(["compare", str(network / "my_fused"), str(network / "golden_nano"), "--my-graph",
               str(network / "fused.json"), "--golden-graph", str(network / "unfused.json")])
    text = capsys.readouterr().out
    assert rc == 1
    assert "first divergent op" in text and "ConvBatchnormFusionPass" in text and "conv1, bn1" in text


@pytest.mark.slow
def test_engine_msaccucmp_matches_native(msaccucmp, network, capsys):
    script = str(msaccucmp.script)
    for my, golden, graph, close in CASES.values():
        extra = (["--my-graph", str(network / graph)] if graph else []) + \
                (["--golden-graph", str(network / close)] if close else [])
        rc_native = main(["compare", str(network / my), str(network / golden), "--json", *extra])
        native = json.loads(capsys.readouterr().out)
        rc_ref = main(["compare", str(network / my), str(network / golden), "--json", "--engine", "msaccucmp",
                       "--msaccucmp", script, *extra])
        ref = json.loads(capsys.readouterr().out)
        assert (rc_native, native["rows"]) == (rc_ref, ref["rows"])
        assert (native["first_divergence"] or {}).get("tensor") == (ref["first_divergence"] or {}).get("tensor")
        # --op: msaccucmp compares everything; only that op's rows are judged, as natively
        op = native["tensors"][0]["op"].split(",")[0]
        for name, code in ((op, None), ("no_such_op", 2)):
            rcs, fds = [], []
            for engine in ([], ["--engine", "msaccucmp", "--msaccucmp", script]):
                rc = main(["compare", str(network / my), str(network / golden), "--json", "--op", name, *extra,
                           *engine])
                out = capsys.readouterr().out
                rcs.append(rc)
                fds.append((json.loads(out)["first_divergence"] or {}).get("tensor") if rc != 2 else None)
            assert rcs[0] == rcs[1] and fds[0] == fds[1], (name, rcs, fds)
            assert code is None or rcs[0] == code


def test_nd_tensors_show_the_shape_msaccucmp_shows(msaccucmp, tmp_path):
    """With a graph, msaccucmp compares an ND tensor as stored (flat) and writes that shape; an NCHW one is
    converted to the golden layout first (the cases above)."""
    rng = np.random.default_rng(3)
    gold = {"a": rng.standard_normal((6, 4)).astype(np.float32), "b": rng.standard_normal((2, 3, 4)).astype(np.float32)}
    ts = {"a": 1700000000000001, "b": 1700000000000002}
    (tmp_path / "gold").mkdir()
    (tmp_path / "my").mkdir()
    for k, v in gold.items():
        np.save(tmp_path / "gold" / f"{k}.0.{ts[k]}.npy", v)

    def nd(x):
        return TensorSpec(x, format=2, original_shape=x.shape, address=0x1000)

    write_dump(tmp_path / "my" / f"Data.a.0.0.{ts['a']}", op_name="a", inputs=[], outputs=[nd(gold["a"] + 1e-3)],
               encoding="nano")
    write_dump(tmp_path / "my" / f"MatMul.b.1.0.{ts['b']}", op_name="b", inputs=[nd(gold["a"])],
               outputs=[nd(gold["b"])], encoding="nano")

    def desc(shape):
        return {"dtype": "DT_FLOAT", "shape": {"dim": list(shape)}, "layout": "ND",
                "attr": [{"key": "origin_format", "value": {"s": "ND"}},
                         {"key": "origin_shape", "value": {"list": {"val_type": 2, "i": list(shape)}}}]}

    def op(name, typ, i, inputs, shape):
        return {"name": name, "type": typ, "id": i, "input": inputs, "output_desc": [desc(shape)],
                "attr": [{"key": "_datadump_original_op_names", "value": {"list": {"val_type": 1, "s": [name]}}}]}

    graph = tmp_path / "g.json"
    graph.write_text(json.dumps({"graph": [{"name": "g", "op": [op("a", "Data", 0, [], (6, 4)),
                                                               op("b", "MatMul", 1, ["a:0"], (2, 3, 4))]}]}))
    proc, ref, rc, got = _graph_peer_and_ours(msaccucmp, tmp_path, graph)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert rc == 0
    shape = ref[0].index("Shape")
    assert [row[shape] for row in got[1:]] == [row[shape] for row in ref[1:]] == ["[24]", "[24]", "[24]"]
    _assert_rows_agree(ref, got, "nd")


def test_undefined_dtype_rows_read_as_msaccucmp_reads_them(msaccucmp, tmp_path):
    """DT_UNDEFINED data is raw int8 bytes to msaccucmp, and its DataType cells say int8: ours too."""
    from fusebisect.compare.dtypes import DT_UNDEFINED

    raw = np.random.default_rng(5).integers(0, 256, 16, dtype=np.uint8)
    for side, data in (("my", raw), ("gold", raw[::-1].copy())):
        (tmp_path / side).mkdir()
        write_dump(tmp_path / side / "Relu.u.1.0.1700000000000001", op_name="u", inputs=[],
                   outputs=[TensorSpec(data, dtype=DT_UNDEFINED)])
    proc = msaccucmp.run_parsing_binary("compare", "-m", str(tmp_path / "my"), "-g", str(tmp_path / "gold"), "-out",
                         str(tmp_path / "ref"))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    ref = _read(next((tmp_path / "ref").glob("result_*.csv")))
    assert main(["compare", str(tmp_path / "my"), str(tmp_path / "gold"), "--csv", str(tmp_path / "ours.csv")]) == 1
    got = _read(tmp_path / "ours.csv")
    assert [row[3] for row in got[1:]] == [row[3] for row in ref[1:]] == ["int8"]
    _assert_rows_agree(ref, got, "undefined")


def _one_op_peer_and_ours(msaccucmp, tmp_path: Path, shape, layout: str, attr=(), named: bool = True):
    """Graph of one op "a" (output desc of ``shape``/``layout``, origin format ``layout``, ``attr`` added, origin
    name "a":0 when ``named``), then msaccucmp and fusebisect on tmp_path/my vs tmp_path/gold: (peer process, peer
    rows, our exit code, our rows), both with the one output row."""
    attr = [{"key": "origin_format", "value": {"s": layout}}, *attr]
    if named:
        attr = [{"key": "_datadump_origin_name", "value": {"s": "a"}},
                {"key": "_datadump_origin_output_index", "value": {"i": 0}}] + attr
    desc = {"dtype": "DT_FLOAT", "shape": {"dim": list(shape)}, "layout": layout, "attr": attr}
    op = {"name": "a", "type": "Conv2D", "id": 0, "input": [], "output_desc": [desc],
          "attr": [{"key": "_datadump_original_op_names", "value": {"list": {"val_type": 1, "s": ["a"]}}}]}
    graph = tmp_path / "g.json"
    graph.write_text(json.dumps({"graph": [{"name": "g", "op": [op]}]}))
    proc, ref, rc, got = _graph_peer_and_ours(msaccucmp, tmp_path, graph)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert len(got) == len(ref) == 2
    return proc, ref, rc, got


LAYOUT_CASES = {
    # my device format, graph origin format/shape, layout of the golden .npy, origin name on the output desc
    "5hd_label_nhwc_npy_nchw": (3, "NHWC", (1, 4, 5, 3), "NCHW", True),
    "5hd_label_nhwc_npy_nchw_no_origin_name": (3, "NHWC", (1, 4, 5, 3), "NCHW", False),
    "5hd_label_nchw_npy_nhwc": (3, "NCHW", (1, 3, 4, 5), "NHWC", True),
    "nchw_dump_nhwc_golden": (0, "NHWC", (1, 4, 5, 3), "NHWC", True),
    "nchw_dump_hwcn_golden_unsupported": (0, "HWCN", (4, 5, 3, 1), "HWCN", True),
}


@pytest.mark.parametrize("case", list(LAYOUT_CASES))
def test_layouts_are_converted_as_msaccucmp_converts_them(msaccucmp, tmp_path, case):
    """A golden labelled NHWC whose .npy holds NCHW (or the reverse) is read in the .npy's layout; a plain
    NCHW dump is transposed to an NHWC golden; the origin format counts even without an origin name."""
    fmt, label, label_shape, stored, named = LAYOUT_CASES[case]
    nchw = np.random.default_rng(5).standard_normal((1, 3, 4, 5)).astype(np.float32)
    golden = {"NCHW": nchw, "NHWC": nchw.transpose(0, 2, 3, 1), "HWCN": nchw.transpose(2, 3, 1, 0)}[stored]
    ts = 1700000000000001
    (tmp_path / "gold").mkdir()
    (tmp_path / "my").mkdir()
    np.save(tmp_path / "gold" / f"a.0.{ts}.npy", np.ascontiguousarray(golden))
    device = from_original(nchw, "NC1HWC0") if fmt == 3 else nchw
    original = label_shape if fmt == 3 else nchw.shape
    write_dump(tmp_path / "my" / f"Conv2D.a.0.0.{ts}", op_name="a", inputs=[],
               outputs=[TensorSpec(device, format=fmt, original_shape=original, address=0x1000)], encoding="nano")
    attr = [{"key": "origin_shape", "value": {"list": {"val_type": 2, "i": list(label_shape)}}}]
    proc, ref, rc, got = _one_op_peer_and_ours(msaccucmp, tmp_path, label_shape, label, attr, named)
    # msaccucmp leaves the reason of an unsupported conversion empty (it only logs it); ours says it
    _assert_rows_agree(ref, got, case, skip=("CompareFailReason",) if "unsupported" in case else ())
    cosine = got[1][ref[0].index("CosineSimilarity")]
    if "unsupported" in case:
        reason = got[1][ref[0].index("CompareFailReason")]
        assert reason == "[a] The format conversion from NCHW to HWCN is not supported."
        assert cosine == "NaN" and rc == 2   # the only tensor cannot be compared: an error, the CSV still written
    else:
        assert float(cosine) == pytest.approx(1.0) and rc == 0


@pytest.mark.parametrize("dumped", ["all", "not_the_middle", "none_of_the_subgraph"])
def test_l1_fusion_compares_only_the_first_and_last_dumped_op(msaccucmp, tmp_path, dumped):
    """In an L1 fusion sub-graph msaccucmp trusts only the newest op dump (complete outputs) and the oldest
    (complete inputs); the ops between are not compared, and a sub-graph without dumps is one failed row."""
    rng = np.random.default_rng(2)
    shape = (1, 2, 4, 4)
    order = ["input", "conv1", "bn1", "relu1"]
    gold = {k: rng.standard_normal(shape).astype(np.float32) for k in order}
    my = {k: v + np.float32(0.3 if k == "bn1" else 1e-3) * rng.standard_normal(shape).astype(np.float32)
          for k, v in gold.items()}
    (tmp_path / "gold").mkdir()
    (tmp_path / "my").mkdir()
    for i, k in enumerate(order):
        np.save(tmp_path / "gold" / f"{k}.0.{TS[k]}.npy", gold[k])
        if (dumped == "not_the_middle" and k == "bn1") or (dumped == "none_of_the_subgraph" and k != "input"):
            continue
        ins = [] if k == "input" else [TensorSpec(my[PRODUCER[k]], format=0, original_shape=shape, address=0x1000)]
        write_dump(tmp_path / "my" / f"{TYPES[k]}.{k}.{i}.0.{TS[k]}", op_name=k, inputs=ins,
                   outputs=[TensorSpec(my[k], format=0, original_shape=shape, address=0x2000)], encoding="nano")

    def op(name, i, inputs, l1):
        attr = [{"key": "_datadump_original_op_names", "value": {"list": {"val_type": 1, "s": [name]}}}]
        if l1:
            attr.append({"key": "_L1_fusion_sub_graph_no", "value": {"s": l1}})
        return {"name": name, "type": TYPES[name], "id": i, "input": inputs, "attr": attr,
                "output_desc": [_desc(shape, name)]}

    graph = tmp_path / "g.json"
    graph.write_text(json.dumps({"graph": [{"name": "g", "op": [
        op("input", 0, [], None), op("conv1", 1, ["input:0"], "7"), op("bn1", 2, ["conv1:0"], "7"),
        op("relu1", 3, ["bn1:0"], "7")]}]}))
    proc, ref, rc, got = _graph_peer_and_ours(msaccucmp, tmp_path, graph)
    assert rc in (0, 1)
    assert len(got) == len(ref), (got, ref, proc.stdout[-1000:])
    _assert_rows_agree(ref, got, dumped, skip=())        # every column, the fail reason too
    tensors = [row[ref[0].index("TensorIndex")] for row in got[1:]]
    assert not any(t.startswith("bn1:") for t in tensors)
    if dumped == "none_of_the_subgraph":
        assert got[-1][-1] == "The fusion operator list is empty"
    else:
        assert "relu1:output:0" in tensors and "conv1:input:0" in tensors


SLICE_CASES = {
    # my format, my shape, golden .npy shape: msaccucmp cuts a larger dump down to the golden (a batch padded on
    # the device, an ND tensor compared flat) and refuses a smaller one, with the shapes padded to 4-D
    "nchw_batch_padded": (0, (4, 3, 2, 2), (3, 3, 2, 2)),
    "nd_larger_flat": (2, (6, 4), (4, 4)),
    "nd_smaller": (2, (2, 4), (6, 4)),
    "nchw_smaller_channel": (0, (2, 2, 2, 2), (2, 3, 2, 2)),
}


@pytest.mark.parametrize("case", list(SLICE_CASES))
def test_a_larger_dump_is_sliced_to_the_golden_as_msaccucmp_slices_it(msaccucmp, tmp_path, case):
    fmt, mine, theirs = SLICE_CASES[case]
    data = np.random.default_rng(9).standard_normal(mine).astype(np.float32)
    golden = np.resize(data.reshape(-1), math.prod(theirs)).reshape(theirs)
    if fmt == 0 and mine[0] > theirs[0]:
        golden = data[:theirs[0]].copy()      # the device ran a padded batch: its first samples are the real ones
    ts = 1700000000000001
    (tmp_path / "gold").mkdir()
    (tmp_path / "my").mkdir()
    np.save(tmp_path / "gold" / f"a.0.{ts}.npy", golden)
    write_dump(tmp_path / "my" / f"Conv2D.a.0.0.{ts}", op_name="a", inputs=[],
               outputs=[TensorSpec(data, format=fmt, original_shape=mine, address=0x1000)], encoding="nano")
    proc, ref, rc, got = _one_op_peer_and_ours(msaccucmp, tmp_path, mine, "NCHW" if fmt == 0 else "ND")
    _assert_rows_agree(ref, got, case)
    cosine, reason = (got[1][ref[0].index(c)] for c in ("CosineSimilarity", "CompareFailReason"))
    if "smaller" in case:
        assert cosine == "NaN" and "can not be compared to the right dump data" in reason and rc == 2
    else:
        assert float(cosine) == pytest.approx(1.0) and reason == "" and rc == 0


def test_an_op_ge_inserted_has_no_ground_truth(tmp_path):
    """An op GE inserted carries an empty _datadump_original_op_names list: msaccucmp reads it as ['']
    and finds no ground truth for it, rather than comparing a golden tensor that merely shares its (per-build
    numbered) name."""
    shape = (1, 2, 4, 4)
    rng = np.random.default_rng(2)
    x, y = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    (tmp_path / "my").mkdir()
    (tmp_path / "npy").mkdir()
    write_dump(tmp_path / "my" / f"Data.x.0.0.{TS['input']}", op_name="x", inputs=[],
               outputs=[_spec(x, 0x11000)], encoding="nano")
    write_dump(tmp_path / "my" / f"Mul.trans_Mul_0.1.0.{TS['conv1']}", op_name="trans_Mul_0",
               inputs=[_spec(x, 0x10000)], outputs=[_spec(x, 0x11000)], encoding="nano")
    np.save(tmp_path / "npy" / f"x.0.{TS['input']}.npy", x)
    np.save(tmp_path / "npy" / f"trans_Mul_0.0.{TS['conv1']}.npy", y)   # another build's op of that name
    inserted = _op("trans_Mul_0", "Mul", 1, ["x:0"], None, shape, None)
    inserted["attr"].append({"key": "_datadump_original_op_names", "value": {"list": {"val_type": 1}}})
    graph = {"graph": [{"name": "g", "op": [_op("x", "Data", 0, [], None, shape, None), inserted]}]}
    (tmp_path / "g.json").write_text(json.dumps(graph))
    report = compare_dumps(tmp_path / "my", tmp_path / "npy", my_graph=tmp_path / "g.json")
    rows = {r.tensor: r for r in report.rows}
    row = rows["trans_Mul_0:output:0"]
    assert not row.compared and "There is no the ground truth dump file" in row.fail_reason
    assert report.first_divergence is None


def test_a_divergent_input_after_a_cast_blames_the_fused_op_before_it(tmp_path):
    """F (fused) -> Cast -> G, F's output not dumped: G's input row is compared through the Cast with F's
    origin; the verdict names F and its fusion passes, not the Cast."""
    shape = (1, 2, 4, 4)
    rng = np.random.default_rng(9)
    x, a, b, g = (rng.standard_normal(shape).astype(np.float32) for _ in range(4))
    (tmp_path / "my").mkdir()
    (tmp_path / "npy").mkdir()
    write_dump(tmp_path / "my" / f"Data.x.0.0.{TS['input']}", op_name="x", inputs=[],
               outputs=[_spec(x, 0x11000)], encoding="nano")
    write_dump(tmp_path / "my" / f"Relu.G.3.0.{TS['relu1']}", op_name="G", inputs=[_spec(b + 1, 0x10000)],
               outputs=[_spec(g, 0x11000)], encoding="nano")
    for name, value in (("x", x), ("a", a), ("b", b), ("g", g)):
        np.save(tmp_path / "npy" / f"{name}.0.{TS['relu1'] + 20}.npy", value)
    graph = {"graph": [{"name": "gr", "op": [
        _op("x", "Data", 0, [], None, shape, None),
        _op("F", "Relu", 1, ["x:0"], ["a", "b"], shape, "b", passes=["ABFusionPass"]),
        _op("cast1", "Cast", 2, ["F:0"], None, shape, None),
        _op("G", "Relu", 3, ["cast1:0"], ["g"], shape, "g")]}]}
    (tmp_path / "g.json").write_text(json.dumps(graph))
    fd = compare_dumps(tmp_path / "my", tmp_path / "npy", my_graph=tmp_path / "g.json").first_divergence
    assert fd["tensor"] == "G:input:0" and fd["producer"]["op"] == "F"
    assert fd["pass_names"] == ["ABFusionPass"] and fd["ground_truth"] == ["a", "b"]


def test_quant_ops_get_only_the_rows_msaccucmp_makes(tmp_path):
    """msaccucmp compares no input of a dequant op (int32 accumulators) and no output of an AscendQuant (int8):
    those have no float ground truth, and comparing them would report divergences that are not there."""
    shape = (1, 2, 4, 4)
    rng = np.random.default_rng(12)
    x, a, b, c = (rng.standard_normal(shape).astype(np.float32) for _ in range(4))
    (tmp_path / "my").mkdir()
    (tmp_path / "npy").mkdir()
    for i, (typ, name, ins, out) in enumerate((("Data", "x", [], x), ("Relu", "a", [x], a),
                                               ("AscendDequant", "deq1", [a], b), ("AscendQuant", "q1", [b], c))):
        write_dump(tmp_path / "my" / f"{typ}.{name}.{i}.0.{TS['input'] + i}", op_name=name,
                   inputs=[_spec(v, 0x10000) for v in ins], outputs=[_spec(out, 0x11000)], encoding="nano")
        np.save(tmp_path / "npy" / f"{name}.0.{TS['input']}.npy", out)
    graph = {"graph": [{"name": "g", "op": [
        _op("x", "Data", 0, [], None, shape, None), _op("a", "Relu", 1, ["x:0"], ["a"], shape, "a"),
        _op("deq1", "AscendDequant", 2, ["a:0"], ["deq1"], shape, "deq1"),
        _op("q1", "AscendQuant", 3, ["deq1:0"], ["q1"], shape, "q1")]}]}
    (tmp_path / "g.json").write_text(json.dumps(graph))
    tensors = [r.tensor for r in compare_dumps(tmp_path / "my", tmp_path / "npy", my_graph=tmp_path / "g.json").rows]
    assert "deq1:input:0" not in tensors and "q1:output:0" not in tensors
    assert {"deq1:output:0", "q1:input:0", "a:input:0"} <= set(tensors)


def test_rows_follow_the_graph_files_op_order_as_msaccucmp_numbers_them(msaccucmp, tmp_path):
    """A graph listing its ops out of id order (x id 0, b id 2, a id 1): msaccucmp numbers the ops in file order
    (its Index) and writes the rows in that order."""
    shape = (1, 2, 4, 4)
    rng = np.random.default_rng(41)
    data = {k: rng.standard_normal(shape).astype(np.float32) for k in "xab"}
    (tmp_path / "gold").mkdir()
    for k, (name, typ, src) in enumerate((("x", "Data", None), ("a", "Relu", "x"), ("b", "Relu", "a"))):
        np.save(tmp_path / "gold" / f"{name}.0.{TS['input'] + k}.npy", data[name])
        (tmp_path / "my").mkdir(exist_ok=True)
        write_dump(tmp_path / "my" / f"{typ}.{name}.{k}.0.{TS['input'] + k}", op_name=name,
                   inputs=[_spec(data[src], 0x10000)] if src else [], outputs=[_spec(data[name], 0x11000 + k)],
                   encoding="nano")
    graph = {"graph": [{"name": "g", "op": [_op("x", "Data", 0, [], None, shape, None),
                                            _op("b", "Relu", 2, ["a:0"], ["b"], shape, "b"),
                                            _op("a", "Relu", 1, ["x:0"], ["a"], shape, "a")]}]}
    (tmp_path / "g.json").write_text(json.dumps(graph))
    proc, ref, rc, got = _graph_peer_and_ours(msaccucmp, tmp_path, tmp_path / "g.json")
    assert proc.returncode == 0 and rc == 0, proc.stdout[-2000:]
    npu_dump = ref[0].index("NPUDump")
    assert [row[npu_dump] for row in ref[1:]] == ["x", "b", "b", "a", "a"]
    assert [row[npu_dump] for row in got[1:]] == ["x", "b", "b", "a", "a"]
    _assert_rows_agree(ref, got, "file order")


def test_origins_are_filled_per_graph_as_msaccucmp_fills_them(msaccucmp, tmp_path):
    """msaccucmp fills an op's empty output origins with its one original name after each graph of the model: A
    (main graph, original X) is filled before a loop body adds B (original X too) to X's group. Filled only
    after all graphs, A's output had no ground truth where msaccucmp compares it."""
    shape = (1, 2, 2, 2)
    rng = np.random.default_rng(5)
    (tmp_path / "gold").mkdir()
    (tmp_path / "my").mkdir()
    golden = rng.standard_normal(shape).astype(np.float32)
    np.save(tmp_path / "gold" / "X.0.1700000000000002.npy", golden)
    write_dump(tmp_path / "my" / "Relu.A.1.0.1700000000000002", op_name="A", encoding="nano",
               inputs=[_spec(golden, 0x1000)], outputs=[_spec(golden + np.float32(0.5), 0x2000)])
    no_origin = {"dtype": "DT_FLOAT", "shape": {"dim": list(shape)}, "layout": "NCHW",
                 "attr": [{"key": "origin_format", "value": {"s": "NCHW"}},
                          {"key": "origin_shape", "value": {"list": {"val_type": 2, "i": list(shape)}}}]}

    def op(name, typ, i, originals, inputs=()):
        attr = [{"key": "_datadump_original_op_names", "value": {"list": {"val_type": 1, "s": originals}}}]
        return {"name": name, "type": typ, "id": i, "input": list(inputs), "attr": attr, "output_desc": [no_origin]}

    graph = tmp_path / "g.json"
    graph.write_text(json.dumps({"graph": [
        {"name": "main", "op": [op("x", "Data", 0, ["x"]), op("A", "Relu", 1, ["X"], ["x:0"])]},
        {"name": "body", "op": [op("arg", "Data", 0, ["arg"]), op("B", "Relu", 1, ["X"], ["arg:0"])]}]}))
    proc, ref, rc, got = _graph_peer_and_ours(msaccucmp, tmp_path, graph)
    assert len(got) == len(ref), (got, ref, proc.stdout[-1000:])
    _assert_rows_agree(ref, got, "per-graph origins")
    out = next(row for row in got[1:] if row[got[0].index("TensorIndex")] == "A:output:0")
    assert out[got[0].index("CosineSimilarity")] not in ("NaN", "")
