"""Whole-network comparison: map ops (``mapping``), read one tensor pair at a time, compute ``metrics``.

``compare_dumps`` gives the rows msaccucmp's ``compare`` writes, in its order, plus what a person needs next:
the first divergent op in execution order and the fusion passes behind it. Memory stays bounded by the largest
tensor pair: each worker loads one pair, computes, and drops it before the next; small pairs wait in a bounded
queue and are compared in stacks (``metrics.compare_batch``), which gives the same values with far fewer numpy
calls per op.
"""

from __future__ import annotations

import copy
import gc
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

from fusebisect.compare import ffts
from fusebisect.compare import mapping as mp
from fusebisect.compare.dumpfile import read_dump
from fusebisect.compare.formats import TARGETS, record_to_original
from fusebisect.compare.metrics import (BATCH_ELEMENTS, ALGORITHMS, FLOAT_EPSILON, Metrics, batchable, compare_arrays,
                                        compare_batch, nan_value, normalize_algorithms)
from fusebisect.errors import DumpFormatError, FusebisectError, UsageError
from fusebisect.fsutil import missing_reason

if TYPE_CHECKING:
    from fusebisect.compare.tree import DumpTree

PRIVATE_FORMATS = {"NC1HWC0", "FRACTAL_Z", "FRACTAL_NZ", "NDC1HWC0", "C1HWNCoC0", "FRACTAL_Z_3D",
                   "NC1HWC0_C04", "FRACTAL_Z_C04"}
_FLOAT32_READ = {"bfloat16", "float8_e4m3fn", "float8_e5m2", "hifloat8"}   # msaccucmp reads these as float32



@dataclass
class CompareRow:
    """One compared tensor (one CSV row)."""

    index: int
    op_type: str
    my_op: str
    golden_ops: list[str]
    tensor: str                     # "op:output:0"; "NaN" when the op has no dump
    my_dtype: str | None
    golden_dtype: str | None
    shape: tuple | None
    metrics: dict[str, object]
    fail_reason: str
    my_address: int | None
    golden_address: int | None
    pass_names: list[str] = field(default_factory=list)
    ub_pass_name: str | None = None
    original_ops: list[str] = field(default_factory=list)   # what the fused op replaced
    timestamp: int = 0                                        # my dump time: execution order
    nonfinite: int = 0              # elements whose NaN/Inf differs from the golden's (one side only, or other kind)
    finite_cosine: float | None = None    # when msaccucmp's cosine is NaN for finite reasons: see _count_nonfinite
    finite_max_abs_error: float | None = None
    note: str = ""                  # what the NaN metrics mean, for people ('' when none are NaN)
    scalar_relative_error: float | None = None   # |mine - golden| / |golden| of a one-element tensor
    judged: bool = True             # False: compared (the CSV has msaccucmp's cells) but no verdict can rest on it

    @property
    def cosine(self) -> float | None:
        """CosineSimilarity as a float (None if absent)."""
        value = self.metrics.get("CosineSimilarity")
        return None if value is None or isinstance(value, str) else float(value)

    @property
    def compared(self) -> bool:
        """True when the pair was compared: some metric is a number, or my tensor has NaN/Inf the golden lacks."""
        return (self.nonfinite > 0 or self.finite_cosine is not None
                or any(isinstance(v, float) and math.isfinite(v) for v in self.metrics.values()))

    @property
    def max_abs_error(self) -> float | None:
        """MaxAbsoluteError as a float (None if absent)."""
        value = self.metrics.get("MaxAbsoluteError")
        return None if value is None or isinstance(value, str) else float(value)


@dataclass
class CompareReport:
    """All rows (msaccucmp order), the first divergence (execution order) and what could not be paired."""

    rows: list[CompareRow]
    first_divergence: dict | None
    unmatched: list[dict]
    algorithms: list[str] = field(default_factory=lambda: list(ALGORITHMS))
    my_address_column: bool = True
    golden_address_column: bool = True
    mode: str = "npu_vs_npu"        # 'npu_vs_npu' | 'npu_vs_npy' | 'fused_vs_unfused' | 'npy_by_name'
    notes: list[str] = field(default_factory=list)   # what a person should know (FFTS+ thread files...)
    #: my op dumps the graph given for my side has no op for, so they were not compared (it may not be this
    #: dump's graph): no "no divergence" can rest on a comparison that left them out
    not_in_graph: list[str] = field(default_factory=list)
    # (run --dumps) graph ops one trial did not dump though the other did: {"run": [...], "reference": [...]}
    cut_short: dict = field(default_factory=dict)
    graphs: tuple = (None, None)   # the graphs the comparison used (my side, golden side), after graph_for
    # the op names (lookup spelling) each side's compared leaf dumped (one device, model and iteration)
    dumped: tuple = (frozenset(), frozenset())
    leaf: str = ""   # (run --dumps) which of several leaves was compared ("device 1, model eval"), when several
    # (run --dumps) (run's, reference's) latest dumped step of the compared (device, model) when they differ
    last_steps: tuple | None = None

    @property
    def unreadable(self) -> list[dict]:
        """The unmatched entries of dump files that could not be read (each has ``file`` and ``reason``)."""
        return [u for u in self.unmatched if u.get("file")]

    @property
    def unreadable_files(self) -> int:
        """How many distinct dump files could not be read (a golden file read for several ops counts once)."""
        return _distinct_files(self.unreadable)

    def execution_order(self) -> list[CompareRow]:
        """Rows sorted by my dump time (rows without a dump keep their place at the end)."""
        return sorted(self.rows, key=lambda r: (r.timestamp == 0, r.timestamp, r.index))


def tree_model(tree) -> str | None:
    """The model (graph) name of a dump tree's leaf directory, when its dumps name exactly one; else None."""
    if tree is None:
        return None
    names = {e.model_name for e in tree.entries}
    return next(iter(names)) if len(names) == 1 else None


def tree_device(tree) -> str | None:
    """The device of a dump tree's leaf directory, when its dumps name exactly one; else None."""
    if tree is None:
        return None
    devices = {e.device for e in tree.entries}
    return next(iter(devices)) if len(devices) == 1 else None


def graph_for(graph, dumped, side: str, notes: list[str], model: str | None = None, device: str | None = None):
    """The graph of one side, for both engines, from what :func:`graph_input` gave (None, a Graph, or a GraphSet).
    A directory of several Build graphs is merged (a job's graph_1, graph_2, ...), except when they share op names
    (a train and an eval graph, or a recompile): merged, the later one would stand for ops of the other. Then the
    graph the dumps' model directory names (``model``) is used, else the one that holds the most of ``dumped``
    (the dump files' op names), then the later file (a recompile), with a note; among graphs alike, one in the
    dumps' device's folder (``pid_*_deviceid_<device>``: each rank dumps its own) first. One file holding several
    GraphDefs that share op names is cut to the one ``model`` names the same way (an op's fusion passes are those
    of the graph that ran it)."""
    from fusebisect.compare.graph import GraphSet

    if not isinstance(graph, GraphSet):   # None, or a Graph a caller built itself
        return graph
    merged, each, graph = graph.merged, graph.each, graph.root
    if len(each) < 2:
        return _model_part(merged, model, side, notes)
    names = [{mp.lookup_name(o.name) for o in g.ops} for _f, g in each]
    if sum(map(len, names)) == len(set().union(*names)):
        return merged   # no op name in two graphs: they are parts of one job
    covered = [len(n & dumped) for n in names]
    undumped = [len(n - dumped) for n in names]   # an eval graph of unfused ops names ops never dumped
    named = [bool(model) and model in g.graph_names for _f, g in each]
    own = [device is not None and any(part.endswith(f"deviceid_{device}") for part in f.parts) for f, _g in each]
    best = max(range(len(each)), key=lambda i: (named[i], own[i], covered[i], -undumped[i], i))
    if not named[best] and covered[best] < len({mp.lookup_name(o.name) for o in merged.ops} & dumped):
        return merged

    def shown(f: Path) -> str:   # under the folder given (runs of a job keep the same names in pid_* folders)
        try:
            return str(f.relative_to(graph))
        except ValueError:
            return f.name

    why = (f"whose graph {model} the dumps' model directory names" if named[best] else
           f"which names {covered[best]} of the {len(dumped)} op dumps")
    notes.append(f"{graph} holds {len(each)} Build graphs sharing op names: the {side} side uses "
                 f"{shown(each[best][0])}, {why} (the others: "
                 f"{', '.join(shown(f) for i, (f, _g) in enumerate(each) if i != best)})")
    return each[best][1]


def _model_part(graph, model: str | None, side: str, notes: list[str]):
    """``graph`` cut to its GraphDef named ``model`` when it holds several that share op names; else as it is."""
    if graph is None or not model or len(graph.graph_names) < 2 or model not in graph.graph_names:
        return graph
    names = [o.name for o in graph.ops]
    if len(names) == len(set(names)):
        return graph
    from fusebisect.compare.graph import Graph

    notes.append(f"{graph.path} holds graphs {', '.join(graph.graph_names)} sharing op names: the {side} side uses "
                 f"{model}, which the dumps' model directory names")
    return Graph(graph.path, [o for o in graph.ops if o.graph == model], [model])


def _dir_has_npy(path: Path) -> bool:
    if path.is_file():
        return path.name.endswith(".npy")
    try:
        return any(name.endswith(".npy") for name in os.listdir(path))
    except OSError:
        return False


@dataclass
class ChosenInputs:
    """What both engines compare: one leaf of each dump tree (``golden`` None for a golden .npy directory, whose
    chosen files are ``golden_npy_entries``), and the notes saying what was chosen and why."""

    my: DumpTree
    golden: DumpTree | None
    golden_npy: bool
    golden_npy_entries: dict | None
    notes: list[str]


def graph_input(graph):
    """A graph argument parsed once: a path becomes a GraphSet (a directory's files each, and merged); a Graph or
    GraphSet (or None) is returned as it is. Raises GraphFormatError."""
    from fusebisect.compare.graph import GraphSet, load_graph_set

    if graph is None or isinstance(graph, GraphSet) or hasattr(graph, "ops"):
        return graph
    return load_graph_set(graph)


def graph_names(graph) -> frozenset | None:
    """The GraphDef names a graph argument holds (None for no graph)."""
    if graph is None:
        return None
    merged = getattr(graph, "merged", graph)
    return frozenset(merged.graph_names)


def choose_inputs(my_path: Path, golden_path: Path, *, with_graph: bool, leaf: str = "latest",
                  prefer: tuple = (None, None), model: str | None = None,
                  device: str | None = None) -> ChosenInputs:
    """Scan both sides and keep what is compared: one (device, model, iteration) leaf of each dump tree
    (``tree.one_leaf``), or of a golden .npy directory the newest (``leaf`` 'earliest': oldest) file of each
    output; with notes for what was left out (files that are no op dumps, other steps). ``model``/``device``:
    only the dumps of that model (its :func:`~fusebisect.compare.tree.model_key`) and device take part. Raises
    DumpFormatError for a golden spread over several directories."""
    from fusebisect.compare.tree import is_golden_dir, model_key, one_leaf, scan_dumps, scan_golden

    my_tree = scan_dumps(my_path)
    golden_npy = is_golden_dir(golden_path) or (golden_path.is_file() and golden_path.name.endswith(".npy"))
    golden_tree = None if golden_npy else scan_dumps(golden_path)
    if model is not None or device is not None:
        for tree in (my_tree, golden_tree):
            if tree is not None:
                tree.entries = [e for e in tree.entries if (model is None or model_key(e.model_name) == model)
                                and (device is None or e.device == device)]
    iterations = {e.iteration for e in my_tree.entries}
    my_tree, golden_tree, notes = one_leaf(my_tree, golden_tree, earliest=leaf == "earliest", prefer=prefer)
    for tree in (my_tree, golden_tree):   # what was found but is no op dump is said, not silently dropped
        if tree is not None and tree.bad:
            where, why = tree.bad[0]
            notes.append(f"{len(tree.bad)} file(s) in {tree.root} are not op dumps and were left out (first: "
                         f"{where}: {why})")

    def step(it: str | None) -> tuple:   # iteration dirs are numbers ("10" after "9")
        return (0, int(it), "") if it and it.isdigit() else (1, 0, it or "")

    compared_first = (min(map(step, {e.iteration for e in my_tree.entries}), default=None)
                      == min(map(step, iterations), default=None))
    if leaf == "latest" and with_graph and not golden_npy and len(iterations) > 1 and not compared_first:
        # fused vs unfused: a later step ran on weights a faulty fusion has already drifted, so its first
        # divergence is wherever the drift shows first, not the fusion's own op
        notes.append("fused vs unfused over several steps: the later ones ran on weights a faulty fusion has "
                     "already drifted, so their first divergence need not be the fusion's; compare the "
                     "earliest step for that (--iteration earliest)")
    entries = None
    if golden_npy:
        repeated: list[tuple[str, int]] = []
        entries = scan_golden(golden_path, repeated, earliest=leaf == "earliest")
        if repeated:
            again, again_index = repeated[0]
            which = "earliest (--iteration earliest)" if leaf == "earliest" else "newest"
            notes.append(f"the golden in {golden_path} holds several dumps of {len(repeated)} output(s) (e.g. "
                         f"{again} output {again_index}: several steps?): the {which} of each was compared; "
                         "give a directory of the one step your dump is")
    return ChosenInputs(my_tree, golden_tree, golden_npy, entries, notes)


def compare_dumps(my, golden, *, my_graph=None, golden_graph=None, algorithms: Sequence[str] | None = None,
                  cosine: float = 0.99, max_abs_error: float | None = None, op: str | None = None,
                  jobs: int | None = 1, ffts_direct: bool = False, leaf: str = "latest",
                  same_ops_directly: bool = False, model: str | None = None,
                  device: str | None = None) -> CompareReport:
    """Compares my dump against the golden data, msaccucmp style.

    ``my``: any dump location ``scan_dumps`` accepts. ``golden``: a golden ``.npy`` directory or a dump location.
    Graphs (paths or loaded :class:`Graph`) choose the mapping (see :mod:`fusebisect.compare.mapping`).
    FFTS+ thread files of one op are merged into one dump (:mod:`fusebisect.compare.ffts`); ``ffts_direct``
    keeps the op names of the files as they are (msaccucmp ``-ffts``: manual-mode slices compared one to one).
    A row diverges when cosine < ``cosine`` or max abs error > ``max_abs_error``. ``jobs``: worker processes
    over ops; ``None`` (or 0) picks :func:`auto_jobs` for the number of ops. ``leaf``: which iteration of a
    dump holding several is compared, 'latest' or 'earliest' (see ``tree.one_leaf``). ``same_ops_directly``
    (fused vs unfused only; not msaccucmp's way): an op both graphs hold, same name, type and fusion (the same
    pass names, or none), is compared one to one with its namesake, inputs with inputs and outputs with outputs, rather than
    through its original ops; msaccucmp compares a Cast's fp16 output with the fp32 tensor before the Cast,
    whose rounding error is no divergence between two runs (the run oracle's case). ``model``, ``device``: compare
    only the dumps of that model and device (a train and an eval graph, or two ranks, one at a time). Returns a
    :class:`CompareReport`. Raises DumpFormatError/GraphFormatError for unreadable inputs, UsageError for
    impossible combinations (my side is .npy).
    """
    algorithms = normalize_algorithms(algorithms)
    if leaf not in ("latest", "earliest"):
        raise UsageError(f"leaf must be 'latest' or 'earliest', got {leaf!r}")
    my_path, golden_path = Path(my), Path(golden)
    if not my_path.exists():
        raise UsageError(f"{my_path}: {missing_reason(my_path, 'no such dump location')}")
    if not golden_path.exists():
        raise UsageError(f"{golden_path}: {missing_reason(golden_path, 'no such golden location')}")
    from fusebisect.compare.tree import is_golden_dir

    if (my_path.is_file() and my_path.name.endswith(".npy")) or is_golden_dir(my_path):
        raise UsageError(f"{my_path}: golden .npy data, not an NPU dump: MY takes NPU dump files or directories, "
                         "and .npy files go on the GOLDEN side")
    with_graph = my_graph is not None
    my_graph, golden_graph = graph_input(my_graph), graph_input(golden_graph)
    chosen = choose_inputs(my_path, golden_path, with_graph=with_graph, leaf=leaf,
                           prefer=(graph_names(my_graph), graph_names(golden_graph)), model=model, device=device)
    my_tree, golden_tree, golden_npy, leaf_notes = chosen.my, chosen.golden, chosen.golden_npy, chosen.notes
    my_index = mp.index_tree(my_tree, graph=with_graph, direct=ffts_direct)
    if not my_index.files:
        raise DumpFormatError(f"no op dump files found in {my_path}")
    if golden_tree is None:
        golden_index = mp.index_golden(chosen.golden_npy_entries)
    else:
        golden_index = mp.index_tree(golden_tree, graph=with_graph, direct=ffts_direct)
        if not golden_index.files:
            raise DumpFormatError(f"no op dump files and no golden .npy files found in {golden_path}")
    graph_notes: list[str] = []
    my_g = graph_for(my_graph, set(my_index.files), "my", graph_notes, tree_model(my_tree), tree_device(my_tree))
    golden_g = graph_for(golden_graph, set(golden_index.files), "golden", graph_notes, tree_model(golden_tree),
                         tree_device(golden_tree))
    ctx = _Context(algorithms, my_index, golden_index, golden_npy, jobs=max(1, int(jobs)) if jobs else 1)
    ctx.notes.extend(leaf_notes + graph_notes)
    ctx.my_address = not _dir_has_npy(my_path)
    ctx.golden_address = not golden_npy and not _dir_has_npy(golden_path)

    stray: list[str] = []
    dropped: dict[str, list[str]] = {}   # fused ops with dumps that msaccucmp's merged rule leaves out
    if my_g is None:
        if golden_npy:
            mode = "npy_by_name"
            tasks = _tasks_npy_by_name(ctx)
        else:
            mode = "npu_vs_npu"
            tasks = _tasks_npu_vs_npu(ctx)
    else:
        rule = mp.build_rule(my_g)
        ctx.originals = {o.name: list(o.original_op_names) if o.have_origin else [] for o in rule.op_list}
        stray = not_in_graph(my_g, my_index.files)
        if stray:   # they are not compared; many of them means the graph is not this dump's
            ctx.notes.append(not_in_graph_note(stray, len(my_index.files), "my"))
        if golden_npy:
            mode = "npu_vs_npy"
        else:
            mode = "fused_vs_unfused"
            close = mp.build_rule(golden_g) if golden_g is not None else _identity_rule(rule)
            if golden_g is not None and (golden_stray := not_in_graph(golden_g, golden_index.files)):
                # unused rather than left out of a verdict, but my ops' original ops are looked up in the wrong graph
                ctx.notes.append(not_in_graph_note(golden_stray, len(golden_index.files), "golden"))
            if same_ops_directly and golden_g is not None:
                ctx.golden_types = {o.name: (o.type, tuple(o.pass_names), o.ub_pass_name) for o in close.op_list}
            rule = mp.merge_close(rule, close)
            dropped = _left_out(my_g, rule, my_index)
            for name, originals in dropped.items():
                ctx.unmatched.append({"op": name, "side": "my", "reason": (
                    f"not compared: its original ops ({', '.join(originals)}) start as another fused op's do, and "
                    "msaccucmp's fusion rule keeps only the first of them (one op fused into several)")})
        ctx.rule = rule
        tasks = _tasks_graph(ctx)
    if op is not None:
        tasks = [t for t in tasks if op in t.op_names]
        if not tasks:
            raise UsageError(f"--op {op}: no such op in the comparison")
    if not jobs:
        ctx.jobs = auto_jobs(len(tasks))
    rows_by_task = _run(tasks, ctx)
    rows = [row for task_rows in rows_by_task for row in task_rows]
    rows.sort(key=lambda r: r.index)     # msaccucmp sorts its CSV by Index (stable)
    if ctx.rule is not None and ctx.my_address != ctx.golden_address:
        _ffts_inputs_from_producers(rows)
    extra = list(dict.fromkeys(r.my_op for r in rows if "for the operator list." in r.fail_reason))
    if extra:   # an op whose dump has more inputs than its graph op: the graph is another build's
        ctx.notes.append(f"{len(extra)} op dump(s) have more inputs than their op in the graph given for my side "
                         f"(first: {extra[0]}): is the graph the one of this dump? (a fused op of another build "
                         "compares against what its unfused op computed)")
    if mode == "npu_vs_npu":
        only_mine = sum(u["reason"] == "no golden dump" for u in ctx.unmatched)
        only_golden = sum(u["reason"] == "no dump in my data" for u in ctx.unmatched)
        if only_mine and only_golden:   # what fused vs unfused dumps matched by name look like
            ctx.notes.append(f"{only_mine} of my ops have no golden op of their name and {only_golden} golden ops "
                             "none of mine: if one side ran with fusion and the other without, give the fused "
                             "side's GE graph (--my-graph) so fused ops are compared with the ops they replaced; "
                             "matched by name, a fused op is compared with the unfused op of its name only")
    notes = list(dict.fromkeys(my_index.notes + golden_index.notes + ctx.notes))
    report = CompareReport(rows, None, ctx.unmatched, algorithms, ctx.my_address, ctx.golden_address, mode, notes)
    report.not_in_graph = stray if op is None else [s for s in stray if s == mp.lookup_name(op)]
    report.graphs = (my_g, golden_g)
    report.dumped = (_dumped_names(my_tree), _dumped_names(golden_tree))
    report.first_divergence = first_divergence(report, cosine=cosine, max_abs_error=max_abs_error)
    if report.first_divergence is not None:
        blame_producer(report.first_divergence, report.rows, my_g)
        _left_out_upstream(report, my_g, dropped)
        if report.unreadable:   # the first divergence is the first among the tensors that could be read
            report.notes.append(unreadable_note(report, {key: min(e.timestamp for e in entries)
                                                         for key, entries in my_index.files.items()}))
    if mode == "npy_by_name":
        report.notes.append("golden .npy without --my-graph: ops are matched by name (msaccucmp requires -f here); a "
                            "fused op is compared with the golden of the op it is named after, which computes less: "
                            "give --my-graph to map fused ops to their original ops")
    return report


def _distinct_files(unreadable: list[dict]) -> int:
    """How many files unreadable entries name (a golden file read for several ops has an entry per op)."""
    return len({u["file"] for u in unreadable})


def unreadable_note(report: CompareReport, ran_at: dict[str, int]) -> str:
    """The note of a first divergence found beside dump files that could not be read. A file of an op that ran
    before the first divergence (in execution order: ``ran_at``, my op dumps' times by lookup name; an op of
    unknown time counts as earlier) may hold an earlier divergence; files of ops that ran after it cannot move it."""
    fd = report.first_divergence
    at = next((r.timestamp for r in report.execution_order()
               if r.tensor == fd["tensor"] and fd["op"] in r.my_op.split(",")), None)

    def before(u: dict) -> bool:
        ran = ran_at.get(mp.lookup_name(str(u["op"])))
        return at is None or ran is None or ran < at

    earlier = [u for u in report.unreadable if before(u)]
    count = report.unreadable_files
    if earlier:
        files = _distinct_files(earlier)
        some = "" if files == count else f", {files} of them of ops that ran before the first divergence"
        return (f"{count} dump file(s) could not be read{some} (first: {earlier[0]['reason']}): the divergence may "
                "start before the first one reported")
    return (f"{count} dump file(s) could not be read (first: {report.unreadable[0]['reason']}): their tensors were not "
            "compared; all of them are of ops that ran after the first divergence, which they do not move")


def not_in_graph(graph, dumped) -> list[str]:
    """Of ``dumped`` (op dump names as indexed, in order), those ``graph`` has no op of that name for."""
    in_graph = {key for o in graph.ops for key in (mp.lookup_name(o.name), mp.dump_file_spelling(o.name))}
    return [key for key in dumped if key not in in_graph]


def not_in_graph_note(stray: list[str], dumps: int, side: str) -> str:
    """The note for ``stray`` (:func:`not_in_graph`) of ``dumps`` op dumps of ``side`` ('my' or 'golden'): their
    graph is likely another build's. Both engines say it alike."""
    mine = side == "my"
    return (f"{len(stray)} of {dumps} {'' if mine else 'golden '}op dumps have no op of that name in the graph given "
            f"for {'my' if mine else 'the golden'} side (first: {stray[0]}); "
            f"{'they are not compared' if mine else 'the original ops of my fused ops are looked up in it'}. "
            "Is the graph the one of this dump?")


def _dumped_names(tree) -> frozenset[str]:
    """The op names (lookup spelling) a chosen dump tree holds (Opdebug records left out); empty for None."""
    if tree is None:
        return frozenset()
    return frozenset(mp.dump_file_spelling(e.op_name) for e in tree.entries if e.op_type != "Opdebug")


def blame_producer(fd: dict, rows: list[CompareRow], graph) -> None:
    """When the first divergent tensor is an input, the op reading it did not cause it: point ``fd`` at the op
    that produced it (from my graph): ``producer`` {op, output, compared}, and the producer's pass names and
    original ops as the ones to suspect. Without a graph, ``producer`` is None (unknown upstream op)."""
    op_name, sep, index = str(fd["tensor"]).rpartition(":input:")
    if not sep:
        return
    fd["input_of"] = op_name
    fd["producer"] = None
    consumer = graph.op(op_name) if graph is not None else None
    edges = consumer.data_inputs if consumer is not None else []
    if not index.isdigit() or int(index) >= len(edges):
        fd["pass_names"], fd["ub_pass_name"], fd["ground_truth"] = [], None, []
        return
    name, _, output = edges[int(index)].rpartition(":")
    producer = graph.op(name)
    # through Cast/TransData to the op the row was compared through (msaccucmp's get_right_dump_data: a special
    # op's input and output indexes correspond one to one), so the fused op before a Cast is the one blamed
    for _ in range(1000):   # (a cycle of special ops ends the walk)
        ins = producer.data_inputs if producer is not None and producer.type in mp.SPECIAL_OPS_TYPE else []
        if not output.isdigit() or int(output) >= len(ins):
            break
        before, _, before_output = ins[int(output)].rpartition(":")
        prior = graph.op(before)
        if prior is None:
            break
        name, output, producer = before, before_output, prior
    tensor = f"{name}:output:{output}"
    compared = any(r.tensor == tensor and r.compared for r in rows)
    fd["producer"] = {"op": name, "output": int(output) if output.isdigit() else output, "compared": compared}
    fd["pass_names"] = list(producer.pass_names) if producer is not None else []
    fd["ub_pass_name"] = producer.ub_pass_name if producer is not None else None
    fd["ground_truth"] = list(producer.original_op_names or [name]) if producer is not None else [name]


def origin_text(fd: dict, where_listed: str = "below") -> str | None:
    """Where a first divergence that is an op's input comes from, for people (None when it is an output): the
    producer, and whether its own output was compared (not compared, its input may already have diverged).
    ``where_listed``: where the text that shows it lists the passes and ops."""
    if "input_of" not in fd:
        return None
    producer = fd.get("producer")
    if producer is None:
        where = "an op upstream (no graph to say which)"
    else:
        where = (f"{producer['op']} (output {producer['output']}, "
                 + ("compared without divergence" if producer["compared"] else "not compared") + ")")
    return (f"this is an input of {fd['input_of']}: the divergence comes from {where}; the passes and ops "
            f"{where_listed} are the producer's")


def suspect_rules(fd: dict) -> list[str]:
    """A first divergence's rules to suspect, as shown: its graph-fusion passes, then its UB fusion pass."""
    return [*(fd.get("pass_names") or []), *([fd["ub_pass_name"]] if fd.get("ub_pass_name") else [])]


def suspects_label(fd: dict) -> str:
    """The heading of a first divergence's pass names: the rules to suspect, unless they are those of a producer
    whose own output was not compared (the divergence may start further upstream)."""
    producer = fd.get("producer")
    if "input_of" in fd and (producer is None or not producer["compared"]):
        return "rules of that producer (not compared itself: the divergence may start further upstream)"
    return "rules to suspect"


AUTO_JOBS_MIN_OPS = 500      # below this, starting workers costs about what they save


def auto_jobs(ops: int) -> int:
    """The default worker count for ``ops`` ops: one per usable CPU when there are at least
    ``AUTO_JOBS_MIN_OPS`` ops and workers can be forked (no other threads running), else 1. Never raises."""
    if ops < AUTO_JOBS_MIN_OPS:
        return 1
    import multiprocessing
    import threading

    if "fork" not in multiprocessing.get_all_start_methods() or threading.active_count() > 1:
        return 1
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, cpus)


def _identity_rule(rule: mp.FusionRule) -> mp.FusionRule:
    """Close graph stand-in when only my graph is known: each original op is its own unfused op."""
    from types import SimpleNamespace as NS
    ops = []
    seen = set()
    for op in rule.op_list:
        for name in op.original_op_names:
            if name and name not in seen:
                seen.add(name)
                ops.append(NS(name=name, type="", id=None, inputs=[], original_op_names=[], outputs=[],
                              l1_fusion_sub_graph_no=None, is_multiop=False, pass_names=[], ub_pass_name=None))
    return mp.build_rule(NS(ops=ops))


def is_divergent(row: CompareRow, *, cosine: float = 0.99, max_abs_error: float | None = None) -> bool:
    """True when the row's cosine is below ``cosine``, its max abs error above ``max_abs_error``, or its NaN/Inf
    differ from the golden's (on one side only, or of another kind; the cosine is then NaN: no threshold would
    catch it). A scalar, whose
    cosine is always 1, diverges when its relative error exceeds ``1 - cosine`` (1 % by default). A row that is
    not ``judged`` (an integer tensor against a float golden) never diverges."""
    if not row.judged:
        return False
    if row.nonfinite:
        return True
    if row.scalar_relative_error is not None:   # its cosine says nothing: 1 - cosine bounds the relative error
        return row.scalar_relative_error > 1 - cosine or (max_abs_error is not None and row.max_abs_error is not None
                                                          and row.max_abs_error > max_abs_error)
    # a cosine is judged as msaccucmp prints it (6 decimals): float32 sums make a tensor's cosine with itself
    # 0.99999994, which --cosine 1 would call a divergence
    if row.finite_cosine is not None:   # msaccucmp's cosine is NaN (same NaN/Inf, or one side all zero)
        return round(row.finite_cosine, 6) < cosine or (max_abs_error is not None
                                                         and row.finite_max_abs_error > max_abs_error)
    cos = row.cosine
    if cos is not None and not np.isnan(cos) and round(cos, 6) < cosine:
        return True
    mae = row.max_abs_error
    if max_abs_error is not None and mae is not None and not np.isnan(mae) and mae > max_abs_error:
        return True
    return False


def verdict_cosine(row: CompareRow) -> float | None:
    """The cosine the verdict uses for ``row`` (what ``--top`` ranks by): -inf when its NaN/Inf differ from the
    golden's, ``finite_cosine`` where msaccucmp's cosine is NaN for finite reasons (0 for a tensor of zeros against
    a non-zero one, the other elements' cosine when both hold the same NaN/Inf), else its cosine. None when no
    verdict rests on a cosine: the row was not compared or not judged, or its cosine is NaN."""
    if not row.compared or not row.judged:
        return None
    if row.nonfinite:
        return -math.inf
    if row.finite_cosine is not None:
        return row.finite_cosine
    cos = row.cosine
    return None if cos is None or math.isnan(cos) else cos


def nonfinite_note(nonfinite: int | None, finite_cosine: float | None, zero: str | None = None) -> str:
    """What a row's NaN metrics mean, for people (msaccucmp writes no reason for NaN/Inf): '' when nothing is NaN.
    ``zero``: 'mine' or 'golden' when that tensor alone is all zero (msaccucmp's cosine is then NaN)."""
    if nonfinite:
        return f"{nonfinite} NaN/Inf values unlike the golden's"
    if zero is not None:
        return f"{'my tensor' if zero == 'mine' else 'the golden'} is all zero and the other is not: cosine 0"
    if finite_cosine is not None:
        return f"same NaN/Inf as the golden; the other elements: cosine {finite_cosine:.6f}"
    return ""


def first_divergence(report: CompareReport, *, cosine: float = 0.99,
                     max_abs_error: float | None = None) -> dict | None:
    """The first divergent row in execution order as the --json dict, or None."""
    for row in report.execution_order():
        if is_divergent(row, cosine=cosine, max_abs_error=max_abs_error):
            # a row of several ops (one original op split into them) names them all, as msaccucmp's NPUDump does;
            # the divergence is the op its tensor belongs to, which --op takes
            ops = [op for op in row.my_op.split(",") if row.tensor.startswith(f"{op}:")]
            return {"op": max(ops, key=len) if ops else row.my_op, "tensor": row.tensor, "cosine": row.cosine,
                    "max_abs_error": row.max_abs_error, "nonfinite": row.nonfinite,
                    "finite_cosine": row.finite_cosine, "note": row.note, "pass_names": list(row.pass_names),
                    "ub_pass_name": row.ub_pass_name,
                    "ground_truth": list(row.original_ops or row.golden_ops)}
    return None


# ------------------------------------------------------------------------------------------------ internals

@dataclass
class _Context:
    algorithms: list[str]
    my: mp.SideIndex
    golden: mp.SideIndex
    golden_npy: bool
    jobs: int = 1
    rule: mp.FusionRule | None = None
    originals: dict = field(default_factory=dict)
    unmatched: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    my_address: bool = True
    golden_address: bool = True
    pending: "_Pending | None" = None
    golden_types: dict = field(default_factory=dict)   # golden op -> (type, pass names, UB pass): one to one


class _Pending:
    """Tensor pairs waiting to be compared together (``metrics.compare_batch``) and the rows they fill.

    Small pairs are queued and compared in stacks when enough elements are waiting (memory stays bounded by
    ``FLUSH_ELEMENTS``); other pairs are compared at once. Rows get their metrics no later than :meth:`flush`.
    """

    FLUSH_ELEMENTS = 4 * BATCH_ELEMENTS

    def __init__(self, algorithms: list[str]) -> None:
        self.algorithms = algorithms
        self.items: list[tuple] = []
        self.targets: list[tuple] = []      # (row, on_error)
        self.elements = 0

    def add(self, row: CompareRow, x: np.ndarray, y: np.ndarray, shape, my_name: str, golden_name: str,
            on_error=None) -> None:
        """Compare x with y into ``row`` (metrics and fail reason), now or at the next flush. ``on_error(exc)``
        handles a DumpFormatError/ValueError raised by the comparison (default: raise it)."""
        if batchable(x, y):
            self.items.append((x, y, shape, my_name, golden_name))
            self.targets.append((row, on_error))
            self.elements += x.size
            if self.elements >= self.FLUSH_ELEMENTS:
                self.flush()
            return
        _fill(row, on_error, lambda: compare_arrays(x, y, self.algorithms, shape=shape, my_name=my_name,
                                                    golden_name=golden_name))
        _judge_values(row, x, y)

    def flush(self) -> None:
        """Compare every queued pair and fill its row."""
        items, targets = self.items, self.targets
        self.items, self.targets, self.elements = [], [], 0
        if not items:
            return
        try:
            results = compare_batch(items, self.algorithms)
        except (DumpFormatError, ValueError):     # find the pair that fails; the others still get their values
            for (x, y, shape, my_name, golden_name), (row, on_error) in zip(items, targets):
                _fill(row, on_error, lambda: compare_arrays(x, y, self.algorithms, shape=shape, my_name=my_name,
                                                            golden_name=golden_name))
                _judge_values(row, x, y)
            return
        for result, (row, _), (x, y, *_) in zip(results, targets, items):
            row.metrics = result.values
            row.fail_reason = result.fail_reason
            _judge_values(row, x, y)


SCALAR_FLOOR = 1e-5


def _scalar(v: np.ndarray) -> complex | None:
    """The one value of ``v`` (numpy or ml_dtypes: bfloat16, float8), or None when it is not a number."""
    one = v.reshape(-1)[:1]
    try:
        if one.dtype.kind == "c":
            return complex(one.astype(np.complex128)[0])
        return complex(float(one.astype(np.float64)[0]))
    except (TypeError, ValueError):
        return None


def quantized_against_float(my_dtype: str, golden_dtype: str, size: int) -> str | None:
    """The note of a row no verdict rests on, or None: an integer tensor (an int32 accumulator, an int8 activation)
    against a float golden is a quantized value before its per-channel scale and offset, and its cosine with the
    golden says nothing (msaccucmp keeps the row). Dtypes by their numpy names; ``size``: elements (a scalar is
    judged)."""
    if size > 1 and my_dtype.startswith(("int", "uint")) and golden_dtype.startswith(("float", "bfloat")):
        return f"{my_dtype} against a {golden_dtype} golden: a quantized value before its scale, not judged"
    return None


def _judge_values(row: CompareRow, x: np.ndarray, y: np.ndarray) -> None:
    """What the verdict needs beyond msaccucmp's metrics: NaN/Inf (:func:`_count_nonfinite`) and, for a scalar
    (a loss: its cosine is 1 whatever the values), the relative error."""
    note = quantized_against_float(str(x.dtype), str(_numeric(y.reshape(-1)[:0]).dtype), x.size)
    if note:
        row.judged = False
        row.note = note
        return
    _count_nonfinite(row, x, y)
    _overflowed_cosine(row, x, y)
    if x.size == 1 and y.size == 1 and x.dtype.kind not in "OSU" and y.dtype.kind not in "OSU" \
            and not row.nonfinite:
        a, b = _scalar(x), _scalar(y)
        if a is not None and b is not None and math.isfinite(abs(a)) and math.isfinite(abs(b)):
            # relative to the golden, but not below 1e-5: a scalar near zero (a centred mean) differs by rounding
            row.scalar_relative_error = abs(a - b) / max(abs(b), SCALAR_FLOOR)
            if row.scalar_relative_error:
                row.note = row.note or f"a scalar: relative error {row.scalar_relative_error:.6g}"


def _numeric(v: np.ndarray) -> np.ndarray:
    """``v`` with the ml_dtypes floats (bfloat16, float8: numpy kind 'V') widened to float32."""
    if v.dtype.kind == "V":
        try:
            return v.astype(np.float32)
        except (TypeError, ValueError):
            return v
    return v


def _overflowed_cosine(row: CompareRow, x: np.ndarray, y: np.ndarray) -> None:
    """A low cosine that only float32 overflow made (msaccucmp sums squares in float32: values past ~1e19 make
    identical tensors read cosine 0): recompute it in float64 as ``finite_cosine``, which the verdict uses."""
    cos = row.cosine
    if row.nonfinite or row.finite_cosine is not None or cos is None or not math.isfinite(cos) or cos >= 0.999999:
        return
    x, y = _numeric(x), _numeric(y)
    if x.size != y.size or x.size < 2 or x.dtype.kind not in "fiu" or y.dtype.kind not in "fiu":
        return
    a, b = x.reshape(-1).astype(np.float64), y.reshape(-1).astype(np.float64)
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        return
    scale = max(float(np.max(np.abs(a))), float(np.max(np.abs(b))))
    if scale * math.sqrt(a.size) < 1e18:
        return
    _finite_cosine(row, a, b)
    row.note = row.note or (f"values past float32's range for sums of squares: cosine in float64 "
                            f"{row.finite_cosine:.6f}")


def _finite_cosine(row: CompareRow, a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Set ``row.finite_cosine`` and ``row.finite_max_abs_error`` from finite float64 arrays; return their L2
    norms, 0.0 for an array msaccucmp counts as all zero. That is decided as msaccucmp's cosine does, on float32
    copies (whose squares underflow below ~1e-23): both norms at most float64 eps read 1; one whose square root
    is at most eps is "All the data is zero" (cosine 0 for the verdict). The cosine itself is taken in float64 on
    each array divided by its largest magnitude (it does not change), so values past ~1e154 do not overflow."""
    with np.errstate(over="ignore"):   # a difference past float64's range is inf, as it is
        row.finite_max_abs_error = float(np.max(np.abs(a - b)))
    with np.errstate(over="ignore", under="ignore"):
        a32, b32 = a.astype(np.float32), b.astype(np.float32)
        n32a, n32b = float(np.sqrt(np.dot(a32, a32))), float(np.sqrt(np.dot(b32, b32)))
    if n32a <= FLOAT_EPSILON and n32b < FLOAT_EPSILON:   # msaccucmp: both norms at most eps
        row.finite_cosine = 1.0
        return 0.0, 0.0
    sa, sb = float(np.max(np.abs(a))), float(np.max(np.abs(b)))
    a, b = (a / sa if sa else a), (b / sb if sb else b)
    na = 0.0 if n32a ** 0.5 <= FLOAT_EPSILON else sa * float(np.linalg.norm(a))
    nb = 0.0 if n32b ** 0.5 <= FLOAT_EPSILON else sb * float(np.linalg.norm(b))
    row.finite_cosine = float(a @ b) / (float(np.linalg.norm(a)) * float(np.linalg.norm(b))) if na and nb else 0.0
    return na, nb


def _count_nonfinite(row: CompareRow, x: np.ndarray, y: np.ndarray) -> None:
    """Judge the rows whose msaccucmp metrics are NaN, which no threshold catches.

    ``row.nonfinite`` counts the elements whose NaN/Inf differs from the golden's (NaN or Inf on one side only,
    NaN against Inf, or Inf of the other sign). When both hold the same NaN/Inf (a -inf attention mask), the
    metrics are NaN whatever the other elements are, and when one tensor alone is all zero (a fused op that
    wrote nothing) the cosine is NaN: ``finite_cosine`` and ``finite_max_abs_error`` then measure the elements
    finite on both sides, a zero tensor against a non-zero one having cosine 0. The arrays are only scanned
    when a metric is not finite."""
    if all(not isinstance(v, float) or math.isfinite(v) for v in row.metrics.values()):
        return
    x, y = _numeric(x), _numeric(y)
    if x.size != y.size or x.size == 0 or x.dtype.kind not in "fciub" or y.dtype.kind not in "fciub":
        return
    x, y = x.reshape(-1), y.reshape(-1)
    fx, fy = np.isfinite(x), np.isfinite(y)
    all_finite = bool(fx.all() and fy.all())
    if all_finite:
        cos = row.cosine
        if cos is None or not math.isnan(cos):   # only the cosine's NaN hides a divergence
            return
        a, b = x, y
    else:
        # NaN/Inf on one side only (mine, or a golden -inf mask my tensor lost) or of another kind
        both = ~fx & ~fy
        same = np.isnan(x[both]) & np.isnan(y[both]) | (x[both] == y[both])
        row.nonfinite = int(np.count_nonzero(fx != fy)) + int(np.count_nonzero(~same))
        finite = fx & fy
        if not row.nonfinite and not finite.any():
            # the same NaN/Inf everywhere: nothing to compare (msaccucmp's relative errors read 0 for all NaN)
            row.judged = False
            row.note = "no element finite on both sides (the same NaN/Inf as the golden): nothing to compare"
            return
        if row.nonfinite or not finite.any():
            row.note = nonfinite_note(row.nonfinite, None)
            return
        a, b = x[finite], y[finite]
    if a.dtype.kind == "c" or b.dtype.kind == "c":   # complex: its real and imaginary parts, as one real vector
        a, b = (np.concatenate([v.real, v.imag]) if v.dtype.kind == "c" else np.concatenate([v, np.zeros_like(v)])
                for v in (a, b))
    na, nb = _finite_cosine(row, a.astype(np.float64), b.astype(np.float64))
    zero = "mine" if na == 0 else "golden" if nb == 0 else None
    if all_finite and na and nb:   # no NaN/Inf and no zero tensor: msaccucmp's float32 sums of squares overflowed
        row.note = (f"values past float32's range for msaccucmp's sums of squares: cosine in float64 "
                    f"{row.finite_cosine:.6f}")
        return
    row.note = nonfinite_note(0, row.finite_cosine, zero if all_finite and na != nb else None)


def _fill(row: CompareRow, on_error, compute) -> None:
    try:
        result: Metrics = compute()
    except (DumpFormatError, ValueError) as exc:
        if on_error is None:
            raise
        on_error(exc)
        return
    row.metrics = result.values
    row.fail_reason = result.fail_reason


@dataclass
class _Task:
    op_names: list[str]
    run: object          # callable(ctx) -> list[CompareRow]


def _run_range(tasks: list[_Task], ctx: _Context, start: int, stop: int) -> list[tuple[list[CompareRow], list,
                                                                                        list]]:
    """Runs tasks[start:stop] with their own pending batch, unmatched list and notes:
    [(rows, unmatched, notes)] per task, every row filled."""
    local = copy.copy(ctx)
    local.unmatched = []
    local.notes = []
    local.pending = _Pending(ctx.algorithms)
    out = []
    for task in tasks[start:stop]:
        before, noted = len(local.unmatched), len(local.notes)
        rows = task.run(local)
        out.append((rows, local.unmatched[before:], local.notes[noted:]))
    local.pending.flush()
    return out


def _ranges(count: int, parts: int) -> list[tuple[int, int]]:
    step = max(1, -(-count // parts))
    return [(i, min(i + step, count)) for i in range(0, count, step)]


def _run_split(tasks: list[_Task], ctx: _Context, jobs: int) -> list[list[tuple[list[CompareRow], list, list]]]:
    """Splits the tasks into ``jobs`` contiguous shares: this process runs the first, forked children the
    others. A child writes its pickled result to an unlinked temporary file (so it never waits for this process
    to read a pipe) and leaves with ``os._exit``. Raises what a child raised; kills the children on any error."""
    import pickle
    import signal
    import tempfile

    ranges = _ranges(len(tasks), jobs)
    try:
        outs = [tempfile.TemporaryFile() for _ in ranges[1:]]
    except OSError:                                         # no usable temporary directory: run serially
        return [_run_range(tasks, ctx, 0, len(tasks))]
    children: list[tuple[int, object]] = []
    try:
        for bounds, out in zip(ranges[1:], outs):
            pid = os.fork()
            if pid == 0:                                    # child
                code = 0
                try:
                    try:
                        result = (True, _run_range(tasks, ctx, *bounds))
                    except BaseException as exc:            # noqa: BLE001 - handed to the parent
                        result = (False, exc)
                    pickle.dump(result, out, protocol=pickle.HIGHEST_PROTOCOL)
                    out.flush()
                except BaseException:                       # noqa: BLE001 - the parent sees the exit code
                    code = 1
                finally:
                    os._exit(code)
            children.append((pid, out))
        parts = [_run_range(tasks, ctx, *ranges[0])]
        shares = list(ranges[1:])
        while children:
            pid, out = children[0]
            _, status = os.waitpid(pid, 0)
            children.pop(0)
            bounds = shares.pop(0)
            with out:
                out.seek(0)
                if os.waitstatus_to_exitcode(status) != 0:
                    # it could not hand its result over (a full temporary directory, a file size limit) or died:
                    # this process compares its share itself
                    parts.append(_run_range(tasks, ctx, *bounds))
                    continue
                ok, value = pickle.load(out)
            if not ok:
                raise value
            parts.append(value)
        return parts
    finally:
        for pid, _ in children:                             # only after an error: stop the rest
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass
        for out in outs:
            out.close()


def _run(tasks: list[_Task], ctx: _Context) -> list[list[CompareRow]]:
    """Run the per-op tasks in order. ``jobs`` > 1: this process and ``jobs - 1`` forked children each run a
    contiguous share (the per-op Python work does not scale with threads), or threads where fork is unavailable
    or other threads are running.
    The cyclic garbage collector is paused meanwhile: the loop makes many objects and no cycles."""
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        if ctx.jobs <= 1 or len(tasks) <= 1:
            results = _run_range(tasks, ctx, 0, len(tasks))
        else:
            import multiprocessing
            import threading

            if "fork" not in multiprocessing.get_all_start_methods() or threading.active_count() > 1:
                from concurrent.futures import ThreadPoolExecutor

                ranges = _ranges(len(tasks), ctx.jobs * 8)
                with ThreadPoolExecutor(max_workers=ctx.jobs) as pool:
                    parts = list(pool.map(lambda b: _run_range(tasks, ctx, *b), ranges))
            else:
                parts = _run_split(tasks, ctx, min(ctx.jobs, len(tasks)))
            results = [item for part in parts for item in part]
    finally:
        if gc_was_enabled:
            gc.enable()
    out = []
    for rows, unmatched, notes in results:   # unmatched entries and notes in task order, as a serial run adds them
        ctx.unmatched.extend(unmatched)
        ctx.notes.extend(notes)
        out.append(rows)
    return out


def _nan_metrics(ctx: _Context) -> dict:
    return {name: nan_value() for name in ctx.algorithms}


def _addr(value: int | None) -> int | None:
    return value if value else None


def _load(ctx: _Context, entry) -> ffts.ThreadRead:
    """Reads what the index gives for an op: one dump file, or an FFTS+ op's thread files merged (their notes go
    to the report). Raises DumpFormatError for unreadable files."""
    if isinstance(entry, ffts.ThreadGroup):
        loaded = entry.read()
        ctx.notes.extend(loaded.notes)
        return loaded
    return ffts.ThreadRead(read_dump(entry.path))


def _read(ctx: _Context, entry):
    """The dump to compare for an index entry (see :func:`_load`)."""
    return _load(ctx, entry).dump


def _read_golden(ctx: _Context, op: str, read):
    """``read()``, recording a golden file that cannot be read as unreadable (then re-raising)."""
    try:
        return read()
    except DumpFormatError as exc:
        _unreadable(ctx, op, exc, side="golden")
        raise


def _unreadable(ctx: _Context, op: str, exc: DumpFormatError, golden_entry=None, side: str | None = None) -> None:
    """Records a dump file that could not be read (a DumpFormatError naming its file, raised by reading it: not a
    tensor whose dtype cannot be decoded) in ``unmatched`` with its ``file``: the tensors in it are not compared,
    so no divergence found elsewhere clears them."""
    if exc.path is None:
        return
    if side is None:
        side = "golden" if golden_entry is not None and exc.path == os.fspath(getattr(golden_entry, "path", "")) \
            else "my"
    ctx.unmatched.append({"op": op, "side": side, "reason": str(exc), "file": exc.path})


FFTS_FILE_COUNT_REASON = ("This is a FFTS+ mode dump data, The number of files does not match the number of "
                          "thread")   # msaccucmp's text


def _ffts_inputs_from_producers(rows: list[CompareRow]) -> None:
    """msaccucmp's ``find_pre_op`` for FFTS+ ops compared with a graph (when exactly one Address column is
    written): an FFTS+ op's input row takes Shape, metrics and fail reason from the output row of the FFTS+ op
    producing that input (thread inputs are slices; the producer's merged output is the whole tensor)."""
    outputs: dict[str, list[CompareRow]] = {}
    for row in rows:
        op = getattr(row, "_ffts_op", None)
        if op is not None and ":output:" in row.tensor:
            outputs.setdefault(op, []).append(row)
    for row in rows:
        producer = getattr(row, "_ffts_producer", None)
        if producer is None:
            continue
        produced = outputs.get(producer[0])
        if produced is None or producer[1] >= len(produced):
            continue
        source = produced[producer[1]]
        row.shape, row.metrics, row.fail_reason = source.shape, dict(source.metrics), source.fail_reason


def _shown_dtype(record, *, device_names: bool) -> str:
    name = record.dtype_name
    if not device_names and name in _FLOAT32_READ:
        return "float32"
    if name == "undefined":   # msaccucmp reads DT_UNDEFINED as int8 and says so
        return "int8"
    if name == "resource":    # a handle, which msaccucmp reads (and names) as int64
        return "int64"
    return name


def _to_original(arr: np.ndarray, fmt: str, shape, target: str | None, sub_format: int = 0) -> np.ndarray:
    from fusebisect.compare.formats import to_original
    return to_original(arr, fmt, tuple(shape) if shape is not None else None, target=target, sub_format=sub_format)


# ---- NPU vs NPU without graphs

def _tasks_npu_vs_npu(ctx: _Context) -> list[_Task]:
    tasks = []
    for index, name, my_entry, golden_entry in mp.npu_vs_npu_groups(ctx.my, ctx.golden):
        tasks.append(_Task([name], lambda c, i=index, n=name, m=my_entry, g=golden_entry: _npu_op(c, i, n, m, g)))
    return tasks


def _one_sided_row(ctx, index, name, my_entry, golden_entry) -> CompareRow:
    if my_entry is not None:
        reason = f'[{name}] There is no the ground truth dump file for the op "{name}".'
        ctx.unmatched.append({"op": name, "side": "golden", "reason": "no golden dump"})
        my_op, golden_ops = name, ["*"]
    else:
        reason = f'[{name}] There is no the my output dump file for the op "{name}".'
        ctx.unmatched.append({"op": name, "side": "my", "reason": "no dump in my data"})
        my_op, golden_ops = "*", [name]
    return CompareRow(index, "NaN", my_op, golden_ops, "NaN", None, None, None, _nan_metrics(ctx), reason,
                      None, None, timestamp=my_entry.timestamp if my_entry is not None else 0)


def _npu_op(ctx: _Context, index: int, name: str, my_entry, golden_entry) -> list[CompareRow]:
    if my_entry is None or golden_entry is None:
        return [_one_sided_row(ctx, index, name, my_entry, golden_entry)]
    try:
        my_loaded = _load(ctx, my_entry)
        my_dump = my_loaded.dump
        golden_dump = _read(ctx, golden_entry)
    except DumpFormatError as exc:
        if exc.path is None:
            ctx.unmatched.append({"op": name, "side": "my", "reason": str(exc)})
        _unreadable(ctx, name, exc, golden_entry)
        return [CompareRow(index, "NaN", name, [name], "NaN", None, None, None, _nan_metrics(ctx),
                           str(exc), None, None, timestamp=my_entry.timestamp)]
    shown = name
    if my_dump.attrs and my_dump.op_name:    # msaccucmp then names the rows as the dump header does
        shown = my_dump.op_name
    rows: list[CompareRow] = []
    messages: list[str] = [] if my_loaded.files_match else [FFTS_FILE_COUNT_REASON]
    for kind, mine, theirs in (("input", my_dump.inputs, golden_dump.inputs),
                               ("output", my_dump.outputs, golden_dump.outputs)):
        problem = _npu_check(name, kind, mine, theirs)
        if problem:
            messages.append(problem)
            continue
        for i, (a, b) in enumerate(zip(mine, theirs)):
            row = CompareRow(index, my_entry.op_type, shown, [shown], f"{shown}:{kind}:{i}",
                             _shown_dtype(a, device_names=True), _shown_dtype(b, device_names=True),
                             tuple(a.shape), {}, "", _addr(a.address), _addr(b.address),
                             timestamp=my_entry.timestamp)
            _compare_records(ctx, row, a, b, my_entry.path, golden_entry.path)
            rows.append(row)
    if not rows:
        # a row without tensors has no op type in msaccucmp (FusionOp.get_real_op_type of a graph-less op)
        rows.append(CompareRow(index, "NaN", shown, [shown], "NaN", None, None, None, _nan_metrics(ctx),
                               ",".join(messages), None, None, timestamp=my_entry.timestamp))
    else:
        # msaccucmp's CSV silently leaves out the tensors of a kind that failed its check when the other kind
        # was compared; say so
        ctx.notes.extend(f"{m} Those tensors are not compared (and not in the CSV)." for m in messages
                         if m != FFTS_FILE_COUNT_REASON and "There is no" not in m)
    return rows


def _npu_check(name, kind, mine, theirs) -> str:
    if len(mine) != len(theirs):
        return f"[{name}] The number of {kind} does not match ({len(mine)} vs {len(theirs)})."
    if not mine:
        return f"[{name}] There is no {kind}. Skip the {name}:{kind}."
    for i, (a, b) in enumerate(zip(mine, theirs)):
        if tuple(a.shape) != tuple(b.shape):
            return (f"[{name}] The shape does not match ({_shape_text(a.shape)} vs {_shape_text(b.shape)}) for "
                    f"{name}:{kind}:{i}.")
    return ""


def _npu_restore(record) -> np.ndarray:
    """``ConvertSingleTensorFormat``: private formats to their original layout (NCHW, or the NHWC/HWCN of a
    TensorFlow graph, :func:`formats.record_to_original`) / ND by the original shape, padding removed."""
    arr = record.array()
    if record.format_name in PRIVATE_FORMATS and record.original_shape:
        try:
            return record_to_original(record, arr)[0]
        except (FusebisectError, ValueError):
            return arr
    return arr


def _left_out(graph, rule, index) -> dict[str, list[str]]:
    """The dumped ops of ``graph`` that the merged fusion ``rule`` holds in no group (an op fused into several: the
    later ones start with the same original op), with their original ops."""
    kept = {o.name for ops in rule.groups.values() for o in ops}
    return {o.name: list(o.original_op_names) for o in graph.ops
            if o.name not in kept and o.original_op_names and index.newest(o.name) is not None}


def _left_out_upstream(report, graph, dropped: dict[str, list[str]]) -> None:
    """When the first divergent op reads what a left-out op (:func:`_left_out`) wrote, say that the divergence may
    start there, with that op's passes: nothing compared it."""
    first = report.first_divergence
    op = graph.op(str(first.get("op") or "").split(",")[0]) if dropped else None
    if op is None:
        return
    for edge in op.inputs:
        producer = graph.op(edge.split(":")[0])
        if producer is not None and producer.name in dropped:
            passes = ", ".join([*producer.pass_names, *([producer.ub_pass_name] if producer.ub_pass_name else [])])
            report.notes.append(f"{op.name} reads the output of {producer.name}, which was not compared (one op "
                                f"fused into several; see unmatched): the divergence may start there"
                                + (f" (its passes: {passes})" if passes else ""))
            return


class RealPath:
    """A dump file's resolved path as the metrics' messages name it (as msaccucmp does), resolved only when a
    message is written: most comparisons write none, and resolving every file costs more than reading it."""

    __slots__ = ("path", "_real")

    def __init__(self, path) -> None:
        self.path = path
        self._real: str | None = None

    def __str__(self) -> str:
        if self._real is None:
            self._real = os.path.realpath(self.path)
        return self._real

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def __repr__(self) -> str:
        return repr(str(self))


def _compare_records(ctx, row: CompareRow, a, b, my_path, golden_path) -> None:
    """NPU vs NPU: restores both records and compares them into ``row`` (now or at the next batch flush)."""

    def failed(exc: Exception) -> None:
        if not isinstance(exc, DumpFormatError):
            raise exc
        row.metrics, row.fail_reason = _nan_metrics(ctx), str(exc)

    try:
        x = _npu_restore(a)
        y = _npu_restore(b)
    except DumpFormatError as exc:
        failed(exc)
        return
    if x.dtype == np.bool_:
        x = x.astype(np.float32)
    if y.dtype == np.bool_:
        y = y.astype(np.float32)
    if x.size != y.size:
        row.metrics = _nan_metrics(ctx)
        row.fail_reason = f"[{Path(my_path).name}_TENSOR] Shape mismatch after restore: ({x.size},) vs ({y.size},)"
        return
    ctx.pending.add(row, x, y, a.shape, RealPath(my_path), RealPath(golden_path), failed)


# ---- golden .npy without a graph: outputs by op name

def _tasks_npy_by_name(ctx: _Context) -> list[_Task]:
    order = sorted(((entries[-1].timestamp, key) for key, entries in ctx.my.files.items()))
    tasks = []
    for index, (_, key) in enumerate(order):
        entry = ctx.my.entry(key)
        tasks.append(_Task([key], lambda c, i=index, e=entry, n=key: _npy_by_name_op(c, i, e, n)))
    return tasks


def _npy_by_name_op(ctx: _Context, index: int, entry, name: str) -> list[CompareRow]:
    try:
        dump = _read(ctx, entry)
    except DumpFormatError as exc:
        _unreadable(ctx, name, exc)
        return [CompareRow(index, entry.op_type, name, [name], "NaN", None, None, None, _nan_metrics(ctx),
                           str(exc), None, None, timestamp=entry.timestamp)]
    rows = []
    for i, record in enumerate(dump.outputs):
        tensor = f"{name}:output:{i}"
        golden = ctx.golden.npy(name, i)
        rows.append(_golden_row(ctx, index, entry, dump, record, tensor, golden, mp.Origin(name, i), entry.op_type,
                                name, [name], [], None, []))
    return rows


# ---- with my graph (-f), optionally a close graph (-cf)

def _tasks_graph(ctx: _Context) -> list[_Task]:
    rule = ctx.rule
    tasks = []
    for key, ops in rule.groups.items():
        tasks.append(_Task([o.name for o in ops], lambda c, k=key: _group(c, k)))
    return tasks


def _group(ctx: _Context, key) -> list[CompareRow]:
    ops = ctx.rule.groups[key]
    rel = mp.relation(ops)
    multi = rel in ("OneToMulti", "MultiToMulti", "L1Fusion")
    if multi:
        my_text, golden_text = mp.left_right_strings(ops)
    rows: list[CompareRow] = []
    if rel == "L1Fusion":
        ops = _l1_compared_ops(ctx, ops)
        if not ops:   # none of the sub-graph's ops was dumped
            op = ctx.rule.groups[key][0]
            row = _missing_my_row(ctx, op, (my_text, golden_text.split(",")))
            row.fail_reason = "The fusion operator list is empty"
            return [row]
    for op in ops:
        if multi and rel != "L1Fusion" and op.is_inner_node():
            continue
        if multi:
            texts = (my_text, golden_text.split(",") if golden_text else ["*"])
        else:
            gt = [n for n in op.original_op_names if n]
            texts = (op.name, gt or ["*"])
        op_rows = _graph_op(ctx, op, texts, missing_ok=multi)
        rows.extend(op_rows)
    if not rows and multi:
        op = ops[0]
        rows.append(_missing_my_row(ctx, op, (my_text, golden_text.split(","))))
    return rows


def _l1_compared_ops(ctx: _Context, ops: list) -> list:
    """msaccucmp's ``_compare_for_l1_fusion``: of an L1 fusion sub-graph, only the dumped op with the newest dump
    (its outputs are complete) and, when its original ops differ from that one's, the dumped op with the oldest
    (its inputs are complete) are compared."""
    dumped = []
    for op in ops:
        entry = ctx.my.newest(op.name)
        if entry is not None:
            dumped.append((entry.timestamp, op))
    if not dumped:
        return []
    dumped.sort(key=lambda item: item[0])
    first, last = dumped[0][1], dumped[-1][1]
    return ([first] if first.original_op_names != last.original_op_names else []) + [last]


def _missing_my_row(ctx, op, texts) -> CompareRow:
    reason = f'[{op.name}] There is no dump file for my output operator "{op.name}". The type is {op.type}.'
    return CompareRow(op.op_id, op.type, texts[0], texts[1], "NaN", None, None, None, _nan_metrics(ctx), reason,
                      None, None, list(op.pass_names), op.ub_pass_name, ctx.originals.get(op.name, []))


_DEQUANT_SUFFIXES = ("_dequant_layer", "AscendDequant", "_dequant")   # msaccucmp's DEQUANT_OP_NANE_SUFFIX_LIST


def _graph_op(ctx: _Context, op: mp.RuleOp, texts, *, missing_ok: bool) -> list[CompareRow]:
    entry = ctx.my.newest(op.name)
    if entry is None:
        ctx.unmatched.append({"op": op.name, "side": "my", "reason": "no dump file for this graph op"})
        return [] if missing_ok else [_missing_my_row(ctx, op, texts)]
    # one to one only where the golden op is the same op: same name, type and fusion (a fusion can keep its
    # principal op's name and type: MatMul with BiasAdd folded in stays a MatMul, and its pass name says so)
    same = ctx.golden_types.get(op.name) == (op.type, tuple(op.pass_names), op.ub_pass_name)
    golden_entry = ctx.golden.newest(op.name) if same else None
    key = mp.lookup_name(op.name)
    if golden_entry is not None and key not in ctx.my.threads and key not in ctx.golden.threads:
        # the same op in both runs (compare_dumps' same_ops_directly): compared one to one
        rows = _npu_op(ctx, op.op_id, op.name, entry, golden_entry)
        for row in rows:
            row.op_type, row.my_op, row.golden_ops = op.type, texts[0], list(texts[1])
            row.pass_names, row.ub_pass_name = list(op.pass_names), op.ub_pass_name
            row.original_ops = ctx.originals.get(op.name, [])
        return rows
    try:
        loaded = _load(ctx, entry)
        dump = loaded.dump
    except DumpFormatError as exc:
        if exc.path is None:
            ctx.unmatched.append({"op": op.name, "side": "my", "reason": str(exc)})
        _unreadable(ctx, op.name, exc)
        row = _missing_my_row(ctx, op, texts)
        row.fail_reason = str(exc)
        return [row]
    rows = []
    ffts_rows = loaded.ffts or ffts.is_ffts_dump(dump)
    # msaccucmp's quant rule: a dequant op's inputs (int32 accumulators) and an AscendQuant's outputs (int8) have
    # no float ground truth; those rows are not produced
    skip = {"input"} if op.type == "AscendDequant" or op.name.endswith(_DEQUANT_SUFFIXES) else set()
    if op.type == "AscendQuant":
        skip.add("output")
    for kind, records in (("input", dump.inputs), ("output", dump.outputs)):
        if kind in skip:
            continue
        for i, record in enumerate(records):
            tensor = f"{op.name}:{kind}:{i}"
            producer_of = None
            try:
                if kind == "input":
                    producer, out_index = mp.find_producer(ctx.rule, op, i)
                    origin = producer.origin_tensor(out_index)
                    producer_of = (producer.name, out_index)
                else:
                    source, out_index = mp.output_source(ctx.rule, op, i)
                    origin = source.origin_tensor(out_index)
            except LookupError as exc:
                rows.append(_fail_row(ctx, op, entry, record, tensor, texts,
                                      f"[{op.name}] There is no the ground truth dump file for {tensor}."
                                      if "origin" in str(exc) or "output description" in str(exc) else str(exc)))
            else:
                if ctx.golden_npy:
                    golden = ctx.golden.npy(origin.name, origin.index)
                else:
                    golden = ctx.golden.newest(origin.name)
                rows.append(_golden_row(ctx, op.op_id, entry, dump, record, tensor, golden, origin, op.type,
                                        texts[0], texts[1], op.pass_names, op.ub_pass_name,
                                        ctx.originals.get(op.name, [])))
            if ffts_rows:                  # kept off the dataclass fields: read by _ffts_inputs_from_producers
                rows[-1]._ffts_op = op.name
                rows[-1]._ffts_producer = producer_of
    return rows


def _fail_row(ctx, op, entry, record, tensor, texts, reason) -> CompareRow:
    return CompareRow(op.op_id, op.type, texts[0], texts[1], tensor, "NaN", "NaN", tuple(record.shape),
                      _nan_metrics(ctx), reason, _addr(record.address), None, list(op.pass_names), op.ub_pass_name,
                      ctx.originals.get(op.name, []), entry.timestamp)


_CONVERTED_TO_ND = ("FRACTAL_NZ", "NDC1HWC0")   # formats msaccucmp converts even towards ND
_LAYOUTS_4D = ("NCHW", "NHWC", "HWCN")
_PLAIN_CONVERSIONS = {("HWCN", "NCHW"), ("HWCN", "NHWC"), ("NCHW", "NHWC"), ("NHWC", "NCHW"), ("NHWC", "HWCN")}


def _layout_as_stored(fmt: str, recorded: tuple, stored: tuple) -> tuple[str, tuple]:
    """msaccucmp's ``_change_format_by_origin_shape``: a 4-D NHWC (NCHW) golden whose .npy holds the NCHW (NHWC)
    permutation of the recorded shape is read in the layout the .npy has. Returns (format, shape to convert to)."""
    if len(recorded) == 4 and len(stored) == 4 and recorded != stored:
        n, a, b, c = recorded
        if fmt == "NHWC" and stored == (n, c, a, b):
            return "NCHW", stored
        if fmt == "NCHW" and stored == (n, b, c, a):
            return "NHWC", stored
    return fmt, recorded


def _shape_text(shape: Sequence[int]) -> str:
    """A shape as msaccucmp writes it in its messages (``utils.convert_shape_to_string``): ``(2, 4)``."""
    return "(" + ", ".join(map(str, shape)) + ")"


def _cannot_compare(op_name: str, mine: Sequence[int], theirs: Sequence[int]) -> str:
    """msaccucmp's ``print_cannot_compare_warning``."""
    return (f"[{op_name}] Due to the different shapes on the left and right,the left dump data{_shape_text(mine)} "
            f"can not be compared to the right dump data{_shape_text(theirs)}. Please check the batch of the dump "
            f"data or the shape may be changed due to optimization.")


def _slice_to(x: np.ndarray, shape: tuple, op_name: str) -> tuple[np.ndarray, str]:
    """msaccucmp's ``TensorConversion.slice_data``: cut my tensor down to the golden's ``shape`` where mine is larger
    in every differing dimension (e.g. a batch padded on the device), both padded to 4-D with trailing 1s; a
    dimension where mine is smaller is an error. Returns (my data, "") or (x, the CompareFailReason)."""
    if x.ndim < len(shape):       # _check_ground_truth_shape_by_my_output_shape: shapes without their 1s
        mine, theirs = [d for d in x.shape if d != 1], [d for d in shape if d != 1]
        if (mine or theirs) and mine != theirs:
            return x, _cannot_compare(op_name, mine or x.shape, theirs or shape)
        return x, ""
    mine = list(x.shape) + [1] * (4 - x.ndim)
    theirs = list(shape) + [1] * (len(mine) - len(shape))
    ones = sum(d == 1 for d in x.shape)
    if math.prod(theirs) == x.size and ones in (x.ndim, x.ndim - 1):
        return x, ""
    for a, b in zip(mine, theirs):
        if a < b:
            return x, _cannot_compare(op_name, mine, theirs)
        if a > b:
            if len(mine) in (4, 5):
                x = x.reshape(mine)[tuple(slice(0, d) for d in theirs)]
            break
    return x, ""


def _golden_row(ctx, index, entry, dump, record, tensor, golden, origin: mp.Origin, op_type, my_text, golden_ops,
                pass_names, ub_pass_name, originals) -> CompareRow:
    op_name = dump.op_name or entry.op_name

    def fail(reason: str) -> CompareRow:
        return CompareRow(index, op_type, my_text, golden_ops, tensor, "NaN", "NaN", tuple(record.shape),
                          _nan_metrics(ctx), reason, _addr(record.address), None, list(pass_names or []),
                          ub_pass_name, list(originals or []), entry.timestamp)

    if golden is None:
        ctx.unmatched.append({"op": entry.op_name, "side": "golden",
                              "reason": f"no golden data for {origin.name}:output:{origin.index}"})
        return fail(f"[{entry.op_name}] There is no the ground truth dump file for {tensor}.")
    try:
        if ctx.golden_npy:
            golden_record = _read_golden(ctx, entry.op_name, lambda: read_dump(golden.path)).outputs[0]
            golden_path = golden.path
            golden_format = origin.format or record.format_name
        else:
            golden_dump = _read_golden(ctx, entry.op_name, lambda: _read(ctx, golden))
            golden_path = golden.path
            if origin.index >= len(golden_dump.outputs):
                return fail(f"[{entry.op_name}] The output index {origin.index} is out of range "
                            f"[0, {len(golden_dump.outputs)}).")
            golden_record = golden_dump.outputs[origin.index]
            golden_format = golden_record.format_name
        y = golden_record.array()
        golden_dtype = _shown_dtype(golden_record, device_names=False)
        golden_layout = None   # the layout a private-format NPU golden was restored to (NHWC in a TF graph)
        if not ctx.golden_npy and golden_record.format_name in PRIVATE_FORMATS and golden_record.original_shape:
            y, golden_layout = record_to_original(golden_record, y)
            if golden_layout not in TARGETS.get(record.format_name, ()):
                golden_layout = None
        if golden_dtype in ("bfloat16",) or y.dtype.name in _FLOAT32_READ:
            y = y.astype(np.float32)
        golden_shape = tuple(record.original_shape) if record.original_shape else tuple(y.shape)
        if ctx.golden_npy:
            golden_format, golden_shape = _layout_as_stored(golden_format, golden_shape, tuple(y.shape))
        x = record.array()
        if x.dtype.name in _FLOAT32_READ:
            x = x.astype(np.float32)
        my_dtype = _shown_dtype(record, device_names=False)
        scalar_device = sum(record.shape) == len(record.shape)
        restored = None   # the original shape a padded tensor was restored to: its Shape cell
        if record.format_name in PRIVATE_FORMATS and not scalar_device:
            x = _to_original(x, record.format_name, golden_shape,
                             golden_layout if golden_format in PRIVATE_FORMATS else golden_format, record.sub_format)
            restored = tuple(x.shape)
        elif (not scalar_device and record.format_name != golden_format and record.format_name in _LAYOUTS_4D
              and golden_format in _LAYOUTS_4D):
            # msaccucmp converts a plain 4-D layout to the golden's (its builtin NCHW/NHWC/HWCN converters)
            if (record.format_name, golden_format) not in _PLAIN_CONVERSIONS:
                return fail(f"[{op_name}] The format conversion from {record.format_name} to {golden_format} is "
                            f"not supported.")
            x = _to_original(x, record.format_name, None, golden_format)
        # msaccucmp converts my tensor only towards a non-ND golden format (or from FRACTAL_NZ/NDC1HWC0) and
        # otherwise compares (and shows) the dump's data as stored: flat (TensorConversion._convert_shape)
        converted = not scalar_device and (golden_format != "ND" or record.format_name in _CONVERTED_TO_ND)
        if not converted:
            x = x.reshape(-1)
        if record.format_name != "ND" or (not scalar_device and x.size != y.size):
            x, problem = _slice_to(x, tuple(y.shape) if converted else (int(y.size),), op_name)
            if problem:
                return fail(problem)
        if x.size != y.size:
            return fail(_cannot_compare(op_name, (x.size,), (y.size,)))
        # an empty tensor keeps its dump shape, as msaccucmp shows and judges it ((0, 2) is "scalar" there)
        shape = tuple(record.shape) if x.size == 0 and record.shape else tuple(x.shape)
        if restored is not None and len(shape) == 1 and math.prod(restored) == x.size:
            shape = restored   # compared flat against an ND golden, shown in its original shape
    except (DumpFormatError, ValueError) as exc:   # (a tensor of a dtype that cannot be decoded: not compared)
        return fail(str(exc))
    row = CompareRow(index, op_type, my_text, golden_ops, tensor, my_dtype, golden_dtype, shape, {}, "",
                     _addr(record.address), None, list(pass_names or []), ub_pass_name, list(originals or []),
                     entry.timestamp)

    def failed(exc: Exception) -> None:   # the row becomes the failure row, as when reading fails
        vars(row).update(vars(fail(str(exc))))

    ctx.pending.add(row, x, y, shape, RealPath(entry.path), RealPath(golden_path), failed)
    return row
