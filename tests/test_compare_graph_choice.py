"""Which graph and which ops a comparison blames: train and eval graphs that share op names, the same choice
from both engines and on every run, and an op fused into several whose later parts msaccucmp's rule leaves out."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fusebisect.cli.app import main
from fusebisect.compare.dumpfile import TensorSpec, write_dump

TS = 1700000000000000


def _op(name, typ, inputs, orig, origin, passes=(), multi=False):
    attr = [{"key": "_datadump_original_op_names", "value": {"list": {"val_type": 1, "s": orig}}}]
    if passes:
        attr.append({"key": "pass_name", "value": {"list": {"val_type": 1, "s": list(passes)}}})
    if multi:
        attr.append({"key": "_datadump_is_multiop", "value": {"b": True}})
    desc = [{"key": "origin_format", "value": {"s": "ND"}}]
    if origin:
        desc += [{"key": "_datadump_origin_name", "value": {"s": origin}},
                 {"key": "_datadump_origin_output_index", "value": {"i": 0}}]
    return {"name": name, "type": typ, "input": inputs, "attr": attr, "output_desc": [{"attr": desc}]}


def _graph(name, ops):
    return {"name": name, "op": [dict(o, id=i) for i, o in enumerate(ops)]}


def _dump(d: Path, typ, name, n, ins, outs):
    d.mkdir(parents=True, exist_ok=True)
    write_dump(d / f"{typ}.{name}.{n}.0.{TS + 10 * n}", op_name=name, inputs=[TensorSpec(a) for a in ins],
               outputs=[TensorSpec(a) for a in outs], encoding="nano")


@pytest.fixture
def case(tmp_path):
    """A faulty fused MatMul+BiasAdd 'ab' against the unfused golden a, b, c (nano dumps, atc-JSON graphs)."""
    rng = np.random.default_rng(0)
    v = {k: rng.standard_normal((4, 8)).astype(np.float32) for k in "xabc"}
    bad = v["b"] + 0.5 * rng.standard_normal((4, 8)).astype(np.float32)
    golden = [_op("x", "Data", [], ["x"], "x"), _op("a", "MatMul", ["x:0"], ["a"], "a"),
              _op("b", "BiasAdd", ["a:0"], ["b"], "b"), _op("c", "Relu", ["b:0"], ["c"], "c")]
    for n, (t, nm, i) in enumerate([("Data", "x", []), ("MatMul", "a", ["x"]), ("BiasAdd", "b", ["a"]),
                                    ("Relu", "c", ["b"])]):
        _dump(tmp_path / "golden", t, nm, n, [v[k] for k in i], [v[nm]])
    for n, (t, nm, ins, o) in enumerate([("Data", "x", [], v["x"]), ("MatMul", "ab", [v["x"]], bad),
                                         ("Relu", "c", [bad], v["c"] + 0.5)]):
        _dump(tmp_path / "my", t, nm, n, ins, [o])

    def fused(p):
        return [_op("x", "Data", [], ["x"], "x"), _op("ab", "MatMul", ["x:0"], ["a", "b"], "b", [p]),
                _op("c", "Relu", ["ab:0"], ["c"], "c")]

    def write(name, doc):
        (tmp_path / name).write_text(json.dumps(doc))
        return tmp_path / name

    write("my_train_eval.json", {"graph": [_graph("train_graph", fused("TrainPass")),
                                           _graph("eval_graph", fused("EvalPass"))]})
    write("golden.json", {"graph": [_graph("train_graph", golden)]})
    write("my_train.json", {"graph": [_graph("train_graph", fused("TrainPass"))]})
    write("my_eval.json", {"graph": [_graph("eval_graph", fused("EvalPass"))]})
    _dump(tmp_path / "my_split", "Data", "x", 0, [], [v["x"]])
    _dump(tmp_path / "my_split", "MatMul", "x1", 1, [v["x"]], [v["a"]])
    _dump(tmp_path / "my_split", "MatMul", "x2", 2, [v["a"]], [bad])
    _dump(tmp_path / "my_split", "Relu", "c", 3, [bad], [v["c"] + 0.5])
    write("my_split.json", {"graph": [_graph("g", [
        _op("x", "Data", [], ["x"], "x"), _op("x1", "MatMul", ["x:0"], ["a", "b"], None, ["SplitMatMulPass"], True),
        _op("x2", "MatMul", ["x1:0"], ["a", "b"], "b", ["SplitMatMulPass"], True),
        _op("c", "Relu", ["x2:0"], ["c"], "c")])]})
    return tmp_path


def _first(capsys, *args):
    main(["compare", *map(str, args), "--json"])
    out = json.loads(capsys.readouterr().out)
    return out


def test_both_engines_take_the_first_op_of_a_name_in_a_file_of_two_graphs(case, capsys, msaccucmp):
    args = [case / "my", case / "golden", "--my-graph", case / "my_train_eval.json",
            "--golden-graph", case / "golden.json"]
    native = _first(capsys, *args)["first_divergence"]
    through = _first(capsys, *args, "--engine", "msaccucmp", "--msaccucmp", msaccucmp.script)["first_divergence"]
    assert (native["op"], native["pass_names"]) == (through["op"], through["pass_names"]) == ("ab", ["TrainPass"])


def _train_eval_tree(case: Path, golden_models=("train_graph/1",)) -> Path:
    t = case / "t"
    for model in ("train_graph/1", "eval_graph/2"):
        shutil.copytree(case / "my", t / "my" / "20260101000000" / "0" / model / "0")
    for model in golden_models:
        shutil.copytree(case / "golden", t / "golden" / "20260101000000" / "0" / model / "0")
    graphs = t / "graph" / "pid_1_deviceid_0"
    graphs.mkdir(parents=True)
    shutil.copy(case / "my_train.json", graphs / "ge_proto_00000001_graph_1_Build.txt")   # JSON, by content
    shutil.copy(case / "my_eval.json", graphs / "ge_proto_00000002_graph_2_Build.txt")
    return t


def test_a_train_and_eval_graph_directory_uses_the_graph_the_dumps_model_names(case, capsys):
    t = _train_eval_tree(case)
    leaf = t / "my" / "20260101000000" / "0" / "train_graph" / "1" / "0"
    out = _first(capsys, leaf, t / "golden", "--my-graph", t / "graph", "--golden-graph", case / "golden.json")
    assert out["first_divergence"]["pass_names"] == ["TrainPass"]
    assert any("whose graph train_graph the dumps' model directory names" in n for n in out["notes"])
    eval_leaf = t / "my" / "20260101000000" / "0" / "eval_graph" / "2" / "0"
    out = _first(capsys, eval_leaf, t / "golden", "--my-graph", t / "graph", "--golden-graph", case / "golden.json")
    assert out["first_divergence"]["pass_names"] == ["EvalPass"]


def test_the_leaf_compared_does_not_depend_on_the_hash_seed(case, tmp_path):
    """Both sides hold a train and an eval model of as many ops: the choice is the same every run (the model
    both sides' graphs name)."""
    t = _train_eval_tree(case, golden_models=("train_graph/1", "eval_graph/2"))
    seen = set()
    for seed in ("0", "1", "2", "3", "4", "5", "6", "7"):
        proc = subprocess.run([sys.executable, "-m", "fusebisect", "compare", str(t / "my"), str(t / "golden"),
                               "--my-graph", str(t / "graph"), "--golden-graph", str(case / "golden.json"), "--json"],
                              capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": seed}, timeout=120)
        out = json.loads(proc.stdout)
        seen.add((tuple(n.split(": compared")[-1] for n in out["notes"] if "hold models" in n),
                  tuple(out["first_divergence"]["pass_names"])))
    assert len(seen) == 1, seen
    [(_, passes)] = seen
    assert passes == ("TrainPass",)   # the model the golden graph names too, and its graph is the one used


def test_an_op_fused_into_several_is_not_left_out_silently(case, capsys):
    """x1 and x2 both carry [a, b]; msaccucmp's merged rule keeps x1 only. x2 (the faulty one) is named in
    unmatched, and the first divergence downstream of it says the divergence may start there, with its pass."""
    out = _first(capsys, case / "my_split", case / "golden", "--my-graph", case / "my_split.json",
                 "--golden-graph", case / "golden.json")
    assert any(u["op"] == "x2" and "msaccucmp's fusion rule keeps only the first" in u["reason"]
               for u in out["unmatched"])
    assert out["first_divergence"]["op"] == "c"
    assert any("c reads the output of x2, which was not compared" in n and "SplitMatMulPass" in n
               for n in out["notes"])


def test_an_op_name_holding_a_space_is_matched_to_its_dump_file(tmp_path, capsys):
    """CANN writes '_' for a space of an op name in its dump file's name: the fused op 'fc1 MatMul' is found, and
    the first divergence is it, with its pass (msaccucmp's lookup misses it)."""
    off = tmp_path / "off.cfg"
    off.write_text('{"Switch":{"GraphFusion":{"ALL":"off"},"UBFusion":{"ALL":"off"}}}')
    for side, extra in (("on", []), ("off", ["--fusion-switch-file", str(off)])):
        subprocess.run([sys.executable, "-m", "fusebisect.sim", "train", "--steps", "1", "--dump-step", "0",
                        "--faulty", "MatMulBiasAddFusionPass", "--dump-path", str(tmp_path / side / "dump"), *extra],
                       check=True, capture_output=True, timeout=120, cwd=tmp_path,   # (its fusion_result.json)
                       env={**os.environ, "DUMP_GE_GRAPH": "2", "DUMP_GRAPH_PATH": str(tmp_path / side / "graph")})
        for graph in (tmp_path / side / "graph").glob("*/*Build.txt"):
            graph.write_text(graph.read_text().replace('"fc1_MatMul', '"fc1 MatMul').replace('"fc1_BiasAdd',
                                                                                               '"fc1 BiasAdd'))
    out = _first(capsys, tmp_path / "on" / "dump", tmp_path / "off" / "dump", "--my-graph", tmp_path / "on" / "graph",
                 "--golden-graph", tmp_path / "off" / "graph")
    first = out["first_divergence"]
    assert (first["op"], first["pass_names"]) == ("fc1 MatMul", ["MatMulBiasAddFusionPass"])
    assert not any("no op of that name in the graph" in n for n in out["notes"])


def _sim(tmp_path: Path, side: str, *extra: str) -> Path:
    root = tmp_path / side
    subprocess.run([sys.executable, "-m", "fusebisect.sim", "train", "--steps", "6", "--faulty",
                    "MatMulBiasAddFusionPass", "--dump-path", str(root / "dump"), *extra], check=True,
                   capture_output=True, timeout=120, cwd=tmp_path,   # (where it writes its fusion_result.json)
                   env={**os.environ, "DUMP_GE_GRAPH": "2", "DUMP_GRAPH_PATH": str(root / "graph")})
    return root


def _rename_model(root: Path, name: str) -> None:
    [model] = root.glob("dump/*/0/sim_train_graph")
    model.rename(model.parent / name)
    for graph in (root / "graph").glob("*/*Build.txt"):
        graph.write_text(graph.read_text().replace("sim_train_graph", name))


def test_tensorflow_model_names_of_two_runs_match_without_their_timestamps(tmp_path, capsys):
    """GE names a TF model ge_default_<run timestamp>_<id>: the fused run (steps 0 and 5 dumped) and the unfused
    one (step 0) share step 0, which is compared, not each side's own latest step."""
    off = tmp_path / "off.cfg"
    off.write_text('{"Switch":{"GraphFusion":{"ALL":"off"},"UBFusion":{"ALL":"off"}}}')
    on = _sim(tmp_path, "on", "--dump-step", "0,5")
    unfused = _sim(tmp_path, "unfused", "--dump-step", "0", "--fusion-switch-file", str(off))
    _rename_model(on, "ge_default_20211016164504_1")
    _rename_model(unfused, "ge_default_20211016180613_1")
    out = _first(capsys, on / "dump", unfused / "dump", "--my-graph", on / "graph", "--golden-graph",
                 unfused / "graph")
    assert out["first_divergence"]["pass_names"] == ["MatMulBiasAddFusionPass"]
    assert any("iteration 0 only" in n for n in out["notes"])
    assert not any("no (device, model, iteration) in common" in n for n in out["notes"])


def test_a_model_the_graph_does_not_name_is_not_compared_instead_of_the_one_it_does(tmp_path, capsys):
    """An eval model dumped at a later step on both sides: the train model, which --my-graph describes, is
    compared (it diverges), not the eval model's one op ('no divergence', exit 0)."""
    off = tmp_path / "off.cfg"
    off.write_text('{"Switch":{"GraphFusion":{"ALL":"off"},"UBFusion":{"ALL":"off"}}}')
    roots = [_sim(tmp_path, "on", "--dump-step", "0"),
             _sim(tmp_path, "unfused", "--dump-step", "0", "--fusion-switch-file", str(off))]
    for root in roots:
        [leaf] = root.glob("dump/*/0/sim_train_graph/*/0")
        evaluation = leaf.parent.parent.parent / "eval_graph" / "2" / "1"
        evaluation.mkdir(parents=True)
        for data in leaf.glob("Data.x.*"):
            shutil.copy(data, evaluation)
    on, unfused = roots
    assert main(["compare", str(on / "dump"), str(unfused / "dump"), "--my-graph", str(on / "graph"),
                 "--golden-graph", str(unfused / "graph"), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["first_divergence"]["pass_names"] == ["MatMulBiasAddFusionPass"]
