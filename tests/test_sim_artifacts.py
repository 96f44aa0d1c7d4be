"""Every artifact the simulator writes, read back by fusebisect's own readers (and by the real msaccucmp)."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

import numpy as np
import pytest

from fusebisect.compare.dumpfile import read_dump
from fusebisect.compare.formats import to_original
from fusebisect.compare.graph import find_build_graphs, load_graph, write_atc_json
from fusebisect.compare.overflow import analyse, decode_record
from fusebisect.compare.tree import scan_dumps, scan_golden
from fusebisect.rules.fired import fired_rules
from fusebisect.sim import RULE_KINDS
from fusebisect.sim.options import resolve
from fusebisect.sim.train import run


def sim(tmp_path: Path, *args: str, env: dict | None = None):
    base = {"ASCEND_WORK_PATH": str(tmp_path)}
    base.update(env or {})
    return run(resolve(list(args), base), stdout=io.StringIO(), stderr=io.StringIO())


def read_result_csv(out: Path) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the one result_*.csv msaccucmp wrote into ``out``."""
    (csv_path,) = out.glob("result_*.csv")
    with csv_path.open(newline="") as handle:
        rows = list(csv.reader(handle))
    return rows[0], rows[1:]


def leaf_dirs(root: Path) -> list[Path]:
    return sorted({p.parent for p in root.rglob("*") if p.is_file()})


@pytest.mark.parametrize("encoding", ["binary", "protobuf", "nano"])
def test_dump_tree_is_cann_shaped_and_readable(tmp_path, encoding):
    dump = tmp_path / "dump"
    result = sim(tmp_path, "--steps", "3", "--dump-step", "0,2", "--dump-path", str(dump), "--dump-encoding", encoding)
    tree = scan_dumps(dump)
    assert not tree.bad
    leaves = leaf_dirs(dump)
    assert [p.name for p in leaves] == ["0", "2"]
    for leaf in leaves:  # {time}/{device}/{model_name}/{model_id}/{step}
        rel = leaf.relative_to(dump).parts
        assert len(rel) == 5 and len(rel[0]) == 14 and rel[1] == "0" and rel[3] == "1"
    groups = tree.groups()
    assert len(groups) == 2
    compute = [n for n in result.compiled.graph.compute_nodes()]
    for entries in groups.values():
        stamps = [e.timestamp for e in entries]
        assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
        assert all(len(str(s)) == 16 for s in stamps)
        assert {e.op_name for e in entries} == {n.name for n in compute} | {"x", "labels"}
        by_name = {e.op_name: e for e in entries}
        # execution order = graph order
        order = [n.name for n in compute]
        assert sorted(order, key=lambda n: by_name[n].timestamp) == order
        for node in compute:
            entry = by_name[node.name]
            dump_file = read_dump(entry.path)
            assert entry.op_type == node.type and dump_file.encoding == encoding
            assert len(dump_file.inputs) == len(node.inputs) and len(dump_file.outputs) == 1
            out = dump_file.outputs[0]
            assert out.array().size == int(np.prod(node.shape))
            if node.fused:
                assert out.original_op == (node.origin(), 0)


def test_private_format_round_trips_and_fused_numerics(tmp_path):
    dump = tmp_path / "dump"
    sim(tmp_path, "--steps", "1", "--dump-step", "0", "--dump-path", str(dump))
    entry = next(e for e in scan_dumps(dump).entries if e.op_name == "fc1_MatMul")
    f = read_dump(entry.path)
    x, w_nz, bias = f.inputs
    assert w_nz.format_name == "FRACTAL_NZ" and w_nz.original_shape == (16, 40) and w_nz.shape != (16, 40)
    w = to_original(w_nz.array(), w_nz.format, w_nz.original_shape)
    expect = x.array() @ w + bias.array()
    np.testing.assert_allclose(f.outputs[0].array(), expect, rtol=1e-5, atol=1e-4)


def test_golden_is_the_unfused_graph_and_matches_fused_outputs(tmp_path):
    dump, golden = tmp_path / "dump", tmp_path / "golden"
    result = sim(tmp_path, "--steps", "1", "--dump-step", "0", "--dump-path", str(dump), "--dump-golden", str(golden))
    gold = scan_golden(golden)
    framework_ops = {"x", "labels", "ln_mean", "gelu_tanh", "sm_div", "ce_log", "ce_mean", "fc2_cast_out"}
    assert framework_ops <= {op for op, _ in gold}
    for entry in scan_dumps(dump).entries:
        node = result.compiled.graph.get(entry.op_name)
        if node is None or not node.fused:
            continue
        mine = read_dump(entry.path).outputs[0].array().astype(np.float64).ravel()
        ref = np.load(gold[(node.origin(), 0)].path).astype(np.float64).ravel()
        cos = mine @ ref / (np.linalg.norm(mine) * np.linalg.norm(ref))
        assert cos > 0.9999, node.name


def test_faulty_fused_op_diverges_from_golden(tmp_path):
    dump, golden = tmp_path / "dump", tmp_path / "golden"
    sim(tmp_path, "--steps", "1", "--dump-step", "0", "--dump-path", str(dump), "--dump-golden", str(golden),
        "--faulty", "MulAddFusionPass")
    entry = next(e for e in scan_dumps(dump).entries if "FusedMulAdd" in e.op_name)
    mine = read_dump(entry.path).outputs[0].array()
    ref = np.load(scan_golden(golden)[("res_add", 0)].path)
    assert np.max(np.abs(mine - ref)) > 0.1


def test_graph_dumps_and_fired_rules(tmp_path):
    graphs = tmp_path / "graphs"
    result = sim(tmp_path, "--steps", "1", env={"DUMP_GE_GRAPH": "2", "DUMP_GRAPH_PATH": str(graphs)})
    [folder] = graphs.iterdir()   # as GE writes them: a folder per process
    assert folder.name == f"pid_{os.getpid()}_deviceid_0"
    names = sorted(p.name for p in folder.iterdir())
    assert names == ["ge_proto_00000000_graph_1_PreRunBegin.txt", "ge_proto_00000001_graph_1_Build.txt"]
    assert [p.name for p in find_build_graphs(graphs)] == ["ge_proto_00000001_graph_1_Build.txt"]
    build = load_graph(graphs)
    original = load_graph(folder / names[0])
    assert not any(op.pass_names or op.ub_pass_name for op in original.ops)
    assert {op.name for op in original.ops} >= {"ln_mean", "gelu_tanh", "sm_exp"}
    ln = build.op("ln_LayerNorm")
    assert ln.pass_names == ["AReduceMeanFusionPass", "MulSquareFusionPass", "LayerNormFusionPass"]
    assert ln.original_op_names[0] == "ln_mean" and ln.outputs[0].origin_name == "ln_out"
    assert ln.outputs[0].origin_output_index == 0 and ln.outputs[0].origin_shape == (60, 40)
    ub = next(op for op in build.ops if op.ub_pass_name == "TbeEltwiseFusionPass")
    assert ub.fusion_scope is not None and "res_add" in ub.original_op_names
    fired = fired_rules(tmp_path)
    assert set(fired) == result.compiled.fired()
    assert all(fired[r].kind == RULE_KINDS[r] for r in fired)
    # DUMP_GRAPH_LEVEL=3: final graph only
    only = tmp_path / "only"
    sim(tmp_path, "--steps", "1", env={"DUMP_GE_GRAPH": "2", "DUMP_GRAPH_PATH": str(only), "DUMP_GRAPH_LEVEL": "3"})
    assert [p.name for p in only.rglob("ge_proto_*")] == ["ge_proto_00000000_graph_1_Build.txt"]


@pytest.mark.parametrize("layout", ["old", "new"])
def test_overflow_records_point_at_the_overflowing_op(tmp_path, layout):
    dump = tmp_path / "dump"
    result = sim(tmp_path, "--steps", "2", "--overflow", "--dump-path", str(dump), "--opdebug-layout", layout,
                 "--dump-encoding", "nano")
    assert result.overflow_steps == [0, 1]
    tree = scan_dumps(dump)
    debug = [e for e in tree.entries if e.op_type == "Opdebug"]
    ops = [e for e in tree.entries if e.op_type != "Opdebug"]
    assert len(debug) == 1 and [e.op_name for e in ops] == ["fc1_MatMul"]
    records = decode_record(bytes(read_dump(debug[0].path).outputs[0].array()))
    hit = [r for r in records if any(r.status_words)]
    assert len(hit) == 1 and hit[0].layout == layout
    assert (hit[0].task_id, hit[0].stream_id) == (ops[0].task_id, ops[0].stream_id)
    assert debug[0].task_id != ops[0].task_id
    report = analyse(dump)
    assert [o.op_name for o in report.overflows] == ["fc1_MatMul"]
    out = read_dump(ops[0].path).outputs[0]
    assert out.dtype_name == "float16" and not np.all(np.isfinite(out.array()))


def test_one_step_dump_tree_is_small(tmp_path):
    dump, golden = tmp_path / "dump", tmp_path / "golden"
    sim(tmp_path, "--steps", "1", "--dump-step", "0", "--dump-path", str(dump), "--dump-golden", str(golden))
    size = sum(p.stat().st_size for p in dump.rglob("*") if p.is_file())
    assert 0 < size < 20 * 1024 * 1024


@pytest.mark.msaccucmp
@pytest.mark.slow
def test_msaccucmp_maps_fused_ops_to_the_recorded_originals(tmp_path, msaccucmp):
    dump, golden, graphs = tmp_path / "dump", tmp_path / "golden", tmp_path / "graphs"
    result = sim(tmp_path, "--steps", "1", "--dump-step", "0", "--dump-path", str(dump), "--dump-golden", str(golden),
                 "--dump-encoding", "nano", env={"DUMP_GE_GRAPH": "2", "DUMP_GRAPH_PATH": str(graphs)})
    fused_json = write_atc_json(load_graph(graphs), tmp_path / "fused.json")
    (leaf,) = leaf_dirs(dump)
    out = tmp_path / "out"
    proc = msaccucmp.run("compare", "-m", str(leaf), "-g", str(golden), "-f", str(fused_json), "-out", str(out))
    # rc 2: the graph's Variable/Const ops have no dump (CANN does not dump them either); the CSV is complete
    assert proc.returncode in (0, 2), proc.stdout[-2000:] + proc.stderr[-2000:]
    header, rows = read_result_csv(out)
    col = {name: header.index(name) for name in ("NPUDump", "GroundTruth", "TensorIndex", "CosineSimilarity")}
    fused = [n for n in result.compiled.graph.compute_nodes() if n.fused]
    assert len(fused) >= 5
    for node in fused:
        out_rows = [r for r in rows if r[col["NPUDump"]] == node.name and r[col["TensorIndex"]] ==
                    f"{node.name}:output:0"]
        assert len(out_rows) == 1, node.name
        row = out_rows[0]
        assert row[col["GroundTruth"]].split(",") == node.originals()
        cosine = float(row[col["CosineSimilarity"]])
        assert np.isfinite(cosine) and cosine > 0.999, (node.name, cosine)


@pytest.mark.msaccucmp
def test_msaccucmp_fused_vs_unfused_with_close_graph_agrees_with_ours(tmp_path, msaccucmp):
    """msaccucmp -f/-cf on the simulator's fused (one faulty rule) and fusion-off nano dumps: it maps every fused
    op through the recorded originals, and fusebisect's own fused-vs-unfused compare gives the same cosines."""
    from fusebisect.compare.engine import compare_dumps

    all_off = tmp_path / "all-off.cfg"
    all_off.write_text('{"Switch":{"GraphFusion":{"ALL":"off"},"UBFusion":{"ALL":"off"}}}\n')
    runs = {}
    for side, extra in (("on", ["--faulty", "MatMulBiasAddFusionPass"]), ("off", ["--fusion-switch-file", str(all_off)])):
        root = tmp_path / side
        result = sim(root, "--steps", "1", "--dump-step", "0", "--dump-path", str(root / "dump"), "--dump-encoding",
                     "nano", *extra, env={"DUMP_GE_GRAPH": "2", "DUMP_GRAPH_PATH": str(root / "graph")})
        (leaf,) = leaf_dirs(root / "dump")
        runs[side] = (result, leaf, write_atc_json(load_graph(root / "graph"), root / f"{side}.json"))
    (fused_result, my_leaf, fused_json), (_, golden_leaf, close_json) = runs["on"], runs["off"]
    out = tmp_path / "out"
    proc = msaccucmp.run("compare", "-m", str(my_leaf), "-g", str(golden_leaf), "-f", str(fused_json), "-cf",
                         str(close_json), "-out", str(out))
    assert proc.returncode in (0, 2), proc.stdout[-2000:] + proc.stderr[-2000:]
    header, rows = read_result_csv(out)
    col = {name: header.index(name) for name in ("NPUDump", "GroundTruth", "TensorIndex", "CosineSimilarity")}
    theirs = {r[col["TensorIndex"]]: r for r in rows}

    ours = {r.tensor: r for r in compare_dumps(my_leaf, golden_leaf, my_graph=fused_json,
                                               golden_graph=close_json).rows}
    fused = [n for n in fused_result.compiled.graph.compute_nodes() if n.fused]
    assert len(fused) >= 5
    for node in fused:
        tensor = f"{node.name}:output:0"
        row = theirs[tensor]
        assert row[col["GroundTruth"]].split(",") == node.originals()
        assert abs(float(row[col["CosineSimilarity"]]) - ours[tensor].cosine) < 1e-6, tensor
    # the faulty rule's fused op is where both tools see the divergence
    assert float(theirs["fc1_MatMul:output:0"][col["CosineSimilarity"]]) < 0.99
    # and the whole CSVs agree row for row, the Cast ops GE inserted included (msaccucmp compares a Cast's output
    # with the origin of the op before the cast, fc2_cast_w's then having no golden dump)
    from fusebisect.cli.app import main

    assert main(["compare", str(my_leaf), str(golden_leaf), "--my-graph", str(fused_json), "--golden-graph",
                 str(close_json), "--csv", str(tmp_path / "ours.csv")]) == 1
    with (tmp_path / "ours.csv").open(newline="") as handle:
        mine = list(csv.reader(handle))
    assert mine[0] == header and len(mine) - 1 == len(rows)
    for got, want in zip(mine[1:], rows):
        for name, a, b in zip(header, got, want):
            close = a == b or (name in ("CosineSimilarity", "MaxAbsoluteError") and abs(float(a) - float(b)) < 1e-6)
            assert close, (name, got, want)
    assert any("There is no the ground truth dump file for fc2_cast_w:output:0." in cell
               for cell in theirs["fc2_cast_w:output:0"])
