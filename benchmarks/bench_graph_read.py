"""Benchmark: reading a GE graph dump (``ge_proto_*_Build.txt``) with fusebisect's selective parser vs
``google.protobuf.text_format.Parse`` + a walk of the parsed message, on the same generated file, side by side.

Usage: python benchmarks/bench_graph_read.py [--ops 100000] [--keep DIR]

The generated graph mimics a real Build-stage dump written by protobuf's printer (DUMP_GE_GRAPH=2): every op
has ~20 attrs (kernel names, strides/pads lists, name maps, fusion attrs on fused ops), input/output descs with
shapes and origin attrs, edge bookkeeping fields; a few Const ops carry weight tensors. Both readers must
produce identical OpInfo lists; the script prints both times and the ratio (target >= 5x).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

from google.protobuf import text_format

from fusebisect.compare.graph import load_graph, ops_from_raw_graphs, raw_graphs_from_proto
from fusebisect.proto import ge_ir_pb2

_TYPES = ["Conv2D", "BatchNorm", "Relu", "MatMulV2", "Add", "Mul", "Cast", "TransData", "Reshape", "Softmax"]
_FORMATS = ["NCHW", "NHWC", "ND"]


def _s(key: str, value: str, ind: str) -> str:
    return (f'{ind}attr {{\n{ind}  key: "{key}"\n{ind}  value {{\n{ind}    s: "{value}"\n'
            f'{ind}  }}\n{ind}}}\n')


def _i(key: str, value: int, ind: str) -> str:
    return f'{ind}attr {{\n{ind}  key: "{key}"\n{ind}  value {{\n{ind}    i: {value}\n{ind}  }}\n{ind}}}\n'


def _b(key: str, value: bool, ind: str) -> str:
    v = "true" if value else "false"
    return f'{ind}attr {{\n{ind}  key: "{key}"\n{ind}  value {{\n{ind}    b: {v}\n{ind}  }}\n{ind}}}\n'


def _list(key: str, kind: str, items, ind: str) -> str:
    vt = {"s": "VT_LIST_STRING", "i": "VT_LIST_INT"}[kind]
    body = "".join(f'{ind}      {kind}: "{x}"\n' if kind == "s" else f"{ind}      {kind}: {x}\n" for x in items)
    return (f'{ind}attr {{\n{ind}  key: "{key}"\n{ind}  value {{\n{ind}    list {{\n{body}'
            f'{ind}      val_type: {vt}\n{ind}    }}\n{ind}  }}\n{ind}}}\n')


def _desc(shape, fmt: str, ind: str, origin: tuple[str, int] | None) -> str:
    dims = "".join(f"{ind}  dim: {d}\n" for d in shape)
    out = [f"{ind}name: \"\"\n{ind}dtype: DT_FLOAT16\n{ind}shape {{\n{dims}{ind}}}\n{ind}layout: \"{fmt}\"\n"]
    out.append(_s("origin_format", fmt, ind))
    out.append(_list("origin_shape", "i", shape, ind))
    out.append(_i("format", 3, ind))
    out.append(_b("origin_shape_initialized", True, ind))
    out.append(_i("_fe_imply_type", 6, ind))
    if origin is not None:
        out.append(_s("_datadump_origin_name", origin[0], ind))
        out.append(_i("_datadump_origin_output_index", origin[1], ind))
    out.append(f"{ind}size: {2 * max(1, len(shape)) * 64}\n{ind}real_dim_cnt: {len(shape)}\n")
    return "".join(out)


def _op(idx: int, rng: random.Random) -> str:
    ind = "    "
    typ = _TYPES[idx % len(_TYPES)]
    name = f"model/block{idx // 50}/layer{idx % 50}/{typ.lower()}_{idx}"
    fused = idx % 7 == 0
    shape = [rng.choice([1, 8, 32]), rng.choice([16, 64, 128]), 14, 14]
    fmt = _FORMATS[idx % 3]
    parts = [f'  op {{\n{ind}name: "{name}"\n{ind}type: "{typ}"\n']
    if idx:
        parts.append(f'{ind}input: "op_{idx - 1}:0"\n')
        parts.append(f'{ind}input: "op_{max(0, idx - 2)}:-1"\n')
    attrs = [
        _s("_kernelname", f"te_{typ.lower()}_{idx:08x}", ind),
        _s("_ge_attr_op_kernel_lib_name", "AIcoreEngine", ind),
        _s("data_format", fmt, ind),
        _list("strides", "i", [1, 1, 1, 1], ind),
        _list("dilations", "i", [1, 1, 1, 1], ind),
        _list("pads", "i", [0, 0, 0, 0], ind),
        _list("_input_name_key", "s", ["x", "filter"], ind),
        _list("_input_name_value", "i", [0, 1], ind),
        _list("_output_name_key", "s", ["y"], ind),
        _b("_is_fusion_op", fused, ind),
        _i("_fe_imply_type", 6, ind),
        _s("_op_compile_strategy", "{}", ind),
        _i("_stream_label_idx", idx % 3, ind),
        _s("_op_custom_info", '{\\"x\\": [1, 2]}', ind),
    ]
    originals = [f"tf/{name}/orig{k}" for k in range(3 if fused else 1)]
    attrs.append(_list("_datadump_original_op_names", "s", originals, ind))
    attrs.append(_list("_datadump_original_op_types", "s", [typ] * len(originals), ind))
    if fused:
        attrs.append(_list("pass_name", "s", ["ConvBatchnormFusionPass", "BatchNormBnInferFusionPass"], ind))
        attrs.append(_s("pass_name_ub", "TbeConvBnreluFusionPass", ind))
        attrs.append(_i("fusion_scope", idx, ind))
    if idx % 1000 == 1:  # a Const with weights
        data = "".join(f"\\{rng.randrange(256):03o}" for _ in range(2048))
        attrs.append(f'{ind}attr {{\n{ind}  key: "value"\n{ind}  value {{\n{ind}    t {{\n{ind}      desc {{\n'
                     f'{ind}        dtype: DT_FLOAT16\n{ind}        shape {{\n{ind}          dim: 1024\n'
                     f'{ind}        }}\n{ind}        layout: "ND"\n{ind}      }}\n{ind}      data: "{data}"\n'
                     f'{ind}    }}\n{ind}  }}\n{ind}}}\n')
    parts.extend(attrs)
    parts.append(f"{ind}id: {idx}\n{ind}stream_id: {idx % 3}\n")
    parts.append(f'{ind}input_name: "x"\n{ind}src_name: "op_{idx - 1}"\n{ind}src_index: 0\n')
    parts.append(f'{ind}dst_name: "op_{idx + 1}"\n{ind}dst_index: 0\n{ind}input_i: {idx * 4096}\n'
                 f'{ind}output_i: {idx * 4096 + 2048}\n{ind}workspace: 0\n{ind}workspace_bytes: 0\n'
                 f'{ind}is_input_const: false\n')
    parts.append(f"{ind}input_desc {{\n{_desc(shape, fmt, ind + '  ', None)}{ind}}}\n")
    parts.append(f"{ind}input_desc {{\n{_desc([16, 16, 3, 3], fmt, ind + '  ', None)}{ind}}}\n")
    origin = (originals[-1], 0)
    parts.append(f"{ind}output_desc {{\n{_desc(shape, fmt, ind + '  ', origin)}{ind}}}\n")
    parts.append("  }\n")
    return "".join(parts)


def generate(path: Path, n_ops: int, seed: int = 0) -> Path:
    """Write a text-format ModelDef with ``n_ops`` ops to ``path``; return the path."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write('name: "bench_model"\ngraph {\n  name: "ge_default_20240101000000_1"\n')
        for i in range(n_ops):
            fh.write(_op(i, rng))
        fh.write("}\n")
    return path


def reference_read(path: Path):
    """text_format.Parse + walk: the OpInfo list the slow, complete way."""
    model = text_format.Parse(path.read_text(encoding="utf-8"), ge_ir_pb2.ModelDef())
    return ops_from_raw_graphs(raw_graphs_from_proto(model))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=100_000, help="ops in the generated graph (default 100000)")
    ap.add_argument("--keep", type=Path, default=None, help="write the graph into this directory and keep it")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        path = generate(folder / "ge_proto_00000001_graph_1_Build.txt", args.ops)
        size_mb = path.stat().st_size / 1e6
        print(f"graph: {args.ops} ops, {size_mb:.1f} MB")
        t0 = time.perf_counter()
        ours = load_graph(path).ops
        t_ours = time.perf_counter() - t0
        print(f"fusebisect load_graph       : {t_ours:8.2f} s  ({size_mb / t_ours:7.1f} MB/s)", flush=True)
        t0 = time.perf_counter()
        ref = reference_read(path)
        t_ref = time.perf_counter() - t0
        print(f"text_format.Parse + walk    : {t_ref:8.2f} s  ({size_mb / t_ref:7.1f} MB/s)")
        same = ours == ref
        print(f"identical extraction        : {same} ({len(ours)} ops, "
              f"{sum(op.is_fused for op in ours)} fused)")
        print(f"speed ratio (target >= 5x)  : {t_ref / t_ours:.1f}x")
        return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
