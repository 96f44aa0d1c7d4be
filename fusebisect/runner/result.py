"""The outcome of a run, for machines (the run JSON) and people (the report on stdout).

Run JSON (contract): ``status``, ``culprits`` (rules, confidence, direction, fused_ops), ``executions``,
``candidates``, ``switch_file``, ``bound``, ``trials`` (config_off, outcome, metric, seconds, role), ``repro``
(good/bad argv), ``excluded`` (rule, reason); plus ``message``, ``candidate_rules``, ``verify``, ``journal``.
"""

from __future__ import annotations

import math
import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from fusebisect.runner.trial import TrialPaths, numbered_trial_dirs, substitute, trial_env
from fusebisect.search.model import target_text
from fusebisect.textutil import fmt_number

if TYPE_CHECKING:  # pragma: no cover
    from fusebisect.runner.session import Session, TrialRecord


def fused_ops_of(graph, rule: str) -> list[str]:
    """Names of the ops in ``graph`` whose pass_names or ub_pass_name include ``rule`` (graph order)."""
    if graph is None:
        return []
    return [op.name for op in graph.ops if rule in (op.pass_names or []) or op.ub_pass_name == rule]


def repro_argv(session: "Session", off: frozenset[str], side: str, device: str | None = None) -> list[str]:
    """The exact command reproducing one side of the boundary: ``env -C CWD VAR=... CMD`` with the trial contract's
    variables for the trial dir WORKDIR/repro/SIDE, which is created (with its dump/ and graph/) so that the
    command runs as given; ``device``: the ASCEND_RT_VISIBLE_DEVICES of the run it reproduces (--jobs,
    --devices)."""
    sw = session.switch_file(off)
    paths = TrialPaths(trial_dir=session.workdir / "repro" / side, switch_file=sw)
    for d in (paths.trial_dir, paths.dump_dir, *([paths.graph_dir] if session.opts.graph_dump else [])):
        d.mkdir(parents=True, exist_ok=True)
    env = trial_env({}, paths, graph_dump=session.opts.graph_dump, device=device)
    argv = substitute(session.opts.command, paths)
    if "=" in argv[0]:   # env would read "./lr=0.1/train.sh" as one more assignment: run it through exec
        argv = ["sh", "-c", 'exec "$@"', "sh", *argv]
    # in the directory the runs had (a relative ./train.sh, relative arguments), wherever it is pasted
    return ["env", "-C", str(session.run_dir), *(f"{k}={v}" for k, v in env.items()), *argv]


def dependencies(session: "Session", rules: list[str]) -> dict[str, list[str]]:
    """For an interaction set: {member: [members it fired only with]}, from the runs' fired-rule evidence. A
    member that never fired in a run with another member off (and did fire with it on) needs that one's fusion
    to take effect, like a pass fusing what another pass built: the pair is then a dependency, and turning the
    dependent member off alone may be enough."""
    fired = {rec.index: session.fired_in(rec.paths) for rec in session.records if rec.outcome in ("good", "bad")}
    out: dict[str, list[str]] = {}
    for m in rules:
        needs = []
        for p in rules:
            if p == m:
                continue
            without = [fired[r.index] for r in session.records if r.index in fired and fired[r.index]
                       and p in r.off and m not in r.off]
            with_p = [fired[r.index] for r in session.records if r.index in fired and fired[r.index]
                      and p not in r.off and m not in r.off]
            if without and not any(m in f for f in without) and any(m in f for f in with_p):
                needs.append(p)
        if needs:
            out[m] = needs
    return out


def json_metric(value: float | None):
    """A metric for the run JSON: a number, None when none was read, or "nan"/"inf"/"-inf" (JSON has none)."""
    if value is None:
        return None
    return value if math.isfinite(value) else str(value)


def trial_row(rec: "TrialRecord") -> dict[str, Any]:
    """One entry of the run JSON's ``trials`` list."""
    return {"index": rec.index, "config_off": sorted(rec.off), "outcome": rec.outcome,
            "metric": json_metric(rec.measurement.metric), "seconds": round(rec.measurement.seconds, 3),
            "role": rec.role, "key": rec.key, "reason": rec.reason, "exit_code": rec.measurement.exit_code,
            "trial_dir": str(rec.paths.trial_dir), **({"config_on": sorted(rec.on)} if rec.on else {}),
            **({"final": True} if rec.final else {})}


def unjudged_runs(workdir: Path, judged: Sequence[int], finished: Sequence[int] = ()) -> list[dict[str, Any]]:
    """The runs that started (their trial dir is kept) but have no verdict: interrupted (Ctrl-C, SIGTERM, kill -9)
    before they ended, or still running, or stopped by their --check. Their numbers are the gaps in the trials'
    numbering; they do not count in ``executions``. ``finished``: the runs whose job ran to its end before the
    check was stopped (journal ``executed`` events; ``job_finished`` true: a resume checks them again)."""
    done, ended = set(judged), set(finished)
    trials = Path(workdir).absolute() / "trials"   # absolute, like trials[].trial_dir
    return [{"index": i, "trial_dir": str(path), **({"job_finished": True} if i in ended else {})}
            for i, path in numbered_trial_dirs(trials).items() if i not in done]


def unjudged_text(unjudged: Sequence[dict], running: bool) -> str:
    """"not counted: run N, started but not judged (why)" for the reports; '' when there is none."""
    if not unjudged:
        return ""
    numbers = ", ".join(str(u.get("index")) for u in unjudged)
    if all(u.get("job_finished") for u in unjudged) and not running:
        why = ("its job finished but its --check was stopped; the resume checks it again, without running the job"
               if len(unjudged) == 1 else
               "their jobs finished but their checks were stopped; the resume checks them again, without running "
               "the jobs")
    else:
        why = "still running, or interrupted" if running else "interrupted"
    return f"not counted: run{'' if len(unjudged) == 1 else 's'} {numbers}, started but not judged ({why})"


def restate_runs(message: str, said: int, searched: int, final: int) -> str:
    """The engine's message counts the runs it observed (``said``); restate it with the session's count of the
    search's runs, plus the final verification runs, which come after the search, so that it agrees with the
    run JSON's ``executions`` (= searched + final)."""
    new = f"{searched} runs" + (f" + {final} verification" if final else "")
    restated, n = re.subn(rf"\b{said} runs\b", new, message, count=1)
    return restated if n else message + (f" (+{final} verification run)" if final else "")


def build_run_json(session: "Session", result, switch_path: Path | None, verify: "TrialRecord | None") -> dict:
    """Return the run JSON of a finished session (``result`` is the engine's SearchResult, or None)."""
    from fusebisect.runner import oracles
    from fusebisect.runner.oracles import BAD, GOOD

    status = result.status if result is not None else "inconclusive"
    graph = None
    base = session.baseline_record()
    culprits = []
    if result is not None and result.culprits:
        if base is not None:
            try:
                graph = oracles.trial_graph(base.paths)
            except Exception as exc:  # the report still stands without fused-op names
                session.notes.append(f"cannot read the baseline graph: {exc}")
        for c in result.culprits:
            ops: list[str] = []
            for rule in c.rules:
                ops.extend(o for o in fused_ops_of(graph, rule) if o not in ops)
            entry = {"rules": list(c.rules), "confidence": round(float(c.confidence), 4),
                     "direction": getattr(c, "direction", "on"), "fused_ops": ops}
            # (always there, as the documented schema has it: {} for a single rule or the reverse direction)
            entry["depends_on"] = (dependencies(session, list(c.rules))
                                   if len(c.rules) > 1 and entry["direction"] == "on" else {})
            culprits.append(entry)
    repro = None
    if result is not None and result.boundary is not None:
        # each side only when that configuration was observed so: a GOOD side that was never seen GOOD (the
        # budget stopped the search, or the job is still bad with the culprits off) would mislead
        repro = {}
        for side, off, outcome in (("good", result.boundary[0], GOOD), ("bad", result.boundary[1], BAD)):
            seen = session.observed(frozenset(off))
            if (side == "good" and (seen is None or seen.outcome != GOOD) and verify is not None
                    and verify.outcome == GOOD and not verify.on):
                # the boundary's good side was only inferred (a parallel search need not run it): the verified
                # production configuration is a good side that was run
                off, seen = verify.off, verify
            repro[side] = (repro_argv(session, frozenset(off), side, seen.device) if seen and seen.outcome == outcome
                           else None)
    ignored = sorted({r for rec in session.records for r in rec.ignored})
    final = sum(1 for rec in session.records if rec.final)
    message = "the search stopped without a verdict" if result is None else \
        restate_runs(result.message, result.executions, session.executed - final, final)
    return {
        "status": status,
        "message": message,
        "culprits": culprits,
        "executions": session.executed,
        "engine_executions": result.executions if result is not None else None,
        # the target for the culprit sets found: none found, no target (the JSON would read as one for k = 1)
        "bound": result.bound if result is not None and culprits else None,
        "candidates": len(session.candidates),
        "candidate_rules": list(session.candidates),
        "switch_file": str(switch_path) if switch_path else None,
        "verify": None if verify is None else {"outcome": verify.outcome, "reason": verify.reason,
                                               "trial_dir": str(verify.paths.trial_dir)},
        "trials": [trial_row(r) for r in sorted(session.records, key=lambda r: r.index)],
        "unjudged": unjudged_runs(session.workdir, [r.index for r in session.records],
                                  session.rechecked_runs),
        "repro": repro,
        "excluded": list(session.excluded),
        # the search's own notes (a mode switch, a culprit named without its run, ...) first, then the runner's
        "notes": list(dict.fromkeys(list(getattr(result, "notes", None) or []) + session.notes)),
        "switch_ignored": ignored,
        "prior": session.prior,
        "journal": str(session.journal.path),
    }


def render_report(console, run_json: dict, notes: Sequence[str] = (), *, workers: int = 1, repeat: int = 1) -> None:
    """Print the human report of a run JSON to ``console`` (stdout): verdict, culprits, runs vs bound, trial
    table, repro commands, production switch file, then ``notes``. ``workers`` and ``repeat`` are the run's
    --jobs and --repeat, which say how the bound reads against the executions (as the verdict's message has it)."""
    from rich.markup import escape
    from rich.table import Table

    j = run_json
    colour = "green" if j["status"] == "found" else "yellow"
    # lines styled on purpose pass markup=True and escape what they interpolate; everything else is printed as
    # it is (paths, messages and op names are data, and a "[/x]" in them is not a style tag)
    if j["status"] == "running":   # no verdict yet: what the run is doing says it (still going, or interrupted)
        console.print(f"[bold {colour}]{escape(j['message'])}[/bold {colour}]", markup=True)
    else:
        console.print(f"[bold {colour}]{j['status']}[/bold {colour}]: {escape(j['message'])}", markup=True)
    for c in j["culprits"]:
        kind = "interaction of " if len(c["rules"]) > 1 else ""
        when = "" if c["direction"] == "on" else " (bad while turned OFF)"
        console.print(f"  culprit: {kind}[bold]{escape(' + '.join(c['rules']))}[/bold]{when}  "
                      f"confidence {c['confidence']:.3f}", markup=True)
        if c["fused_ops"]:
            shown = ", ".join(c["fused_ops"][:8]) + (f" (+{len(c['fused_ops']) - 8} more)"
                                                     if len(c["fused_ops"]) > 8 else "")
            console.print(f"    fused ops it touched: {shown}")
        for rule, needs in (c.get("depends_on") or {}).items():
            console.print(f"    {rule} fired only with {' and '.join(needs)} on: the likelier culprit")
    if j["status"] in ("not_reproduced", "not_fusion"):
        # the numbers behind a stop at the gates: every run of the baseline and of the all-off reference
        for t in j["trials"]:
            if t["config_off"] and len(t["config_off"]) != j["candidates"]:
                continue
            which = "baseline" if not t["config_off"] else "all-off reference"
            metric = "" if t["metric"] is None else f", metric {fmt_number(t['metric'])}"
            reason = f" ({t['reason']})" if t["reason"] else ""
            console.print(f"  {which}, run {t['index']}: {t['outcome'].upper()}{metric}{reason}; output in "
                          f"{t['trial_dir']}", soft_wrap=True)
    final = sum(1 for t in j["trials"] if t.get("final"))
    # the target is the bound for the culprit sets found: a verdict that names none has no target to meet
    counts = ([f"{j['executions'] - final} searching + {final} verification"] if final else []) + (
        [f"run-count target {target_text(j['bound'], workers, repeat)}"]
        if j.get("bound") is not None and j.get("culprits") else [])
    console.print(f"executions: {j['executions']}" + (f" ({'; '.join(counts)})" if counts else "")
                  + f"; candidates: {j['candidates']}")
    unjudged = j.get("unjudged") or []
    if unjudged:
        console.print(f"{unjudged_text(unjudged, j.get('running_pid') is not None)}; output in "
                      + ", ".join(u["trial_dir"] for u in unjudged), soft_wrap=True)
    if j["excluded"]:
        console.print("excluded: " + ", ".join(f"{e['rule']} ({e['reason']})" for e in j["excluded"][:10])
                      + (f" (+{len(j['excluded']) - 10} more)" if len(j["excluded"]) > 10 else ""))
    if j.get("switch_ignored"):
        console.print("[yellow]switch ignored[/yellow] (still fired while off): "
                      + escape(", ".join(j["switch_ignored"])), markup=True)
    table = Table(title="executions", show_lines=False)
    for col in ("#", "role", "off", "outcome", "metric", "seconds", "reason"):
        table.add_column(col)
    for t in j["trials"]:
        off = t["config_off"]
        off_text = "-" if not off else (", ".join(off) if len(off) <= 3 else f"{len(off)} rules")
        if t.get("config_on"):   # (with nothing off it would read as the default configuration)
            off_text += "; forced on: " + ", ".join(t["config_on"])
        metric = "" if t["metric"] is None else fmt_number(t["metric"])
        table.add_row(str(t["index"]), t["role"], off_text, t["outcome"], metric, f"{t['seconds']:.1f}",
                      t["reason"] or "")
    console.print(table)
    if j["repro"]:
        console.print("reproduce the boundary:")
        for side, what in (("good", "GOOD"), ("bad", "BAD")):
            argv = j["repro"].get(side)
            console.print(f"  {side}:{' ' * (5 - len(side))}" + (shlex.join(argv) if argv else
                          f"(none: no run of that configuration was {what})"), soft_wrap=True)
    if j["switch_file"]:
        if j["status"] == "found":
            reverse = any(c.get("direction") == "off" for c in j["culprits"])
            what = "culprits off, or on for those bad while off" if reverse else "culprits off only"
            console.print(f"production switch file ({what}): {j['switch_file']}", soft_wrap=True)
        elif (j.get("verify") or {}).get("outcome") == "good":
            console.print(f"switch file (the culprits named off; a final run was GOOD, but the verdict is "
                          f"inconclusive, see above): {j['switch_file']}", soft_wrap=True)
        else:
            console.print(f"[yellow]partial[/yellow] switch file (the culprits found so far off; NOT a verified "
                          f"fix): {escape(j['switch_file'])}", soft_wrap=True, markup=True)
        v = j.get("verify")
        if v is None and j["status"] != "found":
            console.print("  not verified: no run of it showed the job good")
        elif v is not None and j["status"] != "found" and v["outcome"] == "bad":
            console.print("  NOT sufficient: a run with it was [red]BAD[/red]"
                          + (f" ({escape(v['reason'])})" if v["reason"] else ""), markup=True)
        elif v is not None and j["status"] != "found" and v["outcome"] != "good":   # a run that says nothing
            console.print(f"  not verified: its run was {v['outcome'].upper()}"
                          + (f" ({v['reason']})" if v["reason"] else ""))
        elif v is not None:
            good = v["outcome"] == "good"
            # the runs of that configuration (a noisy job runs it several times): when they disagree, the verdict
            # is theirs together, not that of one "final" run
            run = next((t for t in j["trials"] if t.get("trial_dir") == v.get("trial_dir")), {})
            key = run.get("key")
            runs = [t["outcome"] for t in j["trials"] if key is not None and t.get("key") == key
                    and t["outcome"] in ("good", "bad")]
            if {"good", "bad"} <= set(runs):
                console.print(f"  verified: [{'green' if good else 'red'}]{v['outcome'].upper()}"
                              f"[/{'green' if good else 'red'}] in {runs.count(v['outcome'])} of its {len(runs)} runs "
                              f"(the others {('BAD' if good else 'GOOD')}: a noisy job; the confidence above weighs "
                              "them all)", markup=True)
            else:
                # the engine's last run is usually this configuration's; a single candidate's is the reference
                index = run.get("index")
                last = max((t.get("index") or 0 for t in j["trials"]), default=0)
                by = ("a final run" if index is None else f"a final run (run {index})" if index == last
                      else f"run {index}, of this very configuration")
                console.print(f"  verified by {by}: [{'green' if good else 'red'}]{v['outcome'].upper()}"
                              f"[/{'green' if good else 'red'}]" + (f" ({escape(v['reason'])})" if v["reason"] else ""),
                              markup=True)
    for note in notes or j.get("notes") or []:   # `report` reads them from result.json
        console.print(f"note: {note}", highlight=False)
    console.print(f"journal: {j['journal']}", soft_wrap=True)
