"""Run CANN's own ``msaccucmp.py compare`` and read its CSV into a :class:`CompareReport`.

Used by ``fusebisect compare --engine msaccucmp``: the graphs are written as msaccucmp ``-f``/``-cf`` fusion-rule
JSONs from the GE dumps (``write_atc_json``, no ``atc`` needed), dump trees are presented as the flat directories
msaccucmp expects (symlinks in a temporary directory), and both CSV header generations are understood
(``LeftOp``/``RightOp`` and ``NPUDump``/``GroundTruth``).
"""

from __future__ import annotations

import glob
import math
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from fusebisect.compare import mapping as mp
from fusebisect.compare.engine import (SCALAR_FLOOR, CompareReport, CompareRow, blame_producer,
                                       first_divergence, quantized_against_float)
from fusebisect.compare.metrics import ALGORITHMS, NAN_TEXT, Value, nan_value
from fusebisect.compare.pbtext import decode_text
from fusebisect.errors import FusebisectError, UsageError

_SUBDIR = Path("tools") / "operator_cmp" / "compare" / "msaccucmp.py"
_MY_OP = ("NPUDump", "LeftOp")
_GOLDEN_OP = ("GroundTruth", "RightOp")


def find_msaccucmp(path: str | os.PathLike[str] | None = None) -> Path:
    """Locates msaccucmp.py: ``path`` (file or directory), $ASCEND_TOOLKIT_HOME, $ASCEND_HOME_PATH, then
    /usr/local/Ascend/**/tools/operator_cmp/compare/. Returns its path; raises UsageError if none is found."""
    candidates: list[Path] = []
    if path:
        p = Path(path)
        candidates += [p, p / "msaccucmp.py", p / _SUBDIR]
        for candidate in candidates:
            if candidate.is_file():
                return candidate
        raise UsageError(f"--msaccucmp {path}: no msaccucmp.py there")
    for var in ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH"):
        home = os.environ.get(var)
        if home:
            candidates.append(Path(home) / _SUBDIR)
    candidates += [Path(p) for p in sorted(glob.glob("/usr/local/Ascend/*/" + str(_SUBDIR)))]
    candidates += [Path(p) for p in sorted(glob.glob("/usr/local/Ascend/*/*/" + str(_SUBDIR)))]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise UsageError("msaccucmp.py not found: pass --msaccucmp PATH or set ASCEND_TOOLKIT_HOME "
                     "(looked in $ASCEND_TOOLKIT_HOME, $ASCEND_HOME_PATH, /usr/local/Ascend/*/tools/operator_cmp/compare/)")


def _flat_dir(path: Path, tree, workdir: Path, label: str) -> Path:
    """A flat directory holding the dump files of ``tree`` (one leaf of ``path``, see ``tree.one_leaf``): the path
    itself when it already is one, else symlinks in ``workdir`` (with the leaf's mapping.csv of hashed names)."""
    if path.is_dir() and all((path / n).is_file() or n.startswith(".") for n in os.listdir(path)):
        return path
    flat = workdir / label
    flat.mkdir()
    for entry in tree.entries:
        link = flat / entry.path.name
        if not link.exists():
            os.symlink(entry.path.resolve(), link)
        mapping = entry.path.parent / "mapping.csv"
        if mapping.is_file() and not (flat / "mapping.csv").exists():
            os.symlink(mapping.resolve(), flat / "mapping.csv")
    return flat


def _flat_npy(path: Path, entries: dict, workdir: Path) -> Path:
    """The golden .npy files the native engine compares (one per output: the newest, or with --iteration earliest
    the oldest) as one flat directory: ``path`` itself when it holds just those, else symlinks in ``workdir``."""
    files = {e.path for e in entries.values()}
    if path.is_dir() and {p for p in path.iterdir() if p.name.endswith(".npy")} == files:
        return path
    flat = workdir / "golden"
    flat.mkdir()
    for file in files:
        os.symlink(file.resolve(), flat / file.name)
    return flat


def _unreadable_files(files, side: str) -> list[dict]:
    """Of ``files`` ((op name, path): op dumps, golden .npy files), those that cannot be read (cut short, empty,
    corrupt), as the native engine records them in ``unmatched`` (with ``file``)."""
    from fusebisect.compare.dumpfile import read_dump

    out = []
    for op, path in files:
        try:
            read_dump(path)
        except (FusebisectError, OSError, ValueError) as exc:
            out.append({"op": op, "side": side, "reason": str(exc), "file": str(path)})
    return out


def _real_paths(report: CompareReport, workdir: Path) -> None:
    """msaccucmp's reasons name the files it read: the symlinks of the temporary flat directories, gone once it is
    done. They are named by the files they stand for."""
    links = {}
    for flat in (workdir / "my", workdir / "golden"):
        if flat.is_dir():
            links.update({str(link): os.path.realpath(link) for link in flat.iterdir() if link.is_symlink()})
    if not links:
        return
    pattern = re.compile("|".join(re.escape(k) for k in sorted(links, key=len, reverse=True)))
    for row in report.rows:
        if row.fail_reason:
            row.fail_reason = pattern.sub(lambda m: links[m.group(0)], row.fail_reason)


def run_msaccucmp(my, golden, *, my_graph=None, golden_graph=None, script=None, algorithms=None,
                  cosine: float = 0.99, max_abs_error: float | None = None, env: dict | None = None,
                  timeout: float | None = None, ffts_direct: bool = False, leaf: str = "latest",
                  op: str | None = None) -> CompareReport:
    """Runs ``msaccucmp.py compare`` on the two sides and returns its result as a :class:`CompareReport`.

    ``ffts_direct`` passes ``-ffts`` (FFTS+ thread files keep their op names). ``leaf``: the iteration of a root
    holding several, 'latest' or 'earliest' (as :func:`compare_dumps`). ``op``: keep that op's rows only (msaccucmp
    compares everything), and judge them alone.

    Raises UsageError if msaccucmp is not found, FusebisectError if it fails without writing a result CSV
    (its last log lines are in the message).
    """
    from fusebisect.compare.engine import (choose_inputs, graph_for, graph_input, graph_names, not_in_graph,
                                           not_in_graph_note, tree_device, tree_model)
    from fusebisect.compare.graph import write_atc_json

    script = find_msaccucmp(script)
    my_path, golden_path = Path(my), Path(golden)
    # msaccucmp compares one leaf directory: a root holding several iterations, devices or runs is cut to the
    # leaf the native engine compares (flattened, they would mix: msaccucmp takes the newest file of each name),
    # and a golden .npy directory to the step the native engine compares
    my_graph, golden_graph = graph_input(my_graph), graph_input(golden_graph)
    chosen = choose_inputs(my_path, golden_path, with_graph=my_graph is not None, leaf=leaf,
                           prefer=(graph_names(my_graph), graph_names(golden_graph)))
    my_tree, golden_tree, leaf_notes = chosen.my, chosen.golden, chosen.notes
    golden_files = ([(e.op_name, e.path) for e in chosen.golden_npy_entries.values()] if chosen.golden_npy else
                    [(e.op_name, e.path) for e in golden_tree.entries])
    unreadable = (_unreadable_files([(e.op_name, e.path) for e in my_tree.entries], "my")
                  + _unreadable_files(golden_files, "golden"))
    with tempfile.TemporaryDirectory(prefix="fusebisect_msaccucmp_") as tmp:
        work = Path(tmp)
        my_flat = _flat_dir(my_path, my_tree, work, "my")
        golden_flat = (_flat_npy(golden_path, chosen.golden_npy_entries, work) if chosen.golden_npy else
                       _flat_dir(golden_path, golden_tree, work, "golden"))
        argv = [sys.executable, str(script), "compare", "-m", str(my_flat), "-g", str(golden_flat)]
        graph = None
        graph_notes: list[str] = []   # the graphs the native engine would use (a train/eval directory: one)
        stray: list[str] = []   # my op dumps the graph has no op for: msaccucmp leaves them out, as natively
        if my_graph is not None:
            dumped = list(mp.index_tree(my_tree, graph=True, direct=ffts_direct).files)
            graph = graph_for(my_graph, set(dumped), "my", graph_notes, tree_model(my_tree), tree_device(my_tree))
            argv += ["-f", str(write_atc_json(graph, work / "my_graph.json"))]
            if stray := not_in_graph(graph, dumped):
                graph_notes.append(not_in_graph_note(stray, len(dumped), "my"))
        if golden_graph is not None:
            dumped = [] if chosen.golden_npy else list(mp.index_tree(golden_tree, graph=True,
                                                                     direct=ffts_direct).files)
            close = graph_for(golden_graph, set(dumped), "golden", graph_notes, tree_model(golden_tree),
                              tree_device(golden_tree))
            argv += ["-cf", str(write_atc_json(close, work / "golden_graph.json"))]
            if golden_stray := not_in_graph(close, dumped):
                graph_notes.append(not_in_graph_note(golden_stray, len(dumped), "golden"))
        if algorithms:
            argv += ["-alg", ",".join(algorithms)]
        if ffts_direct:
            argv.append("-ffts")
        out = work / "out"
        argv += ["-out", str(out)]
        try:
            proc = subprocess.run(argv, capture_output=True, env=env, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise FusebisectError(f"msaccucmp did not finish within {timeout:g} s") from None
        # its log: UTF-8, else GBK (Chinese messages on many hosts)
        proc.stdout, proc.stderr = decode_text(proc.stdout), decode_text(proc.stderr)
        csvs = sorted(out.glob("result_*.csv")) if out.is_dir() else []
        if not csvs:
            tail = " | ".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])   # one line
            raise FusebisectError(f"msaccucmp failed (exit {proc.returncode}): {tail}")
        report = read_result_csv(csvs[-1], cosine=cosine, max_abs_error=max_abs_error, graph=graph)
        _real_paths(report, work)
        log_text = proc.stdout + proc.stderr
        missing = re.search(r"Failed to load (\S+\.so)[^\n]*", log_text)
        unparsed = re.search(r"The header content size[^\n]*", log_text)
        if (missing or (unparsed and not unreadable)) and not any(r.compared for r in report.rows):
            # msaccucmp then fills its CSV with "no dump file" rows: say what it could not do instead
            if missing:   # binary dumps need CANN's parser library
                raise FusebisectError(f"msaccucmp could not read the dumps: {missing.group(0).strip()} (binary dumps "
                                      f"need CANN's {missing.group(1)}; the native engine needs no CANN)")
            raise FusebisectError(f"msaccucmp could not read the dumps: {unparsed.group(0).strip()} (it reads a "
                                  "header length first, which a dump written whole as protobuf does not have; the "
                                  "native engine reads binary, protobuf and nano dumps)")
    report.notes[:0] = leaf_notes + graph_notes
    # no "no divergence" rests on a comparison that left them out (the CLI exits 2), as with the native engine
    report.not_in_graph = stray if op is None else [s for s in stray if s == mp.lookup_name(op)]
    timestamps = {}
    for entry in my_tree.entries:
        timestamps[mp.lookup_name(entry.op_name)] = entry.timestamp
    for row in report.rows:
        row.timestamp = timestamps.get(mp.lookup_name(row.tensor.split(":")[0]), 0) if row.tensor != NAN_TEXT else 0
    if op is not None:   # msaccucmp compared everything: keep that op's rows and what it lacks, and judge them
        report.rows = [r for r in report.rows if op in r.my_op.split(",")]
        if not report.rows:
            raise UsageError(f"--op {op}: no such op in the comparison")
        report.unmatched = [u for u in report.unmatched if op in str(u.get("op", "")).split(",")]
    # a dump file msaccucmp could not read shows in its CSV as "no dump file": its tensors are not compared, so no
    # "no divergence" may rest on the others (as with the native engine). My files are all compared; a golden
    # file counts when a row read it (msaccucmp names those it failed to parse), or when nothing was compared.
    reasons = " ".join(r.fail_reason for r in report.rows if r.fail_reason)
    report.unmatched += [u for u in unreadable if (u["side"] == "golden" and (Path(u["file"]).name in reasons
                                                                              or not report.rows))
                         or (u["side"] == "my" and (op is None or u["op"] == op))]
    report.first_divergence = first_divergence(report, cosine=cosine, max_abs_error=max_abs_error)
    if report.first_divergence is not None:   # an op's input: the producer's passes, as the native engine says
        blame_producer(report.first_divergence, report.rows, graph)
    return report


def _metric(text: str, name: str):
    if name == "StandardDeviation":
        return text
    if text == NAN_TEXT or text == "":
        return nan_value()
    try:
        return Value(float(text), text)
    except ValueError:
        return Value(math.nan, text)


_SCALAR_REASON = "This tensor is scalar"   # msaccucmp's CompareFailReason of a one-element tensor
_STD_CELL = re.compile(r"\(([^;()]*);([^;()]*)\),\(([^;()]*);([^;()]*)\)")


def _judge_nan_cells(row: CompareRow) -> None:
    """What a row's cells mean where its cosine says nothing (msaccucmp's CSV gives no reason for NaN/Inf):

    - a scalar (a loss: "This tensor is scalar.", cosine always 1) is judged by its relative error, the
      MaxRelativeError cell, as the native verdict does;
    - NaN/Inf on one side only shows in that side's mean/std of the StandardDeviation cell (a divergence:
      ``nonfinite`` 1, the count is not in the CSV), whatever the cosine (a scalar NaN has cosine 1);
    - "All the data is zero" in one side alone is cosine 0, as the native verdict takes it.

    NaN/Inf on both sides shows as a divergence when the means are of another kind (NaN against Inf, Inf of
    the other sign); otherwise the cells cannot judge it: the row is not judged and the note says so. An empty
    tensor ("(nan;nan),(nan;nan)": means of no element) holds no NaN/Inf: its cosine 1 stands, as natively."""
    if row.shape is not None and math.prod(row.shape) == 0:
        return
    if _SCALAR_REASON in row.fail_reason:
        if "bool" in (row.my_dtype, row.golden_dtype):
            # msaccucmp computes only the cosine (1) and RED (0 against a False golden) of a bool: its cells
            # cannot tell True from False, and a one-element flag (found_inf) is where that matters
            row.judged = False
            row.note = ("a one-element bool: msaccucmp's cells cannot tell True from False, not judged (the native "
                        "engine judges it)")
            return
        row.scalar_relative_error = _scalar_relative_error(row)
    cos = row.cosine
    if cos is None or not math.isnan(cos):
        # a finite cosine despite NaN/Inf on one side: a scalar NaN loss; the same on both: nothing to compare
        if _one_side_nonfinite(row) == (True, True) and not row.nonfinite:
            row.judged = False
            row.note = "the same NaN/Inf on both sides: nothing to compare"
        return
    if "All the data is zero" in row.fail_reason:   # one side only: both all zero reads 1.0
        row.finite_cosine = 0.0
        mae = row.max_abs_error
        row.finite_max_abs_error = mae if mae is not None and math.isfinite(mae) else math.nan
        return
    if row.fail_reason:   # msaccucmp said why it did not compare
        return
    sides = _one_side_nonfinite(row)
    if sides is None:
        row.note = ("msaccucmp's metrics are NaN and its CSV says not why (NaN/Inf in the data?): add "
                    "StandardDeviation to the algorithms, or use the native engine, to tell")
    elif sides == (True, True) and not row.nonfinite:
        # its relative-error cells may still be numbers (they skip NaN): no verdict rests on them either
        row.judged = False
        row.note = ("NaN/Inf on both sides: msaccucmp's metrics are NaN whatever the other elements hold (the "
                    "native engine compares those)")


def _scalar_relative_error(row: CompareRow) -> float | None:
    """|mine - golden| / max(|golden|, 1e-5) of a one-element row, as the native engine computes it, from
    msaccucmp's 6-decimal cells: MaxAbsoluteError over the golden's magnitude (MaxAbsoluteError /
    MaxRelativeError); MaxRelativeError alone when the absolute error rounds to 0; MaxAbsoluteError over 1e-5
    when the relative error is 0 (msaccucmp writes 0 for a golden of 0). None when neither cell is there."""
    mae, rel = row.metrics.get("MaxAbsoluteError"), row.metrics.get("MaxRelativeError")
    mae = mae if isinstance(mae, float) and math.isfinite(mae) else None
    rel = rel if isinstance(rel, float) and math.isfinite(rel) else None
    if mae is not None and rel is not None and mae > 0 and rel > 0:
        return mae / max(mae / rel, SCALAR_FLOOR)
    if rel is not None and rel > 0:
        return rel
    if mae is not None:
        return mae / SCALAR_FLOOR
    return rel


def _one_side_nonfinite(row: CompareRow) -> tuple[bool, bool] | None:
    """Whether my tensor and the golden hold NaN/Inf, read from the StandardDeviation cell's means and stds
    (None when the cell is absent or unreadable). NaN/Inf on one side only marks the row ``nonfinite``."""
    cell = _STD_CELL.fullmatch(str(row.metrics.get("StandardDeviation", "")).strip())
    if cell is None:
        return None
    try:
        stats = [float(v) for v in cell.groups()]
    except ValueError:
        return None
    mine = not all(math.isfinite(v) for v in stats[:2])
    golden = not all(math.isfinite(v) for v in stats[2:])
    same = stats[0] == stats[2] or (math.isnan(stats[0]) and math.isnan(stats[2]))
    if mine and golden and not math.isfinite(stats[0]) and not math.isfinite(stats[2]) and not same:
        # means of another kind: NaN against Inf, -inf against +inf (a scalar's mean is its value): the
        # tensors' NaN/Inf differ, whatever the cosine (NaN) says
        row.nonfinite = 1
        row.note = (f"NaN/Inf unlike the golden's (msaccucmp's mean/std cell: mean {stats[0]} against "
                    f"{stats[2]}; its CSV does not count them)")
        return mine, golden
    if mine != golden:
        row.nonfinite = 1
        row.note = (f"NaN/Inf in {'my tensor' if mine else 'the golden'} only (msaccucmp's mean/std cell; its CSV "
                    "does not count them)")
    return mine, golden


def _int_or_none(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def read_result_csv(path, *, cosine: float = 0.99, max_abs_error: float | None = None,
                    graph=None) -> CompareReport:
    """Reads a msaccucmp result CSV (either header generation) into a :class:`CompareReport`.

    ``graph`` (my graph) fills pass names and original ops. Raises FusebisectError for a CSV that is not a
    msaccucmp result.
    """
    from fusebisect.compare.csvout import read_msaccucmp_csv
    head, rows = read_msaccucmp_csv(path)
    try:
        my_col = next(i for i, h in enumerate(head) if h in _MY_OP)
        golden_col = next(i for i, h in enumerate(head) if h in _GOLDEN_OP)
        tensor_col = head.index("TensorIndex")
        shape_col = head.index("Shape")
        reason_col = head.index("CompareFailReason")
        index_col = head.index("Index")
    except (StopIteration, ValueError):
        raise FusebisectError(f"{path}: not a msaccucmp result CSV (header {','.join(head[:6])}...)") from None
    type_col = head.index("OpType") if "OpType" in head else None
    my_addr_col = next((i for i in range(my_col, golden_col) if head[i] == "Address"), None)
    golden_addr_col = next((i for i in range(golden_col, tensor_col) if head[i] == "Address"), None)
    my_dtype_col = next((i for i in range(my_col, golden_col) if head[i] == "DataType"), None)
    golden_dtype_col = next((i for i in range(golden_col, tensor_col) if head[i] == "DataType"), None)
    algorithms = [h for h in head[shape_col + 1:reason_col] if h in ALGORITHMS]
    ops: dict = {}
    for op in graph.ops if graph is not None else ():   # the first op of a name, as msaccucmp and Graph.op take
        ops.setdefault(op.name, op)
    out: list[CompareRow] = []
    for cells in rows:
        if len(cells) < len(head):
            continue
        shape_text = cells[shape_col]
        shape = None
        if shape_text.startswith("["):
            inner = shape_text.strip("[]")
            shape = tuple(int(v) for v in inner.split(",") if v.strip()) if inner else ()
        tensor = cells[tensor_col]
        op_name = tensor.split(":")[0] if tensor != NAN_TEXT else cells[my_col]
        info = ops.get(op_name)
        row = CompareRow(
            index=int(cells[index_col]), op_type=cells[type_col] if type_col is not None else NAN_TEXT,
            my_op=cells[my_col], golden_ops=cells[golden_col].split(","), tensor=tensor,
            my_dtype=None if my_dtype_col is None or cells[my_dtype_col] == NAN_TEXT else cells[my_dtype_col],
            golden_dtype=(None if golden_dtype_col is None or cells[golden_dtype_col] == NAN_TEXT
                          else cells[golden_dtype_col]),
            shape=shape, metrics={name: _metric(cells[head.index(name)], name) for name in algorithms},
            fail_reason=cells[reason_col],
            my_address=_int_or_none(cells[my_addr_col]) if my_addr_col is not None else None,
            golden_address=_int_or_none(cells[golden_addr_col]) if golden_addr_col is not None else None,
            pass_names=list(info.pass_names) if info else [], ub_pass_name=info.ub_pass_name if info else None,
            original_ops=list(info.original_op_names) if info else [])
        note = (quantized_against_float(row.my_dtype, row.golden_dtype, math.prod(shape))
                if row.my_dtype and row.golden_dtype and shape is not None else None)
        if note:   # as the native engine: the row is kept, no verdict rests on it
            row.judged, row.note = False, note
        else:
            _judge_nan_cells(row)
        out.append(row)
    unmatched = [{"op": r.my_op, "side": "my" if "my output" in r.fail_reason else "golden",
                  "reason": r.fail_reason} for r in out if "There is no" in r.fail_reason]
    report = CompareReport(out, None, unmatched, algorithms or list(ALGORITHMS), my_addr_col is not None,
                           golden_addr_col is not None, "msaccucmp")
    report.first_divergence = first_divergence(report, cosine=cosine, max_abs_error=max_abs_error)
    return report
