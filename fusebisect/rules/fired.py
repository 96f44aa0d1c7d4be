"""Which fusion rules fired in a compile: read ``fusion_result.json`` (GE's compile statistics) and the
``pass_name``/``pass_name_ub`` attrs of Build-stage graph dumps.

``fusion_result.json`` holds one JSON object or several concatenated (whitespace between them), or a JSON array
of them (GE's newer writer, whose objects name their graph ``"session_and_graph_id": "0_11"``), each either
``{"session_and_graph_id_<s>_<g>": {"graph_fusion": {...}, "ub_fusion": {...}}, ...}`` or the older
``{"graphId": "1", "graph_fusion": {...}, "ub_fusion": {...}}``. Per rule it gives ``match_times``,
``effect_times`` and (UB fusion) ``repository_hit_times``, as strings or integers. A rule "fired" when
``effect_times > 0``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from fusebisect.errors import FusebisectError, GraphFormatError

KINDS = {"graph_fusion": "GraphFusion", "ub_fusion": "UBFusion"}
_COUNTS = ("match_times", "effect_times", "repository_hit_times")


@dataclass
class RuleStat:
    """Counts for one fusion rule, summed over graphs and sessions."""

    name: str
    kind: str                   # 'GraphFusion' | 'UBFusion'
    match_times: int = 0
    effect_times: int = 0
    repository_hit_times: int = 0
    graphs: list[str] = field(default_factory=list)   # graphs in which the rule took effect (effect_times > 0)


def _position(text: str, index: int) -> str:
    line = text.count("\n", 0, index) + 1
    column = index - (text.rfind("\n", 0, index) + 1) + 1
    return f"line {line}, column {column}"


def _objects(text: str, path) -> list[tuple[dict, int]]:
    """Return the top-level JSON objects of ``text`` with their start offsets: objects concatenated, or the
    elements of a top-level array of objects (GE's newer writer), or both in turn."""
    decoder = json.JSONDecoder()
    out = []
    i, n = 0, len(text)

    def skip(k: int) -> int:
        while k < n and text[k] in " \t\r\n\f\v\ufeff":
            k += 1
        return k

    def decode(k: int):
        try:
            return decoder.raw_decode(text, k)
        except json.JSONDecodeError as exc:
            raise GraphFormatError(f"malformed fusion_result JSON at {_position(text, exc.pos)}: {exc.msg}",
                                   path=path) from None
        except RecursionError:
            raise GraphFormatError(f"malformed fusion_result JSON at {_position(text, k)}: nested too deeply",
                                   path=path) from None

    while True:
        i = skip(i)
        if i >= n:
            break
        if text[i] == "[":
            start, i, count = i, skip(i + 1), 0
            while i < n and text[i] != "]":
                obj, end = decode(i)
                count += 1
                if not isinstance(obj, dict):
                    raise GraphFormatError(f"malformed fusion_result JSON: element {count} of the array at "
                                           f"{_position(text, start)} is {type(obj).__name__}, expected an object",
                                           path=path)
                out.append((obj, i))
                i = skip(end)
                if i < n and text[i] == ",":
                    i = skip(i + 1)
                    if i >= n or text[i] == "]":
                        decode(i)   # a trailing comma: JSON's own "Expecting value" at its place
                elif i < n and text[i] != "]":
                    raise GraphFormatError(f"malformed fusion_result JSON at {_position(text, i)}: "
                                           "expected ',' or ']'", path=path)
            if i >= n:
                raise GraphFormatError(f"malformed fusion_result JSON: the array at {_position(text, start)} "
                                       "is not closed", path=path)
            i += 1
            continue
        obj, end = decode(i)
        if not isinstance(obj, dict):
            raise GraphFormatError(f"malformed fusion_result JSON at {_position(text, i)}: "
                                   f"expected an object or an array of objects, got {type(obj).__name__}",
                                   path=path)
        out.append((obj, i))
        i = end
    return out


def _count(value, where: str, path, text: str, start: int) -> int:
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, int):
        if value < 0:
            raise GraphFormatError(f"{where} is negative ({value}) (object at {_position(text, start)})", path=path)
        return value
    if isinstance(value, str):
        try:
            n = int(value.strip())
        except ValueError:
            pass
        else:
            if n >= 0:
                return n
    raise GraphFormatError(f"{where} is not a count: {value!r} (object at {_position(text, start)})", path=path)


def _graph_sections(obj: dict, ordinal: int) -> list[tuple[str, dict]]:
    """Return (graph label, section) pairs of one top-level object; a section holds graph_fusion/ub_fusion."""
    if any(k in obj for k in KINDS) or "graphId" in obj:
        gid = obj.get("graphId")
        sid = obj.get("sessionId")
        both = obj.get("session_and_graph_id")
        if gid is None and isinstance(both, (str, int)) and not isinstance(both, bool):
            # the array writer's "session_and_graph_id": "0_11": labelled as the nested form's key
            return [(f"session_and_graph_id_{both}", obj)]
        label = f"graph_{gid}" if gid is not None else f"graph#{ordinal}"
        if sid is not None:
            label = f"session_{sid}_{label}"
        return [(label, obj)]
    sections = []
    for key, value in obj.items():
        if isinstance(value, dict) and (key.startswith("session_and_graph_id") or any(k in value for k in KINDS)):
            sections.append((key, value))
    return sections


def read_fusion_result_per_graph(path) -> dict[str, list[RuleStat]]:
    """Return the rule counts of a ``fusion_result.json`` per graph label (``session_and_graph_id_0_1``,
    ``graph_4``, ...), in file order; a label seen twice has its counts summed.

    Raises GraphFormatError (naming the file and the line/column) for an unreadable, empty or malformed file.
    """
    p = Path(path)
    from fusebisect.fsutil import not_regular

    if why := not_regular(p):
        raise GraphFormatError(why, path=p)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise GraphFormatError(f"cannot read: {exc.strerror or exc}", path=p) from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise GraphFormatError(f"not UTF-8 text (byte {exc.start})", path=p) from None
    if not text.strip():
        raise GraphFormatError("empty file", path=p)
    per_graph: dict[str, dict[tuple[str, str], RuleStat]] = {}
    for ordinal, (obj, start) in enumerate(_objects(text, p)):
        sections = _graph_sections(obj, ordinal)
        if obj and not sections:
            raise GraphFormatError(f"the object at {_position(text, start)} has no session_and_graph_id_*, graphId, "
                                   f"graph_fusion or ub_fusion key: not a fusion_result.json", path=p)
        for label, section in sections:
            stats = per_graph.setdefault(label, {})
            for section_key, kind in KINDS.items():
                rules = section.get(section_key)
                if rules is None:
                    continue
                if not isinstance(rules, dict):
                    raise GraphFormatError(f"\"{label}\".\"{section_key}\" is not an object "
                                           f"(object at {_position(text, start)})", path=p)
                for name, counts in rules.items():
                    if not isinstance(counts, dict):
                        raise GraphFormatError(f"\"{label}\".\"{section_key}\".\"{name}\" is not an object "
                                               f"(object at {_position(text, start)})", path=p)
                    stat = stats.setdefault((name, kind), RuleStat(name, kind))
                    for c in _COUNTS:
                        if c in counts:
                            n = _count(counts[c], f"\"{label}\".\"{section_key}\".\"{name}\".\"{c}\"", p, text,
                                       start)
                            setattr(stat, c, getattr(stat, c) + n)
                    if stat.effect_times > 0 and label not in stat.graphs:
                        stat.graphs.append(label)
    return {label: list(stats.values()) for label, stats in per_graph.items()}


def read_fusion_result(path) -> list[RuleStat]:
    """Return one :class:`RuleStat` per (rule, kind) with counts summed over all graphs and sessions of a
    ``fusion_result.json`` (one object, several concatenated with whitespace between, or an array of them), in
    first-seen order;
    ``graphs`` lists where the rule took effect.

    Raises GraphFormatError (naming the file and the position) for an unreadable, empty or malformed file.
    """
    total: dict[tuple[str, str], RuleStat] = {}
    for stats in read_fusion_result_per_graph(path).values():
        for s in stats:
            _add(total, (s.name, s.kind), s)
    return list(total.values())


def _is_fusion_result(path: Path) -> bool:
    if path.name.startswith("fusion_result") and path.suffix == ".json":
        return True
    from fusebisect.fsutil import not_regular

    if not_regular(path):
        return False
    try:
        with open(path, "rb") as fh:
            head = fh.read(65536)
    except OSError:
        return False
    head = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    if head[:1] != b"{":   # not JSON: a graph's text format, unless named .json (then its JSON error says why)
        return path.suffix == ".json"
    # a GE graph in JSON (atc) has "graph" and "op" keys; anything else in braces is read as a fusion result
    return b'"graph"' not in head and b'"op"' not in head


def _add(acc: dict, key, stat: RuleStat) -> None:
    """Add ``stat``'s counts and graphs into ``acc[key]`` (a fresh copy when the key is new)."""
    have = acc.get(key)
    if have is None:
        acc[key] = RuleStat(stat.name, stat.kind, stat.match_times, stat.effect_times,
                                  stat.repository_hit_times, list(stat.graphs))
        return
    have.match_times += stat.match_times
    have.effect_times += stat.effect_times
    have.repository_hit_times += stat.repository_hit_times
    for g in stat.graphs:
        if g not in have.graphs:
            have.graphs.append(g)


def _from_graph(graph) -> dict[str, RuleStat]:
    found: dict[str, RuleStat] = {}
    for op in graph.ops:
        seen = [(p, "GraphFusion") for p in dict.fromkeys(op.pass_names)]
        if op.ub_pass_name:
            seen.append((op.ub_pass_name, "UBFusion"))
        for name, kind in seen:
            stat = found.setdefault(name, RuleStat(name, kind))
            stat.match_times += 1
            stat.effect_times += 1
            if op.graph not in stat.graphs:
                stat.graphs.append(op.graph)
    return found


def _final_stages(graphs: list[Path]) -> list[Path]:
    """Drop the copies GE's default stage list makes of a built graph: next to a final ``Build`` stage of a graph
    (``ge_proto_N_Build.txt``, ``ge_proto_N_graph_1_Build.txt``), the other stages of that graph in that folder
    whose names hold "Build" (``PreRunAfterOptimizeGraphBeforeBuild``, ``PreRunAfterBuild``) show the same
    fusions again. A graph without a final stage of its own keeps its stages."""
    from fusebisect.compare.graph import dump_stage

    def stage_of(p: Path) -> tuple[tuple[Path, str], bool]:
        stage = dump_stage(p.name) or ""
        graph = re.match(r"(graph_\d+)_", stage)
        key = (p.parent, graph.group(1) if graph else "")
        return key, stage == "Build" or (graph is not None and stage == f"{graph.group(1)}_Build")
    staged = [(p, *stage_of(p)) for p in graphs]
    with_final = {key for _p, key, final in staged if final}
    return [p for p, key, final in staged if final or key not in with_final]


def fired_rules(path, *, unreadable: list[str] | None = None) -> dict[str, RuleStat]:
    """Return the rules that fired, by name: those with ``effect_times > 0`` in ``fusion_result.json`` files plus
    the ``pass_name`` (GraphFusion) / ``pass_name_ub`` (UBFusion) values seen on ops of Build-stage graphs.

    ``path`` is a fusion_result.json, a graph file, or a directory searched recursively for both; every graph of
    every file counts (several sessions or builds may dump graphs of the same name), except the stage copies
    next to a final Build graph (:func:`_final_stages`). Counts come from
    fusion_result.json; a rule seen only in graphs counts the ops carrying it. Every returned rule has
    ``effect_times > 0``. Raises GraphFormatError for a malformed file, or for a path holding neither a
    fusion_result.json nor a Build graph (so an empty trial directory is never read as "nothing fired").
    With ``unreadable`` (a list), a malformed file of a directory is skipped and its error appended there,
    as long as some other file could be read.
    """
    from fusebisect.compare.graph import find_build_graphs, load_graph

    p = Path(path)
    results: list[Path] = []
    graphs: list[Path] = []
    if p.is_dir():
        try:
            results = sorted(f for f in p.rglob("fusion_result*.json") if f.is_file())
        except OSError as exc:
            raise GraphFormatError(f"cannot scan: {exc.strerror or exc}", path=p) from None
        graphs = find_build_graphs(p)
        if not results and not graphs:
            raise GraphFormatError("no fusion_result.json and no Build-stage graph (ge_proto_*Build*.txt) found",
                                   path=p)
    elif p.exists():
        from fusebisect.compare.graph import dump_stage

        stage = dump_stage(p.name)
        if stage is not None and "Build" not in stage and not _is_fusion_result(p):
            # a dump of the graph before (or without) the fusion passes: no pass_name yet, which is no "nothing fired"
            raise GraphFormatError(f"a graph of stage {stage}, dumped before the fusion passes ran (they mark ops in "
                                   "the Build stage): give its ge_proto_*Build*.txt, the dump folder or "
                                   "fusion_result.json", path=p)
        (results if _is_fusion_result(p) else graphs).append(p)
    else:
        from fusebisect.fsutil import missing_reason

        raise GraphFormatError(missing_reason(p), path=p)

    graphs = _final_stages(graphs)
    errors: list[FusebisectError] = []

    def readable(read, f):
        try:
            return read(f)
        except FusebisectError as exc:
            if unreadable is None or not p.is_dir():
                raise
            errors.append(exc)
            return None

    out: dict[str, RuleStat] = {}
    for f in results:
        for stat in readable(read_fusion_result, f) or []:
            if stat.effect_times > 0:
                _add(out, stat.name, stat)
    from_results = set(out)
    for f in graphs:
        graph = readable(load_graph, f)
        for name, gstat in (_from_graph(graph) if graph is not None else {}).items():
            have = out.get(name)
            if have is None:
                out[name] = gstat
                continue
            if name not in from_results:   # counted from graphs alone: every file's ops count (the results
                # name their graphs by session and graph id, the dumps by graph name: one graph, two labels)
                have.graphs.extend(g for g in gstat.graphs if g not in have.graphs)
                have.match_times += gstat.match_times
                have.effect_times += gstat.effect_times
    if errors:
        if len(errors) == len(results) + len(graphs):
            raise errors[0]
        unreadable.extend(str(e) for e in errors)  # type: ignore[union-attr]
    return dict(sorted(out.items()))


__all__ = ["RuleStat", "read_fusion_result", "read_fusion_result_per_graph", "fired_rules", "KINDS"]
