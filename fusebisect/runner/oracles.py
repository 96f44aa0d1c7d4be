"""Turn one finished execution into a verdict: GOOD, BAD or INVALID (git bisect's skip).

Oracles:

- exit status (default): exit 0 good, 125 skip, 1-127 bad, anything else (killed by a signal) invalid;
- ``--metric REGEX`` (one capture group, a number) read from stdout, or from stderr when stdout has no match;
  ``last`` (the last match) or
  ``curve`` (every match, compared point by point over the reference's length: a curve that ends before the
  reference's is bad, the job stopped early); good when within ``rtol``/``atol`` of
  the reference run (the all-candidates-off configuration) or of ``--expect``;
- ``--check CMD2``: run after each execution with the same environment; exit 0 good, 125 skip, 1-127 bad,
  anything else aborts the whole run (:class:`RunAborted`);
- ``--dumps``: compare this run's dumps with the reference run's dumps (fused-vs-unfused mapping through each
  run's graph/ dir); bad when a tensor crosses ``--cosine`` / ``--max-abs-error``.

Several oracles may be given together: the trial is INVALID if any says invalid, else BAD if any says bad, else
GOOD. Under any oracle other than the exit status, a crash (nonzero exit), a timeout or a missing metric is
INVALID, never BAD.

Measuring (at run time: parse logs, run the check) is separate from judging (against the reference), so a run
that finished before the reference exists can be judged later from its journaled measurements.
"""

from __future__ import annotations

import functools
import math
import re
import shlex
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from fusebisect.errors import FusebisectError, UsageError
from fusebisect.runner.trial import (ExecResult, ProcessRegistry, TrialPaths, iter_text, pgid_file, run_process,
                                     substitute)
from fusebisect.textutil import window_start

GOOD, BAD, INVALID, UNKNOWN = "good", "bad", "invalid", "unknown"
PENDING = "pending: judged against the reference run"


class RunAborted(FusebisectError):
    """The ``--check`` command asked to abort the whole run (exit code outside 0-127), like ``git bisect run``.
    Not a usage error: the run ends without an answer (exit 1), its journal kept."""

    exit_code = 1


@dataclass
class Measurement:
    """What was observed in one execution (journaled; enough to judge it later)."""

    exit_code: int | None
    seconds: float
    timed_out: bool = False
    metric: float | None = None  # last match of --metric
    curve: Sequence[float] = field(default_factory=list)  # every match (curve mode; an array of doubles: 8 bytes
    #                                                        a point, a long curve in every record of a run)
    check_exit_code: int | None = None  # --check's exit status


@dataclass(frozen=True)
class MetricSpec:
    """``--metric`` and its tolerance."""

    pattern: re.Pattern
    mode: str = "last"  # 'last' | 'curve'
    rtol: float = 1e-2
    atol: float = 0.0
    expect: float | None = None
    nonfinite: re.Pattern | None = None   # the pattern with its group matching nan/inf instead (see compile_metric)


# a whole word, followed by a space, the line's end or closing punctuation: not "loss info", "nan-check", "nan/inf"
_NONFINITE = "(?i:[-+]?(?:nan|inf(?:inity)?)(?=\\.?(?:[\\s,;)\\]}|'\"]|$)))"   # a sentence's full stop too


def _group_span(regex: str) -> tuple[int, int] | None:
    """(start, end) of the body of the one capture group of ``regex`` (between its parentheses), or None."""
    i, n, start, depth, klass = 0, len(regex), None, 0, False
    while i < n:
        c = regex[i]
        if c == "\\":
            i += 2
            continue
        if klass:
            klass = c != "]"
        elif c == "[":
            klass = True
            if regex[i + 1:i + 2] == "]":   # a ']' first in a class is a literal
                i += 1
        elif c == "(":
            depth += 1
            if start is None:
                if not regex.startswith("?", i + 1):
                    start, level = i + 1, depth
                elif regex.startswith("?P<", i + 1):
                    close = regex.find(">", i)
                    if close < 0:
                        return None
                    start, level = close + 1, depth
        elif c == ")":
            if start is not None and depth == level:
                return start, i
            depth -= 1
        i += 1
    return None


def _nonfinite_variant(pattern: re.Pattern) -> re.Pattern | None:
    """``pattern`` with its capture group's body replaced by nan/inf (any case, signed), or None: the loss a
    job prints once it diverges ('loss nan'), which a group like ``([0-9.]+)`` does not match."""
    span = _group_span(pattern.pattern)
    if span is None:
        return None
    try:
        variant = re.compile(pattern.pattern[:span[0]] + _NONFINITE + pattern.pattern[span[1]:], pattern.flags)
    except re.error:
        return None
    return variant if variant.groups == 1 else None


def compile_metric(regex: str, *, mode: str = "last", rtol: float = 1e-2, atol: float = 0.0,
                   expect: float | None = None) -> MetricSpec:
    """Return a MetricSpec. Raises UsageError when the regex does not compile, does not have exactly one
    capture group, the mode is unknown, or a tolerance is negative."""
    try:
        pattern = re.compile(regex, re.MULTILINE)
    except re.error as exc:
        raise UsageError(f"--metric: invalid regular expression {regex!r}: {exc}") from exc
    if pattern.groups != 1:
        raise UsageError(f"--metric: {regex!r} must have exactly one capture group around the number "
                         f"(it has {pattern.groups}), e.g. 'loss ([0-9.eE+-]+)'")
    if mode not in ("last", "curve"):
        raise UsageError(f"--metric-mode: {mode!r} is not one of last, curve")
    if rtol < 0 or atol < 0:
        raise UsageError("--rtol/--atol must be >= 0")
    return MetricSpec(pattern=pattern, mode=mode, rtol=rtol, atol=atol, expect=expect,
                      nonfinite=_nonfinite_variant(pattern))


def parse_metric(text: str, spec: MetricSpec) -> list[float]:
    """Return every number captured by ``spec.pattern`` in ``text``, in order (matches that are not numbers are
    skipped; 'nan'/'inf' are numbers; a capture the pattern ends right before an exponent, '1.5' of '1.5e-05',
    is read with it). Where the pattern's group cannot match a NaN/Inf the job printed in its
    place ('loss nan' for 'loss ([0-9.]+)'), that NaN/Inf is a value too: the loss did not stop, it diverged."""
    found: dict[int, float] = {}
    for match in spec.pattern.finditer(text):
        value = _number(match.group(1))
        if value is not None:
            exponent = _CUT_EXPONENT.match(text, match.end(1)) if match.end(1) == match.end() else None
            if exponent is not None and _PLAIN_DECIMAL.fullmatch(match.group(1)):
                # '([0-9.]+)' stops at the 'e' of 'loss 1.5e-05' (how Python prints a small loss): the number
                # the job printed is 1.5e-05, not 1.5
                value = float(match.group(1) + exponent.group())
            found[match.start()] = value
    if spec.nonfinite is not None:
        for match in spec.nonfinite.finditer(text):
            found.setdefault(match.start(), float(match.group(1)))
    return [found[k] for k in sorted(found)]


_CUT_EXPONENT = re.compile(r"[eE][+-]?[0-9]+")
_PLAIN_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)")


def _number(captured: str | None) -> float | None:
    """The number a capture holds, or None: a sentence's full stop after it ('loss 0.5.' read by '([0-9.]+)') is
    not part of it."""
    if captured is None:
        return None
    for text in (captured, captured[:-1] if captured.endswith(".") else None):
        if text:
            try:
                return float(text)
            except ValueError:
                pass
    return None


def unparsed_capture(text: str, spec: MetricSpec) -> str | None:
    """The first text ``spec.pattern`` captured in ``text`` that is not a number (what a pattern matching the
    wrong thing reads), or None."""
    for match in spec.pattern.finditer(text):
        if match.group(1) is not None and _number(match.group(1)) is None:
            return match.group(1)
    return None


def close(value: float, reference: float, rtol: float, atol: float) -> bool:
    """True when ``value`` is within ``atol + rtol*|reference|`` of ``reference`` (NaN matches only NaN)."""
    if math.isnan(value) or math.isnan(reference):
        return math.isnan(value) and math.isnan(reference)
    if math.isinf(value) or math.isinf(reference):
        return value == reference
    return abs(value - reference) <= atol + rtol * abs(reference)


def _signal_name(number: int) -> str:
    import signal

    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"


def exit_code_verdict(code: int | None) -> tuple[str, str]:
    """git bisect's rule for an exit status: (outcome, reason). 0 good, 125 skip, 1-127 bad, else 'abort'.

    Returns outcome 'abort' for codes outside 0-127 (including death by a signal)."""
    if code == 0:
        return GOOD, ""
    if code == 125:
        return INVALID, "exit 125 (skip)"
    if code is not None and 1 <= code <= 127:
        return BAD, f"exit {code}"
    return "abort", f"exit {code}" if code is not None and code >= 0 else f"killed by signal {-(code or 0)}"


@dataclass
class DumpsSpec:
    """``--dumps`` thresholds."""

    cosine: float = 0.99
    max_abs_error: float | None = None
    # graph dumps were requested (DUMP_GE_GRAPH): a trial without a Build graph did not honour it, and its fused
    # ops cannot be mapped to the unfused ones (matched by name, the fusion itself would look like a divergence)
    graphs: bool = False


@dataclass
class Verdict:
    outcome: str
    reason: str = ""
    dumps: dict[str, Any] | None = None  # compare rows/first divergence (baseline vs reference only)


class Judge:
    """All oracles of one run, combined. Measures an execution, then judges it against the reference."""

    def __init__(self, *, metric: MetricSpec | None = None, check: Sequence[str] | None = None,
                 dumps: DumpsSpec | None = None) -> None:
        self.metric = metric
        self.check = list(check) if check else None
        self.dumps = dumps

    @property
    def exit_status_only(self) -> bool:
        """True when CMD's exit status is the oracle (no other oracle given)."""
        return self.metric is None and self.check is None and self.dumps is None

    @property
    def needs_reference(self) -> bool:
        """True when a verdict compares with the reference run (metric without --expect, or dumps)."""
        return (self.metric is not None and self.metric.expect is None) or self.dumps is not None

    def measure(self, result: ExecResult, paths: TrialPaths, *, env: dict, cwd=None, timeout=None,
                registry: ProcessRegistry | None = None) -> Measurement:
        """Read the metric from the logs and run the check command; return the measurement.

        The check runs only when CMD exited 0 (a crash is INVALID whatever the check says); its output goes to
        check.log in the trial dir. Raises UsageError if the check cannot be started."""
        m = Measurement(exit_code=result.exit_code, seconds=result.seconds, timed_out=result.timed_out)
        if self.metric is not None:
            # stdout's matches, or stderr's when stdout has none (Python's logging writes there): one stream,
            # so the order of the matches is the order printed in every run (two streams interleave as their
            # buffers flush). The whole log, a piece at a time: a curve keeps its first points and a log of
            # gigabytes costs no more memory than one piece.
            values: list[float] = []
            for path in (paths.stdout_path, paths.stderr_path):
                values = [v for piece in iter_text(path) for v in parse_metric(piece, self.metric)]
                if values:
                    break
            if values:
                m.metric = values[-1]
                if self.metric.mode == "curve":
                    m.curve = array("d", values)
        if self.check is not None and result.exit_code == 0 and not result.timed_out:
            log = paths.trial_dir / "check.log"
            # its group id is kept like the job's: a rerun after kill -9 of fusebisect kills a check left running
            res = run_process(substitute(self.check, paths), env=env, stdout=log, stderr=log, timeout=timeout,
                              cwd=cwd, registry=registry, group_file=pgid_file(paths.trial_dir))
            m.check_exit_code = None if res.timed_out else res.exit_code
            if res.timed_out:
                m.timed_out = True
        return m

    def judge(self, m: Measurement, *, reference: Measurement | None, is_reference: bool,
              paths: TrialPaths | None = None, reference_paths: TrialPaths | None = None,
              dumps: bool = True) -> Verdict:
        """Return the verdict of measurement ``m``.

        ``reference`` is the reference run's measurement (None when there is none yet or it was invalid);
        ``is_reference`` marks the reference run itself, which is good by definition for relative oracles.
        Returns outcome PENDING-unknown when a reference is needed and not given. Raises RunAborted when the
        check command exited outside 0-127. ``dumps`` False: the dump comparison is left out (set aside)."""
        if m.timed_out:   # the job's, or (the job having exited 0) its --check's
            return Verdict(INVALID, "--check timed out" if self.check is not None and m.exit_code == 0 else "timeout")
        if self.exit_status_only:
            outcome, reason = exit_code_verdict(m.exit_code)
            if outcome == "abort":
                return Verdict(INVALID, reason)
            return Verdict(outcome, reason)
        if m.exit_code != 0:
            what = f"exit {m.exit_code}" if m.exit_code is not None and m.exit_code >= 0 else (
                f"killed by signal {-(m.exit_code or 0)}")
            if self.metric is not None and m.metric is not None and m.exit_code is not None and 0 < m.exit_code < 128:
                # a job that judges itself and exits 1: under --metric that is no verdict, and no crash either
                return Verdict(INVALID, f"{what} after printing the metric ({m.metric:g}): a job that fails is no "
                                        "verdict under --metric; if it exits non-zero on bad accuracy, drop --metric "
                                        "(its exit code is then the verdict)")
            return Verdict(INVALID, f"crash ({what})")
        verdicts: list[Verdict] = []
        if self.check is not None:
            outcome, reason = exit_code_verdict(m.check_exit_code)
            if outcome == "abort":
                code = m.check_exit_code
                how = ("timed out" if code is None else f"exited {code}" if code >= 0 else
                       f"was killed by signal {-code} ({_signal_name(-code)})")
                raise RunAborted(f"--check {how}: outside exit codes 0-127, aborting the run (like git bisect "
                                 f"run); the journal is kept")
            verdicts.append(Verdict(outcome, f"check {reason}" if reason else ""))
        if self.metric is not None:
            verdicts.append(self._judge_metric(m, reference, is_reference))
        if self.dumps is not None and dumps:
            verdicts.append(self._judge_dumps(paths, reference_paths, is_reference))
        return combine(verdicts)

    def _judge_metric(self, m: Measurement, reference: Measurement | None, is_reference: bool) -> Verdict:
        spec = self.metric
        assert spec is not None
        if m.metric is None:
            return Verdict(INVALID, "metric not found in the output")
        if spec.expect is not None:
            if close(m.metric, spec.expect, spec.rtol, spec.atol):
                return Verdict(GOOD)
            return Verdict(BAD, f"metric {m.metric:g} vs expected {spec.expect:g}")
        if is_reference:
            if not math.isfinite(m.metric):   # every run would be compared with a loss that diverged
                return Verdict(INVALID, f"the reference's metric is {m.metric:g}: no run can be compared with it")
            return Verdict(GOOD, "reference")
        if reference is None:
            return Verdict(UNKNOWN, PENDING)
        if reference.metric is None:
            return Verdict(INVALID, "the reference run has no metric")
        if spec.mode == "curve":
            mine, ref = m.curve or [m.metric], reference.curve or [reference.metric]
            n = min(len(mine), len(ref))
            for i in range(n):
                if not close(mine[i], ref[i], spec.rtol, spec.atol):
                    return Verdict(BAD, f"curve point {i}: {mine[i]:g} vs reference {ref[i]:g}")
            if len(mine) < len(ref):  # the job stopped early (training aborted): that is the symptom
                return Verdict(BAD, f"curve ends after {len(mine)} points, the reference has {len(ref)}")
            return Verdict(GOOD)
        if close(m.metric, reference.metric, spec.rtol, spec.atol):
            return Verdict(GOOD)
        return Verdict(BAD, f"metric {m.metric:g} vs reference {reference.metric:g}")

    def _judge_dumps(self, paths: TrialPaths | None, reference_paths: TrialPaths | None,
                     is_reference: bool) -> Verdict:
        spec = self.dumps
        assert spec is not None
        if is_reference:
            # every run is compared with this one's dumps (and graph): without them it is no reference, and the
            # run to retry is this one, not the next run compared with it
            if paths is not None and not has_dumps(paths):
                return Verdict(INVALID, f"the all-candidates-off reference run wrote no dumps ({paths.dump_dir}): "
                                        "nothing to compare runs with")
            if paths is not None and spec.graphs:
                try:
                    graph = _reference_graph(paths.graph_dir)
                except FusebisectError as exc:
                    return Verdict(INVALID, f"dumps: the reference run's graph: {exc}")
                if graph is None:
                    return Verdict(INVALID, f"dumps: no GE graph dump in {paths.graph_dir}: fused ops cannot be "
                                            "mapped")
            return Verdict(GOOD, "reference")
        if reference_paths is None or paths is None:
            return Verdict(UNKNOWN, PENDING)
        try:
            comparison = compare_trial_dumps(paths, reference_paths, cosine=spec.cosine,
                                             max_abs_error=spec.max_abs_error, require_graphs=spec.graphs)
        except FusebisectError as exc:
            return Verdict(INVALID, f"dumps: {exc}")
        if comparison is None:
            if has_dumps(paths):   # then the reference lacks them: every run is judged against its dumps
                return Verdict(INVALID, f"the all-candidates-off reference run wrote no dumps "
                                        f"({reference_paths.dump_dir}): nothing to compare with")
            return Verdict(INVALID, "no dumps in the trial dir")
        report = comparison.deciding
        if report is None:
            return Verdict(INVALID, f"dumps: this run dumped {'; '.join(comparison.only_run)} and the reference run "
                           f"{'; '.join(comparison.only_reference)}: nothing in common to compare")
        summary = summarize_dumps(report)
        first = report.first_divergence
        if first:   # (the first leaf, in execution order, whose dumps diverge)
            where = first.get("op") or first.get("my_op") or first
            return Verdict(BAD, f"dumps diverge at {where}" + (f" ({report.leaf})" if report.leaf else ""),
                           summary)
        if comparison.only_run or comparison.only_reference:
            # a (device, model) one run dumped and the other did not: its tensors were never compared
            side, leaves = (("this run", comparison.only_run) if comparison.only_run
                            else ("the reference run", comparison.only_reference))
            return Verdict(INVALID, f"dumps: {side} alone dumped {'; '.join(leaves)}: those tensors were not "
                           "compared", summary)
        for report in comparison.reports:
            verdict = _unjudged(report)
            if verdict is not None:
                return Verdict(INVALID, verdict, summary)
        return Verdict(GOOD, "", summary)


def _unjudged(report) -> str | None:
    """Why a comparison that found no divergence cannot call the run GOOD (tensors that were never compared), or
    None when every tensor was."""
    leaf = f"{report.leaf}: " if report.leaf else ""
    if not any(row.compared for row in report.rows):
        # nothing was compared: calling the run GOOD would clear every rule it left on
        first = next((row.fail_reason for row in report.rows if row.fail_reason), "")
        return (f"dumps: {leaf}none of the {len(report.rows)} tensors could be compared with the reference "
                "run's" + (f" (first reason: {first})" if first else ""))
    # unread tensors may diverge: GOOD would clear every rule left on. The run's own, or the reference's (then
    # every run's are uncompared there, the culprit's divergence perhaps among them)
    mine = [u for u in report.unreadable if u.get("side") != "golden"]
    if mine:
        return f"dumps: {leaf}{len(mine)} dump file(s) could not be read (first: {mine[0]['reason']})"
    theirs = [u for u in report.unreadable if u.get("side") == "golden"]
    if theirs:
        return (f"dumps: {leaf}{len(theirs)} dump file(s) of the reference run could not be read (first: "
                f"{theirs[0]['reason']}), so those tensors were not compared (rerun with --fresh once the job "
                "writes whole dumps)")
    steps = report.last_steps
    if steps is not None:   # the latest step both dumped was compared; the later ones of one run never were
        early, late = ("this run", "the reference's") if steps[0] < steps[1] else ("the reference run", "this run's")
        return (f"dumps: {leaf}the dumps of {early} stop at step {min(steps)}, {late} go on to step {max(steps)}: "
                f"only step {min(steps)} was compared (dumps cut short?)"
                + (" (rerun with --fresh once the job dumps every step)" if early == "the reference run" else ""))
    cut = report.cut_short
    if cut.get("run"):   # its graph ran ops it did not dump: those tensors were never compared
        return (f"dumps: {leaf}{len(cut['run'])} op(s) of the run's graph that the reference run dumped have no "
                f"dump here (first: {cut['run'][0]}): its dumps stopped early or miss ops, so those tensors were "
                "not compared")
    if cut.get("reference"):
        return (f"dumps: {leaf}{len(cut['reference'])} op(s) of the reference run's graph that this run dumped "
                f"have no dump in the reference (first: {cut['reference'][0]}): the reference's dumps stopped "
                "early or miss ops, so those tensors were not compared (rerun with --fresh once the job dumps "
                "every op)")
    if report.not_in_graph:   # the trial's own graph lacks ops it dumped: they were not compared
        return (f"dumps: {leaf}{len(report.not_in_graph)} op dump(s) have no op in the run's graph (first: "
                f"{report.not_in_graph[0]}), so they were not compared")
    return None


def combine(verdicts: Sequence[Verdict]) -> Verdict:
    """Combine several oracles' verdicts: invalid > unknown (pending) > bad > good. Never raises."""
    for outcome in (INVALID, UNKNOWN, BAD):
        hits = [v for v in verdicts if v.outcome == outcome]
        if hits:
            dumps = next((v.dumps for v in verdicts if v.dumps is not None), None)
            # (one reason said once: two oracles waiting for the reference are one PENDING, which a run's
            # record is recognised by when the reference comes)
            return Verdict(outcome, "; ".join(dict.fromkeys(v.reason for v in hits if v.reason)), dumps)
    dumps = next((v.dumps for v in verdicts if v.dumps is not None), None)
    return Verdict(GOOD, "; ".join(v.reason for v in verdicts if v.reason and v.reason != "reference"), dumps)


def has_dumps(paths: TrialPaths) -> bool:
    """True when the trial's dump/ dir holds at least one file."""
    return paths.dump_dir.is_dir() and any(p.is_file() for p in paths.dump_dir.rglob("*"))


def trial_graph(paths: TrialPaths):
    """Return the merged Build graph of a trial (``fusebisect.compare.graph``), or None when it has none.
    Raises GraphFormatError for an unreadable graph."""
    return _graph_in(paths.graph_dir)


def _graph_in(graph_dir: Path, *, each: bool = False):
    """A trial's Build graphs merged, or with ``each`` as a GraphSet (each file's own too: the comparison picks
    among a train and an eval graph per dump, as compare does); None when it has none."""
    from fusebisect.compare.graph import find_build_graphs, load_graph, load_graph_set

    if not graph_dir.is_dir() or not find_build_graphs(graph_dir):
        return None
    return load_graph_set(graph_dir) if each else load_graph(graph_dir)


# the verdict, the journal's dumps rows and the prior read only these two metrics
ORACLE_ALGORITHMS = ("CosineSimilarity", "MaxAbsoluteError")


@functools.lru_cache(maxsize=2)
def _reference_graph(graph_dir: Path):
    # every trial is compared with the same reference run, whose graph dump no longer changes once it has run:
    # parse it once, not once per trial (Build graphs of real networks take seconds to read)
    return _graph_in(graph_dir, each=True)


@dataclass
class TrialComparison:
    """A trial's dumps compared with the reference run's: one report per (device, model) both runs dumped (a train
    and an eval graph, or two ranks, are compared one at a time, each with its own graph), in the order they
    first ran."""

    reports: list            # CompareReport per (device, model)
    only_run: list            # "device D, model M" this run dumped and the reference run did not (not compared)
    only_reference: list      # the same, dumped by the reference run and not by this run

    @property
    def deciding(self):
        """The report of the first leaf (in execution order) whose dumps diverge, else the first report; None when
        the runs dumped no (device, model) in common (nothing was compared)."""
        return next((r for r in self.reports if r.first_divergence), self.reports[0] if self.reports else None)


def compare_trial_dumps(paths: TrialPaths, reference_paths: TrialPaths, *, cosine: float = 0.99,
                        max_abs_error: float | None = None, require_graphs: bool = False,
                        leaf: str = "latest") -> TrialComparison | None:
    """Compare a trial's dumps (my side) with the reference trial's (golden side), mapping fused ops through both
    trials' graphs, on the metrics the verdict uses (:data:`ORACLE_ALGORITHMS`): every (device, model) both
    dumped, each its own comparison; ``leaf`` picks the iteration when several were dumped ('latest', or
    'earliest'). Returns a :class:`TrialComparison`, or None when either side has no dumps. Raises
    DumpFormatError/GraphFormatError for unreadable inputs, and FusebisectError when ``require_graphs`` and either
    trial has no Build graph."""
    if not has_dumps(paths) or not has_dumps(reference_paths):
        return None
    from fusebisect.compare.engine import compare_dumps

    my_graph = _graph_in(paths.graph_dir, each=True)
    golden_graph = _reference_graph(reference_paths.graph_dir)
    if require_graphs:
        for graph, side in ((my_graph, paths), (golden_graph, reference_paths)):
            if graph is None:
                raise FusebisectError(f"no GE graph dump in {side.graph_dir}: fused ops cannot be mapped")
    mine, theirs = _dumped_leaves(paths.dump_dir), _reference_leaves(reference_paths.dump_dir)
    common = [k for k in mine if k in theirs]
    devices = len({k[0] for k in [*mine, *theirs]}) > 1
    models = len({k[1] for k in [*mine, *theirs]}) > 1

    def text(key) -> str:
        if key == (None, None):
            return "dumps outside CANN's directory layout"
        return ", ".join(([f"device {key[0]}"] if devices else []) + ([f"model {key[1]}"] if models else []))

    # one (device, model) each, the same model on another device: a job that writes the device it was given
    # (--jobs: each run its own slot) into its dump path; compared as one, as compare pairs two single leaves
    pair = None
    if not common and len(mine) == 1 and len(theirs) == 1:
        (run_key,), (ref_key,) = list(mine), list(theirs)
        if run_key[1] == ref_key[1] and None not in (run_key[0], ref_key[0]):
            pair = (run_key, ref_key)
    if not common and pair is None:   # other models or devices than the reference's: nothing to compare them with
        return TrialComparison([], [text(k) for k in mine], [text(k) for k in theirs])
    # (this run's key, the reference's) of each comparison; one leaf each (or dumps of no known layout): the one
    # comparison compare itself makes, of the whole trees
    matched = [(k, k) for k in common] if common else [pair]
    several = len(matched) > 1
    reports = []
    for run_key, ref_key in matched:
        key = run_key if several else None
        report = compare_dumps(paths.dump_dir, reference_paths.dump_dir, my_graph=my_graph,
                               golden_graph=golden_graph, algorithms=ORACLE_ALGORITHMS, cosine=cosine,
                               max_abs_error=max_abs_error, leaf=leaf, same_ops_directly=True,
                               device=key[0] if key else None, model=key[1] if key else None)
        report.leaf = text(key) if key else ""
        used_mine, used_theirs = report.graphs   # (the graph of each side the comparison chose)
        dumped_mine, dumped_theirs = report.dumped   # (what the compared leaves hold: one step, model, device)
        report.cut_short = {"run": _undumped(used_mine, dumped_mine, dumped_theirs),
                            "reference": _undumped(used_theirs, dumped_theirs, dumped_mine)}
        # the latest step each run dumped of this (device, model): the comparison takes the latest both hold, so a
        # run whose dumps stop steps earlier was not compared where the other run's go on
        last = (mine[run_key], theirs[ref_key])
        report.last_steps = last if leaf == "latest" and None not in last and last[0] != last[1] else None
        if key is not None:
            report.notes.append(f"{text(key)}: one of the {len(matched)} dumped by both runs, each compared on its "
                                "own")
        if pair is not None:
            report.notes.append(f"this run dumped device {pair[0][0]}, the reference run device {pair[1][0]} (the "
                                "device each run was given): compared with each other")
        reports.append(report)
    if pair is not None:
        return TrialComparison(reports, [], [])
    return TrialComparison(reports, [text(k) for k in mine if k not in theirs],
                           [text(k) for k in theirs if k not in mine])


def _dumped_leaves(dump_dir: Path) -> dict:
    """The (device, model) pairs (:func:`~fusebisect.compare.tree.model_key`) of a trial's dumps, in the order they
    first ran, of the dump_path's latest run, each with the latest step (iteration) dumped of it (None when the
    layout names none); {(None, None): None} for dumps of no known layout."""
    from fusebisect.compare.tree import latest_run_only, model_key, scan_dumps

    tree = scan_dumps(dump_dir)
    latest_run_only(tree, dump_dir)
    leaves: dict = {}
    for e in tree.entries:
        if e.op_type == "Opdebug":
            continue
        key = (e.device, model_key(e.model_name))
        step = int(e.iteration) if e.iteration is not None and e.iteration.isdigit() else None
        if key not in leaves or (step is not None and (leaves[key] is None or step > leaves[key])):
            leaves[key] = step
    return leaves


@functools.lru_cache(maxsize=2)
def _reference_leaves(dump_dir: Path) -> dict:
    return _dumped_leaves(dump_dir)


def _undumped(graph, own: frozenset[str], other: frozenset[str]) -> list[str]:
    """Ops of a trial's ``graph`` it did not dump although the other run dumped them (by name, or for a fused op
    by its original ops): dumps that stopped early (a full disk, a job cut short after exit 0) or miss ops. Ops
    neither run dumped (Data, Const) are not counted."""
    from fusebisect.compare.mapping import dump_file_spelling as spelt

    if graph is None:
        return []
    out = []
    for op in graph.ops:
        key = spelt(op.name)
        if key in own:
            continue
        if key in other or any(spelt(o) in other for o in op.original_op_names):
            out.append(op.name)
    return out


def several_iterations(paths: TrialPaths) -> bool:
    """Return True when the trial dumped more than one iteration (step)."""
    from fusebisect.compare.tree import scan_dumps

    return len({group[3] for group in scan_dumps(paths.dump_dir).groups()}) > 1


def summarize_dumps(report, limit: int = 2000) -> dict[str, Any]:
    """Return the journal's ``dumps`` payload: rows (op, tensor, cosine, max_abs_error) in execution order, at
    most ``limit`` of them and always those around the first divergence (``rows_total``: all rows, ``rows_from``:
    the position of the first one kept), first_divergence and the comparison's notes (e.g. which iteration of
    several was compared)."""
    ordered = report.execution_order()
    first = report.first_divergence or {}
    at = next((i for i, r in enumerate(ordered) if r.tensor == first.get("tensor") and r.my_op == first.get("op")), 0)
    start = window_start(at, len(ordered), limit)   # a real network dumps thousands of tensors
    rows = []
    for row in ordered[start:start + limit]:
        metrics = row.metrics or {}
        rows.append({"op": row.my_op, "tensor": row.tensor,
                     "cosine": _num(metrics.get("CosineSimilarity")),
                     "max_abs_error": _num(metrics.get("MaxAbsoluteError"))})
    return {"rows": rows, "rows_total": len(ordered), "rows_from": start,
            "first_divergence": _plain(report.first_divergence), "notes": list(report.notes),
            "not_compared": sum(not row.compared for row in report.rows)}


def _num(value):
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _plain(value):
    from fusebisect.jsonutil import to_jsonable

    return to_jsonable(value)


def divergence_pass_names(first_divergence: dict | None, report=None) -> list[str]:
    """Return the pass names (pass_names + ub_pass_name) of the first divergent op, in order, deduplicated.

    Looks in the first_divergence dict, and when it lacks them, in the report row it points at (not when the
    divergence is an input: the passes then are its producer's, and the reading op's are beside the point)."""
    if not first_divergence:
        return []
    names: list[str] = []
    for key in ("pass_names", "pass_name"):
        value = first_divergence.get(key)
        if isinstance(value, str):
            names.append(value)
        elif value:
            names.extend(value)
    ub = first_divergence.get("ub_pass_name")
    if ub:
        names.append(ub)
    if not names and report is not None and "input_of" not in first_divergence:
        op = first_divergence.get("op") or first_divergence.get("my_op")
        index = first_divergence.get("index")
        for row in report.rows:
            if (index is not None and row.index == index) or (op is not None and row.my_op == op):
                names.extend(row.pass_names or [])
                if row.ub_pass_name:
                    names.append(row.ub_pass_name)
                break
    return list(dict.fromkeys(n for n in names if n))


def rank_prior(rules: Sequence[str], report, *, cosine: float = 0.99, max_abs_error: float | None = None) -> list[str]:
    """``rules`` (the first divergent op's passes) with those that fused ops which ran before it and matched the
    reference put last, the fewer such ops the earlier: a pass whose other fusions ran clean is the less likely
    one (a generic pass fusing into many ops lists first in the op's passes, but its fault would have shown
    before). Among equals, the pass that fused fewer ops in all comes first (the more specific one); then the
    op's own order."""
    first = getattr(report, "first_divergence", None)
    if not first or len(rules) < 2:
        return list(rules)
    from fusebisect.compare.engine import is_divergent

    wanted = set(rules)
    clean: dict[str, set[str]] = {r: set() for r in rules}
    fused: dict[str, set[str]] = {r: set() for r in rules}
    before = True
    for row in report.execution_order():
        passes = {*(row.pass_names or []), *([row.ub_pass_name] if row.ub_pass_name else [])} & wanted
        for name in passes:
            fused[name].add(row.my_op)
        if row.my_op == first.get("op") and row.tensor == first.get("tensor"):
            before = False
        if not before or row.my_op == first.get("op") or not (row.compared and row.judged):
            continue
        if not is_divergent(row, cosine=cosine, max_abs_error=max_abs_error):
            for name in passes:
                clean[name].add(row.my_op)
    return sorted(rules, key=lambda r: (len(clean[r]), len(fused[r])))


def parse_check(value: str) -> list[str]:
    """Split a ``--check`` value into argv (shlex rules, no shell). Raises UsageError when empty or unbalanced."""
    try:
        argv = shlex.split(value)
    except ValueError as exc:
        raise UsageError(f"--check: cannot split {value!r}: {exc}") from exc
    if not argv:
        raise UsageError("--check: empty command")
    if argv[0].startswith("-"):
        # `--check --jobs 2 -- CMD` makes "--jobs" the check command: say so instead of running "2" as CMD.
        raise UsageError(f"--check needs a command, got the option {argv[0]!r}; give the command as one "
                         "argument, e.g. --check 'python eval.py --ckpt {trial_dir}'")
    return argv


def measurement_from_record(rec: dict) -> Measurement:
    """Rebuild a Measurement from a journal trial record."""
    return Measurement(exit_code=rec.get("exit_code"), seconds=float(rec.get("seconds") or 0.0),
                       timed_out=bool(rec.get("timed_out", False)), metric=rec.get("metric"),
                       curve=array("d", rec.get("curve") or []), check_exit_code=rec.get("check_exit_code"))


def paths_from_record(rec: dict) -> TrialPaths:
    """Rebuild a trial's paths from a journal trial record."""
    sw = rec.get("switch_file")
    return TrialPaths(trial_dir=Path(rec["trial_dir"]), switch_file=Path(sw) if sw else None)
