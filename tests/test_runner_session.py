"""Runner session tests against a tiny target script and a small stand-in search engine.

The stand-in engine (gates, then bisection for one culprit, then a confirmation) keeps these tests independent of
the real engine's choices; the real engine is exercised by tests/test_run_e2e.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.console import Console

from fusebisect.errors import UsageError
from fusebisect.runner.journal import Journal
from fusebisect.runner.oracles import RunAborted
from fusebisect.runner.result import render_report
from fusebisect.runner.session import Progress, RunOptions, Session

RULES = ["ABatchnormFusionPass", "AArgMaxV2FusionPass", "AAMatMulNzToNdFusionPass", "AddRmsNormFusionPass",
         "AConcatV2MeanMulGatherV2FusionPass"]
FORBIDDEN = "AddNFusionPass"  # catalog: cannot be disabled

TARGET = textwrap.dedent(r'''
    """Stand-in training job: reads the switch file, 'fires' its rules, prints a loss, logs its invocation."""
    import json, os, sys
    rules = os.environ["T_RULES"].split(",")
    faulty = set(filter(None, os.environ.get("T_FAULTY", "").split(",")))
    ignore = set(filter(None, os.environ.get("T_IGNORE", "").split(",")))
    crash_when_off = os.environ.get("T_CRASH_OFF", "")
    crash_alone = os.environ.get("T_CRASH_ALONE", "")   # fails to compile when it is the only rule on
    crash_small = os.environ.get("T_CRASH_SMALL", "")   # ... or on with at most one other rule
    sw = json.load(open(os.environ["FUSEBISECT_SWITCH_FILE"]))["Switch"]
    off = {n for sec in sw.values() for n, v in sec.items() if v == "off"}
    on = [r for r in rules if r not in off or r in ignore]
    for pair in filter(None, os.environ.get("T_SHADOW", "").split(",")):
        first, second = pair.split(":")   # `second` fuses the pattern only while `first` does not
        if first in on and second in on:
            on.remove(second)
    work = os.environ["ASCEND_WORK_PATH"]
    ub = {"AddRmsNormFusionPass"}   # reported in its own section, as CANN does
    res = {"session_and_graph_id_0_1": {
        "graph_fusion": {r: {"match_times": 1, "effect_times": 1} for r in on if r not in ub},
        "ub_fusion": {r: {"match_times": 1, "effect_times": 1} for r in on if r in ub}}}
    if os.environ.get("T_EVAL_GRAPH") == "1":   # a second session built without the switch file
        res["session_and_graph_id_1_2"] = {"graph_fusion": {r: {"match_times": 1, "effect_times": 1} for r in rules}}
    if os.environ.get("T_ARRAY") == "1":   # GE's newer writer: an array of per-graph objects
        res = [dict(sec, session_and_graph_id=key[len("session_and_graph_id_"):]) for key, sec in res.items()]
    if os.environ.get("T_NO_STATS") != "1":
        json.dump(res, open(os.path.join(work, "fusion_result.json"), "w"))
    with open(os.environ["T_LOG"], "a") as log:
        log.write(json.dumps({"off": sorted(off), "argv": sys.argv[1:],
                              "explicit_on": sorted(n for sec in sw.values() for n, v in sec.items() if v == "on")})
                  + "\n")
    if crash_when_off and crash_when_off in off or crash_alone and on == [crash_alone] or \
            crash_small and crash_small in on and len(on) <= 2:
        print("compile error", file=sys.stderr)
        sys.exit(3)
    needed = set(filter(None, os.environ.get("T_NEEDED", "").split(",")))  # bad while one of these is off
    bad = bool(faulty & set(on)) or bool(needed & off)
    kill_at = os.environ.get("T_KILL_PARENT_AT")
    if kill_at:
        n = sum(1 for _ in open(os.environ["T_LOG"]))
        if n == int(kill_at) and not os.path.exists(os.environ["T_LOG"] + ".killed"):
            open(os.environ["T_LOG"] + ".killed", "w").close()
            import signal
            os.kill(os.getppid(), signal.SIGKILL)
    print("step 1 loss 0.5000")
    print("step 2 loss %s" % ("0.9000" if bad else "0.4000"))
    sys.exit(1 if (bad and os.environ.get("T_EXIT_BAD") == "1") else 0)
''')


@dataclass
class Culprit:
    rules: tuple
    confidence: float
    direction: str = "on"


@dataclass
class SearchResult:
    status: str
    culprits: list
    executions: int
    bound: int
    message: str
    boundary: tuple | None


class FakeSearch:
    """Gates, then halving for a single culprit, then a confirmation run with the culprit alone off."""

    def __init__(self, candidates, *, prior=(), flaky=False, repeat=1, workers=1, confidence=0.95,
                 max_executions=None, seed=0):
        self.candidates = list(candidates)
        self.workers = workers
        self.observed: dict[frozenset, str] = {}
        self.order: list[frozenset] = []
        self.prior = list(prior)
        self.done = False
        self.result = None
        self.pending: set[frozenset] = set()
        self.lo = list(self.candidates)

    @classmethod
    def replay(cls, candidates, events, **kw):
        s = cls(candidates, **kw)
        for kind, payload in events:
            if kind == "observe":
                s.observe(*payload)
            elif kind == "prior":
                s.set_prior(payload)
        return s

    def set_prior(self, rules):
        self.prior = list(rules)

    def progress(self):
        return {"phase": "search", "candidates_left": len(self.lo), "runs_remaining_estimate": len(self.lo).bit_length(),
                "executions": len(self.order)}

    def _want(self):
        all_off = frozenset(self.candidates)
        for gate in (all_off, frozenset()):
            if gate not in self.observed:
                return [gate]
        if self.observed[frozenset()] != "bad":
            self._finish("not_reproduced")
            return []
        if self.observed[all_off] != "good":
            self._finish("not_fusion")
            return []
        if len(self.lo) > 1:
            half = frozenset(self.lo[: len(self.lo) // 2])
            return [half]
        confirm = frozenset(self.lo)
        if confirm not in self.observed:
            return [confirm]
        if self.observed[confirm] == "good":
            self._finish("found")
        else:
            self._finish("inconclusive")
        return []

    def _finish(self, status):
        self.done = True
        culprits = [Culprit(rules=(self.lo[0],), confidence=1.0)] if status == "found" else []
        boundary = (frozenset(self.lo), frozenset()) if status == "found" else None
        self.result = SearchResult(status=status, culprits=culprits, executions=len(self.order), bound=5,
                                   message=f"fake {status}", boundary=boundary)

    def propose(self):
        if self.done:
            return []
        want = [w for w in self._want() if w not in self.pending]
        self.pending.update(want)
        return want

    def observe(self, off, outcome):
        off = frozenset(off)
        outcome = getattr(outcome, "value", outcome)
        self.pending.discard(off)
        self.order.append(off)
        if off in self.observed and outcome != self.observed[off]:
            return
        self.observed[off] = outcome
        all_off = frozenset(self.candidates)
        if off and off != all_off and len(self.lo) > 1 and off == frozenset(self.lo[: len(self.lo) // 2]):
            if outcome == "good":  # turning the first half off fixed it: culprit there
                self.lo = self.lo[: len(self.lo) // 2]
            elif outcome == "bad":
                self.lo = self.lo[len(self.lo) // 2:]


@dataclass
class Target:
    script: Path
    log: Path
    env: dict

    def calls(self) -> list[dict]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def command(self, *extra: str) -> list[str]:
        return [sys.executable, str(self.script), *extra]


@pytest.fixture
def target(tmp_path) -> Target:
    script = tmp_path / "job.py"
    script.write_text(TARGET)
    log = tmp_path / "calls.jsonl"
    env = dict(os.environ, T_RULES=",".join(RULES), T_LOG=str(log))
    return Target(script=script, log=log, env=env)


def session(target: Target, tmp_path: Path, engine=FakeSearch, **kw) -> Session:
    opts = RunOptions(command=kw.pop("command", target.command()), workdir=kw.pop("workdir", tmp_path / "w"), **kw)
    return Session(opts, engine_cls=engine, env=target.env, progress=Progress(quiet=True))


def test_metric_oracle_finds_the_culprit_and_writes_the_production_cfg(target, tmp_path):
    target.env["T_FAULTY"] = RULES[3]
    res = session(target, tmp_path, metric=r"loss ([0-9.]+)").run()
    j = res.run_json
    assert j["status"] == "found", j
    assert j["culprits"][0]["rules"] == [RULES[3]]
    assert j["candidates"] == len(RULES)  # discovered from the baseline's fusion_result.json
    cfg = json.loads(Path(j["switch_file"]).read_text())
    assert cfg == {"Switch": {"UBFusion": {RULES[3]: "off"}}}  # in its catalog section, nothing else
    assert j["verify"]["outcome"] == "good"
    roles = [t["role"] for t in j["trials"]]
    assert roles[0] == "baseline" and roles[1] == "reference"
    # the search already ran "culprit off, everything else on" and it was good: that run is the verification
    confirm = [t for t in j["trials"] if t["config_off"] == [RULES[3]]]
    assert len(confirm) == 1 and j["verify"]["trial_dir"] == confirm[0]["trial_dir"]
    # executions: one per configuration, never repeated (the baseline is reused, not rerun)
    offs = [tuple(c["off"]) for c in target.calls()]
    assert len(offs) == len(set(offs))
    assert j["executions"] == len(target.calls())
    assert (tmp_path / "w" / "result.json").is_file()
    assert res.exit_code == 0


def test_not_reproduced_when_baseline_matches_reference(target, tmp_path):
    res = session(target, tmp_path, metric=r"loss ([0-9.]+)").run()
    assert res.run_json["status"] == "not_reproduced"
    assert res.exit_code == 1
    assert res.run_json["switch_file"] is None


def test_exit_status_oracle_and_rules_flag(target, tmp_path):
    target.env.update(T_FAULTY=RULES[0], T_EXIT_BAD="1")
    res = session(target, tmp_path, rules=",".join(RULES[:4] + [FORBIDDEN])).run()
    j = res.run_json
    assert j["status"] == "found" and j["culprits"][0]["rules"] == [RULES[0]]
    assert j["excluded"] == [{"rule": FORBIDDEN, "reason": "cannot be disabled (forbidden-close pass)"}]
    assert j["candidate_rules"] == RULES[:4]
    # with --rules no discovery run: the engine's first proposal (the reference) runs first
    assert j["trials"][0]["role"] == "reference"


def test_rules_file(target, tmp_path):
    f = tmp_path / "rules.txt"
    f.write_text(f"# candidates\n{RULES[0]}, {RULES[1]}\n{RULES[2]}\n")
    target.env.update(T_FAULTY=RULES[2], T_EXIT_BAD="1")
    res = session(target, tmp_path, rules=str(f)).run()
    assert res.run_json["candidate_rules"] == RULES[:3]
    assert res.run_json["culprits"][0]["rules"] == [RULES[2]]
    # the same file, edited (the natural next step after not_fusion): not the journal's search any more
    f.write_text(f"{RULES[0]}\n{RULES[2]}\n{RULES[3]}\n")
    with pytest.raises(UsageError, match=rf"the rules --rules names changed: added {RULES[3]}; dropped "
                                         rf"{RULES[1]}\); rerun with --fresh"):
        session(target, tmp_path, rules=str(f)).run()
    assert session(target, tmp_path, rules=str(f), fresh=True).run().run_json["candidate_rules"] == [
        RULES[0], RULES[2], RULES[3]]


def test_a_rule_the_catalog_does_not_know_is_an_error_before_any_run(target, tmp_path):
    with pytest.raises(UsageError) as exc:
        session(target, tmp_path, rules=f"{RULES[0]},GeluFusionPas").run()
    msg = str(exc.value)
    assert "--rules: unknown rule 'GeluFusionPas' (did you mean GeluFusionPass" in msg
    assert "--allow-unknown-rules" in msg and "\n" not in msg
    assert not target.calls() and not (tmp_path / "w").exists()


def test_a_rule_the_catalog_does_not_know_is_kept_with_allow_unknown_rules(target, tmp_path, capsys):
    target.env.update(T_FAULTY=RULES[0], T_EXIT_BAD="1")
    opts = RunOptions(command=target.command(), workdir=tmp_path / "w", rules=f"{RULES[0]},GeluFusionPas",
                      allow_unknown_rules=True)
    res = Session(opts, engine_cls=FakeSearch, env=target.env, progress=Progress(live=False)).run()
    assert res.run_json["candidate_rules"] == [RULES[0], "GeluFusionPas"]
    err = " ".join(capsys.readouterr().err.split())
    assert "--rules: GeluFusionPas is not a rule the catalog knows (did you mean GeluFusionPass" in err
    assert RULES[0] + " is not" not in err


def test_the_repro_commands_run_a_job_whose_path_holds_an_equals_sign(target, tmp_path):
    """A Hydra-style run directory ('lr=0.1/train.sh'): `env VAR=... ./lr=0.1/train.sh` would take the
    command for one more assignment, print the environment and run nothing."""
    wrapper = tmp_path / "lr=0.1" / "train.sh"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{target.script}" "$@"\n')
    wrapper.chmod(0o755)
    target.env["T_FAULTY"] = RULES[3]
    res = session(target, tmp_path, metric=r"loss ([0-9.]+)", command=[str(wrapper)]).run()
    assert res.run_json["status"] == "found"
    calls = len(target.calls())
    proc = subprocess.run(res.run_json["repro"]["bad"], env={**target.env, "PATH": os.environ["PATH"]},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "loss 0.9000" in proc.stdout, proc.stdout[-300:]
    assert len(target.calls()) == calls + 1


def test_the_repro_commands_and_the_report_carry_the_runs_directory(target, tmp_path):
    """A job given relative to the working directory (./train.sh): the repro commands run it there wherever they
    are pasted, and the report's command says where it ran."""
    from fusebisect.cli.app import main

    job = tmp_path / "train.sh"
    job.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{target.script}" "$@"\n')
    job.chmod(0o755)
    target.env["T_FAULTY"] = RULES[3]
    opts = RunOptions(command=["./train.sh"], workdir=tmp_path / "w", metric=r"loss ([0-9.]+)")
    res = Session(opts, engine_cls=FakeSearch, env=target.env, progress=Progress(quiet=True), cwd=str(tmp_path)).run()
    assert res.run_json["status"] == "found"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = subprocess.run(res.run_json["repro"]["bad"], cwd=elsewhere, env={**target.env, "PATH": os.environ["PATH"]},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "loss 0.9000" in proc.stdout, proc.stderr
    assert main(["report", str(tmp_path / "w"), "--markdown", str(tmp_path / "r.md")]) == 0
    assert f"cd {tmp_path} && ./train.sh" in (tmp_path / "r.md").read_text()
    # resuming from another directory (with a train.sh of its own) would run another job under the same command
    # line: refused
    (elsewhere / "train.sh").write_text(job.read_text())
    (elsewhere / "train.sh").chmod(0o755)
    with pytest.raises(UsageError, match=f"was started in {tmp_path}, not here") as refused:
        Session(opts, engine_cls=FakeSearch, env=target.env, progress=Progress(quiet=True), cwd=str(elsewhere)).run()
    # what to do, whole: the workdir absolute (a relative one would name another workdir from there)
    assert f"(cd {tmp_path} and rerun it with --workdir {tmp_path / 'w'})" in str(refused.value)
    # the directory moved with its workdir inside (a project renamed): resumed there, nothing runs again
    import shutil

    moved = tmp_path.parent / (tmp_path.name + "-moved")
    shutil.copytree(tmp_path, moved, symlinks=True)
    calls = len(target.calls())
    again = Session(RunOptions(command=["./train.sh"], workdir=moved / "w", metric=r"loss ([0-9.]+)"),
                    engine_cls=FakeSearch, env=target.env, progress=Progress(quiet=True), cwd=str(moved)).run()
    assert again.run_json["culprits"] == res.run_json["culprits"] and len(target.calls()) == calls
    shutil.rmtree(moved)


def test_invalid_rule_name_is_a_usage_error(target, tmp_path):
    with pytest.raises(UsageError, match="invalid rule name"):
        session(target, tmp_path, rules="Good,bad name").run()


def test_switch_ignored_makes_the_trial_invalid(target, tmp_path):
    target.env.update(T_FAULTY=RULES[3], T_IGNORE=RULES[1])
    res = session(target, tmp_path, metric=r"loss ([0-9.]+)").run()
    trials = res.run_json["trials"]
    with_ignored_off = [t for t in trials if RULES[1] in t["config_off"]]
    assert with_ignored_off, "the search never turned the ignoring rule off"
    for t in with_ignored_off:
        assert t["outcome"] == "invalid"
        assert t["reason"] == f"switch ignored: {RULES[1]}"
    assert res.run_json["switch_ignored"] == [RULES[1]]
    # it can never be turned off, so it leaves the candidates and the search still finds the culprit
    assert {"rule": RULES[1], "reason": "switch ignored: still fired when turned off"} in res.run_json["excluded"]
    assert res.run_json["status"] == "found" and res.run_json["culprits"][0]["rules"] == [RULES[3]]
    assert RULES[1] not in res.run_json["candidate_rules"]
    journal = [json.loads(x) for x in (tmp_path / "w" / "journal.jsonl").read_text().splitlines()]
    assert any(e.get("ignored") == [RULES[1]] for e in journal if e["event"] == "trial")


def test_crash_under_metric_oracle_is_invalid_never_bad(target, tmp_path):
    target.env.update(T_FAULTY=RULES[3], T_CRASH_OFF=RULES[0])
    res = session(target, tmp_path, metric=r"loss ([0-9.]+)").run()
    crashed = [t for t in res.run_json["trials"] if RULES[0] in t["config_off"]]
    assert crashed and all(t["outcome"] == "invalid" and t["reason"] == "crash (exit 3)" for t in crashed)


def test_resume_after_a_crash_runs_no_configuration_twice(target, tmp_path):
    target.env["T_FAULTY"] = RULES[4]
    ref = session(target, tmp_path, metric=r"loss ([0-9.]+)", workdir=tmp_path / "ref").run().run_json
    target.log.unlink()

    class Boom(Exception):
        pass

    count = {"n": 0}

    def crash_after_three(rec):
        count["n"] += 1
        if count["n"] == 3:
            raise Boom()

    s = session(target, tmp_path, metric=r"loss ([0-9.]+)")
    s.on_trial = crash_after_three
    with pytest.raises(Boom):
        s.run()
    assert len(target.calls()) == 3
    res = session(target, tmp_path, metric=r"loss ([0-9.]+)").run().run_json
    offs = [tuple(c["off"]) for c in target.calls()]
    assert len(offs) == len(set(offs))  # no configuration ran twice
    assert res["culprits"] == ref["culprits"] and res["status"] == "found"
    assert len(offs) == ref["executions"]
    # a third run of a finished session executes nothing new
    before = len(target.calls())
    again = session(target, tmp_path, metric=r"loss ([0-9.]+)").run().run_json
    assert len(target.calls()) == before and again["culprits"] == ref["culprits"]


def test_journal_of_another_command_needs_fresh(target, tmp_path):
    target.env["T_FAULTY"] = RULES[1]
    session(target, tmp_path, metric=r"loss ([0-9.]+)").run()
    with pytest.raises(UsageError, match="--fresh"):
        session(target, tmp_path, metric=r"loss ([0-9.]+)", rtol=0.5).run()
    with pytest.raises(UsageError, match="--fresh"):
        session(target, tmp_path, metric=r"loss ([0-9.]+)", command=target.command("--other")).run()
    res = session(target, tmp_path, metric=r"loss ([0-9.]+)", rtol=0.5, fresh=True).run()
    assert res.run_json["status"] == "found"
    old = list((tmp_path / "w" / "previous").glob("*/journal.jsonl"))
    assert len(old) == 1 and Journal(old[0]).load()[0]["options"]["rtol"] == 0.01


def test_check_oracle_exit_codes(target, tmp_path):
    check = tmp_path / "check.py"
    check.write_text(textwrap.dedent('''
        import os, re, sys
        text = open(os.path.join(os.environ["FUSEBISECT_TRIAL_DIR"], "stdout.log")).read()
        loss = float(re.findall(r"loss ([0-9.]+)", text)[-1])
        sys.exit(int(os.environ.get("T_CHECK_BAD_CODE", "1")) if loss > 0.6 else 0)
    '''))
    target.env.update(T_FAULTY=RULES[2])
    res = session(target, tmp_path, check=f"{sys.executable} {check}").run()
    assert res.run_json["culprits"][0]["rules"] == [RULES[2]]
    target.env["T_CHECK_BAD_CODE"] = "125"  # skip: the baseline can't be judged
    res = session(target, tmp_path, check=f"{sys.executable} {check}", workdir=tmp_path / "w125").run()
    assert res.run_json["trials"][0]["outcome"] == "invalid"
    assert res.run_json["status"] != "found"
    target.env["T_CHECK_BAD_CODE"] = "128"  # outside 0-127: abort the whole run, journal kept
    s = session(target, tmp_path, check=f"{sys.executable} {check}", workdir=tmp_path / "w128")
    calls = len(target.calls())
    with pytest.raises(RunAborted, match="--check exited 128"):
        s.run()
    assert Journal(tmp_path / "w128" / "journal.jsonl").load()[0]["event"] == "start"
    ran = len(target.calls()) - calls
    from fusebisect.cli.app import main
    assert main(["report", str(tmp_path / "w128"), "--markdown", str(tmp_path / "r.md")]) == 1   # no verdict yet
    md = " ".join((tmp_path / "r.md").read_text().split())
    assert "stopped while a --check ran" in md and "the resume checks it again, without running the job" in md
    # the check fixed, the same command resumes: the run whose check aborted is checked again, its job (which
    # had finished: a training run) is not run again
    target.env["T_CHECK_BAD_CODE"] = "1"
    res = session(target, tmp_path, check=f"{sys.executable} {check}", workdir=tmp_path / "w128").run()
    assert res.run_json["culprits"][0]["rules"] == [RULES[2]]
    configs = [t["config_off"] for t in res.run_json["trials"]]
    assert len(configs) == len(set(map(tuple, configs))), configs   # no configuration executed twice
    assert len(target.calls()) - calls == res.run_json["executions"] and ran <= res.run_json["executions"]
    assert not res.run_json.get("unjudged")
    # ... and, where the search asks for it in the same round as new runs (its gates), before any new job
    from fusebisect.search import Search

    target.env["T_CHECK_BAD_CODE"] = "128"
    with pytest.raises(RunAborted):
        session(target, tmp_path, engine=Search, check=f"{sys.executable} {check}", workdir=tmp_path / "wg").run()
    target.env["T_CHECK_BAD_CODE"] = "1"
    session(target, tmp_path, engine=Search, check=f"{sys.executable} {check}", workdir=tmp_path / "wg").run()
    judged = [e["index"] for e in Journal(tmp_path / "wg" / "journal.jsonl").load() if e["event"] == "trial"]
    assert judged[0] == 1, judged


def test_a_run_checked_again_after_a_resume_is_checked_on_its_slots_device(target, tmp_path):
    """--jobs 2 on devices 3 and 7: the baseline ran on 7 and its check aborted. The resume hands the check again
    to the first free slot (3): the check runs on that slot's device (7 may be another run's by then, or no
    longer listed), and the record keeps the device its job ran on (the repro command's)."""
    from fusebisect.search import Search

    seen = tmp_path / "check_devices.txt"
    check = tmp_path / "check.py"
    check.write_text(textwrap.dedent(f'''
        import os, re, sys
        trial = os.environ["FUSEBISECT_TRIAL_DIR"]
        with open({str(seen)!r}, "a") as f:
            f.write(os.path.basename(trial) + " " + os.environ.get("ASCEND_RT_VISIBLE_DEVICES", "-") + "\\n")
        loss = float(re.findall(r"loss ([0-9.]+)", open(os.path.join(trial, "stdout.log")).read())[-1])
        sys.exit(int(os.environ.get("T_CHECK_BAD_CODE", "1")) if loss > 0.6 else 0)
    '''))
    target.env.update(T_FAULTY=RULES[2], T_CHECK_BAD_CODE="128")
    kw = dict(engine=Search, check=f"{sys.executable} {check}", rules=",".join(RULES), jobs=2, devices=["3", "7"])
    with pytest.raises(RunAborted):
        session(target, tmp_path, **kw).run()
    first = dict(line.split() for line in seen.read_text().splitlines())
    aborted = next(name for name in first if name.startswith("0002-"))   # the baseline, on the second slot
    assert first[aborted] == "7", first
    target.env["T_CHECK_BAD_CODE"] = "1"
    res = session(target, tmp_path, **kw).run()
    again = [line.split() for line in seen.read_text().splitlines()][len(first):]
    # (when the abort also cut the reference's check short, that run is checked again first, in slot 3)
    both = any(name.startswith("0001-") for name, _d in again)
    assert [d for name, d in again if name == aborted] == (["7"] if both else ["3"]), again
    assert res.run_json["status"] == "found"
    journal = Journal(tmp_path / "w" / "journal.jsonl").load()
    assert next(e for e in journal if e["event"] == "trial" and e["index"] == 2)["device"] == "7"


def _devices_seen(target, tmp_path, **kw) -> tuple[dict, set[str]]:
    """Run a search whose every execution logs its ASCEND_RT_VISIBLE_DEVICES; return (run JSON, devices seen)."""
    target.env["T_FAULTY"] = RULES[0]
    script = tmp_path / "dev.py"
    script.write_text(textwrap.dedent(f'''
        import os, runpy, sys
        with open({str(tmp_path / "devs.txt")!r}, "a") as f:
            f.write(os.environ.get("ASCEND_RT_VISIBLE_DEVICES", "-") + "\\n")
        sys.argv = [{str(target.script)!r}]
        runpy.run_path({str(target.script)!r}, run_name="__main__")
    '''))
    res = session(target, tmp_path, metric=r"loss ([0-9.]+)", command=[sys.executable, str(script)], **kw).run()
    assert res.run_json["status"] == "found"
    devs = (tmp_path / "devs.txt").read_text().split()
    assert len(devs) == res.run_json["executions"]
    return res.run_json, set(devs)


def test_parallel_jobs_use_device_slots(target, tmp_path):
    assert _devices_seen(target, tmp_path, devices=["4", "5"])[1] <= {"4", "5"}


@pytest.mark.parametrize("visible,expected", [("4,5", {"4", "5"}), ("6, 7,8", {"6", "7"}), (None, {"0", "1"})])
def test_jobs_take_their_devices_from_the_users_visible_devices(target, tmp_path, visible, expected):
    target.env.pop("ASCEND_RT_VISIBLE_DEVICES", None)
    if visible is not None:
        target.env["ASCEND_RT_VISIBLE_DEVICES"] = visible
    assert _devices_seen(target, tmp_path, jobs=2)[1] <= expected


def test_jobs_beyond_the_users_visible_devices_is_an_error_before_any_run(target, tmp_path):
    target.env["ASCEND_RT_VISIBLE_DEVICES"] = "4"
    with pytest.raises(UsageError, match="--jobs 2 needs 2 devices but ASCEND_RT_VISIBLE_DEVICES='4' lists 1"):
        session(target, tmp_path, jobs=2).run()
    assert not target.calls() and not (tmp_path / "w").exists()


def test_production_cfg_keeps_a_foreign_file(target, tmp_path):
    target.env.update(T_FAULTY=RULES[1])
    out = tmp_path / "fusion_switch.cfg"
    out.write_text("user content\n")
    res = session(target, tmp_path, metric=r"loss ([0-9.]+)", output=out).run()
    assert res.run_json["switch_file"] == str(out)
    assert (tmp_path / "fusion_switch.cfg.bak").read_text() == "user content\n"
    assert RULES[1] in out.read_text()


def test_a_metric_pattern_that_matches_nothing_stops_after_the_first_run(target, tmp_path):
    target.env["T_FAULTY"] = RULES[3]
    with pytest.raises(UsageError) as exc:
        session(target, tmp_path, metric=r"loss=([0-9.]+)").run()
    msg = str(exc.value)
    assert "--metric 'loss=([0-9.]+)' matched nothing in run 1 (baseline), which exited 0" in msg
    assert "'step 2 loss 0.9000'" in msg and "\n" not in msg
    assert len(target.calls()) == 1          # no further run wasted on a pattern that cannot match
    # (a run that crashes without printing the metric is INVALID and the search goes on: see
    # test_crash_under_metric_oracle_is_invalid_never_bad)
    # a pattern that matched something else than a number says what it captured
    with pytest.raises(UsageError) as exc:
        session(target, tmp_path, metric=r"(loss) [0-9.]+", workdir=tmp_path / "w2").run()
    assert "--metric '(loss) [0-9.]+' matched in run 1 (baseline) but captured 'loss', which is not a number" \
        in str(exc.value)


def test_a_culprit_bad_while_off_is_set_on_and_that_file_is_verified(target, tmp_path):
    from fusebisect.search import Search

    target.env.update(T_NEEDED=RULES[2], T_EXIT_BAD="1")   # the job breaks when RULES[2] is turned off
    res = session(target, tmp_path, engine=Search).run()
    j = res.run_json
    assert j["status"] == "found", j
    assert j["culprits"][0]["rules"] == [RULES[2]] and j["culprits"][0]["direction"] == "off"
    cfg = json.loads(Path(j["switch_file"]).read_text())
    assert {n: v for sec in cfg["Switch"].values() for n, v in sec.items()} == {RULES[2]: "on"}
    # no search run had that file: the verification ran it, and the job saw exactly its content
    assert j["verify"]["outcome"] == "good"
    run = next(t for t in j["trials"] if t["trial_dir"] == j["verify"]["trial_dir"])
    assert run["role"] == "verify" and run["config_on"] == [RULES[2]] and run["config_off"] == []
    last = target.calls()[-1]
    assert last["off"] == [] and last["explicit_on"] == [RULES[2]]
    assert sum(1 for c in target.calls() if c["explicit_on"]) == 1
    assert j["executions"] == len(target.calls())
    # the summary counts the same runs as "executions": the search's, and the verification after it
    assert f" in {j['executions'] - 1} runs + 1 verification " in j["message"], j["message"]
    assert [t.get("final", False) for t in j["trials"]] == [False] * (j["executions"] - 1) + [True]
    # resuming a finished run reuses the journaled verification instead of running it again
    again = session(target, tmp_path, engine=Search).run()
    assert again.run_json["verify"]["trial_dir"] == j["verify"]["trial_dir"]
    assert len(target.calls()) == j["executions"]
    assert again.run_json["message"] == j["message"]
    console = Console(record=True, width=300)
    render_report(console, j)
    n = j["executions"]
    text = console.export_text()
    assert f"executions: {n} ({n - 1} searching + 1 verification; run-count target" in text
    assert "production switch file (culprits off, or on for those bad while off)" in text   # it sets one on


def test_a_fix_whose_runs_disagree_is_not_said_verified_by_one_final_run(target, tmp_path):
    """A noisy job runs the production configuration several times; when its runs disagree, the report says how
    many were GOOD rather than "verified by a final run: GOOD" (the last of them may well have been BAD)."""
    from fusebisect.search import Search

    target.env.update(T_NEEDED=RULES[2], T_EXIT_BAD="1")   # a fix checked by a run of its own
    j = session(target, tmp_path, engine=Search).run().run_json
    verify = next(t for t in j["trials"] if t["trial_dir"] == j["verify"]["trial_dir"])
    console = Console(record=True, width=300)
    render_report(console, j)
    assert "verified by a final run (run " in console.export_text()
    j["trials"] += [{**verify, "index": verify["index"] + 1, "outcome": "bad"},
                    {**verify, "index": verify["index"] + 2, "outcome": "good"}]
    console = Console(record=True, width=300)
    render_report(console, j)
    text = console.export_text()
    assert "verified by a final run" not in text
    assert "verified: GOOD in 2 of its 3 runs (the others BAD: a noisy job" in text


def test_kill_9_of_the_runner_and_resume(target, tmp_path):
    """A real kill -9 of the fusebisect process mid-run (the job kills its parent); the rerun resumes."""
    target.env.update(T_FAULTY=RULES[2], T_KILL_PARENT_AT="4")
    work = tmp_path / "w"
    argv = [sys.executable, "-m", "fusebisect", "run", "--metric", r"loss ([0-9.]+)", "--workdir", str(work),
            "--json", "--", *target.command()]
    first = subprocess.run(argv, env=target.env, capture_output=True, text=True, timeout=60)
    assert first.returncode == -9, first.stderr
    journaled = [e for e in Journal(work / "journal.jsonl").load() if e["event"] == "trial"]
    assert len(journaled) == 3  # the 4th execution was in flight when the runner died
    second = subprocess.run(argv, env=target.env, capture_output=True, text=True, timeout=60)
    assert second.returncode == 0, second.stderr
    j = json.loads(second.stdout)
    assert j["culprits"][0]["rules"] == [RULES[2]]
    offs = [tuple(c["off"]) for c in target.calls()]
    # executions: every journaled one once, plus the one lost in flight, plus the final verification
    assert len(offs) == j["executions"] + 1
    assert len(set(offs)) == len(offs) - 1  # the lost one ran again, nothing else did


def test_search_options_reach_the_engine(target, tmp_path):
    seen = {}

    class Recording(FakeSearch):
        def __init__(self, candidates, **kw):
            seen.update(kw)
            super().__init__(candidates, **kw)

    target.env["T_FAULTY"] = RULES[0]
    session(target, tmp_path, Recording, metric=r"loss ([0-9.]+)", flaky=True, repeat=2, devices=["0", "1", "2"],
            max_runs=30, seed=7, confidence=0.99).run()
    assert seen == {"flaky": True, "repeat": 2, "workers": 3, "confidence": 0.99, "max_executions": 30, "seed": 7}


def test_a_search_that_turns_noisy_by_itself_settles_the_reference_first(target, tmp_path):
    """--flaky runs the all-off reference three times up front; a search that found the job noisy by itself
    kept its one reference run, and every verdict of the noise-aware mode was judged against that one sample
    (an innocent rule named at 0.98)."""
    class TurnsNoisy(FakeSearch):
        @property
        def noisy(self):
            return len(self.order) >= 3   # after the gates and one search run

    target.env["T_FAULTY"] = RULES[0]
    session(target, tmp_path, TurnsNoisy, metric=r"loss ([0-9.]+)").run()
    all_off = sorted(RULES)
    assert sum(sorted(c["off"]) == all_off for c in target.calls()) == 3


def test_fresh_sets_the_previous_runs_outputs_aside_and_numbers_runs_from_1(target, tmp_path):
    work = tmp_path / "w"
    target.env["T_FAULTY"] = RULES[1]
    first = session(target, tmp_path, metric=r"loss ([0-9.]+)").run().run_json
    assert first["status"] == "found" and (work / "fusion_switch.cfg").is_file()
    for name in ("report.html", "report.md"):  # written by the CLI after each run
        (work / name).write_text(f"old {name}")
    with pytest.raises(UsageError, match="--confidence"):  # a rejected --fresh run moves nothing
        session(target, tmp_path, metric=r"loss ([0-9.]+)", fresh=True, confidence=1.5).run()
    assert (work / "fusion_switch.cfg").is_file() and not (work / "previous").exists()
    del target.env["T_FAULTY"]
    res = session(target, tmp_path, metric=r"loss ([0-9.]+)", fresh=True).run().run_json
    assert res["status"] == "not_reproduced" and res["switch_file"] is None
    # nothing of the old run is left where CI would pick it up, and nothing of it is lost
    assert not (work / "fusion_switch.cfg").exists()
    assert not (work / "report.html").exists() and not (work / "report.md").exists()
    assert json.loads((work / "result.json").read_text())["status"] == "not_reproduced"
    [old] = (work / "previous").iterdir()
    assert RULES[1] in (old / "fusion_switch.cfg").read_text()
    assert json.loads((old / "result.json").read_text())["status"] == "found"
    assert (old / "report.html").read_text() == "old report.html"
    assert len(list((old / "trials").iterdir())) == first["executions"]
    # the new run's numbers start again at 1
    assert [t["index"] for t in res["trials"]] == list(range(1, res["executions"] + 1))
    assert sorted(p.name[:4] for p in (work / "trials").iterdir()) == [f"{i:04d}" for i in
                                                                        range(1, res["executions"] + 1)]


def test_fresh_also_sets_aside_a_production_file_written_with_output(target, tmp_path):
    out = tmp_path / "out" / "prod.cfg"
    out.parent.mkdir()
    target.env["T_FAULTY"] = RULES[1]
    assert session(target, tmp_path, metric=r"loss ([0-9.]+)", output=out).run().run_json["status"] == "found"
    del target.env["T_FAULTY"]
    res = session(target, tmp_path, metric=r"loss ([0-9.]+)", output=out, fresh=True).run().run_json
    assert res["status"] == "not_reproduced" and not out.exists()     # no stale verdict at the -o path
    [old] = (tmp_path / "w" / "previous").iterdir()
    assert RULES[1] in (old / "outside" / "prod.cfg").read_text()


def test_the_report_of_a_run_set_aside_points_at_its_own_files(target, tmp_path, capsys):
    """`report WORKDIR/previous/TIME`: its repro commands name switch files that exist (switch/ went along), and
    its production file is the copy set aside (outside/NAME), not the -o path the next run wrote again."""
    from fusebisect.cli.app import main

    out = tmp_path / "out" / "prod.cfg"
    out.parent.mkdir()
    target.env["T_FAULTY"] = RULES[1]
    assert session(target, tmp_path, metric=r"loss ([0-9.]+)", output=out).run().run_json["status"] == "found"
    target.env["T_FAULTY"] = RULES[2]
    assert session(target, tmp_path, metric=r"loss ([0-9.]+)", output=out, fresh=True).run().run_json["status"] \
        == "found"
    [old] = (tmp_path / "w" / "previous").iterdir()
    assert main(["report", str(old), "--json"]) == 0
    j = json.loads(capsys.readouterr().out)
    assert j["switch_file"] == str(old / "outside" / "prod.cfg") and RULES[1] in Path(j["switch_file"]).read_text()
    for side in ("good", "bad"):
        switch = next(a.split("=", 1)[1] for a in j["repro"][side] if a.startswith("FUSEBISECT_SWITCH_FILE="))
        assert switch.startswith(str(old / "switch")) and Path(switch).is_file(), switch


def _two_runs_share_output(target, tmp_path: Path, out: Path) -> None:
    """A run in tmp_path/w (RULES[1] faulty), then one in tmp_path/other (RULES[2] faulty), both writing -o out."""
    target.env["T_FAULTY"] = RULES[1]
    assert session(target, tmp_path, metric=r"loss ([0-9.]+)", output=out).run().run_json["status"] == "found"
    target.env["T_FAULTY"] = RULES[2]
    other = tmp_path / "other"
    other.mkdir()
    assert session(target, other, metric=r"loss ([0-9.]+)", output=out).run().run_json["status"] == "found"


def test_a_report_shows_its_own_production_file_when_another_run_wrote_the_path_since(target, tmp_path, capsys):
    """Two workdirs share -o: the later run wrote the path (the earlier file kept as .bak). The earlier run's
    report shows its own file (the backup holding its digest) with a note, never the other run's as its fix."""
    from fusebisect.cli.app import main

    out = tmp_path / "shared.cfg"
    _two_runs_share_output(target, tmp_path, out)
    assert main(["report", str(tmp_path / "w"), "--json", "--markdown", str(tmp_path / "r.md")]) == 0
    j = json.loads(capsys.readouterr().out)
    assert j["switch_file"] == str(out) + ".bak" and RULES[1] in Path(j["switch_file"]).read_text()
    assert any(n.startswith(f"{out} no longer holds the switch file this run wrote") for n in j["notes"])
    md = (tmp_path / "r.md").read_text()
    assert RULES[1] in md and f'"{RULES[2]}": "off"' not in md
    out.write_text("edited by hand\n")
    (tmp_path / "shared.cfg.bak").write_text("also edited\n")
    assert main(["report", str(tmp_path / "w"), "--markdown", str(tmp_path / "r2.md")]) == 0
    md = (tmp_path / "r2.md").read_text()
    assert "edited by hand" not in md and "also edited" not in md and "no copy of it was found" in md


def test_rerunning_a_finished_run_leaves_a_production_file_another_run_wrote_since(target, tmp_path):
    """Two workdirs share -o and the later run wrote it last. Rerunning the earlier, finished command (to see its
    result again) executes nothing and must not put its older file back over the newer one."""
    out = tmp_path / "prod.cfg"
    _two_runs_share_output(target, tmp_path, out)
    theirs = out.read_text()
    backups = sorted(tmp_path.glob("prod.cfg.bak*"))
    calls = len(target.calls())
    target.env["T_FAULTY"] = RULES[1]
    res = session(target, tmp_path, metric=r"loss ([0-9.]+)", output=out).run()
    assert len(target.calls()) == calls and res.run_json["status"] == "found"
    assert out.read_text() == theirs and sorted(tmp_path.glob("prod.cfg.bak*")) == backups
    assert any(n.startswith(f"{out} changed since this run wrote it") for n in res.run_json["notes"])
    # the result still records this run's own file (by digest), so its report does not take the other for it
    assert res.run_json["switch_file_sha256"] != hashlib.sha256(theirs.encode()).hexdigest()
    # the same file spelled another way is the same file
    (tmp_path / "sub").mkdir()
    res = session(target, tmp_path, metric=r"loss ([0-9.]+)", output=tmp_path / "sub" / ".." / "prod.cfg").run()
    assert out.read_text() == theirs and sorted(tmp_path.glob("prod.cfg.bak*")) == backups
    # the file as this run wrote it (unchanged since) is simply kept
    target.env["T_FAULTY"] = RULES[2]
    again = session(target, tmp_path / "other", metric=r"loss ([0-9.]+)", output=out).run()
    assert out.read_text() == theirs and not any("changed since" in n for n in again.run_json["notes"])


def test_fresh_leaves_a_production_file_another_run_wrote_since(target, tmp_path):
    """Two workdirs share -o: the second run's file is current. --fresh in the first workdir must not take it
    away into the first run's history."""
    out = tmp_path / "out" / "prod.cfg"
    out.parent.mkdir()
    _two_runs_share_output(target, tmp_path, out)
    theirs = out.read_text()
    assert RULES[2] in theirs
    session(target, tmp_path, metric=r"loss ([0-9.]+)", output=out, fresh=True).run()
    assert not list((tmp_path / "w" / "previous").glob("*/outside/prod.cfg"))   # not moved into this history
    assert RULES[2] in out.read_text() or any(RULES[2] in b.read_text() for b in out.parent.glob("prod.cfg.bak*"))


def test_fresh_in_a_copy_of_a_workdir_leaves_the_originals_production_file(target, tmp_path):
    """cp -r A B, then --fresh in B: B's own fusion_switch.cfg is set aside, never A's (the journal names A as
    where the run began, and its result.json A's production file)."""
    import shutil

    target.env["T_FAULTY"] = RULES[1]
    assert session(target, tmp_path, metric=r"loss ([0-9.]+)").run().run_json["status"] == "found"
    original = (tmp_path / "w" / "fusion_switch.cfg").read_text()
    shutil.copytree(tmp_path / "w", tmp_path / "copy")
    target.env["T_FAULTY"] = RULES[2]
    res = session(target, tmp_path, metric=r"loss ([0-9.]+)", workdir=tmp_path / "copy", fresh=True).run()
    assert res.run_json["status"] == "found"
    assert (tmp_path / "w" / "fusion_switch.cfg").read_text() == original      # the original keeps its fix
    [old] = (tmp_path / "copy" / "previous").iterdir()
    assert (old / "fusion_switch.cfg").read_text() == original and not (old / "outside").exists()
    assert RULES[2] in (tmp_path / "copy" / "fusion_switch.cfg").read_text()


def test_a_culprit_named_below_the_confidence_is_no_found(target, tmp_path):
    """The runs with only the culprit on, and with it and one other rule, never compile: the engine names it with
    confidence 0.5 (turning it off works; whether it needs a partner is unknown). That is below --confidence:
    inconclusive, exit 1, with the switch file (verified GOOD) and the reason. (When only its run alone fails,
    two BAD runs with harmless partners rule out one partner, not two pairs sharing it: still inconclusive.)"""
    from fusebisect.search import Search

    target.env["T_FAULTY"] = RULES[3]
    target.env["T_CRASH_ALONE"] = RULES[3]
    alone = session(target, tmp_path, engine=Search, metric=r"loss ([0-9.]+)", workdir=tmp_path / "alone").run()
    assert alone.run_json["status"] == "inconclusive" and alone.run_json["culprits"][0]["confidence"] == 0.5
    assert any("unless it has one in each of them" in n for n in alone.run_json["notes"])
    target.env["T_CRASH_SMALL"] = RULES[3]
    res = session(target, tmp_path, engine=Search, metric=r"loss ([0-9.]+)").run()
    j = res.run_json
    assert res.exit_code == 1 and j["status"] == "inconclusive", j["message"]
    assert [(c["rules"], c["confidence"]) for c in j["culprits"]] == [([RULES[3]], 0.5)]
    assert "is named with confidence 0.5, below --confidence 0.95" in j["message"]
    assert any(f"the run with only {RULES[3]} was invalid" in n for n in j["notes"]), j["notes"]   # the search's
    assert j["switch_file"] and j["verify"]["outcome"] == "good"
    console = Console(record=True, width=300)
    render_report(console, j)
    assert "a final run was GOOD, but the verdict is inconclusive" in console.export_text()


def test_fresh_keeps_an_output_symlink_and_sets_its_target_aside(target, tmp_path):
    """-o through a symbolic link writes the file it points to and keeps the link: --fresh moves that file's
    content aside, never the user's link."""
    real = tmp_path / "real.cfg"
    real.write_text("ORIG\n")
    link = tmp_path / "link.cfg"
    link.symlink_to(real)
    target.env["T_FAULTY"] = RULES[1]
    assert session(target, tmp_path, metric=r"loss ([0-9.]+)", output=link).run().run_json["status"] == "found"
    assert link.is_symlink() and RULES[1] in real.read_text()
    res = session(target, tmp_path, metric=r"loss ([0-9.]+)", output=link, fresh=True).run().run_json
    assert res["status"] == "found"
    assert link.is_symlink() and link.resolve() == real.resolve() and RULES[1] in real.read_text()
    [old] = (tmp_path / "w" / "previous").iterdir()
    assert RULES[1] in (old / "outside" / "real.cfg").read_text() and not (old / "outside" / "link.cfg").exists()


def test_a_workdir_holding_the_users_own_results_is_refused_or_set_aside(target, tmp_path, capsys):
    work = tmp_path / "w"
    work.mkdir()
    (work / "result.json").write_text("my precious results\n")
    (work / "report.md").write_text("# my notes\n")
    target.env["T_FAULTY"] = RULES[1]
    with pytest.raises(UsageError, match=r"already holds result.json, report.md but no journal.jsonl: a run "
                                         r"would overwrite them"):
        session(target, tmp_path, metric=r"loss ([0-9.]+)").run()
    assert (work / "result.json").read_text() == "my precious results\n" and not (work / "trials").exists()
    assert session(target, tmp_path, metric=r"loss ([0-9.]+)", fresh=True).run().run_json["status"] == "found"
    [kept] = (work / "previous").iterdir()
    assert (kept / "result.json").read_text() == "my precious results\n"
    assert (kept / "report.md").read_text() == "# my notes\n"


def test_a_first_run_interrupted_in_its_baseline_is_set_aside_not_refused(target, tmp_path):
    """Ctrl-C or kill -9 during the baseline leaves trials/ and no journal: a rerun sets those trials aside and
    starts; a trials/ holding anything a run of ours does not write stays refused."""
    work = tmp_path / "w"
    (work / "trials" / "0001-e3b0c44298fc" / "dump").mkdir(parents=True)
    (work / "trials" / "0001-e3b0c44298fc.pgid").write_text("999999\n")
    target.env["T_FAULTY"] = RULES[1]
    assert session(target, tmp_path, metric=r"loss ([0-9.]+)").run().run_json["status"] == "found"
    [kept] = (work / "previous").iterdir()
    assert (kept / "trials" / "0001-e3b0c44298fc").is_dir()
    other = tmp_path / "other"
    (other / "trials").mkdir(parents=True)
    (other / "trials" / "my_notes.txt").write_text("mine\n")
    with pytest.raises(UsageError, match="already holds trials but no journal.jsonl"):
        session(target, tmp_path, metric=r"loss ([0-9.]+)", workdir=other).run()
    assert (other / "trials" / "my_notes.txt").read_text() == "mine\n"


def test_a_second_run_in_a_workdir_in_use_is_refused_and_touches_nothing(target, tmp_path):
    import fcntl

    work = tmp_path / "w"
    work.mkdir()
    with open(work / ".lock", "a+") as held:      # another fusebisect run holding the workdir
        fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write("4242\n")
        held.flush()
        with pytest.raises(UsageError, match=r"another fusebisect run is using it \(pid 4242\)"):
            session(target, tmp_path, metric=r"loss ([0-9.]+)").run()
        assert sorted(p.name for p in work.iterdir()) == [".lock"]
    target.env["T_FAULTY"] = RULES[1]           # released: the run goes ahead
    assert session(target, tmp_path, metric=r"loss ([0-9.]+)").run().run_json["status"] == "found"


def test_a_reference_invalid_twice_stops_the_run_at_the_gates(target, tmp_path):
    from fusebisect.search import Search

    target.env.update(T_FAULTY=RULES[3], T_CRASH_OFF=RULES[0])  # the all-off reference crashes every time
    res = session(target, tmp_path, engine=Search, metric=r"loss ([0-9.]+)").run()
    j = res.run_json
    assert j["status"] == "inconclusive" and res.exit_code == 1
    assert [t["role"] for t in j["trials"]] == ["baseline", "reference", "repeat"]
    assert len(target.calls()) == 3  # no baseline rerun that could only stay "pending"
    assert "reference run was INVALID twice (run 2: crash (exit 3); run 3: crash (exit 3))" in j["message"]


@pytest.mark.parametrize("array", ["", "1"])
def test_a_job_that_ignores_the_switch_file_stops_after_the_reference(target, tmp_path, array):
    from fusebisect.search import Search

    # every rule fires whatever the switch file says (array: the statistics in GE's array form)
    target.env.update(T_FAULTY=RULES[3], T_IGNORE=",".join(RULES), T_ARRAY=array)
    res = session(target, tmp_path, engine=Search, metric=r"loss ([0-9.]+)").run()
    j = res.run_json
    assert j["status"] == "inconclusive" and res.exit_code == 1
    assert len(target.calls()) == 2 and j["executions"] == 2
    assert j["message"].startswith("The switch file was ignored: all 5 candidate rules still fired")
    again = session(target, tmp_path, engine=Search, metric=r"loss ([0-9.]+)").run().run_json
    assert len(target.calls()) == 2 and again["status"] == "inconclusive"  # resuming runs nothing more


@pytest.mark.parametrize("first,then", [(1, 3), (2, 1)])
def test_rerunning_a_finished_run_with_other_jobs_executes_nothing(target, tmp_path, first, then):
    from fusebisect.search import Search

    target.env["T_FAULTY"] = f"{RULES[1]},{RULES[3]}"
    done = session(target, tmp_path, engine=Search, metric=r"loss ([0-9.]+)", jobs=first).run().run_json
    assert done["status"] == "found"
    again = session(target, tmp_path, engine=Search, metric=r"loss ([0-9.]+)", jobs=then).run().run_json
    assert again["executions"] == done["executions"] and again["culprits"] == done["culprits"]
    assert len(list((tmp_path / "w" / "trials").iterdir())) == done["executions"]


def test_all_off_still_bad_names_the_rules_that_fired_only_then(target, tmp_path):
    """Turning RULES[1] off lets RULES[4] fuse the same pattern; both are faulty. The reference (every candidate
    the baseline fired turned off) is still bad, because of RULES[4]: not "not caused by the fusion rules"."""
    from fusebisect.search import Search

    target.env.update(T_FAULTY=f"{RULES[1]},{RULES[4]}", T_SHADOW=f"{RULES[1]}:{RULES[4]}", T_EXIT_BAD="1")
    j = session(target, tmp_path, engine=Search).run().run_json
    assert j["status"] == "inconclusive" and RULES[4] not in j["candidate_rules"]
    assert j["message"].startswith(f"With all 4 candidate rules off the symptom is still there, but 1 rule outside "
                                   f"the candidates fired in that run: {RULES[4]} (only then); turning a pass off "
                                   f"can let another fuse the same pattern. The cause may be that rule: to test it, "
                                   f"rerun with --fresh and --rules ")
    rules = j["message"].rsplit("--rules ", 1)[1]   # copied as it is: no period after the list
    again = session(target, tmp_path, engine=Search, rules=rules, fresh=True).run().run_json
    assert again["status"] == "found"
    assert sorted(r for c in again["culprits"] for r in c["rules"]) == sorted([RULES[1], RULES[4]])
    # nothing else fired: all-off still bad is not the fusion rules' doing (the candidates, that is)
    target.env.update(T_FAULTY="", T_SHADOW="", T_NEEDED="")
    target.env["T_RULES"] = ",".join(RULES[:2])
    j = session(target, tmp_path, engine=Search, command=[sys.executable, "-c", "import sys; sys.exit(1)"],
                rules=",".join(RULES[:2]), fresh=True).run().run_json
    assert j["status"] == "not_fusion"
    # (the job is bad without them: they are not its only cause, which says nothing of a second one among them)
    assert j["message"] == ("With all 2 candidate rules off the symptom is still there, twice: turning off the 2 "
                            "rules --rules named does not fix it, so they are not the only cause: the job is bad "
                            "without them (one of them may still be a second cause, or one bad while switched off, "
                            "which these two runs cannot tell).")


def test_a_culprit_that_ignores_its_switch_is_named_as_a_likely_cause_not_suggested_again(target, tmp_path):
    from fusebisect.search import Search

    target.env.update(T_FAULTY=RULES[1], T_IGNORE=RULES[1], T_EXIT_BAD="1")
    j = session(target, tmp_path, engine=Search).run().run_json
    assert j["status"] == "inconclusive" and RULES[1] in j["switch_ignored"]
    assert f"But {RULES[1]} still fired with its switch off (the job ignores it), so no switch file can test it " \
           "or turn it off, and it may be the cause" in j["message"]
    assert "--rules" not in j["message"]   # rerunning with it as a candidate would end the same way


def test_a_session_built_without_the_switch_is_named(target, tmp_path):
    target.env.update(T_FAULTY=RULES[1], T_EVAL_GRAPH="1")
    j = session(target, tmp_path, metric=r"loss ([0-9.]+)").run().run_json
    assert j["status"] == "inconclusive"
    assert j["message"].startswith("The switch file was ignored by session_and_graph_id_1_2 (the candidate rules "
                                   "still fired there with every one turned off, run 2) but honoured by "
                                   "session_and_graph_id_0_1: a graph or session built without it")


def test_found_beside_a_rule_that_ignores_its_switch_says_what_a_relative_oracle_cannot_tell(target, tmp_path):
    from fusebisect.search import Search

    target.env.update(T_FAULTY=RULES[3], T_IGNORE=RULES[1])
    j = session(target, tmp_path, engine=Search, metric=r"loss ([0-9.]+)").run().run_json
    assert j["status"] == "found" and [c["rules"] for c in j["culprits"]] == [[RULES[3]]]
    assert f"Caution: {RULES[1]} stayed on in every run, the reference included (a pass that cannot be switched " \
           "off, or whose switch the job ignores)" in j["message"]
    from fusebisect.report.html import render_run
    from fusebisect.report.model import load_run_view
    html = render_run(load_run_view(tmp_path / "w"))
    assert "Caution:" in html   # the whole verdict reaches the HTML report
    assert f"{j['candidates']} candidate rules" in html   # the rule excluded during the run is not one of them
    # with a good run defined, there is nothing to caution about
    j = session(target, tmp_path, engine=Search, metric=r"loss ([0-9.]+)", expect=0.4, fresh=True).run().run_json
    assert j["status"] == "found" and "Caution" not in j["message"]


NOISY_JOB = textwrap.dedent(r'''
    import json, os, sys
    rules = os.environ["T_RULES"].split(",")
    sw = json.load(open(os.environ["FUSEBISECT_SWITCH_FILE"]))["Switch"]
    off = {n for sec in sw.values() for n, v in sec.items() if v == "off"}
    on = [r for r in rules if r not in off]
    res = {"session_and_graph_id_0_1": {"graph_fusion": {r: {"match_times": 1, "effect_times": 1} for r in on}}}
    json.dump(res, open(os.path.join(os.environ["ASCEND_WORK_PATH"], "fusion_result.json"), "w"))
    counter = os.environ["T_LOG"] + ".n"
    n = int(open(counter).read()) if os.path.exists(counter) else 0
    open(counter, "w").write(str(n + 1))
    # every rule off: a loss that wobbles by 5 % from run to run (--rtol 0.01 is far below it); else bad
    print("loss %s" % ((0.40, 0.43, 0.37, 0.40, 0.44, 0.36, 0.41)[n % 7] if not on else 0.9))
''')


@pytest.mark.parametrize("end", ["not_fusion", "found"])
def test_a_noisy_search_whose_all_off_runs_disagree_names_nothing(target, tmp_path, end):
    """Under a relative --metric, a noise-aware search over a job whose noise is far above --rtol: 'not fusion'
    (the all-off runs read BAD against an all-off reference: that is the noise itself) said the candidates
    are not the only cause, twice; and several culprit sets were named with confidence, most of them innocent.
    Both end inconclusive, saying the noise is larger than the tolerance."""
    class Scripted(FakeSearch):
        noisy = True

        def _want(self):
            all_off = frozenset(self.candidates)
            if frozenset() not in self.observed:
                return [frozenset()]
            if self.order.count(all_off) < 5:
                return [all_off]
            culprits = [Culprit(rules=(r,), confidence=0.97) for r in self.candidates[:2]] if end == "found" else []
            self.done = True
            self.result = SearchResult(status=end, culprits=culprits, executions=len(self.order), bound=5,
                                       message=f"scripted {end}", boundary=None)
            return []

    target.script.write_text(NOISY_JOB)
    j = session(target, tmp_path, Scripted, metric=r"loss ([0-9.]+)").run().run_json
    assert j["status"] == "inconclusive" and j["culprits"] == [], j["message"]
    assert j["message"].startswith("The all-candidates-off runs read BAD against their own middle one in "), \
        j["message"]
    assert "the job's run-to-run noise is larger than the tolerance" in j["message"]
