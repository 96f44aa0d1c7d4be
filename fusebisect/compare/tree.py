"""Find the dump files under a CANN dump directory and put them in execution order.

CANN writes ``{dump_path}/{time}/{device_id}/{model_name}/{model_id}/{iteration}/`` and names each file
``{op_type}.{op_name}.{task_id}.{stream_id}.{timestamp}`` (FFTS+ runtimes append more numeric fields; some
runtimes omit the stream id). Names too long for the file system are hashed, with ``mapping.csv`` rows
``hashed_name,original_name`` in the same directory. Golden (CPU/GPU) data are numpy files
``{op_name}.{output_index}.{timestamp}.npy``.

Scanning only lists and parses names (input directories are never written to); a file whose name cannot be
understood is recorded in :attr:`DumpTree.bad` and skipped, never aborting the scan.
"""

from __future__ import annotations

import csv
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from fusebisect.errors import DumpFormatError

_DUMP_NAME = re.compile(
    r"^(?P<op_type>[^.\s/\\]+)\.(?P<op_name>[^.\s/\\]+)\.(?P<task>[0-9]+)(?:\.(?P<stream>[0-9]+))?"
    r"\.(?P<ts>[0-9]{1,255})(?P<extra>(?:\.[0-9]+){0,8})$")
_GOLDEN_NAME = re.compile(r"^(?P<op>.+)\.(?P<idx>[0-9]+)\.(?P<ts>[0-9]+)\.npy$")
# files that live in dump directories but are not op dumps (results of converters, logs, graphs...)
_NOT_DUMPS = {".csv", ".json", ".txt", ".log", ".cfg", ".md", ".npy", ".pt", ".bin", ".py", ".sh", ".pbtxt",
              ".tmp", ".html"}
MAPPING_FILE = "mapping.csv"
# a dump file's name ends in its timestamp (or a slice/context number): one whose last dotted part holds anything
# but digits is some other file (a log, a model, a core file's name with an extension)
_NAMED_LIKE_FILE = re.compile(r"\.[^./\\]*[^0-9./\\][^./\\]*$")


@dataclass(frozen=True)
class DumpName:
    """The fields of a dump file name."""

    op_type: str
    op_name: str
    task_id: int
    stream_id: int | None
    timestamp: int
    extra: tuple[int, ...] = ()  # FFTS+ trailing numeric fields

    @property
    def task_type(self) -> int | None:
        """FFTS+ task type: the first trailing field (msaccucmp requires 0..4 there), or None for plain names."""
        return self.extra[0] if self.extra else None

    @property
    def context_id(self) -> int | None:
        """FFTS+ context id: the field after the task type (msaccucmp's DUMP_FILE_PATTERN), or None."""
        return self.extra[1] if len(self.extra) >= 3 else None

    @property
    def thread_id(self) -> int | None:
        """FFTS+ thread id: the field after the context id (msaccucmp's DUMP_FILE_PATTERN), or None."""
        return self.extra[2] if len(self.extra) >= 3 else None


def parse_dump_name(name: str) -> DumpName | None:
    """Return the fields of dump file name ``name``, or None if it is not a dump name. Never raises."""
    match = _DUMP_NAME.match(name)
    if not match:
        return None
    extra = tuple(int(x) for x in match["extra"].split(".")[1:]) if match["extra"] else ()
    stream = match["stream"]
    return DumpName(match["op_type"], match["op_name"], int(match["task"]),
                    int(stream) if stream is not None else None, int(match["ts"]), extra)


@dataclass
class DumpEntry:
    """One op dump file found by a scan."""

    path: Path  # the file on disk (hashed name if mapped)
    name: DumpName  # parsed from the original name
    device: str | None
    model_name: str | None
    model_id: str | None
    iteration: str | None
    run: str | None = None   # the timestamp directory: one run of the job (a dump_path keeps one per run)

    @property
    def op_type(self) -> str:
        return self.name.op_type

    @property
    def op_name(self) -> str:
        return self.name.op_name

    @property
    def task_id(self) -> int:
        return self.name.task_id

    @property
    def stream_id(self) -> int | None:
        return self.name.stream_id

    @property
    def timestamp(self) -> int:
        return self.name.timestamp

    @property
    def group(self) -> tuple:
        """(device, model_name, model_id, iteration, run)."""
        return (self.device, self.model_name, self.model_id, self.iteration, self.run)


@dataclass
class DumpTree:
    """All op dumps under a root, in execution order, plus what could not be understood."""

    root: Path
    entries: list[DumpEntry] = field(default_factory=list)  # ordered by timestamp (execution order)
    bad: list[tuple[Path, str]] = field(default_factory=list)  # (file, reason), reported not fatal
    # the files of ``bad`` whose names cannot be a dump's (an extension that is not a number: nohup.out, model.pb)
    stray: set[Path] = field(default_factory=set)

    def groups(self) -> dict[tuple, list[DumpEntry]]:
        """Return entries grouped by (device, model_name, model_id, iteration, run), each in execution order."""
        out: dict[tuple, list[DumpEntry]] = {}
        for entry in self.entries:
            out.setdefault(entry.group, []).append(entry)
        return out


_RANK_DIR = re.compile(r"rank_([0-9]+)")


def _layout(directory: Path) -> tuple[str | None, str | None, str | None, str | None, str | None]:
    """(device, model_name, model_id, iteration, run timestamp) if ``directory`` is a leaf dir of a known layout,
    else all None: CANN's ``{time}/{device}/{model_name}/{model_id}/{iteration}``, or MindSpore's asynchronous
    dump ``rank_{id}/{net_name}/{graph_id}/{iteration}`` (no run timestamp)."""
    parts = directory.parts
    if len(parts) >= 5:
        stamp, device, model_name, model_id, iteration = parts[-5:]
        if stamp.isdigit() and device.isdigit() and model_id.isdigit() and iteration.isdigit():
            return device, model_name, model_id, iteration, stamp
    if len(parts) >= 4:
        rank, net, graph_id, iteration = parts[-4:]
        if (match := _RANK_DIR.fullmatch(rank)) and graph_id.isdigit() and iteration.isdigit():
            return match[1], net, graph_id, iteration, None
    return None, None, None, None, None


def _dir_layout(directory: Path) -> tuple[str | None, str | None, str | None, str | None, str | None]:
    """The layout of a directory as named (a symbolic link to an iteration elsewhere is that iteration), else as
    the kernel finds it ('.' or '..' inside a dump tree still has its device and iteration)."""
    named = _layout(Path(os.path.abspath(directory)))
    return named if named[0] is not None else _layout(directory.resolve())


def read_mapping(directory: Path, bad: list | None = None) -> dict[str, str]:
    """Return ``{hashed_name: original_name}`` from ``directory/mapping.csv`` ({} if absent).

    Malformed rows are appended to ``bad`` as (mapping path, reason) when given. Raises OSError if unreadable.
    """
    path = directory / MAPPING_FILE
    if not path.is_file():
        return {}
    mapping: dict[str, str] = {}
    with open(path, newline="", encoding="utf-8", errors="replace") as handle:
        for lineno, row in enumerate(csv.reader(handle), 1):
            if not row:
                continue
            if len(row) != 2:
                if bad is not None:
                    bad.append((path, f"line {lineno}: expected 'hashed_name,original_name', got {len(row)} fields"))
                continue
            mapping[row[0].strip()] = row[1].strip()
    return mapping


def _scan_dir(directory: Path, files: list[str], tree: DumpTree) -> None:
    mapping = read_mapping(directory, tree.bad) if MAPPING_FILE in files else {}
    layout = _dir_layout(directory)
    for fname in files:
        if fname == MAPPING_FILE or fname.startswith("."):
            continue
        original = mapping.get(fname, fname)
        parsed = parse_dump_name(original)
        path = directory / fname
        if parsed is None:
            if fname in mapping or os.path.splitext(fname)[1].lower() not in _NOT_DUMPS:
                tree.bad.append((path, f"name {original!r} is not {{op_type}}.{{op_name}}.{{task_id}}."
                                       "{stream_id}.{timestamp}"))
                if fname not in mapping and _NAMED_LIKE_FILE.search(fname):
                    tree.stray.add(path)
            continue
        tree.entries.append(DumpEntry(path, parsed, *layout))


def walk(root: Path):
    """Yield (directory, its file names sorted) under ``root``, in sorted order: a link to a directory is
    followed (an iteration kept elsewhere), a loop of links is not."""
    seen: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        real = os.path.realpath(dirpath)
        if real in seen:
            dirnames[:] = []
            continue
        seen.add(real)
        dirnames.sort()
        yield Path(dirpath), sorted(filenames)


def scan_dumps(path: str | os.PathLike[str], *, validate: bool = False) -> DumpTree:
    """Return every op dump under ``path`` (dump_path root, timestamp dir, leaf dir, or one file).

    Entries are ordered by timestamp (execution order; ties by path). Files with unparseable names are listed
    in ``bad``; with ``validate`` each header is also read and unreadable files move to ``bad``. Raises
    DumpFormatError if ``path`` does not exist.
    """
    root = Path(path)
    tree = DumpTree(root=root)
    if root.is_file():
        mapping = read_mapping(root.parent, tree.bad)
        original = mapping.get(root.name, root.name)
        parsed = parse_dump_name(original)
        if parsed is not None:
            tree.entries.append(DumpEntry(root, parsed, *_dir_layout(root.parent)))
        else:
            tree.bad.append((root, f"name {original!r} is not {{op_type}}.{{op_name}}.{{task_id}}."
                                   "{stream_id}.{timestamp}"))
    elif root.is_dir():
        for directory, filenames in walk(root):
            _scan_dir(directory, filenames, tree)
    else:
        raise DumpFormatError(_missing_reason(root), path=root)
    if validate:
        from fusebisect.compare.dumpfile import read_dump

        kept = []
        for entry in tree.entries:
            try:
                read_dump(entry.path)
            except (DumpFormatError, OSError) as exc:
                tree.bad.append((entry.path, getattr(exc, "reason", None) or str(exc)))
            else:
                kept.append(entry)
        tree.entries = kept
    tree.entries.sort(key=lambda e: (e.timestamp, e.task_id, str(e.path)))   # a tie: the task launched first
    return tree


def _leaf_key(group: tuple, earliest: bool = False) -> tuple:
    """Sort key of a (device, model_name, model_id, iteration, run) group of one run: latest (or earliest)
    iteration, then lowest device."""
    device, _name, _mid, iteration, _run = group
    step = (int(iteration) if earliest else -int(iteration)) if iteration is not None else 1
    return (step, int(device) if device is not None else -1)


def _describe_leaves(groups) -> str:
    devices = sorted({g[0] for g in groups if g[0] is not None}, key=int)
    iterations = sorted({g[3] for g in groups if g[3] is not None}, key=int)
    models = sorted({g[1] for g in groups if g[1] is not None})
    runs = sorted({g[4] for g in groups if g[4] is not None}, key=int)
    parts = ([f"runs {', '.join(runs)}"] if len(runs) > 1 else []) + \
        ([f"devices {', '.join(devices)}"] if len(devices) > 1 else []) + \
        ([f"models {', '.join(models)}"] if len(models) > 1 else []) + \
        ([f"iterations {', '.join(iterations)}"] if len(iterations) > 1 else [])
    return "; ".join(parts) or f"{len(groups)} leaf directories"


def latest_run(runs) -> str | None:
    """The latest of the runs (timestamp directory names, all digits; None entries ignored), or None."""
    return max((r for r in runs if r is not None), key=int, default=None)


def latest_run_only(tree: DumpTree, root: Path) -> list[str]:
    """Keep each device's latest run of a dump_path that holds several (one timestamp directory per run): ops of
    two runs are not one execution order, nor one step's data. Timestamp directories of different devices are
    the ranks of one job (each rank's process names its own), so all of them are kept; a directory that a later
    one replaced for any of its devices is an earlier run for all of them. Returns the notes."""
    runs = {e.run for e in tree.entries if e.run is not None}
    if len(runs) < 2:
        return []
    devices = {e.device for e in tree.entries if e.run is not None}
    per_device = {device: {e.run for e in tree.entries if e.device == device and e.run is not None}
                  for device in devices}
    # one process wrote one timestamp directory: replaced on one device, it is an earlier job's on every device
    replaced = set().union(*(druns - {latest_run(druns)} for druns in per_device.values()))
    last: dict[str | None, str] = {}
    for device, druns in per_device.items():
        if druns - replaced:
            last[device] = latest_run(druns - replaced)
    gone = sorted(str(d) for d in devices if d not in last)   # devices only in replaced directories
    # ranks of one job start within minutes of each other: a device whose latest run began long before the latest
    # one and whose dumps ended before it began is an earlier job's (a dump_path reused by a job on fewer
    # devices). Either alone proves nothing: with overflow detection a rank dumps only when it overflows.
    newest = latest_run(runs)
    began = min(e.timestamp for e in tree.entries if e.run == newest)
    ended = {device: max(e.timestamp for e in tree.entries if e.device == device and e.run == run)
             for device, run in last.items()}
    stale = sorted(str(d) for d, run in last.items()
                   if run != newest and ended[d] < began and _minutes_apart(run, newest) > _RANKS_WITHIN_MINUTES)
    last = {d: run for d, run in last.items() if str(d) not in stale}
    keep = set(last.values())
    tree.entries = [e for e in tree.entries if e.run is None or e.run == last.get(e.device)]
    older = runs - keep
    notes = [f"device{'s' if len(stale) > 1 else ''} {', '.join(stale)}: {'their' if len(stale) > 1 else 'its'} "
             f"latest dumps under {root} ended before the latest run ({newest}) began: an earlier job's, left "
             "out"] if stale else []
    if gone:
        notes.append(f"device{'s' if len(gone) > 1 else ''} {', '.join(gone)}: only in timestamp directories a later "
                     "run replaced (the same directory's other devices were dumped again later): an earlier job's, "
                     "left out")
    if not older:
        return [f"{len(runs)} timestamp directories under {root}, each of other devices: read as the ranks of one "
                "run"]
    # files of an earlier run that could not be read are not this run's problem either
    tree.bad = [(p, why) for p, why in tree.bad if not older.intersection(_parts_under(Path(p), root))]
    which = (f"only the latest, {next(iter(keep))}, is read" if len(keep) == 1 else
             f"only each device's latest ({', '.join(sorted(keep, key=int))}) is read")
    return [f"{len(runs)} runs (timestamp directories) under {root}: {which} (give an earlier run's directory to "
            "read that one)"] + notes


_RANKS_WITHIN_MINUTES = 10


def _minutes_apart(earlier: str, later: str) -> float:
    """Minutes between two timestamp directory names (YYYYMMDDhhmmss); 0 when either is not such a name."""
    from datetime import datetime

    try:
        a, b = (datetime.strptime(x, "%Y%m%d%H%M%S") for x in (earlier, later))
    except ValueError:
        return 0.0
    return (b - a).total_seconds() / 60


def _parts_under(path: Path, root: Path) -> tuple[str, ...]:
    """The directory names of ``path`` below ``root`` (all of them when it is not below)."""
    try:
        return path.parent.relative_to(root).parts
    except ValueError:
        return path.parent.parts


def _names_key(key: tuple) -> tuple:
    """A leaf key's parts as sortable text (None first): the last tie-break, so a choice never hangs on set order."""
    return tuple((v is not None, str(v) if v is not None else "") for v in key)


_GE_DEFAULT_TIME = re.compile(r"^(ge_default)_\d{14}_")


def model_key(name: str | None) -> str | None:
    """A model directory's name as both runs of a job share it: GE names a TensorFlow model
    ``ge_default_<YYYYmmddHHMMSS>_<id>``, a timestamp of its own run, so the timestamp is left out."""
    return _GE_DEFAULT_TIME.sub(r"\1_", name) if name else name


def _no_common_leaf(which: str = "") -> str:
    """The note of two dump trees that share no leaf; ``which``: the leaves compared, when each tree holds one."""
    return ("my and golden dumps have no (device, model, iteration) in common: each side's own leaf is compared"
            + (f" ({which})" if which else "") + ", which may be another step's data (give two leaf directories to "
            "choose)")


def _given_as_leaf(tree: DumpTree) -> bool:
    """True when the tree's root is a leaf directory (or a file in one) of a known layout: chosen by the user."""
    root = tree.root if tree.root.is_dir() else tree.root.parent
    return _dir_layout(root)[0] is not None


def _leaf_text(tree: DumpTree) -> str:
    """'device D, model M, iteration I' of a tree holding one leaf."""
    device, model, _mid, iteration, _run = tree.entries[0].group
    return f"device {device}, model {model}, iteration {iteration}"


def one_leaf(my: DumpTree, golden: DumpTree | None = None, *, earliest: bool = False,
             prefer: tuple[frozenset | None, frozenset | None] = (None, None)
             ) -> tuple[DumpTree, DumpTree | None, list[str]]:
    """Keep one (device, model, iteration) leaf of each tree, as msaccucmp compares one leaf directory: dumps of
    several iterations or devices are different data, never one pool of ops (an op missing from one iteration
    would be compared with another iteration's). The leaf kept is the latest iteration (``earliest``: the
    earliest), then the lowest device, then the model with the most ops, among those both trees have (matched
    by device, model name and iteration: model ids differ between runs), taken from each tree's latest run when
    a dump_path holds several (timestamp directories); returns the trees and a note per tree that held more than
    one leaf. Model names match with GE's run timestamp left out (:func:`model_key`). ``prefer``: per side, the
    graph names of the graph given for it: a leaf of a model it names comes first (an eval model dumped at a later
    step is not compared against the train graph)."""
    # a dump_path keeps one timestamp directory per run (per rank: each rank's process names its own): only each
    # device's latest run takes part
    run_notes: list[str] = []
    trees: list[DumpTree] = []
    for tree, side in ((my, "my"), (golden, "golden")):
        if tree is not None:
            tree = DumpTree(root=tree.root, entries=list(tree.entries), bad=list(tree.bad), stray=set(tree.stray))
            run_notes += [f"{side} dumps: {note}" for note in latest_run_only(tree, tree.root)]
            trees.append(tree)
    my, golden = trees[0], (trees[1] if golden is not None else None)
    grouped = [t.groups() for t in trees]
    runs_of = grouped
    # one iteration of a device can hold several models (a train and an eval graph)
    keys = [{(g[0], model_key(g[1]), g[3]): g for g in groups} for groups in runs_of]
    common = set(keys[0]).intersection(*keys[1:]) if len(keys) > 1 else set(keys[0])
    notes: list[str] = run_notes
    unshared = (not common and len(trees) > 1 and all(any(k[0] is not None for k in ks) for ks in keys))
    if all(len(g) <= 1 for g in grouped):
        # one leaf each, found under roots given: step 5 against step 0 is another step's data, said as with
        # several leaves (two leaf directories given are the user's choice)
        if unshared and not all(_given_as_leaf(t) for t in trees):
            notes.append(_no_common_leaf(f"my {_leaf_text(trees[0])}; golden {_leaf_text(trees[1])}"))
        return my, golden, notes
    pick = None

    def unnamed(side: int, model: str | None) -> bool:   # the graph given for that side names another model
        return bool(prefer[side]) and model not in prefer[side]

    if common:   # one (device, model, iteration) for both sides: the model with the most ops on both together
        pick = min(common, key=lambda k: (any(unnamed(i, by_key[k][1]) for i, by_key in enumerate(keys)),
                                          *_leaf_key(keys[0][k], earliest),
                                          -sum(len(groups[by_key[k]]) for groups, by_key in zip(runs_of, keys)),
                                          _names_key(k)))   # a tie (a train and an eval model alike): by name
    elif unshared:
        notes.append(_no_common_leaf())
    out: list[DumpTree] = []
    for i, (tree, all_groups, groups, by_key, side) in enumerate(zip(trees, grouped, runs_of, keys,
                                                                    ("my", "golden"))):
        if len(all_groups) <= 1:
            out.append(tree)
            continue
        if pick is not None:
            chosen = by_key[pick]
        else:   # the latest iteration, then the model with the most ops
            chosen = min(groups, key=lambda g: (unnamed(i, g[1]), *_leaf_key(g, earliest), -len(groups[g]),
                                                _names_key(g)))
        kept = DumpTree(root=tree.root, entries=groups[chosen], bad=tree.bad, stray=tree.stray)
        device, name, _mid, iteration, run = chosen
        models = len({g[1] for g in groups})
        runs = len({g[4] for g in all_groups})
        notes.append(f"{side} dumps in {tree.root} hold {_describe_leaves(all_groups)}: compared "
                     + (f"run {run}, " if runs > 1 else "") + f"device {device}, "
                     + (f"model {name}, " if models > 1 else "")
                     + f"iteration {iteration} only (give a leaf directory to choose another)")
        out.append(kept)
    return out[0], (out[1] if golden is not None else None), notes


@dataclass
class GoldenEntry:
    """One golden numpy file ``{op_name}.{output_index}.{timestamp}.npy``."""

    path: Path
    op_name: str
    output_index: int
    timestamp: int


def _missing_reason(path: Path) -> str:
    """Why an input path that is neither a file nor a directory cannot be read."""
    from fusebisect.fsutil import missing_reason

    return missing_reason(path)


def scan_golden(path: str | os.PathLike[str], repeated: list | None = None, *,
                earliest: bool = False) -> dict[tuple[str, int], GoldenEntry]:
    """Return ``{(op_name, output_index): GoldenEntry}`` for golden .npy files under ``path`` (recursive).

    When one output was dumped several times the newest timestamp wins, or with ``earliest`` the oldest
    (``repeated``, when given, receives the key of each such output once). Raises DumpFormatError if ``path``
    does not exist, or when golden files lie in several directories (iterations, devices): their tensors are
    different data, never one pool.
    """
    root = Path(path)
    if root.is_file():
        candidates = [(root, read_mapping(root.parent).get(root.name, root.name))]
    elif root.is_dir():
        candidates = []
        for d, files in walk(root):
            mapping = read_mapping(d) if MAPPING_FILE in files else {}   # over-long names are hashed
            candidates += [(d / f, mapping.get(f, f)) for f in files]
    else:
        raise DumpFormatError(_missing_reason(root), path=root)
    found: dict[tuple[str, int], GoldenEntry] = {}
    golden = [(file, match) for file, name in candidates if (match := _GOLDEN_NAME.match(name))]
    dirs = sorted({str(file.parent) for file, _match in golden})
    if len(dirs) > 1:
        shown = ", ".join(os.path.relpath(d, root) for d in dirs[:3]) + (", ..." if len(dirs) > 3 else "")
        raise DumpFormatError(f"golden .npy files in {len(dirs)} directories ({shown}): they are different "
                              "steps or devices, give the one directory to compare with", path=root)
    for file, match in golden:
        entry = GoldenEntry(file, match["op"], int(match["idx"]), int(match["ts"]))
        key = (entry.op_name, entry.output_index)
        if key in found and repeated is not None and key not in repeated:
            repeated.append(key)
        if key not in found or (entry.timestamp < found[key].timestamp if earliest
                                else entry.timestamp > found[key].timestamp):
            found[key] = entry
    return found


def is_golden_dir(path: str | os.PathLike[str]) -> bool:
    """Return True if ``path`` is a directory of golden ``{op}.{idx}.{ts}.npy`` files and holds no op dumps."""
    root = Path(path)
    if not root.is_dir():
        return False
    golden = False
    for dirpath, files in walk(root):
        mapping = read_mapping(dirpath) if MAPPING_FILE in files else {}
        for fname in files:
            name = mapping.get(fname, fname)   # a hashed file stands for its original name
            if _GOLDEN_NAME.match(name):
                golden = True
            elif parse_dump_name(name) is not None:
                return False
    return golden
