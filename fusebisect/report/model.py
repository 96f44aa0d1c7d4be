"""The view of one ``fusebisect run`` that every renderer shares, folded from its journal records.

Journal records (``WORKDIR/journal.jsonl``, one JSON object per line) are ``start``, ``trial``, ``verdict`` (a
run judged after it was journaled: a baseline once the reference ran), ``prior``, ``exclude``, ``dumps`` and
``result`` events. A run that was interrupted has no ``result`` yet: the view still shows what
was learned so far.
"""

from __future__ import annotations

import functools
import glob
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fusebisect.errors import FusebisectError
from fusebisect.runner.journal import (JOURNAL_NAME, Journal, decode_float, moved_run_dir, production_digest,
                                      workdir_holder)


@dataclass
class TrialView:
    """One execution of the user's command."""

    number: int  # 1-based execution index (journal order when the record has none)
    role: str  # reference | baseline | search | confirm | verify | repeat
    off: list[str]  # candidate rules turned off
    outcome: str  # good | bad | invalid | unknown
    metric: float | None
    curve: list[float]
    seconds: float
    reason: str
    ignored: list[str]  # rules the config turned off that still fired ("switch ignored")
    switch_file: str | None
    trial_dir: str | None
    on: list[str] = field(default_factory=list)  # rules the config forced on (a rule bad while off, kept on)


def trial_note(t: TrialView) -> str:
    """The note of an execution row: its reason, the rules whose switch it ignored, and the rules it forced on
    (a rule bad while off, kept on: "0 rules off" alone would read as the default configuration)."""
    ignored = f"switch ignored: {', '.join(t.ignored)}"
    note = t.reason + (f" ({ignored})" if t.ignored and ignored not in t.reason else "")
    if t.on:
        note = f"forced on: {', '.join(t.on)}" + (f"; {note}" if note else "")
    return note


@dataclass
class RunView:
    """Everything a report shows about a run."""

    command: list[str] = field(default_factory=list)
    cwd: str | None = None   # the directory the runs had (journals before it was recorded: None)
    candidates: list[str] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    workers: int = 1   # the --jobs of the run that began the journal
    trials: list[TrialView] = field(default_factory=list)
    priors: list[list[str]] = field(default_factory=list)
    excluded: list[dict[str, Any]] = field(default_factory=list)  # {rule, reason}: rules kept out of the search
    unjudged: list[dict[str, Any]] = field(default_factory=list)  # {index, trial_dir}: started, never judged
    dumps: dict[str, Any] | None = None  # rows with cosine per tensor + first_divergence
    result: dict[str, Any] | None = None  # the run JSON, absent while the run is unfinished
    holder: str | None = None  # the pid of the fusebisect run still working in the workdir, if one is
    began_in: str | None = None  # the workdir's path when the journal began (it may have moved since)

    @property
    def repeat(self) -> int:
        """The run's --repeat (runs per configuration), 1 when the start record has none."""
        return _count(self.options.get("repeat"))

    @property
    def status(self) -> str:
        """``found``/``not_reproduced``/``not_fusion``/``inconclusive``, or ``running`` when unfinished."""
        return self.result.get("status", "unknown") if self.result else "running"

    def trial_with_role(self, role: str) -> TrialView | None:
        """The last execution with ``role`` (e.g. the final ``verify`` run), or None."""
        found = [t for t in self.trials if t.role == role]
        return found[-1] if found else None


@functools.cache
def _result_validator():
    """The validator of the run JSON's schema (``data/run_result.schema.json``: the documented --json fields),
    built once."""
    import importlib.resources
    import json

    import jsonschema

    text = importlib.resources.files("fusebisect").joinpath("data/run_result.schema.json").read_text("utf-8")
    return jsonschema.Draft202012Validator(json.loads(text))


def _result_error(result: dict[str, Any]) -> str | None:
    """What makes a journal's result record unlike the run JSON the reports read (the first error), or None."""
    error = next(iter(sorted(_result_validator().iter_errors(result), key=lambda e: list(map(str, e.path)))), None)
    if error is None:
        return None
    where = ".".join(str(p) for p in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


def _count(value: Any) -> int:
    """A start record's --jobs or --repeat: a whole number of at least 1, else 1 (absent, or a hand edit)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 1 else 1


def _excluded(entry: Any) -> dict[str, Any]:
    """A start record's excluded entry ({rule, reason}); raises TypeError for anything else (a hand edit)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("rule"), str):
        raise TypeError(f"an excluded entry is not {{rule, reason}}: {entry!r}")
    return entry


def _rule_list(value: Any, what: str) -> list[str]:
    """A record's list of rule names ([] when absent); raises TypeError for anything else (a hand edit: a string
    would be read as its letters)."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"{what} is not a list of rule names: {str(value)[:60]!r}")
    return value


def _trial_index(rec: dict[str, Any]) -> int:
    """A trial record's run number; raises TypeError when it has none (a hand edit)."""
    index = rec.get("index")
    if isinstance(index, bool) or not isinstance(index, int) or index < 1:
        raise TypeError(f"a trial record has no run number (index {index!r})")
    return index


def view_from_records(records: list[dict[str, Any]]) -> RunView:
    """Fold journal records into a :class:`RunView`. Unknown events are ignored (newer journals)."""
    view = RunView()
    for rec in records:
        event = rec.get("event")
        if event == "start":
            view.began_in = rec.get("workdir")
            view.command = list(rec.get("command") or [])
            view.cwd = rec.get("cwd") if isinstance(rec.get("cwd"), str) else None
            view.candidates = list(_rule_list(rec.get("candidates"), "the start record's candidates"))
            view.options = dict(rec.get("options") or {})
            view.workers = _count(rec.get("workers"))
            view.excluded = [_excluded(e) for e in rec.get("excluded") or []]
        elif event == "exclude":   # dropped from the candidates during the run (switch ignored), as run does
            dropped = _rule_list(rec.get("rules"), "an exclude record's rules")
            view.excluded += [{"rule": r, "reason": rec.get("reason") or ""} for r in dropped]
            view.candidates = [c for c in view.candidates if c not in dropped]
        elif event == "candidates":
            view.candidates = list(_rule_list(rec.get("candidates"), "a candidates record's candidates"))
        elif event == "trial":
            view.result = None   # a run resumed after its result (a raised --max-runs): not finished again yet
            view.trials.append(TrialView(
                number=_trial_index(rec),
                role=str(rec.get("role") or "search"),
                off=sorted(_rule_list(rec.get("off"), "a trial record's off")),
                outcome=str(rec.get("outcome") or "unknown"),
                metric=decode_float(rec.get("metric")),
                curve=[decode_float(v) for v in (rec.get("curve") or []) if v is not None],
                seconds=float(rec.get("seconds") or 0.0),
                reason=str(rec.get("reason") or ""),
                ignored=list(_rule_list(rec.get("ignored"), "a trial record's ignored")),
                switch_file=rec.get("switch_file"),
                trial_dir=rec.get("trial_dir"),
                on=sorted(_rule_list(rec.get("on"), "a trial record's on")),
            ))
        elif event == "verdict":  # a run judged after the fact (a baseline, once the reference ran)
            for t in view.trials:
                if t.number == rec.get("index"):
                    t.outcome, t.reason = str(rec.get("outcome") or t.outcome), str(rec.get("reason") or "")
        elif event == "prior":
            view.priors.append(list(_rule_list(rec.get("rules"), "a prior record's rules")))
        elif event == "dumps":
            view.dumps = {k: v for k, v in rec.items() if k != "event"}
            if not isinstance(view.dumps.get("rows") or [], list) or not all(
                    isinstance(r, dict) for r in view.dumps.get("rows") or []):
                raise TypeError("a dumps record's rows are not a list of objects")
            if not isinstance(view.dumps.get("first_divergence") or {}, dict):
                raise TypeError("a dumps record's first_divergence is not an object")
        elif event == "result":
            view.result = {k: v for k, v in rec.items() if k != "event"}
    if view.result:
        # verdicts settled after the fact (a baseline judged once the reference ran) live in the result
        final = {t.get("index"): t for t in view.result.get("trials") or [] if isinstance(t, dict)}
        for t in view.trials:
            settled = final.get(t.number)
            if settled and settled.get("outcome"):
                t.outcome = str(settled["outcome"])
                t.reason = str(settled.get("reason") or "")
    return view


def load_run_view(workdir: str | Path) -> RunView:
    """Read ``WORKDIR/journal.jsonl`` into a :class:`RunView`.

    Raises FusebisectError when the directory holds no journal (not a fusebisect workdir)."""
    workdir = Path(workdir)
    if not workdir.is_dir():
        from fusebisect.fsutil import missing_reason

        why = "not a directory" if workdir.exists() else missing_reason(workdir)
        raise FusebisectError(f"{why} (give the --workdir of a fusebisect run)", path=workdir)
    journal = Journal(workdir / JOURNAL_NAME)
    records = journal.load()
    holder = workdir_holder(workdir)
    if not records:
        if holder is not None:
            raise FusebisectError(f"no {JOURNAL_NAME} yet: a run (pid {holder}) is in its first execution; report "
                                  "again once it has judged one", path=workdir)
        if (workdir / "trials").is_dir():   # the runner made its dirs, and was stopped before it journaled a run
            raise FusebisectError(f"no {JOURNAL_NAME} yet: the run was stopped before its first execution ended, "
                                  "so there is nothing to report; rerun the same command", path=workdir)
        if (workdir / JOURNAL_NAME).is_file():
            raise FusebisectError(f"{JOURNAL_NAME} holds no complete record (empty, or its first line cut short): "
                                  "there is nothing to report; rerun the same command "
                                  "or move it aside", path=workdir)
        raise FusebisectError(f"no {JOURNAL_NAME} here: not the workdir of a fusebisect run", path=workdir)
    from fusebisect.runner.journal import VERSION
    from fusebisect.runner.result import unjudged_runs

    start = records[0]
    if start.get("event") != "start":   # as run refuses it: what the report would show has no command, no options
        raise FusebisectError("the first record is not a start record: not a journal run writes (fix or move it "
                              "aside)", path=workdir / JOURNAL_NAME)
    if start.get("version") != VERSION:
        raise FusebisectError(f"journal version {start.get('version')!r} is not {VERSION}, the one this version "
                              "reads", path=workdir / JOURNAL_NAME)
    try:
        view = view_from_records(records)
    except (TypeError, ValueError, AttributeError) as exc:   # a hand-edited field of the wrong type
        raise FusebisectError(f"a record has a field of the wrong type ({exc}); fix or move the journal aside "
                              f"(--fresh)", path=workdir / JOURNAL_NAME) from None
    if view.result is not None and (error := _result_error(view.result)):
        raise FusebisectError(f"its result record is not a run result as this version writes it ({error}); rerun "
                              "the same command to write it again, or move the journal aside (--fresh)",
                              path=workdir / JOURNAL_NAME)
    _rebase(view, workdir.absolute())
    _own_production(view, workdir.absolute())
    view.unjudged = unjudged_runs(workdir, [t.number for t in view.trials],
                                  [int(ev.get("index") or 0) for ev in records if ev.get("event") == "executed"])
    view.holder = holder
    last = max((t.number for t in view.trials), default=0)
    if holder is not None or any(u["index"] > last for u in view.unjudged):
        # a run going on in the workdir, or one cut in an execution after the last judged: the result journaled
        # earlier (a --max-runs stop, then a resume) is not its answer
        view.result = None
    return view


def _rebase(view: RunView, workdir: Path) -> None:
    """A workdir moved or renamed since its runs were journaled (absolute paths): its paths (trial dirs, switch
    files, repro dirs, the journal, a production file inside it) are shown where they are now."""
    olds = {Path(view.began_in)} if view.began_in else set()
    olds |= {Path(t.trial_dir).parent.parent for t in view.trials
             if t.trial_dir and Path(t.trial_dir).parent.name == "trials"}
    moves = sorted(((str(o), str(workdir)) for o in olds if o != workdir), key=lambda m: len(m[0]), reverse=True)
    cwd = _moved_cwd(view, workdir)
    if cwd is not None:   # the directory the run began in moved with the workdir inside it (a repro's env -C)
        moves.append((view.cwd, str(cwd)))
        view.cwd = str(cwd)
    if not moves:
        return

    def here(value):
        if isinstance(value, str):
            key, eq, path = value.partition("=")   # a repro command's VAR=PATH
            head, tail = (key + eq, path) if eq and not key.startswith(os.sep) else ("", value)
            for old, new in moves:
                if tail == old or tail.startswith(old + os.sep):
                    return head + new + tail[len(old):]
            return value
        if isinstance(value, list):
            return [here(v) for v in value]
        if isinstance(value, dict):
            return {k: here(v) for k, v in value.items()}
        return value

    for t in view.trials:
        t.trial_dir, t.switch_file = here(t.trial_dir), here(t.switch_file)
    if view.result is not None:
        view.result = here(view.result)
    view.command = here(list(view.command))   # as the repro commands name it: a script that moved with the run


def _moved_cwd(view: RunView, workdir: Path) -> Path | None:
    """Where the directory the run began in is now, when the workdir inside it moved with it (the workdir sits
    where it sat relative to it); None when it did not move, or the workdir was not inside it."""
    if not view.cwd or not view.began_in or Path(view.began_in) == workdir:
        return None
    moved = moved_run_dir(view.began_in, view.cwd, workdir)
    return moved if moved is not None and str(moved) != view.cwd else None


def _holds(candidate: Path, digest: str) -> bool:
    try:
        return candidate.is_file() and production_digest(candidate) == digest
    except OSError:
        return False


def _own_production(view: RunView, workdir: Path) -> None:
    """The production file shown is the one holding what this run wrote (result.json keeps its digest): when its
    path now holds another file (a later run with the same -o, an edit), the copy set aside by --fresh
    (WORKDIR/outside/NAME) or the backup a later run kept (NAME.bak, NAME.bak.N), with a note; when none holds
    it, a note says the file changed, and its content is not shown."""
    result = view.result or {}
    path, digest = result.get("switch_file"), result.get("switch_file_sha256")
    if not path or not digest or _holds(Path(path), digest):
        return
    where = Path(path)
    kept = [workdir / "outside" / where.name] if not where.is_relative_to(workdir) else []
    kept += sorted(where.parent.glob(glob.escape(where.name) + ".bak*"))
    own = next((k for k in kept if _holds(k, digest)), None)
    note = (f"{where} no longer holds the switch file this run wrote (a later run's, or edited): this run's is "
            f"{own}" if own is not None else
            f"{where} no longer holds the switch file this run wrote (a later run's, or edited), and no copy of it "
            "was found: its content is not shown")
    view.result = {**result, "switch_file": str(own) if own is not None else path,
                   "notes": [*(result.get("notes") or []), note]}


def production_cfg_text(view: RunView) -> str | None:
    """The text of the production fusion_switch.cfg the run wrote, if it is still there (holding what it wrote,
    when the run recorded its digest)."""
    result = view.result or {}
    path, digest = result.get("switch_file"), result.get("switch_file_sha256")
    if not path or (digest and not _holds(Path(path), digest)):
        return None
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError:
        return None


def production_cfg_title(view: RunView) -> str:
    """The heading of the production switch file: a partial fix when the run did not end ``found``."""
    if view.status == "found":
        return "Production fusion_switch.cfg"
    if ((view.result or {}).get("verify") or {}).get("outcome") == "good":
        return "fusion_switch.cfg (the culprits named off; a final run was GOOD, but the verdict is inconclusive)"
    return "Partial fusion_switch.cfg (the culprits found so far off; not a verified fix)"


def culprit_rows(view: RunView, catalog=None) -> list[tuple]:
    """One row per culprit rule: (rule, kind, confidence, direction, fused ops, catalog description); values
    the run or the catalog does not know are None."""
    rows = []
    for c in (view.result or {}).get("culprits") or []:
        for rule in c.get("rules") or []:
            entry = catalog.get(rule) if catalog is not None else None
            rows.append((rule, entry.kind if entry else None, c.get("confidence"),
                         "bad while on" if c.get("direction", "on") == "on" else "bad while off",
                         ", ".join(c.get("fused_ops") or []) or None,
                         entry.description if entry and entry.description else None))
    return rows


DIVERGENCE_HEADERS = ("first divergent op", "tensor", "cosine", "max abs error", "graph-fusion passes", "UB pass",
                      "original ops")


def divergence_row(first: dict) -> list[str]:
    """The dump comparison's first divergence as one table row (:data:`DIVERGENCE_HEADERS`; '-' for nothing),
    for the HTML and the Markdown report alike."""
    from fusebisect.textutil import fmt_metric

    return [str(first.get("op") or "-"), str(first.get("tensor") or "-"), fmt_metric(first.get("cosine")),
            fmt_metric(first.get("max_abs_error")), ", ".join(first.get("pass_names") or []) or "-",
            first.get("ub_pass_name") or "-", ", ".join(first.get("ground_truth") or []) or "-"]


def divergence_origin(first: dict) -> str | None:
    """Under the first-divergence row, when that tensor is an op's input: where it comes from (the passes and ops
    in the row are the producer's), as compare says it; None for an output."""
    from fusebisect.compare.engine import origin_text

    return origin_text(first, "in the row")


def fmt_confidence(value: Any) -> str:
    """A culprit's confidence as every report shows it: 3 decimals ('1.000'), '-' when there is none."""
    return f"{value:.3f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "-"


def command_line(view: RunView) -> str:
    """The run's command as a shell line, in the directory its runs had (``cd DIR && CMD``) when journaled."""
    import shlex

    line = " ".join(shlex.quote(str(a)) for a in view.command)
    return f"cd {shlex.quote(view.cwd)} && {line}" if view.cwd else line


def execution_facts(view: RunView) -> tuple[str, str]:
    """("N executions (run-count target B)", "C candidate rules") for the report headers; the target is put as
    the verdict's message puts it (:func:`fusebisect.search.model.target_text`: --jobs and --repeat)."""
    result = view.result or {}
    executions = result.get("executions", len(view.trials))
    bound = result.get("bound") if result.get("culprits") else None   # (the target of the culprit sets found)
    from fusebisect.runner.result import unjudged_text
    from fusebisect.search.model import target_text

    gaps = unjudged_text(view.unjudged, view.holder is not None)
    target = target_text(bound, view.workers, view.repeat) if bound else ""
    return (f"{executions} executions" + (f" (run-count target {target})" if bound else "")
            + (f"; {gaps}" if gaps else ""), f"{len(view.candidates)} candidate rules")


def unfinished_text(view: RunView) -> str:
    """What the report of a run without a result says about it: still going (its workdir's lock is held), or
    interrupted, with the directory to resume it from (the one its runs had)."""
    if view.holder is not None:
        return f"{still_going(view.holder)}."
    rerun = f"rerun the same command{f' in {view.cwd}' if view.cwd else ''} to resume."   # (another dir is refused)
    if view.unjudged and all(u.get("job_finished") for u in view.unjudged):
        return f"stopped while a --check ran (it exited outside 0-127, or was interrupted): {rerun}"
    return f"interrupted: {rerun}"


def still_going(holder: str) -> str:
    """What a report says of a run whose process (``holder``, its pid) still holds the workdir."""
    return f"the run is still going (pid {holder}): report again when it has finished"
