"""write_atc_json produces the fusion rule file the real msaccucmp accepts as -f: a fused op (conv1+bn1) is
compared against the golden bn1 output through our JSON, with finite metrics."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from fusebisect.compare.dumpfile import TensorSpec, write_dump
from fusebisect.compare.graph import load_graph, model_def_to_text, write_atc_json
from fusebisect.proto import ge_ir_pb2


def _fused_graph_text() -> str:
    m = ge_ir_pb2.ModelDef(name="net")
    g = m.graph.add(name="ge_default_20240101000000_1")

    def out_desc(op, shape, origin=None):
        d = op.output_desc.add(dtype=ge_ir_pb2.DT_FLOAT, layout="NCHW")
        d.shape.dim.extend(shape)
        d.attr["origin_format"].s = b"NCHW"
        d.attr["origin_shape"].list.i.extend(shape)
        d.attr["origin_shape"].list.val_type = ge_ir_pb2.AttrDef.ListValue.VT_LIST_INT
        if origin:
            d.attr["_datadump_origin_name"].s = origin.encode()
            d.attr["_datadump_origin_output_index"].i = 0

    def originals(op, names):
        a = op.attr["_datadump_original_op_names"]
        a.list.val_type = ge_ir_pb2.AttrDef.ListValue.VT_LIST_STRING
        a.list.s.extend(n.encode() for n in names)

    data = g.op.add(name="input", type="Data")
    out_desc(data, [1, 3, 4, 4])
    conv = g.op.add(name="conv1_fused", type="Conv2D", id=1, input=["input:0"])
    originals(conv, ["conv1", "bn1"])
    conv.attr["pass_name"].list.s.append(b"ConvBatchnormFusionPass")
    out_desc(conv, [1, 2, 4, 4], "bn1")
    relu = g.op.add(name="relu1", type="Relu", id=2, input=["conv1_fused:0"])
    originals(relu, ["relu1"])
    out_desc(relu, [1, 2, 4, 4], "relu1")
    return model_def_to_text(m)


@pytest.mark.msaccucmp
def test_msaccucmp_reads_our_atc_json(tmp_path, msaccucmp):
    graph_txt = tmp_path / "ge_proto_00000001_Build.txt"
    graph_txt.write_text(_fused_graph_text(), encoding="utf-8")
    fusion_json = write_atc_json(load_graph(graph_txt), tmp_path / "fused.json")

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 3, 4, 4)).astype(np.float32)
    conv1 = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
    bn1 = (conv1 * 0.5 + 0.1).astype(np.float32)
    relu1 = np.maximum(bn1, 0)
    golden = tmp_path / "golden"
    golden.mkdir()
    for i, (name, arr) in enumerate([("input", x), ("conv1", conv1), ("bn1", bn1), ("relu1", relu1)]):
        np.save(golden / f"{name}.0.170000000000000{i + 1}.npy", arr)
    noise = np.float32(1e-3)
    my = tmp_path / "my"
    my.mkdir()
    fmt_nchw = 0
    write_dump(my / "Data.input.0.0.1700000000000001", op_name="input", encoding="nano",
               inputs=[], outputs=[TensorSpec(x, format=fmt_nchw, original_shape=x.shape)])
    write_dump(my / "Conv2D.conv1_fused.1.0.1700000000000003", op_name="conv1_fused", encoding="nano",
               inputs=[TensorSpec(x, format=fmt_nchw, original_shape=x.shape)],
               outputs=[TensorSpec(bn1 + noise, format=fmt_nchw, original_shape=bn1.shape, original_op=("bn1", 0))])
    write_dump(my / "Relu.relu1.2.0.1700000000000004", op_name="relu1", encoding="nano",
               inputs=[TensorSpec(bn1 + noise, format=fmt_nchw, original_shape=bn1.shape)],
               outputs=[TensorSpec(relu1 + noise, format=fmt_nchw, original_shape=relu1.shape)])

    out = tmp_path / "out"
    proc = msaccucmp.run("compare", "-m", str(my), "-g", str(golden), "-f", str(fusion_json), "-out", str(out))
    assert proc.returncode in (0, 2), proc.stdout[-3000:] + proc.stderr[-3000:]
    results = sorted(out.glob("result_*.csv"))
    assert results, proc.stdout[-3000:]
    rows = list(csv.DictReader(results[-1].open(newline="")))
    fused = [r for r in rows if r["NPUDump"] == "conv1_fused" and r["TensorIndex"].endswith("output:0")]
    assert len(fused) == 1, rows
    row = fused[0]
    assert row["GroundTruth"] == "conv1,bn1"          # compared against the fused originals via our JSON
    cosine = float(row["CosineSimilarity"])
    max_abs = float(row["MaxAbsoluteError"])
    assert np.isfinite(cosine) and cosine > 0.9999
    assert max_abs == pytest.approx(1e-3, abs=2e-4)   # the noise we added to bn1, not conv1's difference
