"""fusion_result.json reading and fired-rule collection, plus the inspect graph / rules fired commands."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fusebisect.cli.app import main
from fusebisect.compare.graph import model_def_to_text
from fusebisect.errors import GraphFormatError
from fusebisect.proto import ge_ir_pb2
from fusebisect.rules.fired import fired_rules, read_fusion_result, read_fusion_result_per_graph

SESSION_STYLE = {
    "session_and_graph_id_0_1": {
        "graph_fusion": {
            "ConvBatchnormFusionPass": {"effect_times": "2", "match_times": "3"},
            "ZeroEffectFusionPass": {"effect_times": "0", "match_times": "5"},
        },
        "ub_fusion": {"AutomaticUbFusion": {"effect_times": "1", "match_times": "1", "repository_hit_times": "4"}},
    },
    "session_and_graph_id_0_2": {
        "graph_fusion": {"ConvBatchnormFusionPass": {"effect_times": 1, "match_times": 1}},
    },
}
GRAPHID_STYLE = {"graphId": "7", "sessionId": "0",
                 "graph_fusion": {"ConvBatchnormFusionPass": {"effect_times": "4", "match_times": "4"}},
                 "ub_fusion": {"TbeEltwiseFusionPass": {"effect_times": "0", "match_times": "2",
                                                        "repository_hit_times": "0"}}}


def _stats(path):
    return {(s.name, s.kind): (s.match_times, s.effect_times, s.repository_hit_times, s.graphs)
            for s in read_fusion_result(path)}


@pytest.mark.parametrize("sep", ["", "\n", "\n\n  \t", "\r\n"])
def test_concatenated_objects_with_any_whitespace(tmp_path, sep):
    path = tmp_path / "fusion_result.json"
    path.write_text(json.dumps(SESSION_STYLE, indent=4) + sep + json.dumps(GRAPHID_STYLE) + sep)
    assert _stats(path) == {
        ("ConvBatchnormFusionPass", "GraphFusion"):
            (8, 7, 0, ["session_and_graph_id_0_1", "session_and_graph_id_0_2", "session_0_graph_7"]),
        ("ZeroEffectFusionPass", "GraphFusion"): (5, 0, 0, []),
        ("AutomaticUbFusion", "UBFusion"): (1, 1, 4, ["session_and_graph_id_0_1"]),
        ("TbeEltwiseFusionPass", "UBFusion"): (2, 0, 0, []),
    }
    per_graph = read_fusion_result_per_graph(path)
    assert list(per_graph) == ["session_and_graph_id_0_1", "session_and_graph_id_0_2", "session_0_graph_7"]
    assert [(s.name, s.effect_times) for s in per_graph["session_and_graph_id_0_2"]] == [
        ("ConvBatchnormFusionPass", 1)]


def test_braces_inside_strings_do_not_split_objects(tmp_path):
    doc = {"session_and_graph_id_0_1": {"graph_fusion": {"Weird}{Pass": {"effect_times": "1",
                                                                          "match_times": "1"}}}}
    path = tmp_path / "fusion_result.json"
    path.write_text(json.dumps(doc) + json.dumps(doc))
    assert _stats(path) == {("Weird}{Pass", "GraphFusion"): (2, 2, 0, ["session_and_graph_id_0_1"])}


# GE's newer writer: a JSON array of per-graph objects, each naming its graph by "session_and_graph_id" (as in
# the statistics CANN's own tools ship as test data)
ARRAY_STYLE = """[{
    "graph_fusion": {
        "ConstToAttrGatherV2Fusion": {
            "effect_times": "0",
            "match_times": "1"
        },
        "RefreshInt64ToInt32FusionPass": {
            "effect_times": "1",
            "match_times": "1"
        }
    },
    "session_and_graph_id": "0_11"
},{"graph_fusion": {"RefreshInt64ToInt32FusionPass": {"effect_times": "2", "match_times": "2"}},
   "ub_fusion": {"TbeEltwiseFusionPass": {"effect_times": "1", "match_times": "1"}},
   "session_and_graph_id": "0_12"}]"""


def test_an_array_of_per_graph_objects_reads_like_concatenated_ones(tmp_path):
    path = tmp_path / "fusion_result.json"
    path.write_text(ARRAY_STYLE)
    assert _stats(path) == {
        ("ConstToAttrGatherV2Fusion", "GraphFusion"): (1, 0, 0, []),
        ("RefreshInt64ToInt32FusionPass", "GraphFusion"):
            (3, 3, 0, ["session_and_graph_id_0_11", "session_and_graph_id_0_12"]),
        ("TbeEltwiseFusionPass", "UBFusion"): (1, 1, 0, ["session_and_graph_id_0_12"]),
    }
    # the same labels as GE's nested form, so a run's graphs line up with the baseline's whichever form
    assert list(read_fusion_result_per_graph(path)) == ["session_and_graph_id_0_11", "session_and_graph_id_0_12"]
    # an array followed by another object (appended by a later compile) reads on
    path.write_text(ARRAY_STYLE + "\n" + json.dumps(GRAPHID_STYLE))
    assert _stats(path)[("ConvBatchnormFusionPass", "GraphFusion")] == (4, 4, 0, ["session_0_graph_7"])
    assert main(["rules", "fired", str(path), "--json"]) == 0


@pytest.mark.parametrize("content, reason", [
    ("", "empty file"),
    ("   \n", "empty file"),
    ('{"session_and_graph_id_0_1": {"graph_fusion": {', "line 1, column"),
    ('{"a": 1}\n{"b": ', "line 2, column"),
    ("[1, 2]", "element 1 of the array at line 1, column 1 is int, expected an object"),
    ("\n[{\"graphId\": \"1\"}, []]", "element 2 of the array at line 2, column 1 is list"),
    ("[{\"graphId\": \"1\"} {\"graphId\": \"2\"}]", "line 1, column 19: expected ',' or ']'"),
    ("[{\"graphId\": \"1\"},", "line 1, column 19"),
    ("7", "expected an object or an array of objects, got int"),
    ('{"graphId": "1", "graph_fusion": []}', "is not an object"),
    ('{"graphId": "1", "graph_fusion": {"P": {"effect_times": "x"}}}', "is not a count"),
    ('{"graphId": "1", "graph_fusion": {"P": {"effect_times": -1}}}', "negative"),
    ('{"graphId": "1", "graph_fusion": {"P": 3}}', "is not an object"),
    ('{"graph": [{"op": []}]}', "not a fusion_result.json"),
])
def test_malformed_fusion_result(tmp_path, content, reason):
    path = tmp_path / "fusion_result.json"
    path.write_text(content)
    with pytest.raises(GraphFormatError) as info:
        read_fusion_result(path)
    assert reason in str(info.value) and str(info.value).startswith(str(path))


_SEED = (json.dumps(SESSION_STYLE, indent=2) + "\n" + json.dumps(GRAPHID_STYLE)).encode()


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(_SEED) - 1), st.integers(0, 8),
                          st.sampled_from([b"", b"{", b"}", b'"', b"-1", b"x", b"\n", b"[", b"\xff", b":"])),
                min_size=1, max_size=5))
def test_fuzz_mutated_fusion_result_raises_only_graph_format_error(tmp_path_factory, edits):
    buf = bytearray(_SEED)
    for pos, length, insert in edits:
        buf[pos:pos + length] = insert
    path = tmp_path_factory.mktemp("fuzz") / "fusion_result.json"
    path.write_bytes(bytes(buf))
    try:
        stats = read_fusion_result(path)
    except GraphFormatError as exc:
        assert str(exc).startswith(str(path)) and "\n" not in str(exc)
    else:
        assert all(s.effect_times >= 0 and s.match_times >= 0 for s in stats)


def _graph_text(ops) -> str:
    m = ge_ir_pb2.ModelDef(name="net")
    g = m.graph.add(name="ge_default_1")
    for i, (name, passes, ub) in enumerate(ops):
        op = g.op.add(name=name, type="Conv2D", id=i + 1)
        if passes:
            op.attr["pass_name"].list.s.extend(p.encode() for p in passes)
        if ub:
            op.attr["pass_name_ub"].s = ub.encode()
        op.output_desc.add().attr["_datadump_origin_name"].s = name.encode()
    return model_def_to_text(m)


def test_fired_rules_from_a_work_directory(tmp_path):
    work = tmp_path / "ascend_work"
    (work / "sub").mkdir(parents=True)
    (work / "sub" / "fusion_result.json").write_text(json.dumps(SESSION_STYLE) + "\n" + json.dumps(GRAPHID_STYLE))
    graphs = tmp_path / "ascend_work" / "graphs"
    graphs.mkdir()
    (graphs / "ge_proto_00000100_graph_1_Build.txt").write_text(_graph_text([
        ("a", ["ConvBatchnormFusionPass", "OnlyInGraphPass"], "TbeEltwiseFusionPass"),
        ("b", ["OnlyInGraphPass"], None), ("c", [], None)]))
    (graphs / "ge_proto_00000050_PreRunBegin.txt").write_text(_graph_text([("z", ["NotBuildStagePass"], None)]))
    got = {n: (s.kind, s.effect_times, s.match_times) for n, s in fired_rules(work).items()}
    assert got == {
        "AutomaticUbFusion": ("UBFusion", 1, 1),
        "ConvBatchnormFusionPass": ("GraphFusion", 7, 8),
        "OnlyInGraphPass": ("GraphFusion", 2, 2),         # counted from the ops carrying it
        "TbeEltwiseFusionPass": ("UBFusion", 1, 1),       # effect 0 in the statistics, but on a Build op
    }
    assert "ZeroEffectFusionPass" not in got and "NotBuildStagePass" not in got
    # where it took effect: the statistics' graphs (the Build graph dumped is one of them, under its own name)
    assert fired_rules(work)["ConvBatchnormFusionPass"].graphs == ["session_and_graph_id_0_1",
                                                                   "session_and_graph_id_0_2", "session_0_graph_7"]
    assert fired_rules(work)["OnlyInGraphPass"].graphs == ["ge_default_1"]


def test_fired_rules_of_single_files_and_empty_dir(tmp_path):
    res = tmp_path / "stats.json"
    res.write_text(json.dumps(GRAPHID_STYLE))
    assert list(fired_rules(res)) == ["ConvBatchnormFusionPass"]
    g = tmp_path / "graph.txt"
    g.write_text(_graph_text([("a", ["P"], "U")]))
    assert {n: s.kind for n, s in fired_rules(g).items()} == {"P": "GraphFusion", "U": "UBFusion"}
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(GraphFormatError, match="no fusion_result.json"):
        fired_rules(empty)


def test_graphs_of_the_same_name_from_several_sessions_all_count(tmp_path):
    # Two sessions (or builds) each dump a graph_1: what fired in either fired (compare's mapping keeps the later).
    for session, ops in (("session0", [("fc1", ["MatMulBiasAddFusionPass"], None), ("ln", ["X"], None)]),
                         ("session1", [("ln", ["LayerNormFusionPass", "X"], None)])):
        (tmp_path / session).mkdir()
        (tmp_path / session / "ge_proto_00000005_graph_1_Build.txt").write_text(_graph_text(ops))
    got = {n: s.effect_times for n, s in fired_rules(tmp_path).items()}
    assert got == {"LayerNormFusionPass": 1, "MatMulBiasAddFusionPass": 1, "X": 2}


def test_the_stage_copies_of_a_built_graph_count_once(tmp_path, capsys):
    """GE's default stage list dumps the built graph as PreRunAfterOptimizeGraphBeforeBuild, Build and
    PreRunAfterBuild: one build, one count each (a folder without the final Build stage still counts its own)."""
    ops = [("ln_LayerNorm", ["LayerNormFusionPass"], None), ("fused_add_relu", [], "TbeEltwiseFusionPass")]
    for name in ("ge_proto_00000300_PreRunAfterOptimizeGraphBeforeBuild.txt", "ge_proto_00000320_Build.txt",
                 "ge_proto_00000321_PreRunAfterBuild.txt"):
        (tmp_path / "graph" / name).parent.mkdir(exist_ok=True)
        (tmp_path / "graph" / name).write_text(_graph_text(ops))
    got = {n: (s.effect_times, s.match_times) for n, s in fired_rules(tmp_path / "graph").items()}
    assert got == {"LayerNormFusionPass": (1, 1), "TbeEltwiseFusionPass": (1, 1)}
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "ge_proto_00000007_PreRunAfterBuild.txt").write_text(_graph_text(ops[:1]))
    assert fired_rules(tmp_path)["LayerNormFusionPass"].effect_times == 2
    # stages are told apart per graph: graph_2 without a final Build stage keeps its own
    (tmp_path / "g").mkdir()
    for name, rule in (("graph_1_PreRunAfterBuild", "RuleA"), ("graph_1_Build", "RuleA"),
                       ("graph_2_PreRunAfterBuild", "RuleB")):
        (tmp_path / "g" / f"ge_proto_00000001_{name}.txt").write_text(_graph_text([("x", [rule], None)]))
    assert {n: s.effect_times for n, s in fired_rules(tmp_path / "g").items()} == {"RuleA": 1, "RuleB": 1}
    assert main(["rules", "fired", str(tmp_path / "graph"), "--json"]) == 0
    assert {r["name"]: r["effect_times"] for r in json.loads(capsys.readouterr().out)["rules"]} == {
        "LayerNormFusionPass": 1, "TbeEltwiseFusionPass": 1}


def test_an_unreadable_graph_does_not_hide_the_other_evidence(tmp_path, capsys):
    (tmp_path / "fusion_result.json").write_text(json.dumps(GRAPHID_STYLE))
    graph = tmp_path / "graph" / "ge_proto_00000001_graph_1_Build.txt"
    graph.parent.mkdir()
    graph.write_text(_graph_text([("a", ["OnlyInGraphPass"], None)])[:60])   # cut off mid-write
    with pytest.raises(GraphFormatError, match="not a readable GE graph text"):
        fired_rules(tmp_path)   # strict by default
    unreadable: list[str] = []
    assert list(fired_rules(tmp_path, unreadable=unreadable)) == ["ConvBatchnormFusionPass"]
    assert len(unreadable) == 1 and unreadable[0].startswith(str(graph))
    assert main(["rules", "fired", str(tmp_path), "--json"]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert [r["name"] for r in doc["rules"]] == ["ConvBatchnormFusionPass"] and doc["unreadable"] == unreadable
    assert captured.err.startswith(f"warning: skipped {graph}")
    (tmp_path / "fusion_result.json").write_text("{")   # nothing readable left: an error, not "nothing fired"
    assert main(["rules", "fired", str(tmp_path)]) == 2


def test_an_onnx_style_graph_dump_is_refused_not_read_as_empty(tmp_path, capsys):
    onnx = tmp_path / "ge_onnx_00000001_graph_1_Build.pbtxt"
    onnx.write_text('ir_version: 3\nproducer_name: "GE"\ngraph {\n  node {\n    name: "fc1"\n'
                    '    op_type: "ge:MatMulV2"\n  }\n  name: "graph_1"\n}\n')
    for cmd in (["rules", "fired"], ["inspect", "graph"]):
        assert main([*cmd, str(onnx)]) == 2
        assert "an ONNX-style graph dump (ge_onnx_*.pbtxt, for Netron); give the ge_proto_*.txt" in \
            capsys.readouterr().err
    assert main(["inspect", "graph", str(onnx), "--limit", "-1"]) == 2
    assert "--limit must be 0 (all) or more, got -1" in capsys.readouterr().err


def test_json_nested_too_deeply_is_a_format_error_not_a_crash(tmp_path, capsys):
    deep = tmp_path / "fusion_result.json"
    deep.write_text("[" * 100_000)
    for cmd in (["rules", "fired"], ["inspect", "graph"]):
        assert main([*cmd, str(deep)]) == 2
        assert "nested too deeply" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------- CLI
def test_cli_rules_fired_json_and_table(tmp_path, capsys):
    res = tmp_path / "fusion_result.json"
    res.write_text(json.dumps(SESSION_STYLE))
    assert main(["rules", "fired", str(res), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc == {"rules": [
        {"name": "AutomaticUbFusion", "kind": "UBFusion", "effect_times": 1, "match_times": 1,
         "repository_hit_times": 4, "graphs": 1},   # (the table's 'repo hits' and 'graphs' columns)
        {"name": "ConvBatchnormFusionPass", "kind": "GraphFusion", "effect_times": 3, "match_times": 4,
         "repository_hit_times": 0, "graphs": 2}],
        "unreadable": []}
    assert main(["rules", "fired", str(res)]) == 0
    out = capsys.readouterr().out
    assert "ConvBatchnormFusionPass" in out and "ZeroEffectFusionPass" not in out


def test_cli_rules_fired_table_shows_names_as_they_are_and_whole_in_a_pipe(tmp_path, capsys):
    """Names come from the job's own files: "[/y]" or "[bold]" in one is text, not console markup, and a long
    name stays on one line in a pipe (so `rules fired | grep NAME` finds it)."""
    long_name = "TbeReduceElemwiseFusionPass" + "X" * 60
    res = tmp_path / "fusion_result.json"
    res.write_text(json.dumps({"session_and_graph_id_0_1": {"graph_fusion": {
        name: {"match_times": "1", "effect_times": "1"}
        for name in ("X[/y]Pass", "[bold]LayerNormFusionPass", long_name)}}}))
    assert main(["rules", "fired", str(res)]) == 0
    lines = capsys.readouterr().out.splitlines()
    for name in ("X[/y]Pass", "[bold]LayerNormFusionPass", long_name):
        assert any(line.split()[0] == name for line in lines if line.split()), name


def test_cli_inspect_graph_list_keeps_pass_names_whole_in_a_pipe(tmp_path, capsys):
    """`inspect graph --fused | grep NAME` finds the op a pass fused: in a pipe no name is folded in two."""
    passes = ["AReduceMeanFusionPass", "MulSquareFusionPass", "LayerNormFusionPass"]
    g = tmp_path / "ge_proto_00000001_Build.txt"
    g.write_text(_graph_text([("ln_LayerNorm_with_a_rather_long_scope_name", passes, "TbeEltwiseFusionPass"),
                              ("relu", [], None)]))
    assert main(["inspect", "graph", str(g), "--fused"]) == 0
    out = capsys.readouterr().out
    for name in [*passes, "TbeEltwiseFusionPass", "ln_LayerNorm_with_a_rather_long_scope_name"]:
        assert sum(name in line for line in out.splitlines()) == 1, (name, out)


def test_cli_inspect_graph_op_json(tmp_path, capsys):
    g = tmp_path / "ge_proto_00000001_Build.txt"
    g.write_text(_graph_text([("layer1/conv.fused", ["ConvBatchnormFusionPass"], "AutomaticUbFusion"),
                              ("relu", [], None)]))
    assert main(["inspect", "graph", str(g), "--op", "layer1/conv.fused", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc == {"name": "layer1/conv.fused", "type": "Conv2D", "id": 1, "graph": "ge_default_1",
                   "pass_names": ["ConvBatchnormFusionPass"], "ub_pass_name": "AutomaticUbFusion",
                   "original_op_names": [], "original_op_types": [], "fusion_scope": None, "multi_op": False,
                   "l1_fusion_sub_graph_no": None, "inputs": [],
                   "outputs": [{"index": 0, "origin_name": "layer1/conv.fused", "origin_output_index": None,
                                "origin_format": None, "origin_shape": None}], "also_in": [],
                   "same_name_ops": []}
    # what the detail view prints is in the JSON too: the original ops' types, fusion_scope, multi-op, L1 sub-graph
    m = ge_ir_pb2.ModelDef(name="net")
    op = m.graph.add(name="g").op.add(name="fused", type="Conv2D", id=1)
    op.attr["_datadump_original_op_names"].list.s.extend([b"conv", b"bn"])
    op.attr["_datadump_original_op_types"].list.s.extend([b"Conv2D", b"BatchNorm"])
    op.attr["fusion_scope"].i = 7
    op.attr["_datadump_is_multiop"].b = True
    op.attr["_L1_fusion_sub_graph_no"].s = b"3"
    g.write_text(model_def_to_text(m))
    assert main(["inspect", "graph", str(g), "--op", "fused", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["original_op_names"], doc["original_op_types"], doc["fusion_scope"], doc["multi_op"],
            doc["l1_fusion_sub_graph_no"]) == (["conv", "bn"], ["Conv2D", "BatchNorm"], 7, True, "3")
    assert main(["inspect", "graph", str(g), "--op", "fused"]) == 0
    out = capsys.readouterr().out
    assert "conv (Conv2D), bn (BatchNorm)" in out and "fusion_scope        : 7" in out
    g.write_text(_graph_text([("layer1/conv.fused", ["ConvBatchnormFusionPass"], "AutomaticUbFusion"),
                              ("relu", [], None)]))
    # the dump-file spelling of the name finds the op too
    assert main(["inspect", "graph", str(g), "--op", "layer1_conv_fused", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "layer1/conv.fused"
    assert main(["inspect", "graph", str(g), "--op", "layer1/conv.fused"]) == 0
    out = capsys.readouterr().out
    assert "ConvBatchnormFusionPass" in out and "AutomaticUbFusion" in out


def test_cli_inspect_graph_finds_dump_spellings_and_every_op_of_a_name(tmp_path, capsys):
    m = ge_ir_pb2.ModelDef(name="net")
    main_graph = m.graph.add(name="main")
    main_graph.op.add(name="layer 1\\conv.0[x]", type="Conv2D", id=1)
    for sub, typ in (("body", "MatMulV2"), ("cond", "Less")):
        m.graph.add(name=sub).op.add(name="cell", type=typ, id=1)
    g = tmp_path / "g.txt"
    g.write_text(model_def_to_text(m))
    # a dump file writes '.', '/', '\\' and spaces as '_'
    assert main(["inspect", "graph", str(g), "--op", "layer_1_conv_0[x]"]) == 0
    assert "layer 1\\conv.0[x]  type Conv2D" in capsys.readouterr().out   # printed as it is, not as markup
    assert main(["inspect", "graph", str(g), "--op", "cell", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["also_in"] == ["cond"] and [(o["graph"], o["type"]) for o in doc["same_name_ops"]] == [("cond", "Less")]
    # one name in a loop's body and cond, looked up by its dump-file spelling: found (not "no op")
    m.graph.add(name="body2").op.add(name="loop/add", type="Add", id=3)
    m.graph.add(name="cond2").op.add(name="loop/add", type="Add", id=7)
    g.write_text(model_def_to_text(m))
    assert main(["inspect", "graph", str(g), "--op", "loop_add", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["name"] == "loop/add" and doc["also_in"] == ["cond2"]
    assert main(["inspect", "graph", str(g), "--op", "cell"]) == 0
    captured = capsys.readouterr()
    assert "type MatMulV2" in captured.out and "type Less" in captured.out
    assert "2 ops are named cell, in graphs body, cond" in captured.err


def test_cli_inspect_graph_unknown_op_suggests(tmp_path, capsys):
    g = tmp_path / "g.txt"
    g.write_text(_graph_text([("conv1_fused", ["P"], None), ("relu1", [], None)]))
    assert main(["inspect", "graph", str(g), "--op", "conv1_fuse"]) == 1
    assert "did you mean conv1_fused" in capsys.readouterr().err


def test_cli_inspect_graph_list(tmp_path, capsys):
    g = tmp_path / "g.txt"
    g.write_text(_graph_text([("conv1_fused", ["P"], None), ("relu1", [], None)]))
    assert main(["inspect", "graph", str(g), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["op_count"], doc["fused_count"], doc["graphs"]) == (2, 1, ["ge_default_1"])
    assert [o["name"] for o in doc["ops"]] == ["conv1_fused", "relu1"]
    assert main(["inspect", "graph", str(g), "--fused"]) == 0
    out = capsys.readouterr().out
    assert "conv1_fused" in out and "relu1" not in out


@pytest.mark.parametrize("cmd, content", [
    (["inspect", "graph"], b""),
    (["inspect", "graph"], b"graph { op { name: \"x\" "),
    (["rules", "fired"], b'{"graphId": "1", "graph_fusion": {'),
    (["rules", "fired"], b""),
])
def test_cli_bad_input_is_one_line_exit_2(tmp_path, capsys, cmd, content):
    path = tmp_path / "fusion_result.json" if cmd[0] == "rules" else tmp_path / "g.txt"
    path.write_bytes(content)
    assert main([*cmd, str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"fusebisect: error: {path}") and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("content", [b"{}", b'\xef\xbb\xbf{"s": {"graph_fusion": {"GeluFusionPass": '
                                           b'{"match_times": "1", "effect_times": "1"}}}}'])
def test_a_fusion_result_file_reads_as_in_a_directory(tmp_path, content):
    # named anything, with a BOM or empty: the file on its own is read as the directory scan reads it
    (tmp_path / "f.json").write_bytes(content)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "fusion_result.json").write_bytes(content)
    assert sorted(fired_rules(tmp_path / "f.json")) == sorted(fired_rules(tmp_path / "d"))
    (tmp_path / "x.json").write_text("nonsense")
    with pytest.raises(GraphFormatError, match="malformed fusion_result JSON"):
        fired_rules(tmp_path / "x.json")


def test_a_graph_dumped_before_the_fusion_passes_is_no_evidence_that_nothing_fired(tmp_path, capsys):
    """`rules fired ge_proto_..._PreRunBegin.txt`: its ops carry no pass_name yet; '0 rules fired' (exit 0)
    would read as a compile that fused nothing. Refused as a folder without a Build graph is."""
    pre = tmp_path / "ge_proto_00000000_graph_1_PreRunBegin.txt"
    pre.write_text(_graph_text([("a", [], None)]))
    assert main(["rules", "fired", str(pre)]) == 2
    err = capsys.readouterr().err
    assert "a graph of stage graph_1_PreRunBegin, dumped before the fusion passes ran" in err and err.count("\n") == 1
    build = tmp_path / "ge_proto_00000001_graph_1_Build.txt"
    build.write_text(_graph_text([("a", ["ConvBatchnormFusionPass"], None)]))
    assert main(["rules", "fired", str(build), "--json"]) == 0
    assert [r["name"] for r in json.loads(capsys.readouterr().out)["rules"]] == ["ConvBatchnormFusionPass"]
