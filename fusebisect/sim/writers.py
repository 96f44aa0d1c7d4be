"""Everything the simulated job writes, in CANN's formats and places.

* ``fusion_result.json`` (GE compile statistics) into ``ASCEND_WORK_PATH`` or the working directory;
* GE graph dumps ``ge_proto_<idx>_graph_1_<Stage>.txt`` (text-format ``ge.proto.ModelDef``): the framework graph
  as received (``PreRunBegin``) and the compiled graph (``Build``), in ``DUMP_GRAPH_PATH/pid_<pid>_deviceid_0/``
  as GE writes them (the working directory without DUMP_GRAPH_PATH);
* data dumps ``{dump_path}/{time}/{device}/{model_name}/{model_id}/{step}/{type}.{name}.{task}.{stream}.{ts}``;
* golden ``{op}.{idx}.{ts}.npy`` files of the unfused graph (a CPU/GPU-style reference run);
* ``Opdebug.Node_OpDebug.*`` overflow records (old or new layout) next to the overflowing op's dump.
"""

from __future__ import annotations

import io
import json
import os
import struct
import time
from pathlib import Path
from typing import Callable

import numpy as np

from fusebisect.fsutil import atomic_write_bytes, atomic_write_text
from fusebisect.sim.compiler import Compiled
from fusebisect.sim.graph import Graph, Node, execute
from fusebisect.sim.kernels import run_kernel

SESSION_KEY = "session_and_graph_id_0_1"
DEVICE_ID = "0"
MODEL_ID = "1"
STREAM_ID = 0
NZ_FORMAT = 29  # proto FORMAT_FRACTAL_NZ
ND_FORMAT = 2
CUBE_OVERFLOW_STATUS = 0x100  # AI Core status: overflow converting FP32 to FP16 (a MatMul's output)
VECTOR_OVERFLOW_STATUS = 0x20  # AI Core status: floating-point computation overflow
# context_id/thread_id of a task that is no FFTS+ subtask: msaccucmp's overflow analyser takes only 65535
# (ConstManager.INVALID_ID) as unset and would match the record only to dumps carrying the id it holds
# (fusebisect overflow also reads the u32 and u64 all-ones as unset)
UNSET_ID = 0xFFFF
ADDRESS_BASE = 0x10000


# ---- fusion_result.json ---------------------------------------------------------------------------------------

def fusion_result(compiled: Compiled) -> dict:
    """The fusion_result.json document: passes that ran and matched, per kind (closed passes absent)."""
    graph: dict[str, dict] = {}
    ub: dict[str, dict] = {}
    for s in compiled.stats:
        if s.match_times <= 0:
            continue
        if s.kind == "UBFusion":
            ub[s.name] = {"match_times": str(s.match_times), "effect_times": str(s.effect_times),
                          "repository_hit_times": "0"}
        else:
            graph[s.name] = {"match_times": str(s.match_times), "effect_times": str(s.effect_times)}
    return {SESSION_KEY: {"graph_fusion": graph, "ub_fusion": ub}}


def write_fusion_result(directory: Path | None, compiled: Compiled) -> Path:
    """Write fusion_result.json into ``directory`` (cwd if None); returns its path. Raises OSError."""
    path = (directory or Path.cwd()) / "fusion_result.json"
    return atomic_write_text(path, json.dumps(fusion_result(compiled), indent=4) + "\n")


# ---- GE graph dumps -------------------------------------------------------------------------------------------

def _pb():
    from fusebisect.proto import ge_ir_pb2
    return ge_ir_pb2


def _dtype_enum(pb, name: str) -> int:
    return pb.DataType.Value({"float32": "DT_FLOAT", "float16": "DT_FLOAT16"}.get(name, "DT_FLOAT"))


def _list_s(attr, values: list[str]) -> None:
    attr.list.val_type = 1  # VT_LIST_STRING
    attr.list.s.extend(v.encode() for v in values)


def _desc(pb, desc, node: Node, *, origin: bool) -> None:
    desc.dtype = _dtype_enum(pb, node.dtype)
    desc.shape.dim.extend(node.shape)
    desc.layout = "ND"
    desc.attr["origin_format"].s = b"ND"
    desc.attr["origin_shape"].list.val_type = 2  # VT_LIST_INT
    desc.attr["origin_shape"].list.i.extend(node.shape)
    if origin:
        desc.attr["_datadump_origin_name"].s = node.origin().encode()
        desc.attr["_datadump_origin_output_index"].i = 0


def graph_model(graph: Graph, *, weights: bool = False):
    """``graph`` as a ``ge.proto.ModelDef`` (Build graphs carry the fusion attributes)."""
    pb = _pb()
    model = pb.ModelDef(name=graph.name, version=1)
    g = model.graph.add(name=graph.name)
    by_name = {n.name: n for n in graph.nodes}
    for idx, node in enumerate(graph.nodes):
        op = g.op.add(name=node.name, type=node.type, id=idx, stream_id=STREAM_ID)
        op.input.extend(f"{src}:0" for src in node.inputs)
        if node.pass_names:
            _list_s(op.attr["pass_name"], node.pass_names)
        if node.ub_pass_name:
            op.attr["pass_name_ub"].s = node.ub_pass_name.encode()
            op.attr["fusion_scope"].i = node.fusion_scope or 0
        if node.fused:
            _list_s(op.attr["_datadump_original_op_names"], node.originals())
            _list_s(op.attr["_datadump_original_op_types"], node.original_op_types())
            op.attr["_is_fusion_op"].b = True
        for key in ("axis", "eps", "keep_dims", "has_bias", "dst_type"):
            if key in node.attrs:
                v = node.attrs[key]
                if isinstance(v, bool):
                    op.attr[key].b = v
                elif isinstance(v, int):
                    op.attr[key].i = v
                elif isinstance(v, float):
                    op.attr[key].f = v
                else:
                    op.attr[key].s = str(v).encode()
        for src in node.inputs:
            _desc(pb, op.input_desc.add(), by_name[src], origin=False)
        _desc(pb, op.output_desc.add(), node, origin=node.fused)
        if weights and node.type == "Const":
            value = np.asarray(node.attrs["value"], dtype=np.float32)
            op.attr["value"].t.data = value.tobytes()
    return model


def _stages(level: str) -> list[str]:
    if level == "3":
        return ["Build"]
    if level == "4":
        return ["PreRunBegin"]
    if level in ("1", "2", ""):
        return ["PreRunBegin", "Build"]
    wanted = [w for w in level.split("|") if w]
    return [s for s in ("PreRunBegin", "Build") if any(w in s for w in wanted)]


def write_graphs(opts, framework: Graph, compiled: Compiled) -> list[Path]:
    """Write the GE graph dumps selected by DUMP_GE_GRAPH/DUMP_GRAPH_LEVEL; returns their paths."""
    from google.protobuf import text_format

    # GE writes each process's graphs to a folder of its own under DUMP_GRAPH_PATH
    directory = opts.graph_path / f"pid_{os.getpid()}_deviceid_0" if opts.graph_path else Path.cwd()
    written = []
    for idx, stage in enumerate(_stages(opts.graph_level)):
        graph = framework if stage == "PreRunBegin" else compiled.graph
        model = graph_model(graph, weights=opts.graph_dump == 1)
        text = text_format.MessageToString(model)
        written.append(atomic_write_text(directory / f"ge_proto_{idx:08d}_graph_1_{stage}.txt", text))
    return written


# ---- data dumps -------------------------------------------------------------------------------------------------

def _now_us() -> int:
    return time.time_ns() // 1000


def _file_part(text: str) -> str:
    return "".join("_" if c in "./\\ " else c for c in text)


class DumpSession:
    """Writes the dumps of one run: op dumps per dump step, golden npy, overflow records."""

    def __init__(self, opts, graph: Graph, framework: Graph) -> None:
        self.opts = opts
        self.graph = graph
        self.framework = framework
        self.steps = set(opts.dump_steps)
        if opts.dump_golden is not None and not self.steps:
            self.steps = {0}
        if opts.overflow:
            self.steps = set()  # overflow mode dumps only overflowing ops (dump_debug excludes data dump)
        self.time_dir = time.strftime("%Y%m%d%H%M%S", time.localtime())
        self.clock = _now_us()
        self.task_ids = {n.name: i + 1 for i, n in enumerate(graph.compute_nodes())}
        self.overflow_written: set[int] = set()

    def _tick(self) -> int:
        self.clock = max(self.clock + 1, _now_us())
        return self.clock

    def step_dir(self, step: int) -> Path:
        """The leaf directory of ``step``."""
        assert self.opts.dump_path is not None
        return (self.opts.dump_path / self.time_dir / DEVICE_ID / _file_part(self.graph.name) / MODEL_ID
                / str(step))

    def recorder(self, step: int) -> Callable[[Node, list[np.ndarray], np.ndarray], None] | None:
        """An observer that dumps every compute op of ``step`` (None when only golden files are wanted)."""
        if self.opts.dump_path is None:
            return lambda node, args, value: None
        leaf = self.step_dir(step)

        def record(node: Node, args: list[np.ndarray], value: np.ndarray) -> None:
            self.write_op(leaf, node, args, value, self._tick())
        return record

    def write_op(self, leaf: Path, node: Node, args: list[np.ndarray], value: np.ndarray, ts: int) -> Path:
        """Dump one op (its inputs and output) into ``leaf``; returns the file path."""
        from fusebisect.compare.dumpfile import TensorSpec, write_dump

        inputs = []
        address = ADDRESS_BASE
        for i, arr in enumerate(args):
            spec = self._input_spec(node, i, np.asarray(arr))
            spec.address = address
            address += 0x1000
            inputs.append(spec)
        origin = (node.origin(), 0) if node.fused else None
        outputs = [TensorSpec(np.ascontiguousarray(np.asarray(value)), original_op=origin, address=address,
                              original_shape=tuple(np.shape(value)))]
        task = self.task_ids.get(node.name, 0)
        name = f"{_file_part(node.type)}.{_file_part(node.name)}.{task}.{STREAM_ID}.{ts}"
        return write_dump(leaf / name, op_name=node.name, inputs=inputs, outputs=outputs,
                          encoding=self.opts.dump_encoding, dump_time=ts)

    def _input_spec(self, node: Node, index: int, arr: np.ndarray):
        from fusebisect.compare.dumpfile import TensorSpec

        if node.type in ("MatMul", "MatMulV2") and index == 1 and arr.ndim == 2:
            from fusebisect.compare.formats import from_original
            return TensorSpec(np.ascontiguousarray(from_original(arr, "FRACTAL_NZ")), format=NZ_FORMAT,
                              original_shape=tuple(arr.shape))
        return TensorSpec(np.ascontiguousarray(arr), original_shape=tuple(arr.shape))

    def finish_step(self, step: int, feeds: dict[str, np.ndarray]) -> None:
        """After a dumped step: write the golden npy of the unfused graph for the same inputs."""
        if self.opts.dump_golden is None:
            return
        golden = self.opts.dump_golden
        golden.mkdir(parents=True, exist_ok=True)

        def observe(node: Node, args, value) -> None:
            buf = io.BytesIO()
            np.save(buf, np.asarray(value), allow_pickle=False)
            atomic_write_bytes(golden / f"{_file_part(node.name)}.0.{self._tick()}.npy", buf.getvalue())

        with np.errstate(all="ignore"):
            execute(self.framework, feeds, run_kernel, frozenset(), observe)

    def overflow(self, step: int, ops: list[tuple[Node, list[np.ndarray], np.ndarray]]) -> None:
        """Write Opdebug records and the overflowing ops' dumps for ``step`` (once per step, if a dump path is set
        and the step is a dump step, or is the first step that overflowed when no dump step was given)."""
        if self.opts.dump_path is None or step in self.overflow_written:
            return
        if self.opts.dump_steps and step not in self.opts.dump_steps:
            return
        if not self.opts.dump_steps and self.overflow_written:
            return
        self.overflow_written.add(step)
        leaf = self.step_dir(step)
        from fusebisect.compare.dumpfile import TensorSpec, write_dump

        debug_task = max(self.task_ids.values(), default=0) + 1
        for node, args, value in ops:
            self.write_op(leaf, node, args, value, self._tick())
            task = self.task_ids.get(node.name, 0)
            status = CUBE_OVERFLOW_STATUS if node.type.startswith("MatMul") else VECTOR_OVERFLOW_STATUS
            record = overflow_record(task_id=task, stream_id=STREAM_ID, layout=self.opts.opdebug_layout,
                                     status=status)
            ts = self._tick()
            write_dump(leaf / f"Opdebug.Node_OpDebug.{debug_task}.{STREAM_ID}.{ts}", op_name="Node_OpDebug",
                       inputs=[], outputs=[TensorSpec(np.frombuffer(record, dtype=np.uint8).copy())],
                       encoding=self.opts.dump_encoding, dump_time=ts)
            debug_task += 1


def overflow_record(*, task_id: int, stream_id: int, layout: str = "new", model_id: int = int(MODEL_ID),
                    status: int = CUBE_OVERFLOW_STATUS) -> bytes:
    """An AI Core overflow record for op task ``task_id`` in the old (2048-byte) or new (magic) layout."""
    pc_start, para_base = 0x12C0_0000 + task_id * 0x100, 0x1000_0000 + task_id * 0x40
    if layout == "old":
        buf = bytearray(2048)
        struct.pack_into("<6Q", buf, 256, model_id, stream_id, task_id, 0, pc_start, para_base)
        struct.pack_into("<3Q", buf, 1024, pc_start, 0, status)
        return bytes(buf)
    fields = (model_id, stream_id, task_id, 0, UNSET_ID, UNSET_ID, pc_start, para_base, 0, 0, status)
    data = struct.pack("<11Q", *fields)
    return struct.pack("<IIIIII", 0x5A5A5A5A, 0, 1, 0, 0, len(data)) + data
