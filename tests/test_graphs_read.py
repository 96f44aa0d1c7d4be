"""Graph reading: the fast text parser must extract exactly what text_format.Parse + a walk of the message
gives, on printer output and on oddly formatted text; JSON/.pb inputs, Build-graph selection, errors, fuzz."""

from __future__ import annotations

import json
import os
import random

import pytest
from google.protobuf import text_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fusebisect.compare.graph import (
    Graph, OpInfo, OutputInfo, find_build_graphs, load_graph, model_def_to_text, write_atc_json,
)
from fusebisect.errors import GraphFormatError
from fusebisect.proto import dump_data_pb2, ge_ir_pb2

FORMAT_NAMES = {v: k[len("FORMAT_"):] for k, v in dump_data_pb2.OutputFormat.items()}


# ------------------------------------------------------------------ independent reference (protobuf walk)
def _dec(b: bytes) -> str:
    for enc in ("utf-8", "gbk"):
        try:
            return b.decode(enc)
        except UnicodeDecodeError:
            pass
    return b.decode("utf-8", "replace")


def _strs(a):
    if a is None:
        return None
    kind = a.WhichOneof("value")
    if kind == "list":
        return [_dec(x) for x in a.list.s]
    if kind == "s":
        return [_dec(a.s)]
    return None


def _s(a):
    if a is None:
        return None
    kind = a.WhichOneof("value")
    if kind == "s":
        return _dec(a.s)
    if kind == "i":
        return str(a.i)
    if kind == "list" and len(a.list.s):
        return _dec(a.list.s[0])
    return None


def _i(a):
    if a is None:
        return None
    kind = a.WhichOneof("value")
    if kind == "i":
        return a.i
    if kind == "list" and len(a.list.i):
        return a.list.i[0]
    return None


def reference_ops(model: ge_ir_pb2.ModelDef) -> list[OpInfo]:
    """OpInfo list from a fully parsed ModelDef, following graph.py's documented rules."""
    out = []
    for g in model.graph:
        ops = list(g.op)
        has_ids = any(op.id for op in ops)   # (file order kept either way)
        for op in ops:
            at = {k: op.attr[k] for k in op.attr}
            outputs = []
            for idx, d in enumerate(op.output_desc):
                da = {k: d.attr[k] for k in d.attr}
                f = da.get("origin_format") or da.get("_datadump_origin_format")
                fmt = None
                if f is not None:
                    if f.WhichOneof("value") == "s":
                        fmt = _dec(f.s)
                        fmt = fmt[7:] if fmt.startswith("FORMAT_") else fmt
                    elif _i(f) is not None:
                        fmt = FORMAT_NAMES.get(_i(f), str(_i(f)))
                shape = None
                if "origin_shape" in da and da["origin_shape"].WhichOneof("value") == "list":
                    shape = tuple(da["origin_shape"].list.i)
                outputs.append(OutputInfo(idx, _s(da.get("_datadump_origin_name")),
                                          _i(da.get("_datadump_origin_output_index")), fmt, shape))
            multi = at.get("_datadump_is_multiop")
            out.append(OpInfo(
                name=op.name, type=op.type, id=op.id if has_ids else None, graph=g.name, inputs=list(op.input),
                pass_names=[p for p in (_strs(at.get("pass_name")) or []) if p],
                ub_pass_name=_s(at.get("pass_name_ub")) or None,
                original_op_names=_strs(at.get("_datadump_original_op_names")) or [],
                original_op_types=_strs(at.get("_datadump_original_op_types")) or [],
                fusion_scope=_i(at.get("fusion_scope")),
                is_multiop=bool(multi.b) if multi is not None and multi.WhichOneof("value") == "b" else False,
                l1_fusion_sub_graph_no=_s(at.get("_L1_fusion_sub_graph_no")) or None,
                outputs=outputs,
                origin_empty=_strs(at.get("_datadump_original_op_names")) == []))
    return out


def check_same(tmp_path, text: str, name="ge_proto_00000001_Build.txt") -> list[OpInfo]:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    ours = load_graph(path).ops
    ref = reference_ops(text_format.Parse(text, ge_ir_pb2.ModelDef()))
    assert ours == ref
    return ours


# ------------------------------------------------------------------ fixture models
def _attr_list_s(op_or_desc, key, values):
    a = op_or_desc.attr[key]
    a.list.val_type = ge_ir_pb2.AttrDef.ListValue.VT_LIST_STRING
    a.list.s.extend(v.encode() if isinstance(v, str) else v for v in values)


def sample_model() -> ge_ir_pb2.ModelDef:
    m = ge_ir_pb2.ModelDef(name="net", version=1)
    g = m.graph.add(name="ge_default_20240101000000_1")
    data = g.op.add(name="input", type="Data")          # id 0: not printed
    d = data.output_desc.add(name="y", dtype=ge_ir_pb2.DT_FLOAT, layout="NCHW")
    d.shape.dim.extend([1, 3, 4, 4])
    d.attr["origin_format"].s = b"NCHW"
    d.attr["origin_shape"].list.i.extend([1, 3, 4, 4])
    d.attr["origin_shape"].list.val_type = ge_ir_pb2.AttrDef.ListValue.VT_LIST_INT
    conv = g.op.add(name="conv1_fused", type="Conv2D", id=2, input=["input:0", "const_w:0", "input:-1"])
    _attr_list_s(conv, "_datadump_original_op_names", ["conv1", "bn1"])
    _attr_list_s(conv, "_datadump_original_op_types", ["Conv2D", "BatchNorm"])
    _attr_list_s(conv, "pass_name", ["ConvBatchnormFusionPass", "BatchNormBnInferFusionPass"])
    conv.attr["pass_name_ub"].s = b"TbeConvBnreluFusionPass"
    conv.attr["fusion_scope"].i = 7
    conv.attr["_datadump_is_multiop"].b = True
    conv.attr["_L1_fusion_sub_graph_no"].s = b"l1_3"
    conv.attr["strides"].list.i.extend([1, 1, 1, 1])
    conv.attr["_op_custom"].s = b'{"x": "}{"}'
    conv.attr["weights"].t.desc.dtype = ge_ir_pb2.DT_FLOAT16
    conv.attr["weights"].t.data = bytes(range(256)) * 4
    sub = conv.attr["_original_fusion_graph"].g
    sub.name = "orig"
    sop = sub.op.add(name="conv1", type="Conv2D")
    _attr_list_s(sop, "pass_name", ["ShouldNotBeSeen"])
    idesc = conv.input_desc.add(name="x", layout="NCHW")
    idesc.attr["origin_format"].s = b"NCHW"
    od = conv.output_desc.add(name="y", dtype=ge_ir_pb2.DT_FLOAT16, layout="NC1HWC0")
    od.shape.dim.extend([1, 1, 4, 4, 16])
    od.attr["origin_format"].i = 0
    od.attr["origin_shape"].list.i.extend([1, 2, 4, 4])
    od.attr["_datadump_origin_name"].s = b"bn1"
    od.attr["_datadump_origin_output_index"].i = 0
    od2 = conv.output_desc.add(name="z")
    od2.attr["_datadump_origin_format"].s = b"FORMAT_NHWC"
    od2.attr["origin_shape"].list.val_type = ge_ir_pb2.AttrDef.ListValue.VT_LIST_INT  # scalar: empty list
    relu = g.op.add(name="relu1", type="Relu", id=3, input=["conv1_fused:0"])
    relu.attr["pass_name"].s = b"SinglePassAsString"
    relu.attr["_datadump_original_op_names"].list.s.append("ré/lu\u4e2d".encode())
    relu.output_desc.add().attr["_datadump_origin_name"].s = "\u4e2d\u6587".encode("gbk")  # GBK bytes
    c = g.op.add(name="const_w", type="Const", id=1)
    c.attr["value"].t.data = b"\x00\"\\\n}{" * 10
    sg = m.graph.add(name="subgraph_0")
    sg.op.add(name="sub_data", type="Data")
    sg.op.add(name="sub_add", type="Add", input=["sub_data:0"])
    return m


def test_printer_output_matches_reference(tmp_path):
    ops = check_same(tmp_path, model_def_to_text(sample_model()))
    names = [o.name for o in ops]
    # file order (msaccucmp numbers ops in it), not id order (const_w has id 1)
    assert names == ["input", "conv1_fused", "relu1", "const_w", "sub_data", "sub_add"]
    assert [o.id for o in ops[:4]] == [0, 2, 3, 1]
    conv = ops[1]
    assert conv.pass_names == ["ConvBatchnormFusionPass", "BatchNormBnInferFusionPass"]
    assert conv.ub_pass_name == "TbeConvBnreluFusionPass"
    assert conv.original_op_names == ["conv1", "bn1"] and conv.original_op_types == ["Conv2D", "BatchNorm"]
    assert (conv.fusion_scope, conv.is_multiop, conv.l1_fusion_sub_graph_no) == (7, True, "l1_3")
    assert conv.inputs == ["input:0", "const_w:0", "input:-1"] and conv.data_inputs == ["input:0", "const_w:0"]
    assert conv.outputs[0] == OutputInfo(0, "bn1", 0, "NCHW", (1, 2, 4, 4))
    assert conv.outputs[1] == OutputInfo(1, None, None, "NHWC", ())
    assert ops[0].id == 0 and ops[0].outputs[0].origin_shape == (1, 3, 4, 4)
    relu = ops[2]
    assert relu.pass_names == ["SinglePassAsString"] and relu.original_op_names == ["ré/lu中"]
    assert relu.outputs[0].origin_name == "中文"          # GBK bytes decoded as GBK
    assert [o.graph for o in ops[-2:]] == ["subgraph_0"] * 2 and ops[-1].id is None
    assert conv.is_fused and not ops[0].is_fused


ODD_TEXT = r'''# a comment { with a brace and "a quote
name: "net" graph { name: "g#1" op { name: "in\"put" type: 'Data' id: 0x0 } op { name: "a\\b\x41\344\270\255"
type: "Conv2D" id: 5; input: ["in\"put:0", "x:-1"] , attr { value { list { val_type: VT_LIST_STRING s: "a" s: "b" } }
key: "_datadump_original_op_names" } attr < key: "pass_name" value < list { s: ["P1", "P" "2"] } > >
attr { key: "pass_name_ub"
  value { s: "U\x42" } } attr{key:"fusion_scope" value{i:-3}}attr{key:"_datadump_is_multiop" value{b:True}}
attr { key: "junk" value { g { op { attr { key: "pass_name" value { s: "hidden" } } } } } }  # trailing
output_desc { attr { key: "origin_format" value { s: "ND" } } attr { key: "origin_shape" value { list {
i: [2, 3] } } } attr { key: "_datadump_origin_output_index" value { i: 1 } } }
output_desc: { attr: { key: "_datadump_origin_name", value: { s: "o#k" } } }
} }
'''


def test_odd_formatting_matches_reference(tmp_path):
    ops = check_same(tmp_path, ODD_TEXT)
    assert [o.name for o in ops] == ["in\"put", "a\\bA中"]
    op = ops[1]
    assert op.id == 5 and op.graph == "g#1"
    assert op.original_op_names == ["a", "b"] and op.pass_names == ["P1", "P2"]
    assert op.ub_pass_name == "UB" and op.fusion_scope == -3 and op.is_multiop
    assert op.outputs == [OutputInfo(0, None, 1, "ND", (2, 3)), OutputInfo(1, "o#k", None, None, None)]


def test_deep_nesting_beyond_the_skip_regex(tmp_path):
    m = sample_model()
    a = m.graph[0].op[2].attr["deep"]
    for _ in range(20):  # deeper than the one-regex skip handles: the slow path counts braces
        a = a.func.attr["n"]
    a.s = b"}{ deep"
    check_same(tmp_path, model_def_to_text(m))


def test_one_line_printer_output(tmp_path):
    check_same(tmp_path, text_format.MessageToString(sample_model(), as_one_line=True))


def test_raw_non_utf8_bytes_are_decoded_leniently(tmp_path):
    gbk = "卷积".encode("gbk")
    data = (b'graph { name: "g" op { name: "' + gbk + b'" type: "Conv2D" attr { key: "pass_name" value { s: "P\xff\xfe" } } } }')
    path = tmp_path / "g.txt"
    path.write_bytes(data)
    op = load_graph(path).ops[0]
    assert op.name == "卷积"
    assert op.pass_names[0].startswith("P") and "\ufffd" in op.pass_names[0]


# ------------------------------------------------------------------ random models vs the reference
_names = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=0x4FFF, blacklist_categories=("Cs",)),
                 max_size=8)


@st.composite
def models(draw):
    m = ge_ir_pb2.ModelDef(name=draw(_names))
    for gi in range(draw(st.integers(1, 2))):
        g = m.graph.add(name=draw(_names))
        for oi in range(draw(st.integers(0, 4))):
            op = g.op.add(name=draw(_names), type=draw(_names), id=draw(st.integers(0, 5)))
            op.input.extend(draw(st.lists(_names, max_size=2)))
            for key in draw(st.lists(st.sampled_from(["pass_name", "pass_name_ub", "_datadump_original_op_names",
                                                      "fusion_scope", "_datadump_is_multiop", "other", "origin_format",
                                                      "_L1_fusion_sub_graph_no"]), max_size=4)):
                kind = draw(st.sampled_from(["s", "i", "b", "list_s", "list_i"]))
                a = op.attr[key]
                if kind == "s":
                    a.s = draw(st.binary(max_size=6))
                elif kind == "i":
                    a.i = draw(st.integers(-2**63, 2**63 - 1))
                elif kind == "b":
                    a.b = draw(st.booleans())
                elif kind == "list_s":
                    a.list.s.extend(draw(st.lists(st.binary(max_size=4), max_size=3)))
                    a.list.val_type = 1
                else:
                    a.list.i.extend(draw(st.lists(st.integers(-5, 5), max_size=3)))
            for _ in range(draw(st.integers(0, 2))):
                d = op.output_desc.add(name=draw(_names))
                for key in draw(st.lists(st.sampled_from(["origin_format", "origin_shape", "_datadump_origin_name",
                                                          "_datadump_origin_output_index", "x"]), max_size=3)):
                    if key == "origin_shape":
                        d.attr[key].list.i.extend(draw(st.lists(st.integers(0, 9), max_size=4)))
                    elif key in ("origin_format", "_datadump_origin_output_index"):
                        d.attr[key].i = draw(st.integers(0, 50))
                    else:
                        d.attr[key].s = draw(st.binary(max_size=5))
    return m


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(models(), st.booleans())
def test_random_models_match_reference(tmp_path, model, one_line):
    text = text_format.MessageToString(model, as_one_line=one_line)
    check_same(tmp_path, text)


# ------------------------------------------------------------------ fuzz: only GraphFormatError escapes
_SEED_TEXT = model_def_to_text(sample_model()).encode()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_fuzz_mutated_text_raises_only_graph_format_error(tmp_path, data):
    buf = bytearray(_SEED_TEXT)
    for _ in range(data.draw(st.integers(1, 6))):
        op = data.draw(st.sampled_from(["flip", "delete", "insert", "truncate"]))
        pos = data.draw(st.integers(0, max(0, len(buf) - 1)))
        if op == "flip" and buf:
            buf[pos] = data.draw(st.sampled_from(list(b'{}<>[]:;,"\'\\#\n 0aZ\xff\x00')))
        elif op == "delete":
            del buf[pos:pos + data.draw(st.integers(1, 40))]
        elif op == "insert":
            buf[pos:pos] = data.draw(st.sampled_from([b"{", b"}", b'"', b"attr {", b"value {", b"\\", b"#",
                                                      b"[", b"op {", b":", b"\\x", b"\\777"]))
        else:
            del buf[pos:]
    path = tmp_path / "fuzz.txt"
    path.write_bytes(bytes(buf))
    try:
        graph = load_graph(path)
    except GraphFormatError as exc:
        assert str(exc).startswith(str(path)) and "\n" not in str(exc)
    else:
        assert isinstance(graph, Graph)


# ------------------------------------------------------------------ other inputs
def test_binary_pb_and_atc_json_give_the_same_ops(tmp_path):
    m = sample_model()
    txt = tmp_path / "ge_proto_00000002_Build.txt"
    txt.write_text(model_def_to_text(m), encoding="utf-8")
    pb = tmp_path / "model.pb"
    pb.write_bytes(m.SerializeToString())
    from_txt = load_graph(txt)
    assert load_graph(pb).ops == from_txt.ops
    js = write_atc_json(from_txt, tmp_path / "model.json")
    again = load_graph(js).ops
    assert again == from_txt.ops
    doc = json.loads(js.read_text())
    conv = next(o for o in doc["graph"][0]["op"] if o["name"] == "conv1_fused")
    keys = {a["key"]: a["value"] for a in conv["output_desc"][0]["attr"]}
    assert keys["origin_format"] == {"s": "NCHW"}
    assert keys["origin_shape"] == {"list": {"val_type": 2, "i": [1, 2, 4, 4]}}
    assert keys["_datadump_origin_output_index"] == {"i": 0}      # a JSON number, not "0"
    assert {"key": "_datadump_original_op_names",
            "value": {"list": {"val_type": 1, "s": ["conv1", "bn1"]}}} in conv["attr"]


def test_json_with_string_integers_and_map_attrs(tmp_path):
    doc = {"graph": [{"name": "g", "op": [
        {"name": "a", "type": "Add", "id": "3", "attr": {"pass_name": {"list": {"s": ["P"]}}},
         "output_desc": [{"attr": [{"key": "_datadump_origin_output_index", "value": {"i": "2"}}]}]}]}]}
    path = tmp_path / "x.json"
    path.write_text(json.dumps(doc))
    op = load_graph(path).ops[0]
    assert (op.id, op.pass_names, op.outputs[0].origin_output_index) == (3, ["P"], 2)


def test_build_graph_selection(tmp_path):
    text = model_def_to_text(sample_model())
    (tmp_path / "a").mkdir()
    for name in ["ge_proto_00000010_PreRunBegin.txt", "ge_proto_00000123_graph_1_Build.txt",
                 "a/ge_proto_00000200_Build.txt", "ge_onnx_00000123_graph_1_Build.pbtxt", "ge_proto_x.txt"]:
        (tmp_path / name).write_text(text)
    found = [p.relative_to(tmp_path).as_posix() for p in find_build_graphs(tmp_path)]
    assert found == ["ge_proto_00000123_graph_1_Build.txt", "a/ge_proto_00000200_Build.txt"]
    merged = load_graph(tmp_path)       # same graph names in both files: the later dump wins, no duplicates
    assert [o.name for o in merged.ops] == [o.name for o in load_graph(tmp_path / found[0]).ops]


def test_the_newer_run_folder_of_a_graph_dump_path_wins(tmp_path):
    """GE writes each process's graphs to DUMP_GRAPH_PATH/pid_{pid}_deviceid_{id}/, where runs accumulate: the
    graph of the newer run wins, whatever the folder names' order (pid 10234 sorts before pid 9876)."""
    old, new = tmp_path / "pid_9876_deviceid_0", tmp_path / "pid_10234_deviceid_0"
    for folder, passes in ((old, 'attr { key: "pass_name" value { list { s: "MatMulBiasAddFusionPass" } } } '),
                           (new, "")):
        folder.mkdir()
        (folder / "ge_proto_00000001_graph_1_Build.txt").write_text(
            f'graph {{ name: "g" op {{ name: "fc1_MatMul" type: "MatMulV2" {passes}}} }}\n')
    os.utime(old / "ge_proto_00000001_graph_1_Build.txt", ns=(1_700_000_000_000_000_000,) * 2)
    os.utime(new / "ge_proto_00000001_graph_1_Build.txt", ns=(1_700_000_100_000_000_000,) * 2)
    assert [p.parent.name for p in find_build_graphs(tmp_path)] == [old.name, new.name]
    assert [o.pass_names for o in load_graph(tmp_path).ops] == [[]]
    os.utime(old / "ge_proto_00000001_graph_1_Build.txt", ns=(1_700_000_200_000_000_000,) * 2)
    assert [o.pass_names for o in load_graph(tmp_path).ops] == [["MatMulBiasAddFusionPass"]]


@pytest.mark.parametrize("content, reason", [
    (b"", "empty file"),
    (b"  \n\t ", "empty file"),
    (b'graph { op { name: "x" ', "end of file"),
    (b'graph { op { name: "unterminated } }', "unterminated string"),
    (b"graph { op { id: abc } }", "expected an integer"),
    (b'graph { op { name "x" } }', "expected ':'"),
    (b'graph { op { attr { key: "pass_name" value { s: "\\q" } } } }', "invalid escape"),
    (b'{"graph": [{"op": [{"type": "x"}]}]}', "no string \"name\""),
    (b'{"graph": [', "invalid JSON"),
    (b"\x08\x96\x01\x12garbage\xff\xff\xff", "not a ge.proto.ModelDef"),
    (b'name: "only a name"', "contains no graph"),
])
def test_bad_input_is_one_line_graph_format_error(tmp_path, content, reason):
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    with pytest.raises(GraphFormatError) as info:
        load_graph(path)
    msg = str(info.value)
    assert reason in msg and msg.startswith(str(path)) and "\n" not in msg


def test_missing_path_and_empty_dir(tmp_path):
    with pytest.raises(GraphFormatError, match="cannot read"):
        load_graph(tmp_path / "nope.txt")
    with pytest.raises(GraphFormatError, match="no Build-stage graph"):
        load_graph(tmp_path)


def test_large_generated_graph_matches_reference(tmp_path):
    rng = random.Random(1)
    m = ge_ir_pb2.ModelDef(name="big")
    g = m.graph.add(name="g")
    for i in range(300):
        op = g.op.add(name=f"op/{i}", type=rng.choice(["Add", "Mul"]), id=i + 1, input=[f"op/{i - 1}:0"])
        if rng.random() < 0.3:
            _attr_list_s(op, "pass_name", [f"P{rng.randrange(5)}"])
            op.attr["pass_name_ub"].s = b"UB"
        op.attr["noise"].list.s.extend([b"x" * rng.randrange(50)] * 3)
        d = op.output_desc.add()
        d.attr["_datadump_origin_name"].s = f"orig{i}".encode()
        d.attr["origin_shape"].list.i.extend([rng.randrange(1, 9) for _ in range(4)])
    check_same(tmp_path, model_def_to_text(m))


@pytest.mark.parametrize("snake", [False, True])
def test_protobufs_own_json_mapping_reads_like_the_text_format(tmp_path, snake):
    from google.protobuf import json_format

    model = sample_model()
    text, js = tmp_path / "g.txt", tmp_path / "g.json"
    text.write_text(model_def_to_text(model))
    js.write_text(json_format.MessageToJson(model, preserving_proto_field_name=snake))   # bytes as base64
    want, got = load_graph(text).ops, load_graph(js).ops
    assert [(o.name, o.pass_names, o.ub_pass_name, o.original_op_names, o.outputs) for o in got] == \
        [(o.name, o.pass_names, o.ub_pass_name, o.original_op_names, o.outputs) for o in want]
    assert any(o.pass_names for o in got)


def test_an_empty_original_op_list_is_told_from_an_absent_one(tmp_path):
    """An op GE inserted carries the attribute with an empty list (msaccucmp reads ['']); an op without the
    attribute is not such an op."""
    model = ge_ir_pb2.ModelDef(name="m")
    graph = model.graph.add(name="g")
    inserted = graph.op.add(name="trans_Mul_0", type="Mul", id=1)
    inserted.attr["_datadump_original_op_names"].list.val_type = 1
    graph.op.add(name="plain", type="Relu", id=2)
    ops = check_same(tmp_path, text_format.MessageToString(model))
    assert [(o.name, o.original_op_names, o.origin_empty) for o in ops] == [("trans_Mul_0", [], True),
                                                                             ("plain", [], False)]


def test_protobufs_json_of_an_unfused_graph_keeps_its_output_origins(tmp_path):
    """No op-level string attribute to tell the JSON forms apart (an unfused graph): protobuf's field names
    (outputDesc) do, and the outputs' origins are read as from the .pb, not silently dropped."""
    from google.protobuf import json_format

    model = ge_ir_pb2.ModelDef()
    op = model.graph.add(name="g").op.add(name="fc1_MatMul", type="MatMulV2", id=1)
    desc = op.output_desc.add()
    desc.attr["_datadump_origin_name"].s = b"fc1_BiasAdd"
    desc.attr["origin_format"].s = b"ND"
    (tmp_path / "m.pb").write_bytes(model.SerializeToString())
    (tmp_path / "m.json").write_text(json_format.MessageToJson(model))
    want, got = load_graph(tmp_path / "m.pb").ops, load_graph(tmp_path / "m.json").ops
    assert [o.outputs for o in got] == [o.outputs for o in want]
    assert got[0].outputs[0].origin_name == "fc1_BiasAdd"


def test_a_graph_without_ops_is_one_graph_and_said_to_hold_none(tmp_path, capsys):
    """A GraphDef with a name and no ops is a graph: 'in 1 graph(s)' and its name in the JSON (it read as 0
    graphs), with a warning that it holds no ops."""
    from fusebisect.cli.app import main

    path = tmp_path / "ge_proto_00000001_graph_1_Build.txt"
    path.write_text('graph {\n  name: "empty_g"\n}\n', encoding="utf-8")
    assert main(["inspect", "graph", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["graphs"], doc["op_count"]) == (["empty_g"], 0)
    assert main(["inspect", "graph", str(path)]) == 0
    err = capsys.readouterr().err
    assert "0 ops in 1 graph(s), 0 fused" in err and "its graphs hold no ops" in err
