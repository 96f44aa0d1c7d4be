"""GE graph dumps: read the ops of a ``ge.proto.ModelDef`` (text ``ge_proto_*.txt``, atc-style JSON, binary
``.pb``) into :class:`OpInfo` records, pick the Build-stage graphs of a dump directory, and write a graph back as
the atc ``--mode=5`` JSON that msaccucmp reads as its ``-f``/``-cf`` fusion rule file.

What is extracted per op: name, type, id, owning graph, inputs (``"src:idx"``; ``":-1"`` = control edge), the
fusion attrs ``pass_name`` (graph fusion, a list or one string), ``pass_name_ub`` (UB fusion),
``_datadump_original_op_names``/``_types``, ``fusion_scope``, ``_datadump_is_multiop``,
``_L1_fusion_sub_graph_no``, and per ``output_desc``: ``_datadump_origin_name``,
``_datadump_origin_output_index``, ``origin_format`` (a string, or a GE Format number turned into its name;
``_datadump_origin_format`` when ``origin_format`` is absent) and ``origin_shape``.

Ops keep file order, in which msaccucmp numbers them (its Index, the CSV's row order). Ids follow proto3 (an
absent ``id`` is 0, indistinguishable from ``id: 0``): when no op of a graph has a nonzero id, its ids are reported
as ``None``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from fusebisect.compare.pbtext import RawGraph, RawOp, decode_text, no_gc, parse_model_text
from fusebisect.errors import GraphFormatError
from fusebisect.fsutil import atomic_write_text


@dataclass
class OutputInfo:
    """One ``output_desc`` of an op and the original (framework) tensor it stands for."""

    index: int                                  # position in the op's output_desc list
    origin_name: str | None                     # _datadump_origin_name
    origin_output_index: int | None             # _datadump_origin_output_index
    origin_format: str | None                   # 'NCHW', 'ND', ... (no FORMAT_ prefix)
    origin_shape: tuple[int, ...] | None        # origin_shape list.i; () for a scalar, None when absent


@dataclass
class OpInfo:
    """One node of a GE graph with the attributes that tie it to fusion passes and original ops."""

    name: str
    type: str
    id: int | None
    graph: str                                  # name of the GraphDef holding the op
    inputs: list[str]                           # "src:idx" as in the graph; control edges "src:-1" kept
    pass_names: list[str]                       # graph-fusion passes (attr pass_name)
    ub_pass_name: str | None                    # UB-fusion pass (attr pass_name_ub)
    original_op_names: list[str]                # _datadump_original_op_names ([] if absent)
    original_op_types: list[str]                # _datadump_original_op_types
    fusion_scope: int | None
    is_multiop: bool                            # _datadump_is_multiop
    l1_fusion_sub_graph_no: str | None          # _L1_fusion_sub_graph_no
    outputs: list[OutputInfo]
    origin_empty: bool = False                  # _datadump_original_op_names present but empty: an op GE
                                                # inserted, with no original op (msaccucmp reads [''])

    @property
    def is_fused(self) -> bool:
        """True when a fusion pass produced this op or it stands for several original ops."""
        return bool(self.pass_names or self.ub_pass_name or len(self.original_op_names) > 1)

    @property
    def fusion_passes(self) -> list[str]:
        """Every fusion rule that made it, once each: its graph-fusion passes, then its UB-fusion pass."""
        return list(dict.fromkeys([*self.pass_names, *([self.ub_pass_name] if self.ub_pass_name else [])]))

    @property
    def data_inputs(self) -> list[str]:
        """The inputs without control edges."""
        return [i for i in self.inputs if not is_control_input(i)]


@dataclass
class Graph:
    """The ops of one graph file (or of several Build graphs merged), in graph order."""

    path: Path | None
    ops: list[OpInfo]
    #: the GraphDefs' names in file order, those without ops included (ops name only the graphs they are in)
    names: list[str] = field(default_factory=list)

    def op(self, name: str) -> OpInfo | None:
        """Return the op named exactly ``name`` (the first one if several subgraphs share it), or None.
        The name index is built on first use (after changing ``ops``, build a new Graph)."""
        index = self.__dict__.get("_index")
        if index is None:
            index = {}
            for op in self.ops:
                index.setdefault(op.name, op)
            self.__dict__["_index"] = index
        return index.get(name)

    @property
    def graph_names(self) -> list[str]:
        """Names of the GraphDefs the file holds (and the ops come from), in order of first appearance."""
        return list(dict.fromkeys([*self.names, *(op.graph for op in self.ops)]))


def is_control_input(edge: str) -> bool:
    """Return True when an input string ``"src:-1"`` is a control edge (no data flows)."""
    return edge.endswith(":-1")


# ------------------------------------------------------------------------------------------------ formats
def format_name(value) -> str | None:
    """Return a GE Format as a name without the ``FORMAT_`` prefix ('NCHW', 'FRACTAL_NZ'); ints are looked up
    in the Format enum (unknown numbers give their decimal string); None stays None. Never raises."""
    if value is None:
        return None
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        from fusebisect.proto import dump_data_pb2

        try:
            name = dump_data_pb2.OutputFormat.Name(value)
        except ValueError:
            return str(value)
        return name[len("FORMAT_"):] if name.startswith("FORMAT_") else name
    text = str(value)
    return text[len("FORMAT_"):] if text.startswith("FORMAT_") else text


# ------------------------------------------------------------------------------------- raw -> OpInfo
def _strings(value: dict | None) -> list[str] | None:
    if not value:
        return None
    if "list" in value:
        return list(value["list"].get("s", []))
    if "s" in value:
        return [value["s"]]
    return None


def _one_string(value: dict | None) -> str | None:
    if not value:
        return None
    if "s" in value:
        return value["s"]
    if "i" in value:
        return str(value["i"])
    if "list" in value:
        items = value["list"].get("s") or []
        return items[0] if items else None
    return None


def _int(value: dict | None) -> int | None:
    if not value:
        return None
    if "i" in value:
        return value["i"]
    if "list" in value and value["list"].get("i"):
        return value["list"]["i"][0]
    return None


def _output_info(index: int, attrs: dict[str, dict]) -> OutputInfo:
    fmt_attr = attrs.get("origin_format") or attrs.get("_datadump_origin_format")
    fmt = None
    if fmt_attr:
        fmt = format_name(fmt_attr["s"]) if "s" in fmt_attr else format_name(_int(fmt_attr))
    shape_attr = attrs.get("origin_shape")
    shape = None
    if shape_attr is not None and "list" in shape_attr:
        shape = tuple(shape_attr["list"].get("i", ()))
    return OutputInfo(
        index=index,
        origin_name=_one_string(attrs.get("_datadump_origin_name")),
        origin_output_index=_int(attrs.get("_datadump_origin_output_index")),
        origin_format=fmt,
        origin_shape=shape,
    )


def op_from_raw(raw: RawOp, graph: str) -> OpInfo:
    """Return the :class:`OpInfo` for one extracted op (the one interpretation of attrs for all formats)."""
    attrs = raw.attrs
    ub = _one_string(attrs.get("pass_name_ub")) or None
    l1 = _one_string(attrs.get("_L1_fusion_sub_graph_no")) or None
    multi = attrs.get("_datadump_is_multiop")
    return OpInfo(
        name=raw.name,
        type=raw.type,
        id=raw.id,
        graph=graph,
        inputs=list(raw.inputs),
        pass_names=[p for p in (_strings(attrs.get("pass_name")) or []) if p],
        ub_pass_name=ub,
        original_op_names=_strings(attrs.get("_datadump_original_op_names")) or [],
        original_op_types=_strings(attrs.get("_datadump_original_op_types")) or [],
        fusion_scope=_int(attrs.get("fusion_scope")),
        is_multiop=bool(multi.get("b", False)) if multi else False,
        l1_fusion_sub_graph_no=l1,
        outputs=[_output_info(i, a) for i, a in enumerate(raw.outputs)],
        origin_empty=_strings(attrs.get("_datadump_original_op_names")) == [],
    )


def ops_from_raw_graphs(graphs: list[RawGraph]) -> list[OpInfo]:
    """Return the ops of extracted graphs in graph and file order (see the module docstring for the id rule)."""
    out: list[OpInfo] = []
    for g in graphs:
        ops = g.ops
        if any(op.id for op in ops):
            for op in ops:
                if op.id is None:
                    op.id = 0
        else:
            for op in ops:
                op.id = None
        out.extend(op_from_raw(op, g.name) for op in ops)
    return out


# ------------------------------------------------------------------------------------------- JSON input
def _json_int(value, what: str, path) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value, 0)
        except ValueError:
            pass
    raise GraphFormatError(f"{what} is not an integer: {value!r}", path=path)


def _json_str(value) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))


def _json_attr_value(value, path) -> dict:
    if not isinstance(value, dict):
        raise GraphFormatError(f"attr value is not an object: {value!r}"[:200], path=path)
    if "list" in value:
        lst = value["list"] if isinstance(value["list"], dict) else {}
        out: dict = {}
        if "s" in lst:
            out["s"] = [_json_str(s) for s in (lst["s"] if isinstance(lst["s"], list) else [lst["s"]])]
        if "i" in lst:
            items = lst["i"] if isinstance(lst["i"], list) else [lst["i"]]
            out["i"] = [_json_int(i, "list.i", path) for i in items]
        if "b" in lst:
            out["b"] = [bool(b) for b in (lst["b"] if isinstance(lst["b"], list) else [lst["b"]])]
        return {"list": out}
    if "s" in value:
        return {"s": _json_str(value["s"])}
    if "i" in value:
        return {"i": _json_int(value["i"], "attr i", path)}
    if "b" in value:
        b = value["b"]
        return {"b": b if isinstance(b, bool) else str(b).lower() in ("true", "1")}
    return {}


def _json_attrs(attr, keys, path) -> dict[str, dict]:
    out: dict[str, dict] = {}
    if attr is None:
        return out
    if isinstance(attr, dict):  # protobuf JSON mapping of a map: {"key": {...}}
        items = attr.items()
    elif isinstance(attr, list):  # atc style: [{"key": ..., "value": {...}}]
        items = []
        for entry in attr:
            if not isinstance(entry, dict) or "key" not in entry:
                raise GraphFormatError("an attr entry has no \"key\"", path=path)
            items.append((entry["key"], entry.get("value", {})))
    else:
        raise GraphFormatError("\"attr\" is neither a list nor an object", path=path)
    for key, value in items:
        if key in keys:
            out[key] = _json_attr_value(value, path)
    return out


def _is_proto_json(obj) -> bool:
    """True for protobuf's own JSON mapping of a ModelDef (json_format), whose bytes fields (attr ``s``) are
    base64, unlike atc's JSON: attr maps as objects whose strings all read as base64 of text."""
    import base64
    import binascii

    graphs = obj.get("graph") if isinstance(obj, dict) else None
    graphs = [graphs] if isinstance(graphs, dict) else graphs if isinstance(graphs, list) else []
    ops = [o for g in graphs[:4] if isinstance(g, dict) and isinstance(g.get("op"), list) for o in g["op"][:64]]
    strings: list[str] = []
    for attr in (o.get("attr") for o in ops if isinstance(o, dict)):
        if not isinstance(attr, dict):
            continue
        for value in attr.values():
            if isinstance(value, dict):
                s = value.get("s")
                lst = value.get("list")
                strings += [s] if isinstance(s, str) else []
                strings += [x for x in (lst.get("s") or []) if isinstance(x, str)] if isinstance(lst, dict) else []
    if not strings:   # (an unfused op may have none) json_format writes lowerCamelCase field names, atc snake_case
        keys = {k for o in ops if isinstance(o, dict) for k in o}
        return bool(keys & {"outputDesc", "inputDesc"}) and not keys & {"output_desc", "input_desc"}
    for text in strings[:64]:   # a name such as "GeluFusionPass" decodes to bytes that are not text
        try:
            decoded = base64.b64decode(text, validate=True)
            if not decoded.decode("utf-8").isprintable():
                return False
        except (binascii.Error, ValueError):
            return False
    return True


def _proto_json_graphs(obj, text: str, path) -> list[RawGraph]:
    from google.protobuf import json_format

    from fusebisect.proto import ge_ir_pb2

    model = ge_ir_pb2.ModelDef()
    try:
        json_format.Parse(text, model, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise GraphFormatError(f"not a ge.proto.ModelDef in protobuf's JSON mapping: {exc}", path=path) from None
    return raw_graphs_from_proto(model)


def _raw_graphs_from_json(obj, path) -> list[RawGraph]:
    from fusebisect.compare.pbtext import DESC_ATTR_KEYS, OP_ATTR_KEYS

    if isinstance(obj, dict) and "graph" in obj:
        graphs = obj["graph"]
        if isinstance(graphs, dict):
            graphs = [graphs]
    elif isinstance(obj, dict) and "op" in obj:
        graphs = [obj]
    else:
        raise GraphFormatError("JSON has no \"graph\" list: not an atc-style graph file", path=path)
    if not isinstance(graphs, list):
        raise GraphFormatError("\"graph\" is not a list", path=path)
    out: list[RawGraph] = []
    for g in graphs:
        if not isinstance(g, dict):
            raise GraphFormatError("a \"graph\" element is not an object", path=path)
        rg = RawGraph(_json_str(g.get("name", "")))
        ops = g.get("op", [])
        if not isinstance(ops, list):
            raise GraphFormatError(f"\"op\" of graph {rg.name!r} is not a list", path=path)
        for o in ops:
            if not isinstance(o, dict) or not isinstance(o.get("name"), str):
                raise GraphFormatError(f"an op of graph {rg.name!r} has no string \"name\"", path=path)
            inputs = o.get("input", [])
            if not isinstance(inputs, list):
                raise GraphFormatError(f"\"input\" of op {o['name']!r} is not a list", path=path)
            raw = RawOp(name=o["name"], type=_json_str(o.get("type", "")),
                        id=_json_int(o["id"], f"\"id\" of op {o['name']!r}", path) if "id" in o else None,
                        inputs=[_json_str(i) for i in inputs],
                        attrs=_json_attrs(o.get("attr"), OP_ATTR_KEYS, path))
            descs = o.get("output_desc", [])
            if not isinstance(descs, list):
                raise GraphFormatError(f"\"output_desc\" of op {o['name']!r} is not a list", path=path)
            for d in descs:
                raw.outputs.append(_json_attrs(d.get("attr") if isinstance(d, dict) else None,
                                               DESC_ATTR_KEYS, path))
            rg.ops.append(raw)
        out.append(rg)
    return out


# -------------------------------------------------------------------------------------- binary input
def _proto_attr(attr) -> dict:
    kind = attr.WhichOneof("value")
    if kind == "list":
        lst = attr.list
        out: dict = {}
        if len(lst.s):
            out["s"] = [decode_text(s) for s in lst.s]
        if len(lst.i):
            out["i"] = list(lst.i)
        if len(lst.b):
            out["b"] = list(lst.b)
        return {"list": out}
    if kind == "s":
        return {"s": decode_text(attr.s)}
    if kind == "i":
        return {"i": attr.i}
    if kind == "b":
        return {"b": attr.b}
    return {kind: None} if kind else {}


def raw_graphs_from_proto(model) -> list[RawGraph]:
    """Return the extracted graphs of a parsed ``ge_ir_pb2.ModelDef`` (ids 0 are reported as absent)."""
    from fusebisect.compare.pbtext import DESC_ATTR_KEYS, OP_ATTR_KEYS

    out = []
    for g in model.graph:
        rg = RawGraph(g.name)
        for op in g.op:
            raw = RawOp(name=op.name, type=op.type, id=op.id if op.id else None, inputs=list(op.input),
                        attrs={k: _proto_attr(v) for k, v in op.attr.items() if k in OP_ATTR_KEYS})
            for d in op.output_desc:
                raw.outputs.append({k: _proto_attr(v) for k, v in d.attr.items() if k in DESC_ATTR_KEYS})
            rg.ops.append(raw)
        out.append(rg)
    return out


def _parse_binary(data: bytes, path) -> list[RawGraph]:
    from google.protobuf.message import DecodeError

    from fusebisect.proto import ge_ir_pb2

    model = ge_ir_pb2.ModelDef()
    try:
        model.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise GraphFormatError(f"not a ge.proto.ModelDef (text, JSON or binary protobuf): {exc}",
                               path=path) from None
    return raw_graphs_from_proto(model)


# ------------------------------------------------------------------------------------------ detection
_CONTROL = re.compile(rb"[\x00-\x08\x0e-\x1f\x7f]")


def _looks_binary(data: bytes) -> bool:
    return _CONTROL.search(data, 0, 4096) is not None


def _read_bytes(path: Path) -> bytes:
    from fusebisect.fsutil import not_regular

    if why := not_regular(path):
        raise GraphFormatError(why, path=path)
    try:
        return path.read_bytes()
    except IsADirectoryError:
        raise GraphFormatError("is a directory", path=path) from None
    except OSError as exc:
        raise GraphFormatError(f"cannot read: {exc.strerror or exc}", path=path) from None


def parse_graph_bytes(data: bytes, path=None) -> list[RawGraph]:
    """Return the extracted graphs of one graph file's bytes, detecting JSON, text or binary by content.

    Raises GraphFormatError for an empty file, malformed content, or a file holding no graph.
    """
    stripped = data.lstrip(b" \t\r\n\f\v")
    if stripped.startswith(b"\xef\xbb\xbf"):
        stripped = stripped[3:].lstrip()
    if not stripped:
        raise GraphFormatError("empty file", path=path)
    if stripped[:1] in (b"{", b"["):
        try:
            text = stripped.decode("utf-8")
        except UnicodeDecodeError:
            text = decode_text(stripped)
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise GraphFormatError(f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
                                   path=path) from None
        except RecursionError:
            raise GraphFormatError("invalid JSON: nested too deeply for a graph", path=path) from None
        graphs = _proto_json_graphs(obj, text, path) if _is_proto_json(obj) else _raw_graphs_from_json(obj, path)
    elif _looks_binary(data):
        graphs = _parse_binary(data, path)
    else:
        try:
            graphs = parse_model_text(data, path)
        except GraphFormatError:
            try:  # a binary file whose first 4 KiB happen to look like text
                alt = _parse_binary(data, path)
            except GraphFormatError:
                alt = []
            if not any(g.ops for g in alt):
                raise
            graphs = alt
    if not graphs:
        raise GraphFormatError("contains no graph (not a ge.proto.ModelDef?)", path=path)
    if not any(g.ops for g in graphs) and re.search(rb"(?m)^\s*(ir_version|op_type)\s*:", data[:1 << 20]):
        # GE's ge_onnx_*.pbtxt (for Netron) parses as a ModelDef of empty graphs: say so rather than "no op"
        raise GraphFormatError("an ONNX-style graph dump (ge_onnx_*.pbtxt, for Netron); give the ge_proto_*.txt "
                               "that GE writes beside it", path=path)
    return graphs


# ---------------------------------------------------------------------------------------- public API
_BUILD_NAME = re.compile(r"^ge_proto_(\d+)_(.+)\.txt$")


def dump_stage(file_name: str) -> str | None:
    """The stage of a GE graph dump file name (``ge_proto_00000320_graph_1_Build.txt`` -> ``graph_1_Build``),
    or None for another name."""
    m = _BUILD_NAME.match(file_name)
    return m.group(2) if m else None


def find_build_graphs(directory) -> list[Path]:
    """Return the ``ge_proto_{idx}_{stage}.txt`` files under ``directory`` (recursively) whose stage name
    contains ``Build`` (``..._Build.txt``, ``..._graph_1_Build.txt``, ...), ordered by folder then dump index.
    Folders come oldest first (by their newest Build file): GE writes each process's graphs to a
    ``pid_{pid}_deviceid_{id}`` folder of DUMP_GRAPH_PATH, where the runs of a job accumulate, and a later run's
    graph of the same name must win over an earlier one's (folder names do not sort by time).

    Raises GraphFormatError if ``directory`` is not a readable directory.
    """
    root = Path(directory)
    if not root.is_dir():
        raise GraphFormatError("not a directory", path=root)
    found = []
    newest: dict[str, int] = {}
    try:
        for p in root.rglob("ge_proto_*.txt"):
            m = _BUILD_NAME.match(p.name)
            if m and "Build" in m.group(2) and p.is_file():
                folder = str(p.parent)
                newest[folder] = max(newest.get(folder, 0), p.stat().st_mtime_ns)
                found.append((folder, int(m.group(1)), p.name, p))
    except OSError as exc:
        raise GraphFormatError(f"cannot scan: {exc.strerror or exc}", path=root) from None
    return [t[-1] for t in sorted(found, key=lambda t: (newest[t[0]], t[:3]))]


def load_graph(path) -> Graph:
    """Return the ops of a graph file (text ``ge_proto_*.txt``, atc JSON, or binary ``.pb``, detected by
    content) or of a directory (every Build-stage ``ge_proto_*.txt`` under it, merged; when two files hold a
    graph of the same name the later dump wins: the later file of a folder, the newer of two folders).

    Raises GraphFormatError for an unreadable, empty or malformed file, or a directory without Build graphs.
    """
    with no_gc():
        return _load_graph(Path(path))


@dataclass
class GraphSet:
    """A directory of Build graphs, parsed: merged, and each file's own (see ``engine.graph_for``, which picks
    among them per dump). Lets a caller parse a directory once and compare many dumps against it."""

    root: Path
    merged: Graph
    each: list[tuple[Path, Graph]]


def load_graph_set(directory) -> GraphSet:
    """Parse a graph directory (or one graph file) into a :class:`GraphSet`. Raises GraphFormatError."""
    p = Path(directory)
    if not p.is_dir():
        graph = load_graph(p)
        return GraphSet(p, graph, [(p, graph)])
    merged, each = load_graph_files(p)
    return GraphSet(p, merged, each)


def load_graph_files(directory) -> tuple[Graph, list[tuple[Path, Graph]]]:
    """Return the merged graph of a directory (as :func:`load_graph`) and each Build file's own graph, every file
    parsed once. Raises GraphFormatError as :func:`load_graph`."""
    p = Path(directory)
    with no_gc():
        parts = _parse_build_files(p)
        return _merged(p, parts), [(f, _graph_of(f, raws)) for f, raws in parts]


def _parse_build_files(p: Path) -> list[tuple[Path, list[RawGraph]]]:
    files = find_build_graphs(p)
    if not files:
        raise GraphFormatError("no Build-stage graph (ge_proto_*Build*.txt) found in the directory", path=p)
    return [(f, parse_graph_bytes(_read_bytes(f), f)) for f in files]


def _merged(p: Path, parts: list[tuple[Path, list[RawGraph]]]) -> Graph:
    """One graph of every file's graphs; of two graphs of the same name, the later dump wins."""
    by_name: dict[str, RawGraph] = {}
    unnamed: list[RawGraph] = []
    for _f, raws in parts:
        for g in raws:
            if g.name:
                by_name.pop(g.name, None)
                by_name[g.name] = g
            else:
                unnamed.append(g)
    return _graph_of(p, list(by_name.values()) + unnamed)


def _graph_of(p: Path, raws: list[RawGraph]) -> Graph:
    return Graph(path=p, ops=ops_from_raw_graphs(raws), names=[g.name for g in raws if g.name])


def _load_graph(p: Path) -> Graph:
    if p.is_dir():
        return _merged(p, _parse_build_files(p))
    return _graph_of(p, parse_graph_bytes(_read_bytes(p), p))


# ------------------------------------------------------------------------------------------- writers
def _attr_s(key: str, value: str) -> dict:
    return {"key": key, "value": {"s": value}}


def _attr_list_s(key: str, values: list[str]) -> dict:
    return {"key": key, "value": {"list": {"val_type": 1, "s": list(values)}}}


def graph_to_atc_dict(graph: Graph) -> dict:
    """Return the atc ``--mode=5`` JSON object for ``graph`` (see :func:`write_atc_json`)."""
    graphs: dict[str, list] = {}
    for op in graph.ops:
        attrs = []
        if op.original_op_names:
            attrs.append(_attr_list_s("_datadump_original_op_names", op.original_op_names))
        if op.original_op_types:
            attrs.append(_attr_list_s("_datadump_original_op_types", op.original_op_types))
        if op.pass_names:
            attrs.append(_attr_list_s("pass_name", op.pass_names))
        if op.ub_pass_name:
            attrs.append(_attr_s("pass_name_ub", op.ub_pass_name))
        if op.fusion_scope is not None:
            attrs.append({"key": "fusion_scope", "value": {"i": int(op.fusion_scope)}})
        if op.is_multiop:
            attrs.append({"key": "_datadump_is_multiop", "value": {"b": True}})
        if op.l1_fusion_sub_graph_no:
            attrs.append(_attr_s("_L1_fusion_sub_graph_no", op.l1_fusion_sub_graph_no))
        descs = []
        for out in op.outputs:
            dattrs = []
            if out.origin_format is not None:
                dattrs.append(_attr_s("origin_format", out.origin_format))
            if out.origin_shape is not None:
                dattrs.append({"key": "origin_shape",
                               "value": {"list": {"val_type": 2, "i": [int(d) for d in out.origin_shape]}}})
            if out.origin_name is not None:
                dattrs.append(_attr_s("_datadump_origin_name", out.origin_name))
            if out.origin_output_index is not None:
                dattrs.append({"key": "_datadump_origin_output_index",
                               "value": {"i": int(out.origin_output_index)}})
            descs.append({"attr": dattrs})
        entry = {"name": op.name, "type": op.type}
        if op.id is not None:
            entry["id"] = int(op.id)
        entry.update({"input": list(op.inputs), "attr": attrs, "output_desc": descs})
        graphs.setdefault(op.graph, []).append(entry)
    name = graph.path.stem if graph.path is not None else "fusebisect"
    return {"name": name, "graph": [{"name": g, "op": ops} for g, ops in graphs.items()]}


def write_atc_json(graph: Graph, path) -> Path:
    """Write ``graph`` as the atc ``--mode=5`` JSON msaccucmp reads as ``-f``/``-cf`` (attrs as
    ``[{"key","value"}]`` lists, integers as JSON numbers), atomically; return the path written.

    Raises OSError if the file cannot be written.
    """
    text = json.dumps(graph_to_atc_dict(graph), ensure_ascii=False, indent=1) + "\n"
    return atomic_write_text(path, text)


def model_def_to_text(model) -> str:
    """Return a ``ge_ir_pb2.ModelDef`` in protobuf text format as GE prints ``ge_proto_*.txt`` (non-ASCII bytes
    as octal escapes). Never raises for a valid message."""
    from google.protobuf import text_format

    return text_format.MessageToString(model)


__all__ = [
    "OutputInfo", "OpInfo", "Graph", "load_graph", "find_build_graphs", "dump_stage", "write_atc_json",
    "model_def_to_text",
    "is_control_input", "format_name", "parse_graph_bytes", "graph_to_atc_dict", "op_from_raw",
    "ops_from_raw_graphs", "raw_graphs_from_proto",
]
