"""Drive one bisection: run trials, judge them, journal them, and feed the pure search engine.

The loop reads like the algorithm (Go's bisect): run the baseline to learn which rules fired (the candidates),
run the all-candidates-off reference, derive a prior from the dumps when both runs have them, then ask the engine
what to run next until it is done; finally write the production ``fusion_switch.cfg`` (culprits off only) and
verify it with one more run. Every execution is journaled the moment it ends, and the engine's state is a fold
over the journal, so rerunning the same command resumes without repeating any judged configuration.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import re
import shlex
import signal
import threading
from array import array
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from fusebisect.errors import FusebisectError, UsageError
from fusebisect.fsutil import real_path
from fusebisect.runner import oracles, validation
from fusebisect.runner.journal import (JOURNAL_NAME, VERSION, Journal, JournalError, decode_float, encode_float,
                                       finishing, moved_run_dir, previous_production, set_aside_previous_run,
                                       workdir_lock)
from fusebisect.runner.oracles import (BAD, GOOD, INVALID, PENDING, UNKNOWN, Judge, Measurement, close,
                                       unparsed_capture)
from fusebisect.runner.trial import (PGID_SUFFIX, Execution, ExecResult, ProcessRegistry, TrialPaths, kill_detached,
                                     kill_leftovers, numbered_trial_dirs, read_text, substitute)

VERDICT_OPTIONS = ("metric", "metric_mode", "rtol", "atol", "expect", "check", "dumps", "cosine",
                   "max_abs_error", "rules", "repeat", "flaky", "graph_dump", "seed", "confidence")


class Interrupted(FusebisectError):
    """The user pressed Ctrl-C, or SIGTERM came (timeout, Slurm, Kubernetes): children were killed, the journal is
    kept; rerun the command to resume. ``exit_code``: 130 (SIGINT) or 143 (SIGTERM), the shell's 128 + signal."""

    def __init__(self, message: str, *, exit_code: int = 130) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so that it unwinds like Ctrl-C."""


def _raise_terminated(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not interrupt the cleanup
    raise Terminated()


SWITCH_IGNORED = "switch ignored: still fired when turned off"   # the reason of such an exclusion (journaled)
UNCHECKED = ("switch unchecked: no fusion_result.json or Build graph, unlike the baseline (a compile cache hit "
             "compiles nothing)")


@contextlib.contextmanager
def sigterm_as_interrupt():
    """While running, SIGTERM unwinds like Ctrl-C (only the main thread can install a handler)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@dataclass
class RunOptions:
    """Everything ``fusebisect run`` was asked to do. Defaults match the CLI's."""

    command: list[str]  # CMD argv (after --); placeholders substituted per trial
    workdir: Path = Path("fusebisect-work")  # journal, trials/, switch/, result.json, fusion_switch.cfg
    metric: str | None = None  # --metric REGEX (one capture group)
    # None: not given (an oracle option given without its oracle is an error; validation.resolve_options fills
    # in the defaults: metric_mode last, rtol 1e-2, atol 0, cosine 0.99)
    metric_mode: str | None = None  # last | curve
    rtol: float | None = None  # relative tolerance of the metric vs the reference (or --expect)
    atol: float | None = None  # absolute tolerance
    expect: float | None = None  # compare the metric with this value instead of the reference run
    check: str | None = None  # --check CMD2 (shlex-split)
    dumps: bool = False  # --dumps oracle
    cosine: float | None = None  # --dumps: bad below this cosine similarity
    max_abs_error: float | None = None  # --dumps: bad above this max absolute error
    rules: str | None = None  # --rules FILE|NAME,...: the candidates (else the rules that fired)
    allow_unknown_rules: bool = False  # --rules may name rules the catalog does not know (custom passes)
    repeat: int = 1  # --repeat N: executions per configuration (engine decides)
    flaky: bool = False  # --flaky: the job is noisy, use the noise-aware mode from the start
    jobs: int = 1  # parallel executions
    devices: list[str] | None = None  # device ids, one slot per parallel execution
    timeout: float | None = None  # seconds per execution (and per check)
    graph_dump: bool = True  # set DUMP_GE_GRAPH/DUMP_GRAPH_LEVEL/DUMP_GRAPH_PATH
    fresh: bool = False  # move the previous run's journal, results, reports and trials aside and start over
    output: Path | None = None  # production switch file (default WORKDIR/fusion_switch.cfg)
    verify: bool = True  # run the production switch file once more at the end
    max_runs: int | None = None  # budget of executions for the engine
    confidence: float = 0.95  # minimum posterior to name a culprit
    seed: int = 0  # engine's seed (deterministic tie-breaks)

    def verdict_options(self) -> dict[str, Any]:
        """The options that change verdicts or the search (recorded in the journal's start record)."""
        return {k: getattr(self, k) for k in VERDICT_OPTIONS}

    @property
    def workers(self) -> int:
        return len(self.devices) if self.devices else max(1, self.jobs)


@dataclass
class TrialRecord:
    """One journaled execution (the journal's ``trial`` event) plus its judged outcome."""

    index: int
    key: str
    off: frozenset[str]
    role: str
    outcome: str
    reason: str
    measurement: Measurement
    paths: TrialPaths
    ignored: list[str] = field(default_factory=list)
    device: str | None = None
    on: frozenset[str] = frozenset()  # rules set explicitly on (only the reverse direction's production file)
    final: bool = False  # the production switch file's own verification run, after the search

    def to_event(self) -> dict:
        m = self.measurement
        extra = {**({"on": sorted(self.on)} if self.on else {}), **({"final": True} if self.final else {})}
        return {"event": "trial", "index": self.index, "key": self.key, "off": sorted(self.off), **extra,
                "outcome": self.outcome, "metric": encode_float(m.metric),
                "curve": [encode_float(v) for v in m.curve], "exit_code": m.exit_code,
                "seconds": round(m.seconds, 3), "timed_out": m.timed_out, "check_exit_code": m.check_exit_code,
                "trial_dir": str(self.paths.trial_dir),
                "switch_file": str(self.paths.switch_file) if self.paths.switch_file else None,
                "reason": self.reason, "ignored": list(self.ignored), "role": self.role, "device": self.device}

    @classmethod
    def from_event(cls, ev: dict) -> "TrialRecord":
        m = oracles.measurement_from_record(ev)
        m.metric = decode_float(ev.get("metric"))
        m.curve = array("d", (decode_float(v) for v in ev.get("curve") or []))
        return cls(index=int(ev.get("index") or 0), key=ev.get("key", ""), off=frozenset(ev.get("off") or []),
                   role=ev.get("role", "search"), outcome=ev.get("outcome", INVALID), reason=ev.get("reason") or "",
                   measurement=m, paths=oracles.paths_from_record(ev), ignored=list(ev.get("ignored") or []),
                   device=ev.get("device"), on=frozenset(ev.get("on") or []), final=bool(ev.get("final")))

    @property
    def pending(self) -> bool:
        return self.outcome == UNKNOWN and self.reason == PENDING


def config_key(off: frozenset[str], on: frozenset[str] = frozenset()) -> str:
    """A short stable key of a configuration (sha256 of its sorted OFF names, then any rules set explicitly on)."""
    text = "\n".join(sorted(off)) + ("\n\0on\n" + "\n".join(sorted(on)) if on else "")
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


class Progress:
    """Progress on stderr: runs done, candidates left, rough runs remaining, the runs in flight, last verdicts.

    On a terminal a live status footer (rich) stays under the scrolling log lines; elsewhere (pipes, CI, logs)
    every event is one plain line. Quiet mode prints nothing. Thread-safe: parallel trials report from worker
    threads."""

    def __init__(self, quiet: bool = False, *, verbose: bool = False, live: bool | None = None) -> None:
        from fusebisect.console import PipeConsole

        self.quiet = quiet
        self.verbose = verbose  # also print each run's switch file, trial dir and exact command
        self.console = PipeConsole(stderr=True, highlight=False, soft_wrap=False, emoji=False)
        self.live_enabled = (self.console.is_terminal and not self.console.is_dumb_terminal) if live is None \
            else live
        self._live = None
        self._lock = threading.Lock()
        self._inflight: dict[int, str] = {}  # run index -> "role: what is off"
        self._verdicts: list[str] = []  # outcome of each finished run, oldest first
        self._done = 0
        self._left: int | None = None
        self._estimate: int | None = None
        self._looking = 0   # culprit sets found, while the search looks for more (0: it is still searching)

    def _where(self) -> list[str]:
        """Where the search stands, for the footer and the verdict lines."""
        if self._looking and self._left is not None:
            sets = f"{self._looking} culprit set{'s' if self._looking != 1 else ''}"
            runs = f"{self._estimate or 1} run{'s' if (self._estimate or 1) != 1 else ''}"
            return [f"{sets} found", f"looking for more among the other {self._left} ({runs} if there is none)"]
        parts = []
        if self._left is not None:
            parts.append(f"{self._left} candidate{'s' if self._left != 1 else ''} left")
        if self._estimate is not None:
            parts.append(f"roughly {self._estimate} runs left")
        return parts

    def _status(self):
        from rich.text import Text

        text = Text(" · ".join([f"runs done: {self._done}", *self._where()]), style="bold")
        marks = {"good": ("✓", "green"), "bad": ("✗", "red"), "invalid": ("?", "yellow"), "unknown": ("~", "blue")}
        if self._verdicts:
            text.append("   last: ")
            for outcome in self._verdicts[-12:]:
                mark, colour = marks.get(outcome, ("·", "white"))
                text.append(mark, style=colour)
        for index, what in sorted(self._inflight.items()):
            text.append(f"\n  running {index} ({what})", style="dim")
        return text

    def _refresh(self) -> None:
        if self.quiet or not self.live_enabled:
            return
        if self._live is None:
            from rich.live import Live

            self._live = Live(self._status(), console=self.console, refresh_per_second=4, transient=True)
            self._live.start()
        else:
            self._live.update(self._status())

    def log(self, message: str) -> None:
        if self.quiet:
            return
        with self._lock:
            # one event, one line: never cut (a terminal wraps it; in a pipe it stays one line)
            self.console.print(message, soft_wrap=True)  # printed above the live footer when there is one
            self._refresh()

    def detail(self, message: str) -> None:
        """A line shown only with --verbose (printed as plain text, no markup)."""
        if self.verbose and not self.quiet:
            with self._lock:
                self.console.print(message, markup=False, soft_wrap=True)  # paths stay copyable
                self._refresh()

    def started(self, rec_index: int, off: frozenset[str], role: str, device: str | None,
                left_on: frozenset[str] | None = None, forced_on: frozenset[str] = frozenset()) -> None:
        """A run began; ``left_on``: the candidates it leaves on (named instead of the rules off when fewer);
        ``forced_on``: rules its switch file sets on (a culprit bad while off)."""
        if not off:
            what = "nothing off"
        elif left_on is not None and len(left_on) < len(off):
            what = f"{len(off)} off: " + (f"all but {_short(left_on)}" if left_on else "every candidate")
        else:
            what = f"{len(off)} off: " + _short(off)
        if forced_on:
            what += f"; forced on: {_short(forced_on)}"
        dev = f" on device {device}" if device is not None else ""
        with self._lock:
            self._inflight[rec_index] = f"{role}{dev}: {what}"
        self.log(f"[dim]run {rec_index} ({role}{dev}): {what}[/dim]")

    def finished(self, rec: TrialRecord, progress: dict | None, executed: int) -> None:
        colour = {"good": "green", "bad": "red", "invalid": "yellow"}.get(rec.outcome, "blue")
        why = f" ({_esc(rec.reason)})" if rec.reason else ""
        metric = f" metric={rec.measurement.metric:g}" if rec.measurement.metric is not None else ""
        tail = ""
        with self._lock:
            self._inflight.pop(rec.index, None)
            self._verdicts.append(rec.outcome)
            self._done = executed
            if progress and progress.get("phase") != "done" and not rec.final:
                self._left = progress.get("candidates_left")
                self._estimate = progress.get("runs_remaining_estimate")
                self._looking = (progress.get("found") or 0) if progress.get("phase") == "verify" else 0
                parts = self._where()
                if parts:
                    tail = " — " + ", ".join(parts)
            else:   # the search is over (its production config is verified next, or was)
                self._left = self._estimate = None
                self._looking = 0
        self.log(f"run {rec.index} [{colour}]{rec.outcome.upper()}[/{colour}]{why}{metric} "
                 f"in {rec.measurement.seconds:.1f}s; {executed} run{'s' if executed != 1 else ''} done{tail}")

    def close(self) -> None:
        """Stop the live footer (the log lines above it stay on screen)."""
        with self._lock:
            if self._live is not None:
                self._live.stop()
                self._live = None


def _untestable(rules: Sequence[str], why: str) -> str:
    """The caution for rules that kept firing with their switch off; ``why`` says what that left untested, with
    ``{it}`` standing for the rules."""
    one = len(rules) == 1
    it = "it" if one else "them"
    return (f"But {_short(rules)} still fired with {'its' if one else 'their'} switch off (the job ignores it), "
            f"{why.format(it=it)}, and {it} may be the cause. Make the job honour FUSEBISECT_SWITCH_FILE for {it} (a "
            f"compile cache?) and rerun.")


def _esc(value) -> str:
    """``value`` as text that rich prints as it is (a '[' in a path or a job's message is not markup)."""
    from rich.markup import escape

    return escape(str(value))


def _short(names, limit: int = 4) -> str:
    names = sorted(names)
    text = ", ".join(names[:limit])
    return text + (f" (+{len(names) - limit} more)" if len(names) > limit else "")


@dataclass
class SessionResult:
    """What ``run`` returns: the run JSON (contract), the trial records and the human-report extras."""

    run_json: dict
    records: list[TrialRecord]
    exit_code: int
    journal: Path
    verify: TrialRecord | None = None
    notes: list[str] = field(default_factory=list)


def _only_our_trials(trials: Path) -> bool:
    """True when ``trials`` holds nothing but trial dirs a run of ours names (``NNNN-KEY``) and their group-id
    files: the trials of a first run interrupted before its journal began."""
    try:
        entries = list(trials.iterdir())
    except OSError:
        return False
    pattern = re.compile(r"\d{4,}-[0-9a-f]{12}(" + re.escape(PGID_SUFFIX) + ")?")
    return all(pattern.fullmatch(e.name) for e in entries)


class Session:
    """One ``fusebisect run``: owns the journal, the trials, the judge and the engine.

    ``engine_cls`` (default :class:`fusebisect.search.Search`) and ``on_trial`` (called after every journaled
    trial; tests use it to simulate a crash) are hooks for tests.
    """

    def __init__(self, opts: RunOptions, *, engine_cls=None, catalog=None, env: dict | None = None,
                 cwd: str | None = None, progress: Progress | None = None,
                 on_trial: Callable[[TrialRecord], None] | None = None,
                 on_set_aside: Callable[[Path], None] | None = None,
                 on_finish: Callable[["SessionResult"], None] | None = None) -> None:
        if not opts.command:
            raise UsageError("no command to run: put it after --, e.g. fusebisect run -- python train.py")
        self.env = dict(os.environ if env is None else env)
        self.cwd = cwd
        self._catalog = catalog
        self.set_aside: Path | None = None   # where --fresh moved the previous run (WORKDIR/previous/TIME)
        self._set_contradicted = None   # (BAD run, fewer-off plan) when keeping an interaction's member on was BAD
        self.on_set_aside = on_set_aside     # called with that directory as soon as the move is done
        self.on_finish = on_finish   # called with the result while the workdir is still locked (its reports)
        # every option is checked here, before the journal is touched and before any execution
        opts = validation.resolve_options(opts)
        self.opts = opts
        self.workdir = Path(opts.workdir).absolute()
        validation.check_search_options(opts)
        self.judge = Judge(
            metric=oracles.compile_metric(opts.metric, mode=opts.metric_mode, rtol=opts.rtol, atol=opts.atol,
                                          expect=opts.expect) if opts.metric is not None else None,
            check=oracles.parse_check(opts.check) if opts.check is not None else None,
            dumps=oracles.DumpsSpec(cosine=opts.cosine, max_abs_error=opts.max_abs_error, graphs=opts.graph_dump)
            if opts.dumps else None)
        # one ASCEND_RT_VISIBLE_DEVICES slot per parallel execution (unset when running one at a time)
        self.slots: list[str | None] = validation.device_slots(opts, self.env)
        self.rule_names = validation.candidate_rules(opts, self.catalog)  # --rules, else None
        self.journal_workers = opts.workers   # the --jobs of the run that started the journal (set by _load)
        self.production_off: frozenset[str] | None = None   # a verified production OFF-set other than the culprits
        self._fired: dict[str, dict] = {}   # trial dir -> the rules that fired there (fired_in)
        validation.check_paths(opts, self.workdir)
        for flag, argv in (("", opts.command), ("--check: ", self.judge.check)):
            problem = validation.program_problem(argv[0], env=self.env, cwd=cwd) if argv else None
            if problem:
                raise UsageError(f"{flag}cannot run command {argv[0]!r}: {problem}")
        self.journal = Journal(self.workdir / JOURNAL_NAME)
        self.progress = progress or Progress()
        self.on_trial = on_trial
        self._engine_cls = engine_cls
        self.registry = ProcessRegistry()
        self.records: list[TrialRecord] = []
        self.candidates: list[str] = []
        self.excluded: list[dict] = []
        self.kinds: dict[str, str] = {}  # rule -> kind seen in the baseline (for names the catalog lacks)
        self.prior: list[str] | None = None
        self.dumps_event: dict | None = None
        self._stale_outputs = False   # a resume of a run that has a result: its outputs go once a run is added
        self._next_index = 1
        self._rebuild = False  # candidates changed: rebuild the engine from the journal
        self._lock = threading.Lock()
        self.notes: list[str] = []
        # config key -> a run whose job finished but whose check was stopped (aborted, or interrupted) before its
        # verdict (journal ``executed`` events): a resume checks its output again instead of running the job again
        self._rechecks: dict[str, TrialRecord] = {}
        self._ran_on: dict[int, str] = {}   # run -> the device its job ran on, when its check ran on another slot
        self._dumps_aside_said = False

    # ------------------------------------------------------------------ helpers

    @property
    def catalog(self):
        if self._catalog is None:
            from fusebisect.rules.catalog import default_catalog

            self._catalog = default_catalog()
        return self._catalog

    def _engine_class(self):
        if self._engine_cls is None:
            from fusebisect.search import Search

            self._engine_cls = Search
        return self._engine_cls

    @staticmethod
    def _outcome(value: str):
        try:
            from fusebisect.search import Outcome
        except ImportError:  # engine not importable: tests with a fake engine take strings
            return value
        return Outcome(value)

    def switch_config(self, off: frozenset[str], direction_on: frozenset[str] = frozenset()):
        """The SwitchConfig turning ``off`` off (and ``direction_on`` explicitly on), each in its section."""
        from fusebisect.rules.catalog import KINDS
        from fusebisect.rules.switchfile import SwitchConfig

        cfg = SwitchConfig()
        for names, value in ((off, "off"), (direction_on, "on")):
            for name in sorted(names):
                rule = self.catalog.get(name)
                # the section the job's fusion_result.json reported it in is what this CANN reads; where the
                # catalog says otherwise (another version), both: an entry in the other section does nothing
                kinds = [k for k in KINDS if k in (self.kinds.get(name), rule.kind if rule is not None else None)]
                for k in kinds or KINDS:
                    cfg.section(k)[rule.name if rule is not None and kinds else name] = value
        return cfg

    def switch_file(self, off: frozenset[str], on: frozenset[str] = frozenset()) -> Path:
        """Write (idempotently) and return the content-hashed switch file of a configuration."""
        from fusebisect.rules.switchfile import write_hashed_switch_file

        return write_hashed_switch_file(self.workdir / "switch", self.switch_config(off, on)).absolute()

    def _new_paths(self, off: frozenset[str], on: frozenset[str] = frozenset()) -> tuple[int, TrialPaths]:
        with self._lock:
            trials = self.workdir / "trials"
            existing = max(numbered_trial_dirs(trials), default=0)  # an interrupted run's dir is kept
            index = max(self._next_index, existing + 1)
            self._next_index = index + 1
            trial_dir = trials / f"{index:04d}-{config_key(off, on)}"
        return index, TrialPaths(trial_dir=trial_dir, switch_file=self.switch_file(off, on))

    @property
    def all_off(self) -> frozenset[str]:
        return frozenset(self.candidates)

    def reference_record(self) -> TrialRecord | None:
        """The run of the all-candidates-off configuration every other run is judged against, or None.

        The first valid (GOOD) one; but where only a metric is compared with it, once three or more of its runs
        measured a metric, the one whose metric is nearest all the others (their medoid): one noisy sample must
        not decide every verdict of a flaky job (see :meth:`_rejudge_on_new_reference`)."""
        consensus = self._consensus_reference()
        if consensus is not None:
            return consensus
        for rec in self.records:
            if rec.off == self.all_off and rec.role != "verify" and rec.outcome == GOOD:
                return rec
        return None

    def dumps_set_aside(self) -> bool:
        """True when --dumps cannot judge: it compares every run with the all-candidates-off reference, and next
        to an oracle of its own (--check, or --metric with --expect) that reference run was BAD (a rule bad while
        turned off breaks it): the other oracle then judges alone."""
        j = self.judge
        if j.dumps is None or not (j.check is not None or (j.metric is not None and j.metric.expect is not None)):
            return False
        return any(r.outcome == BAD and not r.ignored for r in self._gate_runs(self.all_off))

    def _gate_runs(self, off: frozenset[str]) -> list[TrialRecord]:
        """The runs of gate configuration ``off`` (nothing off: the baseline; all off: the reference) made for
        the search, not a final check of a production file, nor with rules set on."""
        return [r for r in self.records if r.off == off and not r.on and r.role != "verify"]

    def _reference_runs(self) -> list[TrialRecord] | None:
        """The all-candidates-off runs that measured a finite metric, when the metric is the only thing judged
        against the reference (else None: the first GOOD run is the reference)."""
        j = self.judge
        if j.metric is None or j.metric.expect is not None or j.dumps is not None:
            return None
        return [r for r in self._gate_runs(self.all_off) if not r.ignored and r.measurement.exit_code == 0
                and not r.measurement.timed_out and r.measurement.metric is not None
                and math.isfinite(r.measurement.metric)]

    @property
    def _flaky_search(self) -> bool:
        """True for a search in the noise-aware mode: declared (--flaky), or switched to by the engine itself. No
        engine yet (a job that ignores its switch file) is not noisy."""
        return self.opts.flaky or bool(getattr(getattr(self, "engine", None), "noisy", False))

    @property
    def _noisy_search(self) -> bool:
        """True for a noisy job: declared (--flaky, --repeat), or a search that switched to the noise-aware mode
        itself (as noisy as one declared)."""
        return self._flaky_search or self.opts.repeat > 1

    def _all_off_metric_runs(self) -> list[TrialRecord]:
        """The all-candidates-off runs (no rule forced on) that measured a finite metric, whatever their verdict."""
        return [r for r in self.records if r.off == self.all_off and not r.on
                and r.measurement.metric is not None and math.isfinite(r.measurement.metric)]

    def _reference_noise(self) -> str | None:
        """When no other run of the all-candidates-off configuration agrees with the reference within the metric's
        tolerance (a relative metric oracle, a search not in the noise-aware mode): every verdict rests on a
        reference the job cannot reproduce, so the message saying so and what to do; else None. (One outlier
        among runs that agree is what settling the reference on their middle one is for.)"""
        spec = self.judge.metric
        if spec is None or spec.expect is not None or self._noisy_search:
            return None
        offs = self._all_off_metric_runs()
        ref = self.reference_record()
        others = [r for r in offs if r is not ref]
        if ref is None or ref not in offs or not others or \
                any(self._metric_disagreement(r, ref) is None for r in others):
            return None
        a, b = ref, others[0]
        why = self._metric_disagreement(b, a)
        return (f"The all-candidates-off runs differ from each other beyond the tolerance (runs {a.index} and "
                f"{b.index}: {why}; --rtol {spec.rtol:g}, --atol {spec.atol:g}): the job's run-to-run noise is "
                f"larger than the tolerance, and every verdict rests on that reference. Raise --rtol "
                f"(--metric-mode curve compares every point), give {self._expect_hint()}, or declare --flaky, and "
                f"rerun with --fresh.")

    def _self_disagreement(self) -> tuple[int, int, TrialRecord | None, TrialRecord | None]:
        """Under a relative metric oracle: (k, m, one of them, the reference): k of the m all-candidates-off runs
        besides the reference differ from it beyond the tolerance. Each is a GOOD configuration read BAD: the
        oracle's own error rate, measured. (0, 0, None, None) under any other oracle."""
        spec = self.judge.metric
        ref = self.reference_record()
        if spec is None or spec.expect is not None or self.judge.dumps is not None or ref is None:
            return 0, 0, None, None
        others = [r for r in self._all_off_metric_runs() if r is not ref]
        apart = [r for r in others if self._metric_disagreement(r, ref) is not None]
        return len(apart), len(others), (apart[0] if apart else None), ref

    def _noise_beyond_tolerance(self, *, not_fusion: bool = False, sets: int = 0) -> str | None:
        """A noisy search under a relative metric oracle whose all-candidates-off runs read BAD against their own
        middle one most of the time (6 runs or more, three in four): a GOOD configuration then reads BAD more
        often than the noise model allows (it weighs flip rates below 1/2), and it names innocent rules with
        confidence. The message saying so, or None. At the end, less evidence does: ``not_fusion`` (the search
        ended 'not fusion', which under this oracle is that noise itself: the reference is an all-off run) with
        any disagreement; ``sets`` >= 2 culprit sets named while one all-off run in four disagrees (measured:
        a job whose noise is twice --rtol, 3 of its 10 all-off runs BAD, got a dozen innocent rules named; one
        whose noise is --rtol, one set, right)."""
        if not self._noisy_search:
            return None
        k, m, apart, ref = self._self_disagreement()
        if apart is None:
            return None
        if not (not_fusion or (sets >= 2 and m >= 3 and 4 * k >= m) or (m >= 6 and 4 * k >= 3 * m)):
            return None
        spec = self.judge.metric
        return (f"The all-candidates-off runs read BAD against their own middle one in {k} of {m} runs (e.g. run "
                f"{apart.index}: {self._metric_disagreement(apart, ref)}; --rtol {spec.rtol:g}, --atol "
                f"{spec.atol:g}): the job's run-to-run noise is larger than the tolerance, so a run that reads BAD "
                f"says little, and no rule can be named from such runs. Raise --rtol above the noise "
                f"(--metric-mode curve compares every point), or give {self._expect_hint()}, and rerun with "
                f"--fresh.")

    def _near_expect(self) -> str | None:
        """Under --expect, all-off runs that miss it by a tenth of the baseline's miss or less: a tolerance below
        the job's noise (or the precision it prints), more likely than a cause outside the candidates. The
        message saying so, or None."""
        spec = self.judge.metric
        if spec is None or spec.expect is None or spec.mode == "curve":
            return None
        offs = [r.measurement.metric for r in self._gate_runs(self.all_off) if r.outcome == BAD
                and r.measurement.metric is not None and math.isfinite(r.measurement.metric)]
        base = self.baseline_record()
        miss_base = (abs(base.measurement.metric - spec.expect) if base is not None and base.measurement.metric
                     is not None and math.isfinite(base.measurement.metric) else None)
        if not offs or not miss_base:
            return None
        miss_off = max(abs(v - spec.expect) for v in offs)
        if miss_off * 10 > miss_base:
            return None
        scale = max(abs(spec.expect), 1e-12)
        read = ", ".join(f"{v:g}" for v in offs)
        return (f"With all {len(self.candidates)} candidate rules off the metric misses --expect {spec.expect:g} by "
                f"at most {miss_off:.3g} ({miss_off / scale:.2g} relative; runs read {read}), "
                f"the baseline by {miss_base:.3g}: ten times as near, yet outside --rtol {spec.rtol:g} / --atol "
                f"{spec.atol:g}. The tolerance is likely below the job's run-to-run noise or the precision it prints: "
                f"raise --rtol above {miss_off / scale:.2g} and rerun with --fresh.")

    def _metric_disagreement(self, a: TrialRecord, b: TrialRecord) -> str | None:
        """How two runs' metrics differ beyond the tolerance, as the metric oracle compares them ('curve point i:
        x vs y' in curve mode, every point; else 'x vs y'), or None when they agree."""
        spec = self.judge.metric
        ma, mb = a.measurement, b.measurement
        if spec.mode == "curve" and ma.curve and mb.curve:
            return next((f"curve point {i}: {x:g} vs {y:g}" for i, (x, y) in enumerate(zip(ma.curve, mb.curve))
                         if not close(x, y, spec.rtol, spec.atol)), None)
        return None if close(ma.metric, mb.metric, spec.rtol, spec.atol) else f"{ma.metric:g} vs {mb.metric:g}"

    def _settle_reference(self, *, flaky: bool) -> None:
        """Run the all-candidates-off configuration until three of its runs have a metric, so that the reference
        is their middle one: up front for a job declared noisy (``flaky``), else once two of its runs disagree.
        Within the budget; at most three more runs (a resume counts the journal's)."""
        for _ in range(3):
            runs = self._reference_runs()
            if not runs or len(runs) >= 3:
                return
            disputed = len(runs) == 2 and self._metric_disagreement(runs[1], runs[0]) is not None
            if not (flaky or disputed) or self.budget_spent or self.gate_stop() is not None:
                return
            if disputed or len(runs) == 1:   # (said once, before the first run it adds)
                self.progress.log("the all-candidates-off runs disagree: one more to settle the reference" if disputed
                                  else "a noisy job: the all-candidates-off reference is the middle of three runs")
            self.run_one(self.all_off, "repeat")

    def _recheck_reference(self, result) -> bool:
        """Before ``not_reproduced`` under a relative metric oracle, which rests on the one reference run as much
        as on the baseline, and before naming every candidate a culprit (every other configuration BAD: what a
        reference run that read an outlier makes of any job): run the reference again (once per journal), and
        settle it if the two disagree. Returns True when that moved the reference (the engine is then to be
        rebuilt from the new verdicts)."""
        runs = self._reference_runs()
        if result is None or not runs or len(runs) != 1 or self.budget_spent:
            return False
        named = {r for c in result.culprits for r in c.rules}
        if result.status == "not_reproduced":
            self.progress.log("the baseline matches the reference: the reference runs once more before that stands")
        elif len(self.candidates) >= 3 and named >= set(self.candidates):   # (two culprits of two: plausible)
            self.progress.log("every candidate was named a culprit, as a reference run that read an outlier would "
                              "make it: the reference runs once more before that stands")
        else:
            return False
        self.run_one(self.all_off, "repeat")
        self._settle_reference(flaky=False)
        if not self._rebuild and not self.opts.flaky and self._reference_disputed():
            # the reference stayed, but its runs disagree: a verdict resting on it (the baseline matching it) is
            # no better than the job's noise; the search starts again in its noise-aware mode, which weighs them
            self.progress.log("the all-candidates-off runs disagree with each other: the search goes on in its "
                              "noise-aware mode")
            self._rebuild = True
        return self._rebuild

    def _reference_disputed(self) -> bool:
        """True when, under a relative metric oracle, some runs of the all-candidates-off configuration agree with
        the reference within the tolerance and others do not: the job's noise reaches the reference itself. (When
        none agrees, the reference cannot be reproduced at all: :meth:`_reference_noise` ends the search.)"""
        runs = self._reference_runs()
        ref = self.reference_record()
        if not runs or ref not in runs:
            return False
        agree = [r for r in runs if r is not ref and self._metric_disagreement(r, ref) is None]
        return bool(agree) and len(agree) < len(runs) - 1

    def _consensus_reference(self) -> TrialRecord | None:
        """The medoid (by metric) of the all-candidates-off runs that measured a finite metric, when there are
        three or more and the metric is the only thing judged against the reference; else None."""
        runs = self._reference_runs()
        if runs is None or len(runs) < 3:
            return None
        if self.judge.metric.mode == "curve" and all(r.measurement.curve for r in runs):
            # the curve is what is compared: the run that disagrees with the fewest others, then the nearest
            # to them point by point (runs ending at the same loss can differ in between)
            def spread(r: TrialRecord) -> tuple:
                others = [o for o in runs if o is not r]
                # points where both are finite (an fp16 warm-up's inf/nan: inf - inf would make every sum NaN,
                # and min() take the first run)
                return (sum(self._metric_disagreement(r, o) is not None for o in others),
                        sum(abs(x - y) for o in others for x, y in zip(r.measurement.curve, o.measurement.curve)
                            if math.isfinite(x) and math.isfinite(y)),
                        r.index)
            return min(runs, key=spread)
        values = [r.measurement.metric for r in runs]
        return min(runs, key=lambda r: (sum(abs(r.measurement.metric - v) for v in values), r.index))

    def _rejudge_on_new_reference(self, before: TrialRecord | None) -> None:
        """After a run of the reference configuration: if the reference changed (a medoid other than the run
        every verdict so far rests on), judge every run again, journal the verdicts that changed, and have the
        engine rebuilt from them."""
        now = self.reference_record()
        if now is None or before is None or now is before:
            return
        self._judge_all_again()
        self._rebuild = True
        apart = self._metric_disagreement(before, now)
        if self.judge.metric.mode == "curve" and apart:
            self.progress.log(f"the reference is now run {now.index} (the curve nearest the other all-candidates-off "
                              f"runs; run {before.index} differs from it at {apart}): every run judged again")
            return
        self.progress.log(f"the reference is now run {now.index} (metric {now.measurement.metric:g}, the middle of "
                          f"the all-candidates-off runs; run {before.index} read {before.measurement.metric:g}): "
                          f"every run judged again")

    def _judge_all_again(self) -> None:
        """Judge every judged run against the current reference and journal each verdict that changed."""
        for rec in self.records:
            if rec.pending:
                continue
            was = (rec.outcome, rec.reason)
            self.judge_record(rec)
            if (rec.outcome, rec.reason) != was:
                self.journal.append({"event": "verdict", "index": rec.index, "outcome": rec.outcome,
                                     "reason": rec.reason})

    def baseline_record(self) -> TrialRecord | None:
        """The first run of the default configuration (nothing off), or None."""
        for rec in self.records:
            if not rec.off and rec.role != "verify":
                return rec
        return None

    # ------------------------------------------------------------------ one trial

    def execute(self, off: frozenset[str], role: str, device: str | None = None,
                on: frozenset[str] = frozenset(), after_job=None) -> tuple[int, TrialPaths, ExecResult,
                                                                           Measurement | None]:
        """Run CMD for configuration ``off`` (``on``: rules set explicitly on) and measure it (thread-safe; no
        judging). ``after_job(paths)`` is called once the job ran to its end, before it is measured."""
        with self._lock:
            kept = self._rechecks.pop(config_key(off, on), None)
        if kept is not None and kept.paths.stdout_path.is_file():
            index, paths = kept.index, kept.paths
            if kept.device is not None:   # its record keeps the device its job ran on; the check runs in its slot
                self._ran_on[index] = kept.device
        else:
            kept = None
            index, paths = self._new_paths(off, on)
        self.progress.started(index, off, role, device, left_on=frozenset(self.candidates) - off, forced_on=on)
        self.progress.detail(f"  switch file {paths.switch_file}\n  trial dir   {paths.trial_dir}\n"
                             f"  command     {shlex.join(substitute(self.opts.command, paths))}")
        execution = Execution(command=list(self.opts.command), paths=paths, base_env=self.env,
                              graph_dump=self.opts.graph_dump, device=device, timeout=self.opts.timeout,
                              cwd=self.cwd)
        if kept is not None:
            # its job ran to its end before the check was stopped: the output is checked again, not made again
            self.progress.log(f"run {index}: its job had finished when its check was stopped; checking its output "
                              f"again (the job does not run again)")
            km = kept.measurement
            result = ExecResult(exit_code=km.exit_code, seconds=km.seconds, timed_out=km.timed_out)
        else:
            result = execution.run(self.registry)
        if result.interrupted:
            return index, paths, result, None
        if after_job is not None:
            after_job(paths)
        if kept is None:
            # the job ran to its end: journaled before it is judged, so that a kill -9 while its check (or the
            # dump comparison) runs leaves a resume that checks this output again instead of running the job again
            self._journal_executed(index, off, on, role, paths, result, device)
        # (Ctrl-C or SIGTERM while the check runs raises KeyboardInterrupt here: the run is journaled already)
        m = self.judge.measure(result, paths, env=execution.env, cwd=self.cwd, timeout=self.opts.timeout,
                               registry=self.registry)
        if self.registry.stopping:
            return index, paths, ExecResult(exit_code=None, seconds=result.seconds, interrupted=True), None
        return index, paths, result, m

    def _journal_executed(self, index: int, off: frozenset[str], on: frozenset[str], role: str, paths: TrialPaths,
                          result: ExecResult, device: str | None) -> None:
        """Journal that a run's job ran to its end, before the run is judged: when it gets no verdict (its check
        aborted the run, was interrupted, or fusebisect was killed), a resume checks that output again rather than
        running the job again; once judged, its trial record supersedes this one. (The journal has begun by then:
        a discovery baseline begins it as soon as its job ends.)"""
        if not self.journal.path.exists():
            return
        with contextlib.suppress(OSError, FusebisectError):
            self.journal.append({"event": "executed", "index": index, "key": config_key(off, on), "off": sorted(off),
                                 **({"on": sorted(on)} if on else {}), "role": role, "exit_code": result.exit_code,
                                 "seconds": round(result.seconds, 3), "timed_out": result.timed_out,
                                 "trial_dir": str(paths.trial_dir),
                                 "switch_file": str(paths.switch_file) if paths.switch_file else None,
                                 "device": device})

    def fired_in(self, paths: TrialPaths) -> dict:
        """The rules that fired in a trial (its fusion_result.json and Build graphs); {} when the job wrote
        neither, or (with a warning) when they cannot be read. Read once per trial dir (graphs can be large)."""
        from fusebisect.rules.fired import fired_rules

        key = str(paths.trial_dir)
        if key in self._fired:
            return self._fired[key]
        if not self._wrote_evidence(paths):
            return {}  # the job wrote no statistics and no Build graph (yet: a pending trial may still write)
        unreadable: list[str] = []
        try:
            fired = fired_rules(paths.trial_dir, unreadable=unreadable)
        except FusebisectError as exc:
            self.progress.log(f"[yellow]warning:[/yellow] cannot read what fired in {_esc(paths.trial_dir)}: "
                              f"{_esc(exc)}")
            fired = {}
        for problem in unreadable:   # what the other files say still counts
            self.progress.log(f"[yellow]warning:[/yellow] skipped {_esc(problem)}")
        self._fired[key] = fired
        return fired

    def _graphs_by_switch(self, rec: TrialRecord) -> tuple[list[str], list[str]]:
        """By their fusion_result.json labels (session_and_graph_id_0_1, ...): the graphs in which candidates
        fired in the baseline and none of those ``rec`` turned off fired in ``rec`` (honoured), and the graphs in
        which one still fired (ignoring)."""
        base = self.baseline_record()
        if base is None:
            return [], []
        before, after = self._fired_per_graph(base), self._fired_per_graph(rec)
        off = set(rec.off)
        ignoring = [label for label, fired in after.items() if fired & off]
        honoured = [label for label, fired in before.items() if fired & off and not after.get(label, set()) & off]
        return honoured, ignoring

    @staticmethod
    def _fired_per_graph(rec: TrialRecord) -> dict[str, set[str]]:
        from fusebisect.rules.fired import read_fusion_result_per_graph

        out: dict[str, set[str]] = {}
        for path in sorted(rec.paths.trial_dir.rglob("fusion_result*.json")):
            try:
                per_graph = read_fusion_result_per_graph(path)
            except FusebisectError:
                continue
            for label, stats in per_graph.items():
                out.setdefault(label, set()).update(s.name for s in stats if s.effect_times > 0)
        return out

    @staticmethod
    def _wrote_evidence(paths: TrialPaths) -> bool:
        """True when the run wrote a fusion_result.json or a Build graph (what fired can be checked)."""
        from fusebisect.compare.graph import find_build_graphs

        trial = paths.trial_dir
        return trial.is_dir() and (any(trial.rglob("fusion_result*.json")) or bool(find_build_graphs(trial)))

    def ignored_rules(self, off: frozenset[str], paths: TrialPaths) -> list[str]:
        """Rules this configuration turned off that still fired in the run (switch ignored), sorted."""
        if not off:
            return []
        fired = self.fired_in(paths)
        return sorted(r for r in off if r in fired and getattr(fired[r], "effect_times", 1) > 0)

    def judge_record(self, rec: TrialRecord) -> None:
        """(Re)judge a record against the current reference; updates outcome and reason in place.

        Raises RunAborted when the check command asked to abort."""
        # the first valid all-off run is the reference (GOOD by definition under a relative oracle); a later
        # run of that configuration (a repeat, a re-check) is judged against it like any other run
        first = self.reference_record()
        is_ref = rec.off == self.all_off and not rec.on and (first is None or first is rec)
        ref = None if is_ref else first
        verdict = self.judge.judge(rec.measurement, reference=ref.measurement if ref else None, is_reference=is_ref,
                                   paths=rec.paths, reference_paths=ref.paths if ref else None,
                                   dumps=not self.dumps_set_aside())
        outcome, reason = verdict.outcome, verdict.reason
        if rec.ignored:
            outcome, reason = INVALID, "switch ignored: " + ", ".join(rec.ignored)
        elif outcome in (GOOD, BAD) and self._unchecked(rec):
            outcome, reason = INVALID, UNCHECKED
        rec.outcome, rec.reason = outcome, reason

    def _cache_hint(self) -> str:
        """Why runs were INVALID when the job did not read its switch file (nothing compiled, or rules still
        fired when turned off) in two or more of them: the sign of a compile cache; '' otherwise."""
        unchecked = sum(1 for r in self.records if r.outcome == INVALID and r.reason == UNCHECKED)
        # a cache serves an earlier build whatever the switch file says (one rule alone off tells nothing: another
        # rule's switch may override its)
        ignored = sum(1 for r in self.records if r.outcome == INVALID and len(r.off) > 1 and r.ignored)
        if unchecked + ignored < 2:
            return ""
        what = [f"{unchecked} wrote no fusion_result.json or Build graph, unlike the baseline" if unchecked else "",
                f"{ignored} still fired rules they turned off" if ignored else ""]
        return (f"Of the invalid runs, {' and '.join(w for w in what if w)}: a compile cache reusing an earlier "
                f"build (ge_cache, .torchair_cache, an ATC output) is the usual cause. Disable compile caches and "
                f"rerun with --fresh.")

    def _unchecked(self, rec: TrialRecord) -> bool:
        """True when ``rec`` turned some (not all) candidates off, exited 0 and wrote no fusion_result.json or
        Build graph while the baseline did: nothing shows its switch file was read (a compile cache hit compiles
        nothing). A job that failed may have failed compiling (its exit status can be the symptom); the all-off
        runs have their own message (:meth:`_switch_unchecked`)."""
        if not rec.off or rec.off == self.all_off or rec.measurement.exit_code != 0 or \
                self._wrote_evidence(rec.paths):
            return False
        base = self.baseline_record()
        return base is not None and base is not rec and self._wrote_evidence(base.paths)

    def finish_trial(self, index: int, off: frozenset[str], role: str, paths: TrialPaths, m: Measurement,
                     device: str | None, on: frozenset[str] = frozenset(), final: bool = False,
                     announce: bool = True) -> TrialRecord:
        """Judge a measured execution, journal it, and return the record (``final``: the production switch file's
        own verification run, after the search). ``announce`` False: the caller logs it with :meth:`announce`
        once the engine has its outcome (the candidates left are then those after it). Raises RunAborted (check
        abort)."""
        device = self._ran_on.pop(index, device)
        rec = TrialRecord(index=index, key=config_key(off, on), off=off, role=role, outcome=UNKNOWN, reason="",
                          measurement=m, paths=paths, ignored=self.ignored_rules(off, paths), device=device, on=on,
                          final=final)
        before = self.reference_record()
        # a discovery baseline under a relative oracle stays pending until the reference; RunAborted (the check
        # asked to abort) leaves the run's 'executed' record, journaled before it was judged, for the resume
        self.judge_record(rec)
        self.journal.append(rec.to_event())
        if self._stale_outputs:
            # a run resumed after its result (a raised --max-runs) goes on: that result and its reports are no
            # longer its answer; they are written again at the end (until then `fusebisect report` says running)
            self._stale_outputs = False
            for name in ("result.json", "report.html", "report.md"):
                with contextlib.suppress(OSError):
                    (self.workdir / name).unlink()
        self.records.append(rec)
        if rec.off == self.all_off:
            self._rejudge_on_new_reference(before)
        self._check_metric_pattern(rec)
        if rec.off == self.all_off and rec.ignored:
            newly = [r for r in rec.ignored if r in self.candidates]
            if newly and len(newly) < len(self.candidates):
                self.exclude(newly, SWITCH_IGNORED)
        if rec.off == self.all_off and rec.outcome == GOOD:
            self._settle_pending()
        elif rec.off == self.all_off and rec.outcome == BAD and self.dumps_set_aside():
            if not self._dumps_aside_said:
                self._dumps_aside_said = True
                self.progress.log("the all-candidates-off reference is BAD: its dumps are no reference, so --dumps "
                                  "is set aside and the other oracle judges alone")
            self._settle_pending()
        if announce:
            self.announce(rec)
        return rec

    def announce(self, rec: TrialRecord) -> None:
        """Log a journaled run's verdict with the search's progress, and tell ``on_trial``."""
        self.progress.finished(rec, self._engine_progress(), self.executed)
        if self.on_trial is not None:
            self.on_trial(rec)

    def _check_metric_pattern(self, rec: TrialRecord) -> None:
        """Stop at once when --metric has matched nothing yet and this run exited 0 without a match: the
        pattern (not the job) is wrong, and every further run would be INVALID for the same reason."""
        m = rec.measurement
        if (self.opts.metric is None or m.metric is not None or m.exit_code != 0 or m.timed_out
                or any(r.measurement.metric is not None for r in self.records)):
            return
        tails = [read_text(path, 64 * 1024) for path in (rec.paths.stdout_path, rec.paths.stderr_path)]
        for tail in tails:   # the logs' tails are enough
            captured = unparsed_capture(tail, self.judge.metric) if self.judge.metric is not None else None
            if captured is not None:
                raise UsageError(f"--metric {self.opts.metric!r} matched in run {rec.index} ({rec.role}) but captured "
                                 f"{captured[:60]!r}, which is not a number (output in {rec.paths.stdout_path.parent})."
                                 f" Fix the pattern (one capture group around the number) and rerun with --fresh")
        last = next((ln.strip() for tail in tails for ln in reversed(tail.splitlines()) if ln.strip()), "")
        hint = f"; its last line: {last[:120]!r}" if last else "; it printed nothing"
        raise UsageError(f"--metric {self.opts.metric!r} matched nothing in run {rec.index} ({rec.role}), which "
                         f"exited 0 (output in {rec.paths.stdout_path.parent}){hint}. Fix the pattern (one "
                         f"capture group around the number) and rerun "
                         f"with --fresh")

    def exclude(self, rules: Sequence[str], reason: str, *, journal: bool = True) -> None:
        """Drop ``rules`` from the candidates (e.g. they ignore the switch, so the reference could never be
        valid); journal it and rebuild the engine from the observations that remain meaningful."""
        drop = set(rules)
        self.candidates = [c for c in self.candidates if c not in drop]
        self.excluded.extend({"rule": r, "reason": reason} for r in rules)
        if journal:
            self.journal.append({"event": "exclude", "rules": list(rules), "reason": reason})
            self.progress.log(f"[yellow]excluded[/yellow] {', '.join(rules)}: {_esc(reason)}")
        self._rebuild = True

    def _ignored_alone(self, result):
        """A rule left out because it still fired with every candidate off may honour its switch when it is the
        only one off (another switch overrides it): before a verdict that rests on it staying on, run each such
        rule alone off (up to three; once per journal). Honoured there, it was left out wrongly: the verdict is
        inconclusive, naming it and the rerun that tests it."""
        honoured: list[tuple[str, TrialRecord]] = []
        untried: list[str] = []
        for rule in self._switch_ignored()[:3]:
            off = frozenset({rule})
            rec = next((r for r in self.records if r.off == off and not r.on), None)
            if rec is None:
                if self.budget_spent:
                    untried.append(rule)
                    continue
                rec = self.run_one(off, "confirm")
            if rule not in rec.ignored and self._wrote_evidence(rec.paths):
                honoured.append((rule, rec))
        if untried and not honoured:
            one = len(untried) == 1
            return dataclasses.replace(result, status="inconclusive", message=(
                f"{result.message} But {_short(untried)} {'was' if one else 'were'} left out because "
                f"{'it' if one else 'they'} still fired with every candidate off, and the budget (--max-runs "
                f"{self.opts.max_runs}) left no run to try {'it' if one else 'each'} alone off (another rule's "
                f"switch may override {'its' if one else 'theirs'}): raise it and rerun the same command to resume."))
        if not honoured:
            return result
        names = [rule for rule, _ in honoured]
        one = len(names) == 1
        base = self.baseline_record()

        def shown(rec: TrialRecord) -> str:
            # under a relative oracle GOOD/BAD compares with a reference that kept the rule on: show the numbers
            m, b = rec.measurement.metric, base.measurement.metric if base is not None else None
            if self._relative_only():
                return (f"run {rec.index}: metric {m:g}, the baseline's {b:g}" if m is not None and b is not None
                        else f"run {rec.index}")
            return f"run {rec.index}: {rec.outcome.upper()}"

        runs = ", ".join(shown(rec) for _, rec in honoured)
        return dataclasses.replace(result, status="inconclusive", message=(
            f"{result.message} But {_short(names)} {'was' if one else 'were'} left out because "
            f"{'it' if one else 'they'} still fired with every candidate off, while with only "
            f"{'it' if one else 'each'} off the switch took effect ({runs}): another rule's switch overrides "
            f"{'its' if one else 'theirs'}, and {'it' if one else 'they'} may be the cause. Rerun with --fresh "
            f"--rules {','.join(names)} to test {'it' if one else 'them'}."))

    def _switch_ignored(self) -> list[str]:
        """The rules excluded during the run because the job ignored their switch (they stayed on throughout)."""
        return [e["rule"] for e in self.excluded if str(e.get("reason", "")).startswith(SWITCH_IGNORED)]

    @property
    def executed(self) -> int:
        return len(self.records)

    @property
    def run_dir(self) -> Path:
        """The directory the job's runs have (its working directory), absolute."""
        return Path(self.cwd).absolute() if self.cwd else Path.cwd()

    @property
    def rechecked_runs(self) -> list[int]:
        """The runs whose job finished but whose --check was stopped, not judged yet (a resume checks them)."""
        return sorted(r.index for r in self._rechecks.values())

    def run_one(self, off: frozenset[str], role: str, on: frozenset[str] = frozenset(),
                final: bool = False) -> TrialRecord:
        """Run, judge and journal one configuration in this thread. Raises Interrupted, RunAborted."""
        device = self.slots[0]
        index, paths, result, m = self.execute(off, role, device, on)
        if m is None:
            raise Interrupted("interrupted")
        return self.finish_trial(index, off, role, paths, m, device, on, final)

    def _engine_progress(self) -> dict | None:
        engine = getattr(self, "engine", None)
        if engine is None:
            return None
        try:
            return engine.progress()
        except Exception:  # progress is cosmetic
            return None

    # ------------------------------------------------------------------ the run

    def run(self) -> SessionResult:
        """Run (or resume) the bisection and return its result. Raises UsageError (bad options, journal of another
        command), RunAborted (--check asked to abort), Interrupted (Ctrl-C; children killed, journal kept)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        with workdir_lock(self.workdir):
            self._stop_leftovers()
            had_journal = (self.workdir / JOURNAL_NAME).exists()
            if self.opts.fresh:
                moved = set_aside_previous_run(self.workdir, self._previous_production_file())
                if moved is not None:
                    self.set_aside = moved[0]
                    if self.on_set_aside is not None:   # (its reports name the workdir's paths: rewritten now)
                        self.on_set_aside(moved[0])
                    whose = "the previous run's" if had_journal else "the files"
                    self.progress.log(f"{whose} {_esc(', '.join(moved[1]))} moved to {_esc(moved[0])}")
            elif not had_journal:
                # a run writes these without a backup: files of the same names that no run of ours wrote (there
                # is no journal) belong to the user
                theirs = [name for name in ("result.json", "report.html", "report.md", "trials", "repro")
                          if (self.workdir / name).exists()]
                if theirs == ["trials"] and _only_our_trials(self.workdir / "trials"):
                    # a first run interrupted before its journal began (during the baseline): ours, set aside
                    moved = set_aside_previous_run(self.workdir)
                    if moved is not None:
                        self.progress.log(f"an earlier run was interrupted before its journal began: its "
                                          f"{_esc(', '.join(moved[1]))} moved to {_esc(moved[0])}")
                    theirs = []
                if theirs:
                    raise UsageError(f"--workdir: {self.workdir} already holds {', '.join(theirs)} but no "
                                     f"{JOURNAL_NAME}: a run would overwrite them. Use a new --workdir, or add "
                                     f"--fresh to move them to {self.workdir / 'previous'}/")
            result = self._run_locked()
            if self.on_finish is not None:   # (a --fresh run waiting for the lock must not move them half-written)
                with finishing(self.workdir):
                    self.on_finish(result)
            return result

    def _run_locked(self) -> SessionResult:
        try:
            with sigterm_as_interrupt():
                return self._run()
        except KeyboardInterrupt as exc:
            if threading.current_thread() is threading.main_thread():
                # a second Ctrl-C (or SIGTERM) must not cut the cleanup short: the jobs' groups are being killed
                # and the worker threads end with them (the CLI restores the handlers for in-process callers)
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
            self.registry.kill_all()
            terminated = isinstance(exc, Terminated)
            raise Interrupted(self._resume_hint("terminated (SIGTERM)" if terminated else "interrupted"),
                              exit_code=143 if terminated else 130) from None
        finally:
            self.progress.close()

    def _stop_leftovers(self) -> None:
        """Kill the executions an earlier fusebisect left running here when it was killed itself (kill -9): they
        would hold the devices the runs about to start need."""
        trials = self.workdir / "trials"
        for found in sorted(trials.glob(f"*{PGID_SUFFIX}")) if trials.is_dir() else []:
            trial_dir = found.with_name(found.name[:-len(PGID_SUFFIX)])
            pids = kill_leftovers(trial_dir) + kill_detached(str(trial_dir))   # and those that left the group
            if pids:
                self.progress.log(f"killed the execution an interrupted run left running in {_esc(trial_dir)} "
                                  f"(process{'es' if len(pids) > 1 else ''} {', '.join(map(str, pids))})")

    def _previous_production_file(self) -> list[Path]:
        """The production switch file the previous run in this workdir wrote (from its result.json), if any, and
        only while it holds what that run wrote: a run in another workdir sharing -o may have written it since."""
        previous = previous_production(self.workdir)
        if previous is None:
            return []
        path, unchanged = previous
        if unchanged is False and path.is_file():
            self.progress.log(f"{_esc(path)} is left in place: it changed since the previous run in this workdir "
                              f"wrote it (another run's production file?)")
            return []
        return [path]

    def _resume_hint(self, what: str = "interrupted") -> str:
        if not self.journal.path.exists():   # still in the baseline run: nothing to resume yet
            return (f"{what} during the baseline run, before the journal began; the running execution was killed. "
                    f"Rerun the same command to start again.")
        runs = f"{self.executed} run{'' if self.executed == 1 else 's'}"
        return (f"{what} after {runs}; the running executions were killed and the journal is kept "
                f"in {self.journal.path}. Rerun the same command to resume (add --fresh to start over).")

    def _load(self) -> dict | None:
        records = self.journal.load()
        if not records:
            return None
        start = records[0]
        if start.get("event") != "start":
            raise JournalError("the first record is not a start record; use --fresh", path=self.journal.path)
        if start.get("version") != VERSION:
            raise UsageError(f"{self.journal.path}: journal version {start.get('version')} is not {VERSION}; "
                             f"rerun with --fresh")
        if start.get("command") != list(self.opts.command) or start.get("options") != _jsonable(
                self.opts.verdict_options()):
            diff = _describe_difference(start, self.opts)
            raise UsageError(f"{self.journal.path} belongs to a different command or options ({diff}); rerun "
                             f"with --fresh to start over (the old journal is kept), or use another --workdir")
        here = str(self.run_dir)
        if isinstance(start.get("cwd"), str) and start["cwd"] != here and not _moved_together(start, here,
                                                                                             self.workdir):
            # the same command line in another directory can be another job (./train.sh, relative paths)
            raise UsageError(f"{self.journal.path} was started in {start['cwd']}, not here ({here}): its runs ran "
                             f"the command there; resume there (cd {shlex.quote(start['cwd'])} and rerun it with "
                             f"--workdir {shlex.quote(str(self.workdir.absolute()))}), or rerun with --fresh to start "
                             f"over here (the old journal is kept)")
        if "rule_names" in start and start["rule_names"] != self.rule_names:
            # the same --rules FILE, edited since: another search (--rules NAMES would differ as options)
            was, now = start["rule_names"] or [], self.rule_names or []
            added, dropped = [r for r in now if r not in was], [r for r in was if r not in now]
            change = "; ".join(part for part in (f"added {', '.join(added)}" if added else "",
                                                 f"dropped {', '.join(dropped)}" if dropped else "") if part)
            raise UsageError(f"{self.journal.path} belongs to a different command or options (the rules --rules "
                             f"names changed: {change or 'their order'}); rerun with --fresh to start over (the old "
                             f"journal is kept), or use another --workdir")
        self.candidates = list(start.get("candidates") or [])
        self.journal_workers = int(start.get("workers") or 1)
        self._stale_outputs = any(ev.get("event") == "result" for ev in records[1:])
        self.excluded = list(start.get("excluded") or [])
        self.kinds = dict(start.get("kinds") or {})
        for ev in records[1:]:
            kind = ev.get("event")
            if kind == "trial":
                rec = TrialRecord.from_event(ev)
                self.records.append(rec)
                self._next_index = max(self._next_index, rec.index + 1)
            elif kind == "prior":
                self.prior = list(ev.get("rules") or [])
            elif kind == "dumps":
                self.dumps_event = ev
            elif kind == "exclude":
                self.exclude(list(ev.get("rules") or []), ev.get("reason") or "", journal=False)
            elif kind == "executed":
                kept = TrialRecord.from_event(ev)
                self._rechecks[kept.key] = kept
        judged = {rec.index for rec in self.records}
        self._rechecks = {k: r for k, r in self._rechecks.items() if r.index not in judged}
        self._rebase()
        settled = {int(ev.get("index") or 0) for ev in records[1:] if ev.get("event") == "verdict"}
        by_index = {rec.index: rec for rec in self.records}
        for ev in records[1:]:   # verdicts given after the fact, the latest last (a reference that changed)
            if ev.get("event") == "verdict" and (rec := by_index.get(int(ev.get("index") or 0))) is not None:
                rec.outcome, rec.reason = str(ev.get("outcome") or rec.outcome), str(ev.get("reason") or "")
        self._settle_pending(journaled=settled)
        if self._reference_runs() is not None:
            # an interruption while every run was judged again against a new reference (the medoid of the
            # all-off runs) leaves some verdicts journaled against the old one: judge them all against the
            # reference the journal's runs make, as the uninterrupted run did (cheap: a metric comparison)
            self._judge_all_again()
        return start

    def _rebase(self) -> None:
        """The workdir was moved or renamed (once or more) since runs were journaled: their trial dirs and switch
        files (journaled as absolute paths, WORKDIR/trials/NAME and WORKDIR/switch/NAME) are read under the
        workdir as it is now."""
        def here(path: Path | None, kind: str) -> Path | None:
            if path is None or path.parent.name != kind or path.parent.parent == self.workdir:
                return path
            return self.workdir / kind / path.name
        moved = []
        for rec in [*self.records, *self._rechecks.values()]:
            paths = TrialPaths(trial_dir=here(rec.paths.trial_dir, "trials"),
                               switch_file=here(rec.paths.switch_file, "switch"))
            if paths != rec.paths:
                moved.append(rec.paths.trial_dir.parent.parent)
                rec.paths = paths
        if moved:
            self.progress.log(f"the workdir was {_esc(', '.join(map(str, dict.fromkeys(moved))))} when runs were "
                              f"journaled: they are read under {_esc(self.workdir)}")

    def _settle_pending(self, journaled: set[int] = frozenset()) -> None:
        """Judge the runs that waited for the reference, and journal each verdict that settles (``verdict``
        events, unless ``journaled`` already holds that run): a report of an interrupted run reads them."""
        for rec in self.records:
            if rec.pending:
                self.judge_record(rec)
                if not rec.pending and rec.index not in journaled:
                    self.journal.append({"event": "verdict", "index": rec.index, "outcome": rec.outcome,
                                         "reason": rec.reason})

    def _write_start(self) -> None:
        self.journal.append({"event": "start", "command": list(self.opts.command), "candidates": self.candidates,
                             "options": _jsonable(self.opts.verdict_options()), "version": VERSION,
                             "excluded": self.excluded, "kinds": self.kinds, "workdir": str(self.workdir),
                             "rule_names": self.rule_names, "workers": self.opts.workers,
                             "cwd": str(self.run_dir)})

    def _discover(self) -> TrialRecord | None:
        """Settle the candidates: --rules, else the rules that fired in a baseline run, else the catalog's
        disableable rules. Returns the baseline record when one was run."""
        catalog = self.catalog
        if self.rule_names is not None:
            names = self.rule_names
            source = ("--rules" if not validation.rules_spec_is_file(self.opts.rules) else
                      f"--rules {_esc(self.opts.rules)} (read as a file)")
            for name in names:  # only with --allow-unknown-rules (else a usage error before any run)
                if catalog.get(name) is None:
                    self.progress.log(f"[yellow]warning:[/yellow] --rules: {name} is not a rule the catalog knows"
                                      + validation.did_you_mean(catalog, name)
                                      + "; kept (--allow-unknown-rules), but a misspelt name switches nothing off")
        else:
            self.progress.log("running the baseline (default configuration) to see which rules fire")

            def settle(paths: TrialPaths) -> None:
                # the job ran to its end: the rules it fired settle the candidates, and the journal begins, before
                # the run is judged (an interrupted --check then leaves a run the resume checks again, not reruns)
                fired = self.fired_in(paths)
                names = sorted(fired)
                for name, stat in fired.items():
                    kind = getattr(stat, "kind", None)
                    if kind:
                        self.kinds[name] = kind
                source = "the rules that fired in the baseline"
                if not names:
                    names = sorted(catalog.disableable())
                    source = "the catalog's disableable rules (no fusion_result.json or graph dump in the baseline)"
                self._settle_candidates(names, source)

            index, paths, result, m = self.execute(frozenset(), "baseline", self.slots[0], after_job=settle)
            if m is None:
                raise Interrupted("interrupted")
            return self.finish_trial(index, frozenset(), "baseline", paths, m, self.slots[0])
        self._settle_candidates(names, source)
        return None

    def _settle_candidates(self, names: list[str], source: str) -> None:
        """Keep the rules of ``names`` that a switch file can turn off as the candidates (the others go to
        ``excluded``, with why), say so, and begin the journal. Raises UsageError when none is left."""
        from fusebisect.rules.switchfile import RULE_NAME_RE

        catalog = self.catalog
        candidates = []
        for name in names:
            rule = catalog.get(name)
            if not RULE_NAME_RE.fullmatch(name):  # from the job's own files: never let it reach a switch file
                self.excluded.append({"rule": name, "reason": "not a valid pass name (characters CANN never uses)"})
            elif rule is not None and not rule.can_disable:
                why = "forbidden-close pass" if rule.always_on == "forbidden-close" else rule.always_on
                self.excluded.append({"rule": name, "reason": f"cannot be disabled ({why})"})
            elif rule is not None and rule.spelling_of:
                self.excluded.append({"rule": name, "reason": f"a spelling of {rule.spelling_of}; use that name"})
            else:
                candidates.append(name)
        if not candidates:
            raise UsageError(f"no candidate rules ({source}: {len(names)} found, all excluded)")
        self.candidates = candidates
        locked = sum(e["reason"].startswith("cannot be disabled") for e in self.excluded)
        why = ("cannot be disabled" if locked == len(self.excluded) else
               f"{locked} cannot be disabled, {len(self.excluded) - locked} not switchable by name" if locked else
               "not switchable by name")
        self.progress.log(f"{len(candidates)} candidate rules from {source}"
                          + (f"; {len(self.excluded)} excluded ({why})" if self.excluded else ""))
        self._write_start()

    def _make_engine(self, *, spent: bool = False):
        """The engine, rebuilt from the journal. ``spent``: the run budget is used up, so the engine gets no
        further run either (its budget is what it has observed), and it settles on what it found so far."""
        cls = self._engine_class()
        events = list(self._fold_events())
        observed = sum(1 for kind, _ in events if kind == "observe")
        # runs already judged always count: a rerun with a lower --max-runs must not cut a finished search short
        cap = max(2, observed) if spent else None if self.opts.max_runs is None else max(self.opts.max_runs, observed)
        kw = dict(flaky=self.opts.flaky or self._reference_disputed(), repeat=self.opts.repeat,
                  workers=self.opts.workers,
                  confidence=self.opts.confidence, max_executions=cap, seed=self.opts.seed)
        if not events:
            return cls(self.candidates, **kw)
        engine = cls.replay(self.candidates, events, **kw)
        if not engine.done and self.journal_workers != kw["workers"]:
            # a search the journal finished with another --jobs: its plan (P configurations a round) is the one
            # that reached the end; replayed with it, nothing is left to run
            first = cls.replay(self.candidates, events, **{**kw, "workers": self.journal_workers})
            if first.done:
                return first
        if spent and not engine.done and hasattr(engine, "settle"):
            engine.settle()   # a round cut short by the budget: the configurations it waits for will not run
        return engine

    def budget_left(self) -> int | None:
        """Executions --max-runs still allows (the final verification run included), or None without a budget."""
        return None if self.opts.max_runs is None else self.opts.max_runs - self.executed

    @property
    def budget_spent(self) -> bool:
        """True when --max-runs allows no further execution."""
        left = self.budget_left()
        return left is not None and left <= 0

    def _fold_events(self):
        """The engine's view of the journal: observations (not pending ones) and priors, in journal order. (A
        final verification run comes after the engine was done, so replaying it changes nothing.)"""
        records = self.journal.load()[1:]
        by_index = {rec.index: rec for rec in self.records}
        allowed = set(self.candidates)
        for ev in records:
            if ev.get("event") == "trial":
                rec = by_index.get(int(ev.get("index") or 0))
                if rec is None or rec.pending or rec.on or not rec.off <= allowed:
                    continue  # (configs naming excluded rules say nothing about the remaining candidates)
                yield ("observe", (rec.off, self._outcome(rec.outcome)))
            elif ev.get("event") == "prior":
                yield ("prior", list(ev.get("rules") or []))

    def _run(self) -> SessionResult:
        start = self._load()
        if start is None:
            self._discover()
        else:
            done = sum(1 for r in self.records)
            self.progress.log(f"resuming from {_esc(self.journal.path)}: {done} runs already judged, "
                              f"{len(self.candidates)} candidates")
        # A relative oracle needs the reference before a discovery baseline can be judged.
        for _attempt in range(3):  # an exclusion (switch ignored) changes the reference configuration
            if not any(r.pending for r in self.records) or self.reference_record() is not None:
                break
            if any(r.off == self.all_off for r in self.records):
                break  # the reference ran and was invalid
            if self.budget_spent:
                break
            self.run_one(self.all_off, "reference")
        if self.gate_stop() is None:
            self._settle_reference(flaky=self.opts.flaky)
        if self.gate_stop() is None:
            # a run still waiting for a reference (the first one was INVALID) waits on: the engine asks for the
            # reference's retry, and the drive loop holds the waiting runs rather than running them again
            self.engine = self._make_engine()
            self._rebuild = False
            self._maybe_prior()
            self._drive()
        for rec in self.records:
            if rec.pending:
                self.judge_record(rec)
                if rec.pending:
                    rec.outcome, rec.reason = INVALID, "no valid reference run to compare with"
        return self._finish(self.gate_stop())

    def gate_stop(self) -> str | None:
        """Why no further run can tell anything, read from the all-candidates-off reference runs, or None:
        every candidate it turned off still fired (the job ignores the switch file), or it was INVALID twice
        while the oracle judges every other run against it (like the engine's own gate retry)."""
        refs = self._gate_runs(self.all_off)
        for rec in refs:
            if set(self.candidates) <= set(rec.ignored):
                honoured, ignoring = self._graphs_by_switch(rec)
                if honoured and ignoring:
                    return (f"The switch file was ignored by {_short(ignoring)} (the candidate rules still fired "
                            f"there with every one turned off, run {rec.index}) but honoured by "
                            f"{_short(honoured)}: a graph or session built without it (an eval session with a "
                            f"config of its own?). Hand FUSEBISECT_SWITCH_FILE to every session of the job; "
                            f"nothing can be concluded.")
                return (f"The switch file was ignored: all {len(self.candidates)} candidate rules still fired "
                        f"with every one of them turned off (the all-candidates-off reference, run {rec.index}), "
                        f"so no run can tell a rule's effect. Make the job hand FUSEBISECT_SWITCH_FILE to the "
                        f"framework (see the trial contract) and disable compile caches; nothing can be "
                        f"concluded.")
        if self.judge.needs_reference and len(refs) >= 2 and all(r.outcome == INVALID for r in refs):
            why = "; ".join(f"run {r.index}: {r.reason or 'invalid'}" for r in refs[:2])
            return (f"The all-candidates-off reference run was INVALID twice ({why}); every other run is judged "
                    f"against it, so nothing can be concluded.")
        return self._noise_beyond_tolerance()

    def _maybe_prior(self) -> None:
        """Once baseline and reference both ran with dumps: compare them, journal the rows, and give the first
        divergent op's pass names to the engine as a prior (once per journal)."""
        if self.prior is None and self.dumps_event is not None and self.dumps_event.get("prior"):
            # killed between the journal's dumps line and its prior line: the prior the run was about to use
            self._set_prior(list(self.dumps_event["prior"]))
            return
        if self.prior is not None or self.dumps_event is not None:
            return
        base, ref = self.baseline_record(), self.reference_record()
        if base is None or ref is None:
            return
        if not (oracles.has_dumps(base.paths) and oracles.has_dumps(ref.paths)):
            return
        try:
            # The earliest dumped iteration: later ones ran on weights the fault has already drifted, and their
            # first divergence can be an innocent op. When it shows none, the latest (a fault can need steps).
            report = None
            for leaf in ("earliest", "latest"):
                if report is not None and (report.first_divergence or not oracles.several_iterations(base.paths)):
                    break
                comparison = oracles.compare_trial_dumps(base.paths, ref.paths, cosine=self.opts.cosine,
                                                         max_abs_error=self.opts.max_abs_error,
                                                         require_graphs=self.opts.graph_dump, leaf=leaf)
                report = comparison.deciding if comparison is not None else None
                if report is None:
                    break
        except ImportError as exc:  # compare engine unavailable
            self.notes.append(f"no dump prior: {exc}")
            return
        except FusebisectError as exc:
            self.progress.log(f"[yellow]warning:[/yellow] cannot compare the baseline and reference dumps: "
                              f"{_esc(exc)}")
            self.dumps_event = {"event": "dumps", "rows": [], "first_divergence": None, "error": str(exc)}
            self.journal.append(self.dumps_event)
            return
        if report is None:
            return
        summary = oracles.summarize_dumps(report)
        names = oracles.divergence_pass_names(report.first_divergence, report)
        rules = oracles.rank_prior([n for n in names if n in set(self.candidates)], report,
                                   cosine=self.opts.cosine, max_abs_error=self.opts.max_abs_error)
        self.dumps_event = {"event": "dumps", **summary, "prior": rules, "divergence_rules": names}
        self.journal.append(self.dumps_event)
        if rules:
            op = (report.first_divergence or {}).get("op") or (report.first_divergence or {}).get("my_op")
            from fusebisect.search import PRIOR_SINGLES

            alone, rest = rules[:PRIOR_SINGLES], rules[PRIOR_SINGLES:]
            self.progress.log(f"dumps: first divergence at {_esc(op)}"
                              + (f" (fused by {', '.join(rules)})" if rest else "")
                              + f"; testing {' and '.join(alone)} alone first")
            self._set_prior(rules)

    def _set_prior(self, rules: list[str]) -> None:
        self.prior = rules
        self.journal.append({"event": "prior", "rules": rules})
        self.engine.set_prior(rules)

    def _role(self, off: frozenset[str]) -> str:
        engine_role = getattr(self.engine, "role", None)
        if engine_role is not None:
            try:
                return str(engine_role(off))
            except Exception:  # cosmetic: fall back to our own naming
                pass
        seen = any(r.off == off and r.role != "verify" for r in self.records)
        if seen:
            return "repeat"
        if not off:
            return "baseline"
        if off == self.all_off:
            return "reference"
        phase = str((self._engine_progress() or {}).get("phase", ""))
        return "confirm" if "confirm" in phase else "search"

    def _drive(self) -> None:
        """Ask the engine for configurations, run them (in parallel when asked), feed back the outcomes."""
        engine = self.engine
        workers = self.opts.workers
        free = list(self.slots)
        inflight: dict[Future, tuple[frozenset[str], str, str | None]] = {}
        # runs done but still pending (waiting for the reference's verdict): observed once judged, never rerun; the
        # discovery baseline, run before the engine existed (or journaled before a resume), among them
        held: list[TrialRecord] = [r for r in self.records if r.pending and r.off <= set(self.candidates)]
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="trial")
        def spent() -> bool:   # no run left in the budget beyond those in flight
            left = self.budget_left()
            return left is not None and left - len(inflight) <= 0

        try:
            while True:
                if not inflight:   # no device busy: settle a reference its runs dispute before going on (a job
                    # declared noisy, or found noisy by the engine: three reference runs, whose middle one the
                    # verdicts are judged against; one noisy reference sample would skew every verdict the
                    # noise-aware mode weighs as if each flipped on its own)
                    self._settle_reference(flaky=self._flaky_search)
                    if self._rebuild:
                        self.engine = engine = self._make_engine()
                        self._rebuild = False
                stopped = self.gate_stop() is not None  # runs still in flight finish and are journaled
                if not inflight and held and not stopped and \
                        all(frozenset(o) in {r.off for r in held} for o in engine.propose()):
                    # the engine waits for them, and they wait for a reference that could not be judged yet (a
                    # reference INVALID for good stops the loop below with that verdict)
                    if len(self._gate_runs(self.all_off)) < 2 and free and not spent():
                        device = free.pop(0)   # its retry, which the engine would ask next
                        fut = pool.submit(self.execute, self.all_off, "repeat", device)
                        inflight[fut] = (self.all_off, "repeat", device)
                    else:
                        for rec in held:
                            engine.observe(rec.off, self._outcome(rec.outcome))
                        held.clear()
                if not engine.done and not stopped and not spent() and len(inflight) < workers \
                        and not self.registry.stopping:
                    running = {v[0] for v in inflight.values()} | {rec.off for rec in held}
                    proposed = [frozenset(o) for o in engine.propose()]
                    # a run whose job finished before its check was stopped is checked again first (cheap), also
                    # when this search no longer asks for its configuration (a resume with another --jobs plans
                    # other rounds): its verdict is knowledge the engine keeps, and the job's work is not lost
                    proposed += [r.off for r in self._rechecks.values()
                                 if not r.on and r.off and r.off != self.all_off and r.off not in proposed
                                 and r.off <= set(self.candidates) and self._direction_known()]
                    proposed.sort(key=lambda o: config_key(o) not in self._rechecks)
                    for off in proposed:
                        if off in running or not free or spent():
                            continue
                        role = self._role(off)
                        device = free.pop(0)
                        fut = pool.submit(self.execute, off, role, device)
                        inflight[fut] = (off, role, device)
                        running.add(off)
                if not inflight and engine.done and self._recheck_reference(engine.result):
                    continue   # the reference moved: every run was judged again; the loop's top rebuilds the engine
                if not inflight:
                    if not engine.done and spent():  # the engine settles on what it has found so far
                        self.engine = engine = self._make_engine(spent=True)
                    if not engine.done and not stopped:
                        self.notes.append("the search engine proposed nothing more before finishing")
                    break
                done, _ = wait(list(inflight), timeout=0.5, return_when=FIRST_COMPLETED)
                for fut in done:
                    off, role, device = inflight.pop(fut)
                    free.append(device)
                    index, paths, result, m = fut.result()
                    if m is None:
                        continue
                    rec = self.finish_trial(index, off, role, paths, m, device, announce=False)
                    if self._rebuild:
                        self.engine = engine = self._make_engine()
                        self._rebuild = False
                        # the engine has the judged ones from the journal; the pending ones (this one too) still wait
                        held[:] = [r for r in [*held, rec] if r.pending and r.off <= set(self.candidates)]
                    elif off <= set(self.candidates):
                        if rec.pending:   # (a baseline done before the reference it is judged against)
                            held.append(rec)
                        else:
                            engine.observe(off, self._outcome(rec.outcome))
                        for waiting in [r for r in held if not r.pending]:   # judged now the reference ran
                            held.remove(waiting)
                            engine.observe(waiting.off, self._outcome(waiting.outcome))
                    self.announce(rec)   # with what the search knows after it
                    self._maybe_prior()
        except BaseException:
            self.registry.kill_all()
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown(wait=True)

    # ------------------------------------------------------------------ the end

    def _finish(self, stop: str | None = None) -> SessionResult:
        """Write the production switch file (when a culprit was found) and result.json; ``stop``: why the run
        ended at the gates without the engine (see :meth:`gate_stop`), an inconclusive verdict."""
        from fusebisect.runner.result import build_run_json

        if self.dumps_set_aside():
            self.notes.append("--dumps was set aside: the all-candidates-off reference run was BAD by "
                              f"{'--check' if self.judge.check is not None else '--metric --expect'}, and --dumps "
                              "compares every run with that run's dumps; the other oracle judged alone")
        if stop is not None:
            from fusebisect.search.model import SearchResult, theoretical_bound

            result = SearchResult(status="inconclusive", culprits=[], executions=self.executed,
                                  bound=theoretical_bound(len(self.candidates), 1), message=stop)
        else:
            result = self.engine.result
        if result is not None and (noise := self._reference_noise() or self._noise_beyond_tolerance(
                sets=len(result.culprits) if result.status == "found" else 0)) is not None:
            named = ", ".join("+".join(c.rules) for c in result.culprits)
            # no culprit rests on a reference the job cannot reproduce: none is named, no switch file written
            result = dataclasses.replace(result, status="inconclusive", culprits=[], message=noise + (
                f" (The search had named {named}.)" if named else ""))
        if result is not None and result.status in ("not_reproduced", "not_fusion"):
            result = self._ignored_alone(result)
        verify = None
        switch_path = None
        if result is not None and result.status == "found" and result.culprits:
            switch_path, verify = self._production(result)
            result = self._unless_still_bad(result)
            if result.status == "found" and self._set_contradicted is not None:
                seen, (_off, kept, dependents) = self._set_contradicted
                kept_s, dep_s = ", ".join(kept), ", ".join(dependents)
                result = dataclasses.replace(result, status="inconclusive", message=(
                    f"{result.message} But run {seen.index}, with only {dep_s} off, was BAD: an interaction is fixed "
                    f"by turning either member off, so {kept_s} takes part in the symptom without {dep_s} too "
                    f"(alone, when one flipped verdict made it look like a pair, or with another rule). The "
                    f"production switch file turns off the whole set; rerun with --fresh --flaky to weigh the runs "
                    f"as a noisy job's."))
            low = [c for c in result.culprits if c.confidence < self.opts.confidence]
            if result.status == "found" and low:   # never named below --confidence: an unconfirmed set
                names = ", ".join("+".join(c.rules) for c in low)
                result = dataclasses.replace(result, status="inconclusive", message=(
                    f"{result.message} {names} is named with confidence {min(c.confidence for c in low):g}, below "
                    f"--confidence {self.opts.confidence:g}: the run that would show whether it reproduces the "
                    f"symptom alone could not be judged (see the notes), so the culprit set is not established. "
                    f"The switch file turns it off" + (" and a final run was GOOD." if verify is not None and
                                                       verify.outcome == GOOD else ".")))
            stuck = self._switch_ignored()
            stuck += [r for r in self._fused_with_excluded(result) if r not in stuck]
            outside = self._divergence_outside()
            if result.status == "found" and outside is not None and self._relative_only():
                op, rules = outside
                result = dataclasses.replace(result, status="inconclusive", message=(
                    f"{result.message} But the first divergence in the dumps, {op}, was fused only by "
                    f"{_short(rules)}, which no run switched off (not a candidate: it cannot be switched off, or the "
                    f"job ignores its switch): the fault is likelier there, in the reference run too, and the "
                    f"culprits found only change how it shows. The switch file turns them off; say what a good run "
                    f"is ({self._expect_hint()} or --check CMD) to tell."))
            elif result.status == "found" and stuck and self._relative_only():
                # every run had those rules on, the reference too: GOOD only means "like that reference"
                result = dataclasses.replace(result, message=(
                    f"{result.message} Caution: {_short(stuck)} stayed on in every run, the reference included "
                    f"(a pass that cannot be switched off, or whose switch the job ignores); under a relative "
                    f"oracle GOOD "
                    f"means like that reference, so {'it' if len(stuck) == 1 else 'they'} may be the cause, which "
                    f"the culprits found only make visible. Say what a good run is ({self._expect_hint()} or "
                    f"--check CMD) to tell."))
            if result.status == "found" and (confounded := self._confounded(result)) is not None:
                result = dataclasses.replace(result, status="inconclusive", message=f"{result.message} {confounded}")
            if result.status == "found" and (unchecked := self._unchecked_references()) is not None:
                refs, base = unchecked
                failed = sorted({r.measurement.exit_code for r in refs} - {0}, key=str)
                guess = (f"it exited {', '.join(map(str, failed))}: a failed compile?" if failed else
                         "a compile cache?")
                self.notes.append(f"the all-candidates-off run{'s' if len(refs) > 1 else ''} (run "
                                  f"{', '.join(str(r.index) for r in refs)}) wrote no fusion_result.json or Build "
                                  f"graph, unlike the baseline (run {base.index}): nothing shows the switch file was "
                                  f"read there ({guess})")
            if result.status == "found" and self._relative_only() and \
                    all(c.direction == "on" for c in result.culprits):
                # the reference may be the broken run: a rule bad while OFF then reads as bad while on
                tell = (f"{self._expect_hint()} (a known-good loss)" if self.judge.metric is not None else
                        "--check CMD (what a good run is)")   # --dumps alone: --expect needs --metric
                self.notes.append("GOOD means like the all-candidates-off run; were that run the broken one (a rule "
                                  "bad while turned off), the rule named would be that rule and the switch file the "
                                  f"broken configuration: {tell} rules that out")
        elif result is not None and result.status == "not_reproduced" and \
                (unchecked := self._switch_unchecked("the job ran like the baseline")):
            result = dataclasses.replace(result, status="inconclusive", message=unchecked)
        elif result is not None and result.status == "not_reproduced" and self._relative_only():
            result = dataclasses.replace(result, message=self._not_reproduced_message())
            if stuck := self._switch_ignored():
                # the reference kept them on too: "like the reference" says nothing about them
                result = dataclasses.replace(result, status="inconclusive", message=(
                    f"{result.message} {_untestable(stuck, 'in the reference run too, so no run could test {it}')}"))
        elif result is not None and result.status == "not_fusion":
            result = self._not_fusion(result)
        elif result is not None and result.status == "inconclusive" and not result.culprits:
            # a gate INVALID twice: say why each of its runs could not be judged (a crash, a timeout, ...)
            whys = []
            for gate, which in ((frozenset(), "baseline"), (self.all_off, "reference")):
                runs = self._gate_runs(gate)
                if len(runs) >= 2 and all(r.outcome == INVALID for r in runs) and f"run {runs[0].index}:" \
                        not in result.message:
                    whys.append((which, "; ".join(f"run {r.index}: {r.reason or 'invalid'}" for r in runs[:2])))
            if whys:   # both gates: each named
                why = "; ".join(f"{which} {text}" if len(whys) > 1 else text for which, text in whys)
                result = dataclasses.replace(result, message=f"{result.message} Why: {why}.")
        if result is not None and result.status == "inconclusive" and (hint := self._cache_hint()):
            result = dataclasses.replace(result, message=f"{result.message} {hint}")
        if (result is not None and result.status == "inconclusive" and "--max-runs" not in result.message
                and self.budget_spent and stop is None   # a gate's stop is not the budget's, nor a search's own end
                and getattr(result, "budget_stopped", False)):
            result = dataclasses.replace(result, message=f"{result.message} The budget (--max-runs "
                                         f"{self.opts.max_runs}) is spent: raise it and rerun the same command "
                                         f"to resume.")
        elif (result is not None and result.status == "inconclusive" and stop is None and "--max-runs" not in
              result.message and self.opts.max_runs is None and getattr(result, "budget_stopped", False)):
            # the engine's own cap (the noise-aware mode allows about 3 log2(n) + 30 runs per culprit sought)
            result = dataclasses.replace(result, message=f"{result.message} That is the search's own run budget "
                                         f"({self.executed} runs): {self._go_on_hint()}.")
        if (sick := self._sick_device()) is not None:
            self.notes.append(sick)
        run_json = build_run_json(self, result, switch_path, verify)
        if switch_path is not None:   # what this run wrote there: --fresh moves only that, not another run's file
            run_json["switch_file_sha256"] = self._production_sha256
        from fusebisect.fsutil import atomic_write_text

        atomic_write_text(self.workdir / "result.json", json.dumps(run_json, indent=2, ensure_ascii=False) + "\n")
        self.journal.append({"event": "result", **run_json})
        code = 0 if run_json["status"] == "found" else 1
        return SessionResult(run_json=run_json, records=list(self.records), exit_code=code,
                             journal=self.journal.path, verify=verify, notes=list(run_json["notes"]))

    def production_config(self, result):
        """Return (off, on, SwitchConfig) of the production switch file: 'on'-direction culprits off,
        'off'-direction culprits (bad while turned off) explicitly on; once :meth:`_production` verified it, an
        interaction set that is a dependency turns off only its dependent member."""
        off = frozenset(r for c in result.culprits if getattr(c, "direction", "on") == "on" for r in c.rules)
        on = frozenset(r for c in result.culprits if getattr(c, "direction", "on") == "off" for r in c.rules)
        if self.production_off is not None:
            off = self.production_off
        return off, on, self.switch_config(off, on)

    def _final_run(self, off: frozenset[str], on: frozenset[str] = frozenset()) -> TrialRecord | None:
        """The last final verification run of a configuration (any outcome), or None."""
        runs = [r for r in self.records if r.final and r.off == off and r.on == on]
        return runs[-1] if runs else None

    def _fewer_off(self, result) -> tuple[frozenset[str], list[str], list[str]] | None:
        """The production OFF-set keeping on the members an interaction set's dependent member needs (a pass
        fusing what another built: turning the dependent one off removes the set's fusion and keeps the
        other's), with the rules kept on and the dependent members; None when no set is such a dependency."""
        from fusebisect.runner.result import dependencies

        off: set[str] = set()
        kept: list[str] = []
        dependents: list[str] = []
        for c in result.culprits:
            if getattr(c, "direction", "on") != "on":
                continue
            rules = list(c.rules)
            deps = dependencies(self, rules) if len(rules) > 1 else {}
            dependent = [m for m, needs in deps.items() if set(needs) == set(rules) - {m}]
            if len(dependent) == 1:
                off.add(dependent[0])
                dependents.append(dependent[0])
                kept += [r for r in rules if r != dependent[0]]
            else:
                off.update(rules)
        return (frozenset(off), kept, dependents) if kept else None

    def observed(self, off: frozenset[str], on: frozenset[str] = frozenset()) -> TrialRecord | None:
        """The verdict observed for one configuration: the last of its runs whose outcome (GOOD or BAD) is the
        majority of its judged runs (the last judged one on a tie), or None when none was judged."""
        runs = [r for r in self.records if r.off == off and r.on == on and r.outcome in (GOOD, BAD)]
        if not runs:
            return None
        good = sum(r.outcome == GOOD for r in runs)
        if 2 * good == len(runs):
            return runs[-1]
        majority = GOOD if 2 * good > len(runs) else BAD
        return next(r for r in reversed(runs) if r.outcome == majority)

    def _unless_still_bad(self, result):
        """``result`` (found) when the production configuration was seen GOOD, or the user skipped the final
        run; else an inconclusive result that keeps the culprits found so far: the job was still BAD with them
        off, or the budget (--max-runs) was spent before any run could show it good."""
        off, on, _cfg = self.production_config(result)
        seen = self.observed(off, on)
        final = [r for r in self.records if r.off == off and r.on == on and r.final and r.outcome in (GOOD, BAD)]
        if final and final[-1].outcome == BAD:
            seen = final[-1]   # the run made to check the fix decides, whatever earlier runs of it said
        base = self.baseline_record()
        if seen is None and not off and on and base is not None and on <= set(self.fired_in(base.paths)):
            seen = self.observed(frozenset())   # rules set on that fire by default anyway: that is the baseline
            if seen is not None and seen.outcome == GOOD:
                self.notes.append(f"the production switch file sets {', '.join(sorted(on))} on, which the baseline "
                                  f"(run {seen.index}, GOOD) already had: it is that configuration")
        if seen is not None and seen.outcome == GOOD:
            return result
        invalid = [r for r in self.records if r.off == off and r.on == on and r.outcome == INVALID]
        if seen is None and not self.budget_spent and not invalid:
            # no run of it (--no-verify after a search that saw it only through another configuration): found.
            # (When the budget stopped the search before that run, --no-verify does not make the answer whole,
            # and a production file whose every run crashed is no fix either.)
            return result
        what = f"with {', '.join(sorted(off))} off" if off else f"with {', '.join(sorted(on))} set on"
        judged = [r for r in self.records if r.off == off and r.on == on and r.outcome in (GOOD, BAD)]
        split = seen is not None and {r.outcome for r in judged} == {GOOD, BAD} and (self._flaky_search or not final)
        if split:   # a noisy job: its runs of the fix disagree, which says neither that it works nor that it fails
            def runs(outcome) -> str:
                at = [str(r.index) for r in judged if r.outcome == outcome]
                return f"run{'s' if len(at) > 1 else ''} {', '.join(at)}"
            state = f"the runs {what} disagree (BAD: {runs(BAD)}; GOOD: {runs(GOOD)})"
        elif seen is not None:
            state = f"the job is still BAD {what} (run {seen.index})"
        elif invalid:
            state = f"the run {what} could not be judged (run {invalid[-1].index}: {invalid[-1].reason})"
        else:
            state = f"no run {what} was left to show the job good"
        # the engine says when the budget cut it; a rerun with a lower --max-runs of a search that ended on its own
        # spends the budget too, without having stopped anything
        cut = getattr(result, "budget_stopped", False)
        # only a BAD run of the production configuration says more culprits are left
        whole = ("they are not the whole answer" if seen is not None and not split
                 else "whether they are the whole answer is not known")
        if self.budget_spent and (cut or seen is None and not invalid):
            message = (f"The budget (--max-runs {self.opts.max_runs}) stopped the search: {state}. The culprits "
                       f"found so far are listed, but {whole}. Raise --max-runs and rerun the same command to "
                       f"resume.")
        elif cut and self.opts.max_runs is None:   # the engine's own cap (the noise-aware mode's, per culprit)
            message = (f"The search's own run budget stopped it: {state}. The culprits found so far are listed, "
                       f"but {whole}. {self._go_on_hint(capital=True)}.")
        elif seen is None:   # nothing judged the production configuration: nothing says more is left
            message = (f"The search ended with culprits named, but {state}: whether they are the whole answer is "
                       f"not known.")
        elif split:
            message = f"The search ended with culprits named, but {state}: {whole}."
        else:
            message = (f"The search ended with culprits named, but {state}: they are not the whole answer, and no "
                       f"further culprit could be isolated.")
        self.notes.append("the production switch file turns off the culprits found so far: a partial fix, "
                          + ("whose runs disagree" if split else "not sufficient (the job is still bad with it)"
                             if seen is not None else "not verified"))
        return dataclasses.replace(result, status="inconclusive", message=message)

    def _direction_known(self) -> bool:
        """True once the gates are behind the search (a run the plan does not ask for is knowledge then)."""
        return str((self._engine_progress() or {}).get("phase", "gates")) != "gates"

    def _sick_device(self) -> str | None:
        """A note when every run on one device was INVALID while the others' runs were judged: the device, not
        the configurations, is likelier at fault (its INVALID runs cost the search other splits); else None."""
        by_device: dict[str, list[TrialRecord]] = {}
        for r in self.records:
            if r.device is not None and r.outcome in (GOOD, BAD, INVALID):
                by_device.setdefault(str(r.device), []).append(r)
        if len(by_device) < 2:
            return None
        sick = [d for d, runs in by_device.items() if len(runs) >= 2 and all(r.outcome == INVALID for r in runs)]
        healthy = [d for d, runs in by_device.items() if all(r.outcome != INVALID for r in runs)]
        if len(sick) != 1 or not healthy:
            return None
        runs = by_device[sick[0]]
        return (f"every run on device {sick[0]} ({len(runs)}: run {', '.join(str(r.index) for r in runs)}) was "
                f"INVALID, and no run on device{'s' if len(healthy) > 1 else ''} {', '.join(healthy)} was: check "
                f"that device, or rerun without it "
                f"(--devices)")

    def _confounded(self, result) -> str | None:
        """A rule outside the candidates whose firing matches the verdicts (it fired in every judged BAD run and in
        no GOOD one, among runs that wrote what fired) explains them as well as the culprits named: switching a pass
        off can let another fuse the same pattern, or a pass may fire only sometimes. Returns the message saying
        so, or None. Needs two BAD and one GOOD run with that evidence."""
        judged = [r for r in self.records if r.outcome in (GOOD, BAD) and self._wrote_evidence(r.paths)]
        bad = [r for r in judged if r.outcome == BAD]
        good = [r for r in judged if r.outcome == GOOD]
        if len(bad) < 2 or not good:
            return None
        named = {rule for c in result.culprits for rule in c.rules}
        cands = set(self.candidates)
        fired = [{k for k, v in self.fired_in(r.paths).items() if getattr(v, "effect_times", 1) > 0} for r in bad]
        suspects = set.intersection(*fired) - cands - named
        for r in good:
            suspects -= set(self.fired_in(r.paths))
        if not suspects:
            return None
        rules = sorted(suspects)
        one = len(rules) == 1
        switchable = [r for r in rules if (rule := self.catalog.get(r)) is None or rule.can_disable]
        hint = (f" To test {'it' if len(switchable) == 1 else 'them'}, rerun with --fresh and --rules "
                f"{','.join([*self.candidates, *switchable])}." if switchable else
                " No switch file can turn it off." if one else " No switch file can turn them off.")
        return (f"But {_short(rules)}, not {'a candidate' if one else 'candidates'}, fired in every BAD run "
                f"({len(bad)}) and in no GOOD one ({len(good)}): {'it explains' if one else 'they explain'} the "
                f"verdicts as well as the culprits named (turning a pass off can let another fuse the same pattern, "
                f"and a pass may fire only sometimes).{hint}")

    def _divergence_outside(self) -> tuple[str, list[str]] | None:
        """(op, its rules) when the first divergence of the baseline's dumps is an op fused only by rules that are
        not candidates (cannot be switched off, or the job ignores their switch): every run, the reference
        included, had that op fused. None otherwise (or without dumps)."""
        event = self.dumps_event or {}
        names = list(event.get("divergence_rules") or [])
        if not names or set(names) & set(self.candidates):
            return None
        first = event.get("first_divergence") or {}
        op = str(first.get("op") or first.get("my_op") or "?")
        spec = self.judge.dumps
        if spec is not None:
            # an op whose inputs already differ from the reference's (if less than --cosine says) did not start
            # the divergence: a scalar output (a loss) crosses the threshold first while a tensor before it stays
            # above it
            clean = 1.0 - (1.0 - spec.cosine) / 10
            for row in event.get("rows") or []:
                if row.get("op") == op and ":input:" in str(row.get("tensor")):
                    cos = row.get("cosine")
                    if cos is not None and cos < clean:
                        return None
        return op, names

    def _fused_with_excluded(self, result) -> list[str]:
        """Excluded rules (forbidden-close, switch ignored) that fused the same ops as a culprit in the baseline's
        graph: always on, they may be what the culprit's fusion only makes visible."""
        base = self.baseline_record()
        if base is None:
            return []
        try:
            graph = oracles.trial_graph(base.paths)
        except Exception:   # no graph: nothing to tell
            return []
        if graph is None:
            return []
        excluded = {e["rule"] for e in self.excluded}
        culprits = {r for c in result.culprits for r in c.rules}
        found: list[str] = []
        for op in graph.ops:
            passes = set(op.fusion_passes)
            if passes & culprits:
                found += sorted(r for r in passes & excluded if r not in found)
        return found

    def _unchecked_references(self) -> tuple[list[TrialRecord], TrialRecord] | None:
        """(the judged all-off runs, the baseline) when none of those runs wrote a fusion_result.json or Build graph
        but the baseline did: nothing shows they read their switch file (a compile cache hit compiles nothing, so
        it writes neither); else None."""
        refs = [r for r in self.records if r.off == self.all_off and not r.on and r.outcome in (GOOD, BAD)]
        base = self.baseline_record()
        if not refs or base is None or not self._wrote_evidence(base.paths) or \
                any(self._wrote_evidence(r.paths) for r in refs):
            return None
        return refs, base

    def _switch_unchecked(self, what: str) -> str | None:
        """When the all-off runs' switch is unchecked (:meth:`_unchecked_references`), the verdict on them rests on
        it: the message saying so (``what``: what those runs showed), else None."""
        if (unchecked := self._unchecked_references()) is None:
            return None
        refs, base = unchecked
        return (f"With all {len(self.candidates)} candidate rules off {what}, but "
                f"{'that run' if len(refs) == 1 else 'those runs'} (run {', '.join(str(r.index) for r in refs)}) "
                f"wrote no fusion_result.json or Build graph, unlike the baseline (run {base.index}): the job did not "
                f"compile (a rule it needs was off?) or a compile cache skipped compiling, so whether the switch "
                f"took effect cannot be checked. Disable compile caches and rerun with --fresh.")

    def _all_off_fusions(self, judged: Callable[[TrialRecord], bool]) -> tuple[dict, dict, list[str]]:
        """(the rules that fired in the latest all-candidates-off run ``judged`` accepts, those that fired in the
        baseline, and the first's rules outside the candidates that did not fire in the baseline: turning a pass
        off can let another fuse the same pattern)."""
        refs = [r for r in self.records if r.off == self.all_off and not r.on and judged(r)]
        fired = self.fired_in(refs[-1].paths) if refs else {}
        base = self.baseline_record()
        before = self.fired_in(base.paths) if base is not None else {}
        cands = set(self.candidates)
        news = [r for r in fired if r not in cands and r not in before and getattr(fired[r], "effect_times", 1) > 0]
        return fired, before, news

    def _not_fusion(self, result):
        """All candidates off and still bad: say what that excludes, and no more. Rules that fired in that run
        without being candidates (switching a pass off can let another fuse the same pattern) leave the
        question open: the verdict is then inconclusive, naming them."""
        if noise := self._noise_beyond_tolerance(not_fusion=True):   # all-off bad against an all-off run: noise
            return dataclasses.replace(result, status="inconclusive", message=noise)
        if near := self._near_expect():   # all-off bad against --expect, by far less than the baseline
            return dataclasses.replace(result, status="inconclusive", message=near)
        unchecked = self._switch_unchecked("the symptom is still there")
        if unchecked:
            return dataclasses.replace(result, status="inconclusive", message=unchecked)
        fired, before, news = self._all_off_fusions(lambda r: r.outcome == BAD)
        cands = set(self.candidates)

        def locked(r: str) -> bool:   # a rule no switch file can turn off
            rule = self.catalog.get(r)
            return rule is not None and not rule.can_disable

        fixed = [r for r in news if locked(r)]
        outside = [r for r in fired if r not in cands and r not in fixed and getattr(fired[r], "effect_times", 1) > 0
                   and not locked(r)]
        ignored = self._switch_ignored()
        stuck = [r for r in outside if r in ignored]   # no switch file can turn these off: not worth a rerun
        outside = [r for r in outside if r not in ignored]
        n = len(self.candidates)
        what = (f"the {n} rules --rules named" if self.rule_names is not None else
                f"the {n} switchable rules that fired in the baseline" if before else
                f"the catalog's {n} switchable rules")
        if outside:
            new = [r for r in outside if r not in before]
            listed = ", ".join(f"{r} (only then)" if r in new else r for r in outside)
            message = (f"With all {n} candidate rules off the symptom is still there, but {len(outside)} rule"
                       f"{'s' if len(outside) > 1 else ''} outside the candidates fired in that run: {listed}"
                       + ("; turning a pass off can let another fuse the same pattern" if new else "")
                       + f". The cause may be {'among them' if len(outside) > 1 else 'that rule'}: to test "
                       f"{'them' if len(outside) > 1 else 'it'}, rerun with --fresh and "
                       f"--rules {','.join([*self.candidates, *outside])}")
            return dataclasses.replace(result, status="inconclusive", message=message)
        message = (f"With all {n} candidate rules off the symptom is still there, twice: turning off {what} does "
                   f"not fix it, so they are not the only cause: the job is bad without them (one of them may "
                   f"still be a second cause, or one bad while switched off, which these two runs cannot tell)")
        if stuck:
            return dataclasses.replace(result, status="inconclusive", message=(
                f"{message}. {_untestable(stuck, 'so no switch file can test {it} or turn {it} off')}"))
        if ignored:
            message += (f", nor can it be told for {_short(ignored)}, excluded because the job ignored "
                        f"{'its' if len(ignored) == 1 else 'their'} switch")
        if fixed:
            message += (f". {_short(fixed)}, which cannot be switched off, fired only in that run (turning a pass "
                        "off can let another fuse the same pattern)")
        always = [e["rule"] for e in self.excluded
                  if locked(e["rule"]) and e["rule"] in before and e["rule"] not in ignored and e["rule"] not in fixed]
        if always:
            message += (f". {_short(always)} fired in the baseline and cannot be switched off, so the cause may be "
                        f"{'that fusion' if len(always) == 1 else 'one of those fusions'}, which no switch file can "
                        f"remove")
        return dataclasses.replace(result, message=message + ".")

    def _relative_only(self) -> bool:
        """True when GOOD means only "same as the reference run": --metric without --expect and/or --dumps, no
        --check and no --expect to say what a good run is."""
        j = self.judge
        return j.needs_reference and j.check is None and (j.metric is None or j.metric.expect is None)

    def _go_on_hint(self, *, capital: bool = False) -> str:
        """How to let a search its own run budget stopped go on."""
        return (f"{'R' if capital else 'r'}erun the same command with --max-runs above {self.executed} to let it go "
                f"on (it resumes from the journal)")

    def _not_reproduced_message(self) -> str:
        """A baseline that matches the reference, under a relative oracle: the job may still be broken by
        something the candidates do not hold."""
        oracle = "--dumps" if self.judge.dumps is not None else "--metric without --expect"
        if self.judge.dumps is not None and self.judge.metric is not None:
            oracle = "--metric without --expect and --dumps"
        runs = sum(1 for r in self.records if not r.off and not r.on and r.role != "verify" and r.outcome == GOOD)
        outside = [f"a rule --rules did not name (it named {len(self.rule_names)})"] if self.rule_names else []
        forbidden = [e["rule"] for e in self.excluded if str(e.get("reason", "")).startswith("cannot be disabled")]
        others = [e["rule"] for e in self.excluded if e["rule"] not in forbidden]
        outside.append(f"one of the {len(forbidden)} passes that cannot be switched off ({_short(forbidden)})"
                       if forbidden else "a pass that cannot be switched off")
        if others:
            outside.append(f"one of the {len(others)} other excluded rules ({_short(others)})")
        outside.append("something other than fusion that the reference run shares")
        good = self._expect_hint()
        # a pass outside the candidates that fused only with them off: the reference may be broken its own way
        news = self._all_off_fusions(lambda r: r.outcome != INVALID)[2]
        if news:
            them = "it" if len(news) == 1 else "them"
            return (f"The baseline (default configuration) matches the all-candidates-off reference run"
                    f"{f' ({runs} runs)' if runs > 1 else ''}, but {len(news)} rule"
                    f"{'s' if len(news) > 1 else ''} outside the candidates fired in that reference run only: "
                    f"{_short(news)} (turning a pass off can let another fuse the same pattern). Under {oracle}, "
                    f"good only means \"same as that reference\", which may be broken by {them}: to test {them}, "
                    f"rerun with --fresh and --rules {','.join([*self.candidates, *news])}, or say what a good run "
                    f"is: {good} (the value a good run reaches) or --check CMD.")
        return (f"The baseline (default configuration) matches the all-candidates-off reference run"
                f"{f' ({runs} runs)' if runs > 1 else ''}. Under {oracle}, good only means \"same as that "
                f"reference\": either the job is fine, or the cause is outside the {len(self.candidates)} "
                f"candidates: {', '.join(outside[:-1])} or {outside[-1]}. To tell, say what a good run is: {good} "
                f"(the value a good run reaches) or --check CMD.")

    def _expect_hint(self) -> str:
        """How to say what a good run is with --expect, given the options in use (it tunes --metric, and not
        its curve mode)."""
        if self.judge.metric is None:
            return "--metric REGEX --expect VALUE"
        return "--metric-mode last --expect VALUE" if self.opts.metric_mode == "curve" else "--expect VALUE"

    def _production(self, result) -> tuple[Path, TrialRecord | None]:
        """Write the production switch file to --output (keeping a .bak of a foreign file) and verify it."""
        from fusebisect.rules.switchfile import next_backup_path, render_switch, write_switch_file

        off, on, cfg = self.production_config(result)
        # a noisy job's one GOOD run of a narrower file proves little: only a deterministic search narrows it
        fewer = self._fewer_off(result) if not on and not self._noisy_search else None
        if fewer is not None:
            # one more verification run, when the budget allows it, for a file that keeps those fusions on (a
            # rerun finds that run in the journal, whatever its outcome, and never runs it again)
            seen = self.observed(fewer[0]) or self._final_run(fewer[0])
            budget = not (self.budget_left() is not None and self.budget_left() < 1)
            if seen is None and self.opts.verify and not budget:
                self.notes.append(f"a production file keeping {', '.join(fewer[1])} on was not tried: the budget "
                                  f"(--max-runs {self.opts.max_runs}) is spent; raise it and rerun to try it")
            if seen is None and self.opts.verify and budget:
                self.progress.log(f"verifying a production file that keeps {', '.join(fewer[1])} on")
                seen = self.run_one(fewer[0], "verify", final=True)
            if seen is not None and seen.outcome == GOOD:
                self.production_off = fewer[0]
                off, on, cfg = self.production_config(result)
                self.notes.append(f"the production switch file keeps {', '.join(fewer[1])} on: "
                                  f"{', '.join(fewer[2])} fired only with {'it' if len(fewer[1]) == 1 else 'them'} "
                                  f"on, and run {seen.index} with only {', '.join(fewer[2])} off was GOOD")
            elif seen is not None:
                self.notes.append(f"keeping {', '.join(fewer[1])} on was not enough (run {seen.index} "
                                  f"{seen.outcome.upper()}): the production switch file turns off the whole set")
                if seen.outcome == BAD:
                    self._set_contradicted = (seen, fewer)
        target = Path(self.opts.output) if self.opts.output else self.workdir / "fusion_switch.cfg"
        target = target.absolute()
        if target.exists() and not target.is_dir():
            try:
                same = target.read_text(encoding="utf-8") == render_switch(cfg)
            except (OSError, UnicodeDecodeError):
                same = False
            previous = previous_production(self.workdir)
            if not same and previous is not None and previous[1] is False and \
                    real_path(previous[0]) == real_path(target):
                # this run wrote it before (a rerun of a finished command) and another run (or an edit) has
                # replaced it since: putting the older file back would undo that
                self.notes.append(f"{target} changed since this run wrote it (another run's production file, or an "
                                  f"edit): left as it is; rerun with -o PATH to write this run's file elsewhere")
            elif not same:
                backup = next_backup_path(target)
                write_switch_file(target, cfg, force=True)  # keeps the old file as `backup`
                self.notes.append(f"the previous {target.name} was kept as {backup.name}")
        else:
            write_switch_file(target, cfg)
        self._production_sha256 = hashlib.sha256(render_switch(cfg).encode("utf-8")).hexdigest()
        verify = None
        if not self.opts.verify:   # --no-verify runs nothing more, but a run of that file the journal has counts
            verify = self.observed(off, on) or self._final_run(off, on)
        if self.opts.verify:
            # the engine's last step ("culprits off, everything else on: anything left?") is this very
            # configuration; a judged run of it is the verification, never rerun. A culprit that is bad while
            # turned off is set explicitly on, a configuration no search run had: it gets its own run, within
            # the budget (--max-runs counts it).
            verify = self.observed(off, on)
            if verify is not None and off == self.all_off and not on and (
                    len(self.candidates) > 1 or self._flaky_search or self.opts.repeat > 1):
                # every candidate named: the production file is the reference's configuration, judged at the
                # start (GOOD by definition under a relative oracle). A job that started failing for another
                # reason (a lost device, a missing file) looks like this: run it again (once: a rerun finds it).
                # A single candidate of a deterministic job is named by the gates themselves, no later run: its
                # reference run stands (a noisy job's fix gets a run of its own, as any other).
                self.notes.append("every candidate rule was named a culprit: the all-off configuration is run "
                                  "again to check the job did not start failing for another reason")
                verify = None
            verify = verify or self._final_run(off, on)   # a final run of it already made, even INVALID
            # a run of it whose switch did not take effect (or that compiled nothing: a cache hit) would not take
            # effect again: no duplicate run
            verify = verify or next((r for r in reversed(self.records) if r.off == off and r.on == on
                                     and r.outcome == INVALID and (r.ignored or r.reason == UNCHECKED)), None)
            if verify is None and self.budget_spent:
                self.notes.append(f"no run to verify the production switch file: the budget (--max-runs "
                                  f"{self.opts.max_runs}) is spent")
                return target, None
            if verify is None:
                self.progress.log("verifying the production switch file with one more run")
                verify = self.run_one(off, "verify", on, final=True)
            if verify.outcome != GOOD:
                self.notes.append(f"the verification run with the production switch file was "
                                  f"{verify.outcome.upper()}" + (f" ({verify.reason})" if verify.reason else ""))
        return target, verify


def _moved_together(start: dict, here: str, workdir: Path) -> bool:
    """True when the directory the run began in and its workdir inside it were moved (or copied) together: the
    workdir sits where it sat relative to that directory."""
    began, cwd = start.get("workdir"), start.get("cwd")
    if not isinstance(began, str) or not isinstance(cwd, str):
        return False
    return moved_run_dir(began, cwd, Path(workdir).absolute()) == Path(here)


def _jsonable(obj):
    return json.loads(json.dumps(obj, default=str))


def _describe_difference(start: dict, opts: RunOptions) -> str:
    if start.get("command") != list(opts.command):
        return f"command was {' '.join(start.get('command') or [])!r}"
    old = start.get("options") or {}
    new = _jsonable(opts.verdict_options())
    keys = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    return ", ".join(f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in keys) or "options differ"
