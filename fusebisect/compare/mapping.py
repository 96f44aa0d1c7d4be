"""Which tensors to compare: msaccucmp's op mapping between my dump, the golden data and the graphs.

Cases (as msaccucmp ``compare`` decides them):

* **NPU vs NPU, no graph**: ops paired by op name; inputs and outputs index by index (``NpuVsNpuComparison``).
* **NPU vs golden .npy with my graph** (``-f``): ops grouped by their ``_datadump_original_op_names``
  (OneToOne, MultiToOne, OneToMulti, MultiToMulti, L1 fusion); each output goes to the golden
  ``{origin_name}.{origin_output_index}``; input *i* goes to the golden output of the producer named by the
  graph's input *i* (walking back through Cast/TransData).
* **fused vs unfused NPU dumps with both graphs** (``-f`` + ``-cf``): the original names of each fused op are
  re-mapped to the op of the close graph that carries them, and the golden data is that op's NPU dump.

FFTS+ thread files (one op dumped as one file per thread slice) are filed under one op name and read as one
merged dump (:mod:`fusebisect.compare.ffts`), as msaccucmp does in every case.

The result is a list of :class:`OpPlan` (one per fusion group, msaccucmp's ``Index``) whose :class:`TensorPlan`
items say where both tensors are; reading and comparing them is the engine's job.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fusebisect.compare import ffts

SPECIAL_OPS_TYPE = ("Cast", "TransData")


def lookup_name(name: str) -> str:
    """msaccucmp's dump-file lookup key for a graph op name ('/' and '.' become '_')."""
    return name.replace("/", "_").replace(".", "_")


def dump_file_spelling(name: str) -> str:
    """An op name as a dump file name writes it ('.', '/', '\\' and spaces become '_'): wider than
    :func:`lookup_name`, which compare keeps as msaccucmp has it; for finding an op a user or a record names."""
    for ch in "./\\ ":
        name = name.replace(ch, "_")
    return name


@dataclass
class Origin:
    """The golden tensor one NPU output corresponds to."""

    name: str
    index: int
    format: str | None = None
    shape: tuple[int, ...] | None = None


@dataclass
class RuleOp:
    """One op of a fusion-rule graph, in msaccucmp's view."""

    op_id: int                    # fusion-group id = the CSV Index
    name: str
    type: str
    inputs: list[str]             # "src:idx", control edges removed
    original_op_names: list[str]
    have_origin: bool
    outputs: list[Origin | None]  # per output_desc; None = empty origin name
    l1_no: str = ""
    is_multiop: bool = False
    pass_names: list[str] = field(default_factory=list)
    ub_pass_name: str | None = None
    sequence: int = 0

    def origin_tensor(self, index: int) -> Origin:
        """``FusionOp.get_origin_tensor``: the origin of output ``index``; raises LookupError with msaccucmp's text."""
        if not self.outputs:
            raise LookupError(f'The output description of the fusion operator "{self.name}" is empty.')
        real = index if index < len(self.outputs) else 0
        origin = self.outputs[real]
        if origin is None or not origin.name:
            raise LookupError(f"The origin name of the {self.name}:{index} is empty.")
        return Origin(origin.name, index if origin.index is None else origin.index, origin.format, origin.shape)

    def is_inner_node(self) -> bool:
        """A split (multi-op) node none of whose outputs maps to an original output."""
        return self.is_multiop and all(o is None or not o.name for o in self.outputs)


@dataclass
class FusionRule:
    """msaccucmp's ``FusionRuleParser`` state built from a :class:`fusebisect.compare.graph.Graph`."""

    groups: dict[object, list[RuleOp]]      # fusion-op name -> ops, in first-appearance order
    op_to_group: dict[str, object]
    op_list: list[RuleOp]

    def op(self, name: str) -> RuleOp | None:
        """Returns the op called ``name`` or None."""
        key = self.op_to_group.get(name)
        for op in self.groups.get(key, []):
            if op.name == name:
                return op
        return None

    def origin_to_op(self) -> dict[str, str]:
        """original op name -> name of the op carrying it (last wins, as msaccucmp)."""
        out: dict[str, str] = {}
        for op in self.op_list:
            for origin in op.original_op_names:
                out[origin] = op.name
        return out


def _group_key(name: str, l1_no: str, originals: list[str]) -> object:
    if l1_no:
        return l1_no
    if originals:
        if len(originals) == 1:
            return originals[0] or name
        import uuid     # only fused groups need it; not imported at start-up

        return uuid.uuid3(uuid.NAMESPACE_DNS, "".join(originals))
    return name


def build_rule(graph) -> FusionRule:
    """Builds msaccucmp's fusion rule from a loaded graph (``OpInfo`` list). Returns a :class:`FusionRule`."""
    groups: dict[object, list[RuleOp]] = {}
    op_to_group: dict[str, object] = {}
    op_list: list[RuleOp] = []
    described: dict[str, list[tuple[str | None, tuple | None]]] = {}   # op -> each output's (format, shape)

    def rename() -> None:
        # a single op whose only original name is its group name fills empty origins with that name; msaccucmp
        # does it after each graph of the model, over the groups so far (a group that a later graph, a loop's
        # body, gives a second op keeps the names filled before)
        for key, ops in groups.items():
            if len(ops) == 1 and len(ops[0].original_op_names) == 1 and key == ops[0].original_op_names[0]:
                # (an output without an origin name keeps its origin format and shape, as msaccucmp's OutputDesc)
                desc = described.get(ops[0].name, [])
                ops[0].outputs = [o if o is not None else Origin(ops[0].original_op_names[0], i, *desc[i])
                                  for i, o in enumerate(ops[0].outputs)] or [Origin(ops[0].original_op_names[0],
                                                                                    None)]

    current = getattr(graph.ops[0], "graph", None) if graph.ops else None
    for position, info in enumerate(graph.ops):
        if getattr(info, "graph", None) != current:   # (ops built without a graph name are one graph)
            rename()
            current = getattr(info, "graph", None)
        # an op GE inserted (its original-op list present but empty) has no ground truth: msaccucmp reads ['']
        inserted = getattr(info, "origin_empty", False) and not info.original_op_names
        have_origin = bool(info.original_op_names) or inserted
        originals = list(info.original_op_names) if info.original_op_names else [""] if inserted else [info.name]
        outputs: list[Origin | None] = []
        for out_index, out in enumerate(info.outputs):
            name = out.origin_name or ""
            if not name and not have_origin:
                name = info.name
            index = out.origin_output_index if out.origin_output_index is not None else out_index
            desc = (out.origin_format or None, tuple(out.origin_shape) if out.origin_shape else None)
            described.setdefault(info.name, []).append(desc)
            outputs.append(Origin(name, index, *desc) if name else None)
        if not outputs and not have_origin:
            outputs.append(Origin(info.name, None))  # type: ignore[arg-type]
        # (msaccucmp drops FFTS+ manual-slice fields from graph input names)
        inputs = [ffts.strip_slices(i) for i in info.inputs if i and not i.endswith(":-1")]
        l1_no = info.l1_fusion_sub_graph_no or ""
        key = _group_key(info.name, l1_no, originals)
        op_to_group[info.name] = key
        op = RuleOp(0, info.name, info.type, inputs, originals, have_origin, outputs, l1_no,
                    bool(info.is_multiop), list(info.pass_names or []), info.ub_pass_name,
                    info.id if info.id is not None else position)
        if key in groups:
            op.op_id = groups[key][0].op_id
            if all(o.name != op.name for o in groups[key]):
                groups[key].append(op)
                op_list.append(op)
        else:
            op.op_id = len(groups)
            groups[key] = [op]
            op_list.append(op)
    rename()
    op_list.sort(key=lambda o: o.sequence)
    return FusionRule(groups, op_to_group, op_list)


def merge_close(open_rule: FusionRule, close_rule: FusionRule) -> FusionRule:
    """``merge_close_and_open_fusion_rule``: original names and output origins re-pointed at close-graph ops."""
    close_map = close_rule.origin_to_op()
    # (msaccucmp's lists, as sets: membership only; a list made it quadratic in the graph's ops)
    seen_open: set[str] = set()
    seen_close: set[str] = set()
    done: set[object] = set()
    groups: dict[object, list[RuleOp]] = {}
    op_to_group: dict[str, object] = {}
    op_list: list[RuleOp] = []   # built backwards, reversed at the end (msaccucmp inserts each at the front)
    for name, key in reversed(list(open_rule.op_to_group.items())):
        if key in done:
            continue
        done.add(key)
        op_to_group[name] = key
        for op in open_rule.groups[key]:
            first = op.original_op_names[0]
            if first in seen_open:
                continue
            seen_open.add(first)
            if first in close_map:
                if close_map[first] in seen_close:
                    continue
                seen_close.add(close_map[first])
            if not (len(op.original_op_names) == 1 and op.original_op_names[0] == ""):
                names: list[str] = []
                for origin in op.original_op_names:
                    if origin in close_map and close_map[origin] not in names:
                        names.append(close_map[origin])
                op.original_op_names = names
            for out in op.outputs:
                if out is None or not out.name or out.name not in close_map:
                    continue
                close_name = close_map[out.name]
                close_ops = close_rule.groups.get(close_rule.op_to_group.get(close_name), [])
                for close_op in close_ops:
                    hit = next((i for i, c in enumerate(close_op.outputs)
                                if c is not None and c.name == out.name and c.index == out.index), None)
                    if hit is not None:
                        out.index = hit
                        break
                out.name = close_name
            groups.setdefault(key, []).append(op)
            op_list.append(op)
    op_list.reverse()
    # every op name stays addressable (producers of inputs)
    for name, key in open_rule.op_to_group.items():
        op_to_group.setdefault(name, key)
    return FusionRule(groups, op_to_group, op_list)


def relation(ops: list[RuleOp]) -> str:
    """``get_relation_for_fusion``: 'OneToOne' | 'MultiToOne' | 'OneToMulti' | 'MultiToMulti' | 'L1Fusion'."""
    if len(ops) == 1:
        return "MultiToOne" if len(ops[0].original_op_names) > 1 else "OneToOne"
    if ops[0].l1_no:
        return "L1Fusion"
    return "OneToMulti" if len(ops[0].original_op_names) == 1 else "MultiToMulti"


def left_right_strings(ops: list[RuleOp]) -> tuple[str, str]:
    """``make_left_and_right_string`` over a group: (NPUDump text, GroundTruth text)."""
    by_origin: dict[str, list[RuleOp]] = {}
    for op in ops:
        by_origin.setdefault(",".join(op.original_op_names), []).append(op)
    return ",".join(o.name for lst in by_origin.values() for o in lst), ",".join(by_origin)


def find_producer(rule: FusionRule, op: RuleOp, index: int) -> tuple[RuleOp, int]:
    """The op and output index feeding input ``index`` of ``op`` (through Cast/TransData); LookupError if none."""
    return output_source(rule, *_pre_op(rule, op, index))


def output_source(rule: FusionRule, op: RuleOp, index: int) -> tuple[RuleOp, int]:
    """The op and output index whose origin output ``index`` of ``op`` is compared with: ``op`` itself, or for a
    Cast/TransData the op before it (msaccucmp's ``get_right_dump_data``: the special op's input and output
    indexes correspond one to one); LookupError if the chain breaks."""
    current, current_index = op, index
    guard = 0
    while current.type in SPECIAL_OPS_TYPE and guard < 1000:
        current, current_index = _pre_op(rule, current, current_index)
        guard += 1
    return current, current_index


def _pre_op(rule: FusionRule, op: RuleOp, index: int) -> tuple[RuleOp, int]:
    if index >= len(op.inputs):
        raise LookupError(f"The input index ({index}) is out of range ({len(op.inputs)}) for the operator list.")
    parts = op.inputs[index].split(":")
    if len(parts) != 2 or not parts[0].strip() or not parts[1].strip().isdigit():
        raise LookupError(f"The input information ({op.inputs[index]}) is invalid. It only supports op_name:index.")
    producer = rule.op(parts[0].strip())
    if producer is None:
        raise LookupError(f'There is no "{parts[0].strip()}" in the fusion rule file.')
    return producer, int(parts[1])


@dataclass
class SideIndex:
    """Dump files of one side by lookup name: newest last (msaccucmp uses the newest), or for an FFTS+ op its
    thread files in msaccucmp's order, read together as a :class:`~fusebisect.compare.ffts.ThreadGroup`."""

    files: dict[str, list]          # lookup name -> [DumpEntry...] sorted by timestamp (FFTS+: thread order)
    golden: dict[tuple[str, int], object] | None = None   # npy golden: (lookup name, idx) -> GoldenEntry
    threads: dict[str, object] = field(default_factory=dict)   # lookup name -> ThreadGroup (FFTS+ ops)
    notes: list[str] = field(default_factory=list)             # files left out, and why

    def entry(self, key: str):
        """What the engine reads for lookup name ``key``: the ThreadGroup of an FFTS+ op, else the newest dump
        entry; None if there is none."""
        group = self.threads.get(key)
        if group is not None:
            return group
        entries = self.files.get(key)
        if not entries and (wide := dump_file_spelling(key)) != key:
            # a space or backslash in the op name: CANN's dump file writes '_' for it (msaccucmp misses those)
            return self.entry(wide)
        return entries[-1] if entries else None

    def newest(self, op_name: str):
        """What the engine reads for ``op_name`` (see :meth:`entry`), or None."""
        return self.entry(lookup_name(op_name))

    def npy(self, op_name: str, index: int):
        """The newest golden .npy entry for ``op_name`` output ``index`` or None."""
        if self.golden is None:
            return None
        return self.golden.get((lookup_name(op_name), index)) or self.golden.get((dump_file_spelling(op_name), index))


def index_tree(tree, *, graph: bool = False, direct: bool = False) -> SideIndex:
    """Indexes a :class:`DumpTree` by op name (Opdebug files skipped). FFTS+ thread files are filed under the op
    name msaccucmp gives them (``ffts.op_key``; ``graph``: a fusion-rule graph is used, ``direct``:
    msaccucmp ``-ffts``) and grouped. Returns a :class:`SideIndex`; never raises."""
    files: dict[str, list] = {}
    notes: list[str] = []
    for entry in tree.entries:
        if entry.op_type == "Opdebug":
            continue
        key = ffts.op_key(entry.op_name, graph=graph, direct=direct)
        if key is None:
            notes.append(f"{entry.path}: skipped, as msaccucmp does: the op name keeps an _lxslice field "
                         "that is not at its end")
            continue
        files.setdefault(lookup_name(key), []).append(entry)
    threads: dict[str, object] = {}
    for key, entries in files.items():
        entries.sort(key=lambda e: e.timestamp)
        mode = ffts.task_mode(entries[-1].name)
        if mode != ffts.NORMAL:
            entries[:] = ffts.thread_order(entries, mode)
            threads[key] = ffts.ThreadGroup(key, mode, entries)
    return SideIndex(files, threads=threads, notes=notes)


def index_golden(golden: dict) -> SideIndex:
    """Indexes ``scan_golden`` output. Returns a :class:`SideIndex` in npy mode."""
    return SideIndex({}, {(lookup_name(name), idx): entry for (name, idx), entry in golden.items()})


def npu_vs_npu_groups(my: SideIndex, golden: SideIndex) -> list[tuple[int, str, object, object]]:
    """msaccucmp's graph-less pairing: [(index, op_name, my_entry|None, golden_entry|None)], my ops first
    by execution time, then golden-only ops. An entry is what :meth:`SideIndex.entry` gives."""
    order: list[tuple[int, str]] = []
    for key, entries in my.files.items():
        order.append((entries[-1].timestamp, key))
    order.sort()
    result: list[tuple[int, str, object, object]] = []
    names: dict[str, int] = {}
    for _, key in order:
        names[key] = len(result)
        result.append((len(result), key, my.entry(key), None))
    golden_order = sorted((entries[-1].timestamp, key) for key, entries in golden.files.items())
    extra = len(result)
    for _, key in golden_order:
        entry = golden.entry(key)
        if key in names:
            idx = names[key]
            result[idx] = (result[idx][0], result[idx][1], result[idx][2], entry)
        else:
            result.append((extra, key, None, entry))
            extra += 1
    return result
