"""The ``fusebisect run`` command edge: usage errors (exit 2), Ctrl-C and SIGTERM (exit 130/143, journal kept, no
orphans)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from fusebisect.cli.app import main


@pytest.mark.parametrize("args,msg", [
    (["run", "--metric", "loss ([0-9.]+)"], "no command to run"),
    (["run", "--metric", "loss [0-9.]+", "--", "true"], "exactly one capture group"),
    (["run", "--metric", "(", "--", "true"], "invalid regular expression"),
    (["run", "--metric-mode", "first", "--metric", "(x)", "--", "true"], "--metric-mode"),
    (["run", "--check", "a 'b", "--", "true"], "--check"),
    (["run", "--rules", "A,b c", "--", "true"], "invalid rule name"),
    (["run", "--repeat", "0", "--", "true"], "--repeat"),
    (["run", "--timeout", "0", "--", "true"], "--timeout"),
    (["run", "--jobs", "3", "--devices", "0,1", "--", "true"], "disagree"),
])
def test_usage_errors_exit_2(args, msg, capsys, tmp_path):
    rc = main([*args[:1], "--workdir", str(tmp_path / "w"), *args[1:]])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert msg in err and err.startswith("fusebisect: error: ")


def test_scripts_whose_hash_bang_works_are_run(capsys, tmp_path):
    """env -S splits the rest of the line itself, with options that take values (-u NAME, -C DIR): such a script
    starts, and was refused ('no FOO is on the PATH')."""
    for line in ("#!/usr/bin/env -S -u FOO sh", f"#!/usr/bin/env -S -C {tmp_path} sh", "#! /bin/sh -eu",
                 "#!/usr/bin/env -S VAR=1 sh -e", "#!/usr/bin/env sh" + " " * 240 + "# only 256 bytes are read"):
        job = tmp_path / "job.sh"
        job.write_text(f"{line}\nexit 0\n")
        job.chmod(0o755)
        rc = main(["-q", "run", "--rules", "GeluFusionPass", "--workdir", str(tmp_path / "w"), "--fresh", "--",
                   str(job)])
        err = capsys.readouterr().err
        assert rc == 1 and "cannot run command" not in err, (line, err)   # it ran: good with or without Gelu


def test_help_has_an_example(capsys):
    rc = main(["run", "--help"])
    out = capsys.readouterr().out
    assert rc == 0 and "Example" in out and "FUSEBISECT_SWITCH_FILE" in out


def test_missing_program_exits_2(capsys, tmp_path):
    rc = main(["run", "--workdir", str(tmp_path / "w"), "--", str(tmp_path / "no-such-program")])
    assert rc == 2 and "cannot run command" in capsys.readouterr().err


@pytest.mark.parametrize("text, why", [
    (b"#!/bin/sh\r\nexit 0\r\n", "its #! line ends in a carriage return (saved with CRLF line ends)"),
    (b"#!/no/such/interpreter -e\nexit 0\n", "its #! line names the interpreter /no/such/interpreter, which does not"),
    (b"exit 0\n", "a script without a #! line, which exec cannot start"),
    (b"#!/usr/bin/env python3\r\nimport sys\r\n", "its #! line ends in a carriage return"),   # env's program
    (b"#!/bin/sh -e\r\nexit 0\r\n", "its #! line ends in a carriage return"),   # an argument of the interpreter
    (b"#!/usr/bin/env no-such-python-9\nprint(1)\n", "its #! line runs no-such-python-9 through env, and no "
                                                        "no-such-python-9 is on the PATH"),
    (b"", "an empty file, which exec cannot start"),
    (b"#!/usr/bin/env python3 -u\nprint(1)\n", "its #! line gives env 'python3 -u' as one argument (Linux does "
                                             "not split the rest of a #! line), which env cannot run: write "
                                             "'#!/usr/bin/env -S python3 -u'"),
    (b"#!/usr/bin/env -S no-such-prog-9 -u\n", "its #! line runs no-such-prog-9 through env, and no no-such-prog-9 is"),
    (b"#!/usr/bin/env VAR=1\n", "its #! line gives env 'VAR=1' and no program to run: env would run the script "
                                "itself, which starts env again, forever"),
    (b"#!/usr/bin/env\n", "its #! line runs env with nothing to run: env would run the script itself"),
    (b"#!\necho\n", "its #! line names no interpreter"),
])
def test_a_script_exec_cannot_start_is_refused_before_any_run(capsys, tmp_path, text, why):
    """exec said "No such file or directory" of a script that is there (its #! interpreter is not), after the
    journal began: every retry left a run the report called interrupted."""
    job = tmp_path / "job.sh"
    job.write_bytes(text)
    job.chmod(0o755)
    for check in (False, True):
        argv = ["--check", str(job)] if check else []
        rc = main(["run", "--workdir", str(tmp_path / "w"), "--timeout", "10", "--max-runs", "2", *argv, "--",
                   str(job) if not check else "true"])   # (a script env starts again and again ends at the timeout)
        err = capsys.readouterr().err
        assert rc == 2 and f"cannot run command '{job}': {why}" in err, err
        assert not (tmp_path / "w" / "trials").exists()


@pytest.mark.parametrize("sig, code, what", [(signal.SIGINT, 130, "interrupted"),
                                             (signal.SIGTERM, 143, "terminated (SIGTERM)")])  # timeout, Slurm, k8s
def test_ctrl_c_or_sigterm_kills_the_job_keeps_the_journal_and_says_how_to_resume(tmp_path, sig, code, what):
    job = tmp_path / "job.py"
    pidfile = tmp_path / "grandchild.pid"
    job.write_text(textwrap.dedent(f'''
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        open({str(pidfile)!r}, "w").write(str(child.pid))
        time.sleep(300)
    '''))
    work = tmp_path / "w"
    proc = subprocess.Popen([sys.executable, "-m", "fusebisect", "run", "--rules", "ABatchnormFusionPass",
                             "--workdir", str(work), "--", sys.executable, str(job)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not (pidfile.exists() and pidfile.read_text()):
        assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read() if proc.poll() else ""
        time.sleep(0.05)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert f"fusebisect: {what} after 0 runs" in err and "Rerun the same command to resume" in err
    assert len(list((work / "trials").iterdir())) == 1  # the interrupted run's dir (and logs) are kept
    events = [json.loads(line) for line in (work / "journal.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events] == ["start"]  # kept, and the killed run is not judged
    _assert_gone(int(pidfile.read_text()), "the job's grandchild survived Ctrl-C")


def _assert_gone(pid: int, why: str) -> None:
    """Wait up to 5 s for ``pid`` to end (a zombie counts as ended); else kill it and fail with ``why``."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    pytest.fail(why)


def _wait_written(proc: subprocess.Popen, path, timeout: float = 30) -> None:
    """Wait until ``path`` holds something (written by the job or the check of the fusebisect process ``proc``,
    which must still be running)."""
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text()):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)


def _kill_9_once_written(proc: subprocess.Popen, pidfile) -> None:
    """kill -9 the fusebisect process ``proc`` as soon as its job has written ``pidfile``."""
    _wait_written(proc, pidfile)
    proc.kill()
    proc.wait(timeout=10)


def _blocking_check(tmp_path, then: str = ""):
    """A --check script that, while tmp_path/block exists, writes its pid to tmp_path/check.pid and sleeps, else
    runs ``then`` (Python source); returns (script, pid file, block file), the block file created."""
    check, pidfile, block = tmp_path / "check.py", tmp_path / "check.pid", tmp_path / "block"
    block.touch()
    check.write_text(textwrap.dedent(f'''
        import os, sys, time
        if os.path.exists({str(block)!r}):
            open({str(pidfile)!r}, "w").write(str(os.getpid()))
            time.sleep(300)
    ''') + then + "\n")
    return check, pidfile, block


def test_after_kill_9_the_rerun_kills_a_check_command_left_running(tmp_path):
    """The --check command runs in its own process group after the job: kill -9 of fusebisect while it runs
    leaves it alive, and the rerun kills it like a job left running."""
    check, pidfile, block = _blocking_check(tmp_path)
    work = tmp_path / "w"
    argv = [sys.executable, "-m", "fusebisect", "run", "--rules", "ABatchnormFusionPass", "--workdir", str(work),
            "--check", f"{sys.executable} {check}", "--", sys.executable, "-c", "pass"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _kill_9_once_written(proc, pidfile)
        left = int(pidfile.read_text())
        assert psutil.Process(left).is_running()
        block.unlink()
        rerun = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert "killed the execution an interrupted run left running in" in " ".join(rerun.stderr.split())
        _assert_gone(left, "the check command left running by the killed fusebisect survived the rerun")
    finally:
        proc.kill()


@pytest.mark.parametrize("rules", [["--rules", "ABatchnormFusionPass"], []])
def test_a_run_stopped_during_its_check_resumes_without_running_its_job_again(tmp_path, rules):
    """SIGTERM while the --check of a finished job runs: the journal keeps that the job ran, and the rerun checks
    its output again instead of running the training job a second time. Without --rules that first run is the
    discovery baseline: its fired rules settle the candidates and begin the journal before it is checked, so it
    is not run again either."""
    check, started, block = _blocking_check(tmp_path, 'sys.exit(0 if \'"ABatchnormFusionPass": "off"\' in '
                                                       'open(os.environ["FUSEBISECT_SWITCH_FILE"]).read() else 1)')
    count = tmp_path / "jobs.txt"
    work = tmp_path / "w"
    argv = [sys.executable, "-m", "fusebisect", "run", *rules, "--workdir", str(work),
            "--check", f"{sys.executable} {check}", "--", sys.executable, "-c",
            f"open({str(count)!r}, 'a').write('x')"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_written(proc, started, timeout=60)
        proc.terminate()
        assert proc.wait(timeout=30) == 143
        assert count.read_text() == "x"
        block.unlink()
        rerun = subprocess.run([*argv[:4], "--json", *argv[4:]], capture_output=True, text=True, timeout=120)
        assert rerun.returncode == 0, rerun.stderr
        j = json.loads(rerun.stdout)
        assert len(count.read_text()) == j["executions"], (count.read_text(), rerun.stderr)
        assert "checking its output again (the job does not run again)" in " ".join(rerun.stderr.split())
        assert "ABatchnormFusionPass" in str(j["culprits"])
    finally:
        proc.kill()


def test_a_run_killed_9_during_its_check_resumes_without_running_its_job_again(tmp_path):
    """kill -9 of fusebisect while the --check of a finished job runs (nothing is journaled then by a handler):
    the journal already holds that the job ran, and the rerun checks its output instead of training again."""
    check, started, block = _blocking_check(tmp_path, 'sys.exit(0 if \'"ABatchnormFusionPass": "off"\' in '
                                                       'open(os.environ["FUSEBISECT_SWITCH_FILE"]).read() else 1)')
    count = tmp_path / "jobs.txt"
    argv = [sys.executable, "-m", "fusebisect", "run", "--json", "--rules", "ABatchnormFusionPass", "--workdir",
            str(tmp_path / "w"), "--check", f"{sys.executable} {check}", "--", sys.executable, "-c",
            f"open({str(count)!r}, 'a').write('x')"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _kill_9_once_written(proc, started)
        left = int(started.read_text())
        assert count.read_text() == "x"
        block.unlink()
        rerun = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert rerun.returncode == 0, rerun.stderr
        j = json.loads(rerun.stdout)
        assert j["status"] == "found" and len(count.read_text()) == j["executions"], (count.read_text(), rerun.stderr)
        assert "checking its output again (the job does not run again)" in " ".join(rerun.stderr.split())
        _assert_gone(left, "the check command left running by the killed fusebisect survived the rerun")
    finally:
        proc.kill()


def test_a_check_run_again_on_resume_runs_on_its_own_slot_device(tmp_path):
    """The resume checks a finished job's output again in the slot the scheduler gave it: on that slot's device,
    never on the device the job had (another run may hold it, or --devices no longer lists it)."""
    seen = tmp_path / "check_devices.txt"
    check, started, block = _blocking_check(tmp_path, f'open({str(seen)!r}, "a").write(os.environ.get('
                                                       '"ASCEND_RT_VISIBLE_DEVICES", "-") + "\\n")')
    argv = [sys.executable, "-m", "fusebisect", "run", "--rules", "ABatchnormFusionPass", "--workdir",
            str(tmp_path / "w"), "--check", f"{sys.executable} {check}"]
    proc = subprocess.Popen([*argv, "--devices", "3", "--", sys.executable, "-c", "pass"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_written(proc, started, timeout=60)
        proc.terminate()
        assert proc.wait(timeout=30) == 143
        block.unlink()
        rerun = subprocess.run([*argv, "--devices", "5", "--", sys.executable, "-c", "pass"], capture_output=True,
                               text=True, timeout=120)
        assert "checking its output again" in " ".join(rerun.stderr.split()), rerun.stderr
        assert set(seen.read_text().split()) == {"5"}, seen.read_text()
    finally:
        proc.kill()


def test_after_kill_9_the_rerun_first_kills_the_job_left_running(tmp_path):
    """kill -9 of fusebisect leaves its running job alive (it holds an NPU); the rerun that resumes kills it, and
    only it, before starting anything."""
    job = tmp_path / "job.py"
    pidfile = tmp_path / "grandchild.pid"
    detached = tmp_path / "detached.pid"   # a process the job moved out of its group (setsid)
    block = tmp_path / "block"
    block.touch()
    job.write_text(textwrap.dedent(f'''
        import os, subprocess, sys, time
        if os.path.exists({str(block)!r}):
            away = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
            open({str(detached)!r}, "w").write(str(away.pid))
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
            open({str(pidfile)!r}, "w").write(str(child.pid))
            time.sleep(300)
    '''))
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
    work = tmp_path / "w"
    argv = [sys.executable, "-m", "fusebisect", "run", "--rules", "ABatchnormFusionPass", "--workdir", str(work),
            "--", sys.executable, str(job)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _kill_9_once_written(proc, pidfile)
        grandchild = int(pidfile.read_text())
        assert psutil.Process(grandchild).is_running()      # fusebisect is gone, its job is not
        block.unlink()
        rerun = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert "killed the execution an interrupted run left running in" in " ".join(rerun.stderr.split())
        _assert_gone(grandchild, "the job left running by the killed fusebisect survived the rerun")
        _assert_gone(int(detached.read_text()), "the process the job detached survived the rerun")
        assert bystander.poll() is None                        # nothing else was touched
        assert not list(work.glob("trials/*.pgid"))
    finally:
        bystander.kill()
        proc.kill()


def test_found_under_a_budget_always_rests_on_a_good_run_of_the_production_file(capsys, tmp_path):
    """Two culprits; whatever --max-runs cuts, "found" needs a GOOD run with the culprits off, --no-verify or
    not: --no-verify skips only the final run, not the search's own look for more culprits."""
    rules = ["GeluFusionPass", "LayerNormFusionPass", "MulAddFusionPass", "MatMulBiasAddFusionPass"]
    job = tmp_path / "job.sh"   # bad while GeluFusionPass or MulAddFusionPass is on
    job.write_text('for r in GeluFusionPass MulAddFusionPass; do\n'
                   '  grep -q "\\"$r\\": \\"off\\"" "$FUSEBISECT_SWITCH_FILE" || exit 1\ndone\n')
    statuses = set()
    for budget in range(4, 12):
        for verify in ([], ["--no-verify"]):
            work = tmp_path / f"w{budget}{len(verify)}"
            rc = main(["run", "--json", "--rules", ",".join(rules), "--max-runs", str(budget), *verify,
                       "--workdir", str(work), "--", "bash", str(job)])
            j = json.loads(capsys.readouterr().out)
            statuses.add(j["status"])
            if j["status"] == "found":
                off = sorted(r for c in j["culprits"] for r in c["rules"])
                assert rc == 0 and off == ["GeluFusionPass", "MulAddFusionPass"], (budget, verify, j["message"])
                assert any(t["config_off"] == off and t["outcome"] == "good" for t in j["trials"]), (budget, verify)
            else:
                assert rc == 1 and j["status"] == "inconclusive", (budget, verify, j["message"])
    assert statuses == {"found", "inconclusive"}


def test_a_budget_cut_before_the_production_run_does_not_say_more_culprits_are_left(capsys, tmp_path):
    """Nothing showed the job still bad with the culprit off: the verdict must not say the culprits found are not
    the whole answer."""
    rules = ["GeluFusionPass", "LayerNormFusionPass", "MulAddFusionPass", "MatMulBiasAddFusionPass"]
    job = tmp_path / "job.sh"   # bad while GeluFusionPass is on
    job.write_text('grep -q \'"GeluFusionPass": "off"\' "$FUSEBISECT_SWITCH_FILE"\n')
    args = ["run", "--json", "--rules", ",".join(rules), "--", "bash", str(job)]
    assert main(args[:2] + ["--workdir", str(tmp_path / "all")] + args[2:]) == 0
    full = json.loads(capsys.readouterr().out)
    assert full["trials"][-1]["config_off"] == ["GeluFusionPass"]
    budget = full["executions"] - 1
    assert main(args[:2] + ["--max-runs", str(budget), "--workdir", str(tmp_path / "cut")] + args[2:]) == 1
    j = json.loads(capsys.readouterr().out)
    assert j["status"] == "inconclusive" and [c["rules"] for c in j["culprits"]] == [["GeluFusionPass"]]
    assert "whether they are the whole answer is not known" in j["message"], j["message"]
    assert "not the whole answer" not in j["message"].replace("whether they are the whole answer is not known", "")


def test_progress_events_are_one_line_each_in_a_pipe(capsys, tmp_path):
    rules = ["BatchMatMulNonAlignedFusionPass", "BatchMatMulReduceMeanFusionPass", "BatchMatMulTransposeFusionPass",
             "BatchMatMulV2ReduceFusionPass", "BatchMatMulV2ReshapeFusionPass", "GeluFusionPass"]
    job = tmp_path / "job.sh"   # bad while GeluFusionPass is on
    job.write_text('grep -q \'"GeluFusionPass": "off"\' "$FUSEBISECT_SWITCH_FILE"\n')
    assert main(["run", "--rules", ",".join(rules), "--workdir", str(tmp_path / "w"), "--", "bash", str(job)]) == 0
    lines = capsys.readouterr().err.splitlines()
    started = [ln for ln in lines if ln.startswith("run ") and " off: " in ln]
    assert len(started) >= 4 and all(ln.endswith(("more)", "Pass", "every candidate")) for ln in started), started
    # the fewer of off and on is named: which rule a search run left on is read off its line
    assert "run 6 (search): 5 off: all but GeluFusionPass" in started
    assert not [ln for ln in lines if ln.lstrip().startswith(("BatchMatMul", "GeluFusionPass"))]   # no wrapped rest
    # each verdict line says where the search stands after that verdict, not before it
    tails = [ln.partition(" — ")[2] for ln in lines if " runs done" in ln]
    assert tails[-4:] == ["2 candidates left, roughly 3 runs left", "1 candidate left, roughly 2 runs left",
                          "1 culprit set found, looking for more among the other 5 (1 run if there is none)", ""]


def test_a_gate_invalid_twice_says_why(capsys, tmp_path):
    job = tmp_path / "job.sh"   # fine with the rules off; the default configuration crashes
    job.write_text('grep -q off "$FUSEBISECT_SWITCH_FILE" && { echo "loss 1.0"; exit 0; }\nkill -SEGV $$\n')
    rc = main(["run", "--json", "--metric", "loss ([0-9.]+)", "--rules", "GeluFusionPass,LayerNormFusionPass",
               "--workdir", str(tmp_path / "w"), "--", "bash", str(job)])
    j = json.loads(capsys.readouterr().out)
    assert rc == 1 and j["status"] == "inconclusive"
    assert j["message"] == ("The baseline run could not be judged twice; nothing can be concluded. Why: run 2: "
                            "crash (killed by signal 11); run 3: crash (killed by signal 11).")


def test_a_job_that_never_runs_to_a_verdict_is_not_blamed_on_the_candidates(capsys, tmp_path):
    """Every run a skip (exit 125), the default configuration's too: the message says neither gate could be
    judged (not 'narrow the candidates'), and why, once, run by run."""
    rc = main(["run", "--json", "--rules", "GeluFusionPass,LayerNormFusionPass", "--workdir", str(tmp_path / "w"),
               "--", "sh", "-c", "exit 125"])
    j = json.loads(capsys.readouterr().out)
    assert rc == 1 and j["status"] == "inconclusive"
    assert j["message"].startswith("Neither the baseline (default configuration) nor the all-candidates-off "
                                   "reference run could be judged twice")
    assert "--rules" not in j["message"] and j["message"].count("Why:") == 1
    assert "Why: baseline run 2: exit 125 (skip)" in j["message"] and "; reference run 1: exit 125" in j["message"]


def test_rules_takes_a_long_list_of_names_and_refuses_a_switch_file_of_all(capsys, tmp_path):
    """A NAME,NAME,... list past 255 characters is names, not a file name the OS refuses; a switch file that
    switches ALL is refused as the name ALL is; --jobs has a ceiling (no hang on a huge value)."""
    from fusebisect.rules.catalog import default_catalog

    names = sorted(r.name for r in default_catalog().rules.values() if r.can_disable and not r.spelling_of)[:40]
    spec = ",".join(names)
    assert len(spec) > 255
    assert main(["run", "--json", "--rules", spec, "--workdir", str(tmp_path / "w"), "--", "true"]) == 1
    assert json.loads(capsys.readouterr().out)["candidates"] == len(names)
    all_off = tmp_path / "all-off.cfg"
    assert main(["cfg", "all-off", "--out", str(all_off)]) == 0
    capsys.readouterr()
    assert main(["run", "--rules", str(all_off), "--workdir", str(tmp_path / "w2"), "--", "true"]) == 2
    assert f"--rules: {all_off} switches ALL, which is the switch file's key" in capsys.readouterr().err
    assert main(["run", "--jobs", "100000000", "--workdir", str(tmp_path / "w3"), "--", "true"]) == 2
    assert "--jobs must be between 1 and 64" in capsys.readouterr().err


def test_two_culprits_found_through_the_early_look_keep_both_repro_commands(capsys, tmp_path):
    """A first culprit early in a long order: the run after its confirmation turns on the first 60 % of the rules
    after it; the second culprit there makes it BAD, so "only the first off" is never run. The repro commands
    still rest on runs that were made, and reproduce both sides."""
    from fusebisect.rules.catalog import default_catalog

    names = sorted(r.name for r in default_catalog().rules.values() if r.can_disable and not r.spelling_of)[:120]
    first, second = names[3], names[50]
    job = tmp_path / "job.sh"   # good only while both culprits are off
    job.write_text(f'grep -q \'"{first}": "off"\' "$FUSEBISECT_SWITCH_FILE" && '
                   f'grep -q \'"{second}": "off"\' "$FUSEBISECT_SWITCH_FILE"\n')
    assert main(["run", "--json", "--rules", ",".join(names), "--workdir", str(tmp_path / "w"),
                 "--", "bash", str(job)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert sorted(c["rules"] for c in out["culprits"]) == sorted([[first], [second]])
    offs = [sorted(t["config_off"]) for t in out["trials"]]
    assert [first] not in offs                      # the look-for-more run after the first, implied BAD
    early = [o for o in offs if first in o and second not in o and len(o) < len(names) - 1]
    assert early, "no early look was run"
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("FUSEBISECT_", "ASCEND_", "DUMP_"))}
    for side, code in (("good", 0), ("bad", 1)):
        assert out["repro"][side], side
        assert subprocess.run(out["repro"][side], env=clean, cwd=tmp_path).returncode == code, side


def test_the_boundary_commands_run_as_printed_with_the_whole_trial_contract(capsys, tmp_path):
    job = tmp_path / "job.sh"   # writes into {trial_dir} and $FUSEBISECT_DUMP_DIR; bad while GeluFusionPass is on
    job.write_text('echo x > "$1/marker" && echo y > "$FUSEBISECT_DUMP_DIR/d" && [ -n "$ASCEND_WORK_PATH" ] || exit 3\n'
                   'grep -q \'"GeluFusionPass": "off"\' "$FUSEBISECT_SWITCH_FILE"\n')
    assert main(["run", "--json", "--rules", "GeluFusionPass,LayerNormFusionPass", "--workdir", str(tmp_path / "w"),
                 "--", "bash", str(job), "{trial_dir}"]) == 0
    repro = json.loads(capsys.readouterr().out)["repro"]
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("FUSEBISECT_", "ASCEND_", "DUMP_"))}
    for side, code in (("good", 0), ("bad", 1)):
        assert subprocess.run(repro[side], env=clean, cwd=tmp_path).returncode == code, (side, repro[side])
        assert (tmp_path / "w" / "repro" / side / "marker").exists()


def test_a_later_run_of_the_all_off_configuration_is_judged_against_the_reference(capsys, tmp_path):
    """Both rules are culprits, so the production file is the reference's configuration, run again to check
    the job did not start failing for another reason: that run is judged, not GOOD by definition."""
    job, count = tmp_path / "job.sh", tmp_path / "count"
    job.write_text(
        'off=$(grep -c \'"off"\' "$FUSEBISECT_SWITCH_FILE")\n'
        'if [ "$off" = 2 ]; then n=$(( $(cat ' + str(count) + ' 2>/dev/null || echo 0) + 1 )); echo $n > '
        + str(count) + '\n  [ $n -ge 2 ] && { echo "loss 99"; exit 0; }; echo "loss 1.0"; exit 0; fi\n'
        'echo "loss 2.0"\n')   # bad while either rule is on; the second all-off run: the job broke meanwhile
    rc = main(["run", "--json", "--metric", "loss ([0-9.]+)", "--rules", "GeluFusionPass,LayerNormFusionPass",
               "--workdir", str(tmp_path / "w"), "--", "bash", str(job)])
    j = json.loads(capsys.readouterr().out)
    assert rc == 1 and j["status"] == "inconclusive", j["message"]
    assert j["verify"]["outcome"] == "bad" and "metric 99" in j["verify"]["reason"]
    # the same command again: the journal has that re-check; nothing runs
    assert main(["run", "--json", "--metric", "loss ([0-9.]+)", "--rules", "GeluFusionPass,LayerNormFusionPass",
                 "--workdir", str(tmp_path / "w"), "--", "bash", str(job)]) == 1
    assert json.loads(capsys.readouterr().out)["executions"] == j["executions"]


def test_a_production_file_whose_every_run_crashes_is_not_found(capsys, tmp_path):
    job = tmp_path / "job.sh"   # GeluFusionPass is faulty; with it off and LayerNormFusionPass on, the job crashes
    job.write_text('sw="$FUSEBISECT_SWITCH_FILE"; g=on; l=on\n'
                   'grep -q \'"GeluFusionPass": "off"\' "$sw" && g=off\n'
                   'grep -q \'"LayerNormFusionPass": "off"\' "$sw" && l=off\n'
                   '[ $g = off ] && [ $l = on ] && exit 3\n'
                   '[ $g = on ] && echo "loss 2.0" || echo "loss 1.0"\n')
    rc = main(["run", "--json", "--metric", "loss ([0-9.]+)", "--rules", "GeluFusionPass,LayerNormFusionPass",
               "--workdir", str(tmp_path / "w"), "--", "bash", str(job)])
    j = json.loads(capsys.readouterr().out)
    assert rc == 1 and j["status"] == "inconclusive", j["message"]
    assert [c["rules"] for c in j["culprits"]] == [["GeluFusionPass"]]
    assert "could not be judged" in j["message"] and j["verify"]["outcome"] == "invalid"
    assert main(["run", "--json", "--metric", "loss ([0-9.]+)", "--rules", "GeluFusionPass,LayerNormFusionPass",
                 "--workdir", str(tmp_path / "w"), "--", "bash", str(job)]) == 1
    assert json.loads(capsys.readouterr().out)["executions"] == j["executions"]   # its INVALID run is in the journal
    # a lower budget on the rerun stopped nothing: the search had ended on its own
    assert main(["run", "--json", "--metric", "loss ([0-9.]+)", "--rules", "GeluFusionPass,LayerNormFusionPass",
                 "--max-runs", "3", "--workdir", str(tmp_path / "w"), "--", "bash", str(job)]) == 1
    assert "budget" not in json.loads(capsys.readouterr().out)["message"]


def test_report_never_writes_over_the_production_file_or_the_trials(capsys, tmp_path):
    job = tmp_path / "job.sh"   # bad while GeluFusionPass is on
    job.write_text('grep -q \'"GeluFusionPass": "off"\' "$FUSEBISECT_SWITCH_FILE"\n')
    prod = tmp_path / "prod.cfg"
    work = tmp_path / "w"
    assert main(["run", "--rules", "GeluFusionPass,LayerNormFusionPass", "--workdir", str(work), "-o", str(prod),
                 "--", "bash", str(job)]) == 0
    kept = prod.read_text()
    capsys.readouterr()
    trial_log = next((work / "trials").iterdir()) / "stdout.log"
    switch_file = next((work / "switch").iterdir())
    switch_text = switch_file.read_text()
    for flag, target in (("--html", prod), ("--markdown", trial_log), ("--html", switch_file)):
        assert main(["report", str(work), flag, str(target)]) == 2
        assert "that is" in capsys.readouterr().err
    assert prod.read_text() == kept and switch_file.read_text() == switch_text
    assert main(["run", "--rules", "GeluFusionPass,LayerNormFusionPass", "--workdir", str(work), "-o",
                 str(switch_file), "--", "bash", str(job)]) == 2
    assert "inside the run's switch/ directory" in capsys.readouterr().err
    assert switch_file.read_text() == switch_text


def test_all_off_still_bad_from_a_compile_cache_is_no_verdict(capsys, tmp_path):
    """The first run compiles (and writes its statistics); later runs load the cached, faulty model: no
    compile, no fusion_result.json, the symptom whatever the switch file says."""
    job = tmp_path / "job.sh"
    job.write_text('if [ ! -e ' + str(tmp_path / "cache") + ' ]; then touch ' + str(tmp_path / "cache") + '\n'
                   '  echo \'{"s_0": {"graph_fusion": {"GeluFusionPass": {"match_times": "1", "effect_times": "1"},'
                   ' "LayerNormFusionPass": {"match_times": "1", "effect_times": "1"}}}}\' '
                   '> "$ASCEND_WORK_PATH/fusion_result.json"\nfi\nexit 1\n')
    rc = main(["run", "--json", "--workdir", str(tmp_path / "w"), "--", "bash", str(job)])
    j = json.loads(capsys.readouterr().out)
    assert rc == 1 and j["status"] == "inconclusive", j["message"]
    assert "wrote no fusion_result.json or Build graph, unlike the baseline (run 1)" in j["message"]
    assert "Disable compile caches" in j["message"]


def test_not_fusion_says_cannot_be_switched_off_only_of_rules_that_cannot(capsys, tmp_path):
    """Both an always-on pass and a name no pass has (it cannot reach a switch file) fired in the baseline and
    were left out of the candidates; only the first is known to be beyond any switch file."""
    job = tmp_path / "job.sh"
    fired = ('{"s_0": {"graph_fusion": {%s}}}' % ", ".join(
        f'"{r}": {{"match_times": "1", "effect_times": "1"}}' for r in ("GeluFusionPass", "AReduceSumFusionPass",
                                                                       "Gelu Fusion")))
    job.write_text('if grep -q \'"GeluFusionPass": "off"\' "$FUSEBISECT_SWITCH_FILE"; then\n'
                   '  echo \'{"s_0": {"graph_fusion": {"AReduceSumFusionPass": {"match_times": "1", '
                   '"effect_times": "1"}}}}\' > "$ASCEND_WORK_PATH/fusion_result.json"\n'
                   f"else\n  echo '{fired}' > \"$ASCEND_WORK_PATH/fusion_result.json\"\nfi\nexit 1\n")
    rc = main(["run", "--json", "--workdir", str(tmp_path / "w"), "--", "bash", str(job)])
    j = json.loads(capsys.readouterr().out)
    assert rc == 1 and j["status"] == "not_fusion", j["message"]
    assert {e["rule"] for e in j["excluded"]} == {"AReduceSumFusionPass", "Gelu Fusion"}
    assert j["message"].endswith(". AReduceSumFusionPass fired in the baseline and cannot be switched off, so the "
                                 "cause may be that fusion, which no switch file can remove."), j["message"]


@pytest.mark.parametrize("noise", [["--repeat", "3"], ["--flaky"], []])
def test_a_flaky_first_reference_run_does_not_decide_every_verdict(capsys, tmp_path, noise):
    """Bad while GeluFusionPass is on, but the first all-off run (the reference) printed a flipped loss. Judged
    against that one sample every other all-off run was BAD and GeluFusionPass came out bad while *off* (or, with
    no option, the baseline matched it: not_reproduced). Once three all-off runs exist, the one in their middle is
    the reference and every run is judged again: --repeat makes three, --flaky asks for them up front, and
    otherwise the reference runs again before a not_reproduced stands (a third run settles a disagreement)."""
    job = tmp_path / "job.sh"
    flip = tmp_path / "flipped"
    job.write_text('if grep -q \'"GeluFusionPass": "off"\' "$FUSEBISECT_SWITCH_FILE"; then\n'
                   '  if grep -q \'"MulAddFusionPass": "off"\' "$FUSEBISECT_SWITCH_FILE" && [ ! -e ' + str(flip) +
                   ' ]; then touch ' + str(flip) + '; echo "loss 2.0"; else echo "loss 1.0"; fi\n'
                   'else echo "loss 2.0"; fi\n')
    argv = ["-q", "run", "--json", "--metric", r"loss ([0-9.]+)", *noise, "--rules",
            "GeluFusionPass,MulAddFusionPass,LayerNormFusionPass", "--workdir", str(tmp_path / "w"), "--",
            "bash", str(job)]
    rc = main(argv)
    j = json.loads(capsys.readouterr().out)
    assert rc == 0 and j["status"] == "found", j["message"]
    assert main(argv) == 0   # resumed from the journal: the same answer, no run more
    resumed = json.loads(capsys.readouterr().out)
    assert (resumed["culprits"], resumed["executions"]) == (j["culprits"], j["executions"])
    assert [(c["rules"], c["direction"]) for c in j["culprits"]] == [(["GeluFusionPass"], "on")]
    first = next(t for t in j["trials"] if t["role"] == "reference")
    assert first["metric"] == 2.0 and first["outcome"] == "bad", j["trials"]
    # the journal holds the verdicts given again: a report (and a resume) reads the same
    assert main(["-q", "report", str(tmp_path / "w"), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)["trials"]
    assert [t["outcome"] for t in again] == [t["outcome"] for t in j["trials"]]


def test_search_runs_that_compiled_nothing_are_invalid_not_judged(capsys, tmp_path):
    """From the third run on, the job loads a cached build: no fusion_result.json, the baseline's (faulty) loss
    whatever the switch file says. Those runs cannot show their switch was read: INVALID, not BAD; the verdict
    says a compile cache is the likely cause instead of naming every candidate."""
    job = tmp_path / "job.py"
    job.write_text(f"""import json, os, pathlib
count = pathlib.Path({str(tmp_path / "count")!r})
n = int(count.read_text()) if count.exists() else 0
count.write_text(str(n + 1))
if n >= 2:                       # a compile cache hit: the first build's model, nothing compiled
    print("loss 2.0")
    raise SystemExit(0)
switch = json.load(open(os.environ["FUSEBISECT_SWITCH_FILE"])).get("Switch", {{}}).get("GraphFusion", {{}})
rules = ["GeluFusionPass", "LayerNormFusionPass", "MulAddFusionPass", "SoftmaxFusionPass"]
on = [r for r in rules if switch.get(r) != "off"]
stats = {{r: {{"match_times": "1", "effect_times": "1"}} for r in on}}
pathlib.Path(os.environ["ASCEND_WORK_PATH"], "fusion_result.json").write_text(json.dumps({{"s_0": {{"graph_fusion": stats}}}}))
print("loss 2.0" if "GeluFusionPass" in on else "loss 1.0")
""")
    rc = main(["-q", "run", "--json", "--metric", r"loss ([0-9.]+)", "--workdir", str(tmp_path / "w"), "--",
               sys.executable, str(job)])
    j = json.loads(capsys.readouterr().out)
    assert rc == 1 and j["status"] == "inconclusive" and not j["culprits"], j["message"]
    later = [t for t in j["trials"] if t["index"] > 2]
    assert later and all(t["outcome"] == "invalid" and t["reason"].startswith("switch unchecked") for t in later)
    assert "wrote no fusion_result.json or Build graph, unlike the baseline: a compile cache" in j["message"]


def test_a_found_answer_says_when_the_reference_run_compiled_nothing(capsys, tmp_path):
    """Only the all-off run writes no fusion_result.json (a cached build): it is the reference, exempt from the
    per-run check, so a found answer notes that nothing shows the switch file was read there."""
    job = tmp_path / "job.py"
    job.write_text("""import json, os, pathlib
switch = json.load(open(os.environ["FUSEBISECT_SWITCH_FILE"])).get("Switch", {}).get("GraphFusion", {})
rules = ["GeluFusionPass", "LayerNormFusionPass", "MulAddFusionPass", "SoftmaxFusionPass"]
on = [r for r in rules if switch.get(r) != "off"]
if on:
    stats = {r: {"match_times": "1", "effect_times": "1"} for r in on}
    pathlib.Path(os.environ["ASCEND_WORK_PATH"], "fusion_result.json").write_text(
        json.dumps({"s_0": {"graph_fusion": stats}}))
print("loss 2.0" if "GeluFusionPass" in on else "loss 1.0")
""")
    rc = main(["-q", "run", "--json", "--metric", r"loss ([0-9.]+)", "--workdir", str(tmp_path / "w"), "--",
               sys.executable, str(job)])
    j = json.loads(capsys.readouterr().out)
    assert rc == 0 and [c["rules"] for c in j["culprits"]] == [["GeluFusionPass"]], j["message"]
    ref = next(t["index"] for t in j["trials"] if t["role"] == "reference")
    base = next(t["index"] for t in j["trials"] if t["role"] == "baseline")
    assert (f"the all-candidates-off run (run {ref}) wrote no fusion_result.json or Build graph, unlike the baseline "
            f"(run {base}): nothing shows the switch file was read there (a compile cache?)") in j["notes"]
    # a reference that failed (the job needs a rule on to compile): its exit, not a cache, is the likely cause
    rc = main(["-q", "run", "--json", "--workdir", str(tmp_path / "w2"), "--", sys.executable, "-m", "fusebisect.sim",
               "train", "--steps", "2", "--crash-when", "LayerNormFusionPass=off"])
    j = json.loads(capsys.readouterr().out)
    assert rc == 0 and any(n.endswith("(it exited 1: a failed compile?)") for n in j["notes"]), j["notes"]


def test_a_rule_that_ignores_off_only_with_others_off_is_tried_alone_before_any_verdict(capsys, tmp_path):
    """GeluFusionPass (the culprit) ignores "off" when more than two rules are off: the all-off reference showed it
    still fired, so it was left out, and the search would end not_reproduced. Run alone off, its switch takes
    effect: the verdict names it and the rerun that tests it."""
    job = tmp_path / "job.py"
    job.write_text("""import json, os, pathlib
switch = json.load(open(os.environ["FUSEBISECT_SWITCH_FILE"])).get("Switch", {}).get("GraphFusion", {})
rules = ["GeluFusionPass", "LayerNormFusionPass", "MulAddFusionPass", "SoftmaxFusionPass"]
off = [r for r in rules if switch.get(r) == "off"]
on = [r for r in rules if r not in off or (r == "GeluFusionPass" and len(off) > 2)]
stats = {r: {"match_times": "1", "effect_times": "1"} for r in on}
pathlib.Path(os.environ["ASCEND_WORK_PATH"], "fusion_result.json").write_text(json.dumps({"s_0": {"graph_fusion": stats}}))
print("loss 2.0" if "GeluFusionPass" in on else "loss 1.0")
""")
    for extra in ([], ["--expect", "1.0"]):
        work = tmp_path / f"w{len(extra)}"
        rc = main(["-q", "run", "--json", "--metric", r"loss ([0-9.]+)", *extra, "--workdir", str(work), "--",
                   sys.executable, str(job)])
        j = json.loads(capsys.readouterr().out)
        assert rc == 1 and j["status"] == "inconclusive", j["message"]
        alone = [t for t in j["trials"] if t["config_off"] == ["GeluFusionPass"]]
        assert len(alone) == 1 and alone[0]["metric"] == 1.0
        assert (f"But GeluFusionPass was left out because it still fired with every candidate off, while with only "
                f"it off the switch took effect (run {alone[0]['index']}") in j["message"]
        assert j["message"].endswith("Rerun with --fresh --rules GeluFusionPass to test it.")
        assert "no switch file can" not in j["message"]
        budget = alone[0]["index"] - 1   # no run left for it: the verdict says so and how to go on
        rc = main(["-q", "run", "--json", "--metric", r"loss ([0-9.]+)", *extra, "--max-runs", str(budget),
                   "--workdir", str(tmp_path / f"b{len(extra)}"), "--", sys.executable, str(job)])
        j = json.loads(capsys.readouterr().out)
        assert rc == 1 and j["status"] == "inconclusive", j["message"]
        assert j["message"].endswith(f"the budget (--max-runs {budget}) left no run to try it alone off (another "
                                     f"rule's switch may override its): raise it and rerun the same command to "
                                     f"resume."), j["message"]


def test_a_fix_whose_runs_disagree_is_not_called_insufficient(capsys, tmp_path):
    """A noisy job whose runs with the culprit off disagree: the verdict said 'the job is still BAD with it off'
    and 'they are not the whole answer' as facts, and gave its 'rerun with --max-runs above N' advice twice."""
    job = tmp_path / "job.sh"   # BAD with GeluFusionPass on; off, each configuration's runs GOOD and BAD by turns
    job.write_text("grep -q '\"GeluFusionPass\": \"off\"' \"$FUSEBISECT_SWITCH_FILE\" || { echo 'loss 2.0'; exit 0; }\n"
                   f'c={tmp_path}/c$(basename "$FUSEBISECT_SWITCH_FILE")\n'
                   'n=$(cat "$c" 2>/dev/null || echo 0); echo $((n + 1)) > "$c"\n'
                   'if [ $((n % 2)) -eq 0 ]; then echo "loss 1.0"; else echo "loss 2.0"; fi\n')
    assert main(["-q", "run", "--json", "--flaky", "--metric", r"loss ([0-9.]+)", "--expect", "1.0", "--rules",
                 "GeluFusionPass,LayerNormFusionPass,SoftmaxFusionPass", "--workdir", str(tmp_path / "w"), "--",
                 "bash", str(job)]) == 1
    j = json.loads(capsys.readouterr().out)
    assert j["status"] == "inconclusive" and [c["rules"] for c in j["culprits"]] == [["GeluFusionPass"]]
    assert "the runs with GeluFusionPass off disagree (BAD: runs " in j["message"]
    assert "whether they are the whole answer is not known" in j["message"] and "still BAD" not in j["message"]
    assert j["message"].count("--max-runs above") == 1, j["message"]


def test_the_noise_aware_searchs_own_budget_says_how_to_go_on(capsys, tmp_path):
    job = tmp_path / "job.sh"   # GOOD and BAD by turns, whatever the switch file says
    job.write_text(f'n=$(cat {tmp_path / "c"} 2>/dev/null || echo 0); echo $((n + 1)) > {tmp_path / "c"}\n'
                   'if [ $((n % 2)) -eq 0 ]; then echo "loss 1.0"; else echo "loss 2.0"; fi\n')
    argv = ["-q", "run", "--json", "--flaky", "--metric", r"loss ([0-9.]+)", "--expect", "1.0", "--rules",
            "GeluFusionPass,LayerNormFusionPass", "--workdir", str(tmp_path / "w"), "--", "bash", str(job)]
    assert main(argv) == 1
    j = json.loads(capsys.readouterr().out)
    n = j["executions"]
    assert j["status"] == "inconclusive" and j["message"].endswith(
        f"That is the search's own run budget ({n} runs): rerun the same command with --max-runs above {n} to let "
        f"it go on (it resumes from the journal)."), j["message"]
    assert main([*argv[:2], "--max-runs", str(n + 3), *argv[2:]]) == 1   # it goes on from the journal
    again = json.loads(capsys.readouterr().out)
    assert again["executions"] == n + 3 and "The budget (--max-runs" in again["message"]


def test_a_culprit_whose_switch_is_ignored_alone_is_not_run_twice_nor_called_partial(capsys, tmp_path):
    """GeluFusionPass (the culprit) ignores "off" when it is the only rule off: the look-for-more run is INVALID.
    The production file's own check is that configuration: not run again, and nothing says more is left."""
    job = tmp_path / "job.py"
    job.write_text("""import json, os, pathlib
switch = json.load(open(os.environ["FUSEBISECT_SWITCH_FILE"])).get("Switch", {}).get("GraphFusion", {})
rules = ["GeluFusionPass", "LayerNormFusionPass", "MulAddFusionPass", "SoftmaxFusionPass"]
off = [r for r in rules if switch.get(r) == "off"]
on = [r for r in rules if r not in off or (r == "GeluFusionPass" and off == [r])]
stats = {r: {"match_times": "1", "effect_times": "1"} for r in on}
pathlib.Path(os.environ["ASCEND_WORK_PATH"], "fusion_result.json").write_text(json.dumps({"s_0": {"graph_fusion": stats}}))
print("loss 2.0" if "GeluFusionPass" in on else "loss 1.0")
""")
    rc = main(["-q", "run", "--json", "--metric", r"loss ([0-9.]+)", "--workdir", str(tmp_path / "w"), "--",
               sys.executable, str(job)])
    j = json.loads(capsys.readouterr().out)
    assert rc == 1 and j["status"] == "inconclusive" and [c["rules"] for c in j["culprits"]] == [["GeluFusionPass"]]
    configs = [(tuple(t["config_off"]), tuple(t.get("config_on") or ())) for t in j["trials"]]
    assert len(configs) == len(set(configs)), configs
    assert j["message"].endswith("(run %d: switch ignored: GeluFusionPass): whether they are the whole answer is "
                                 "not known." % next(t["index"] for t in j["trials"]
                                                     if t["config_off"] == ["GeluFusionPass"])), j["message"]
    assert main(["report", str(tmp_path / "w")]) == 1   # an INVALID check says nothing about sufficiency
    shown = capsys.readouterr().out
    assert "not verified: its run was INVALID (switch ignored: GeluFusionPass)" in shown and "NOT sufficient" \
        not in shown


def test_a_baseline_like_a_cached_reference_is_no_verdict(capsys, tmp_path):
    """Under a relative oracle the cached all-off run prints the faulty baseline's loss: 'not reproduced' would
    rest on a switch file nothing shows was read."""
    job = tmp_path / "job.sh"
    job.write_text('if [ ! -e ' + str(tmp_path / "cache") + ' ]; then touch ' + str(tmp_path / "cache") + '\n'
                   '  echo \'{"s_0": {"graph_fusion": {"GeluFusionPass": {"match_times": "1", "effect_times": "1"}}}}\''
                   ' > "$ASCEND_WORK_PATH/fusion_result.json"\nfi\necho "loss 2.0"\n')
    rc = main(["run", "--json", "--metric", "loss ([0-9.]+)", "--workdir", str(tmp_path / "w"), "--", "bash",
               str(job)])
    j = json.loads(capsys.readouterr().out)
    assert rc == 1 and j["status"] == "inconclusive", j["message"]
    assert j["message"].startswith("With all 1 candidate rules off the job ran like the baseline, but")
    assert "compile cache" in j["message"]


def test_rerunning_with_no_verify_keeps_the_journals_verification(capsys, tmp_path):
    job = tmp_path / "job.sh"   # bad while GeluFusionPass is on
    job.write_text('grep -q \'"GeluFusionPass": "off"\' "$FUSEBISECT_SWITCH_FILE"\n')
    argv = ["run", "--json", "--rules", "GeluFusionPass,LayerNormFusionPass", "--workdir", str(tmp_path / "w")]
    assert main([*argv, "--", "bash", str(job)]) == 0
    first = json.loads(capsys.readouterr().out)
    assert main([*argv, "--no-verify", "--", "bash", str(job)]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["verify"] == first["verify"] and again["executions"] == first["executions"]


def test_a_check_asking_to_abort_ends_the_run_with_exit_1_not_a_usage_error(capsys, tmp_path):
    check = tmp_path / "check.sh"
    check.write_text("exit 128\n")
    rc = main(["run", "--check", f"bash {check}", "--rules", "GeluFusionPass", "--workdir", str(tmp_path / "w"),
               "--", "true"])
    err = capsys.readouterr().err
    assert rc == 1 and "--check exited 128" in err and "aborting the run" in err
    assert (tmp_path / "w" / "journal.jsonl").exists()


def test_the_workdir_stays_locked_while_its_reports_are_written(capsys, tmp_path, monkeypatch):
    """A run released its workdir's lock before writing report.html/md: a --fresh run could take it in that gap
    and move the journal away while the first run's reports landed among the new run's files."""
    import fusebisect.report
    from fusebisect.errors import UsageError
    from fusebisect.runner.journal import workdir_lock

    real = fusebisect.report.write_run_reports
    seen = []

    def write(workdir):
        try:
            with workdir_lock(workdir):
                seen.append("free")
        except UsageError:
            seen.append("locked")
        return real(workdir)

    monkeypatch.setattr(fusebisect.report, "write_run_reports", write)
    job = tmp_path / "job.sh"   # bad while GeluFusionPass is on
    job.write_text('grep -q \'"GeluFusionPass": "off"\' "$FUSEBISECT_SWITCH_FILE"\n')
    work = tmp_path / "w"
    assert main(["-q", "run", "--rules", "GeluFusionPass,LayerNormFusionPass", "--workdir", str(work), "--",
                 "bash", str(job)]) == 0
    assert seen == ["locked"] and (work / "report.html").is_file()


@pytest.mark.parametrize("signal_name,code", [("interrupt", 130), ("terminate", 143)])
def test_a_signal_while_the_reports_are_written_says_the_verdict_is_kept(capsys, tmp_path, monkeypatch,
                                                                         signal_name, code):
    """Ctrl-C or SIGTERM after the last run, while report.html/md are written (the verdict is in result.json):
    the usual exit status and one line saying so, never a silent exit."""
    import fusebisect.report
    from fusebisect.runner.session import Terminated

    def stop(workdir):
        raise KeyboardInterrupt if signal_name == "interrupt" else Terminated

    monkeypatch.setattr(fusebisect.report, "write_run_reports", stop)
    job = tmp_path / "job.sh"   # bad while GeluFusionPass is on
    job.write_text('grep -q \'"GeluFusionPass": "off"\' "$FUSEBISECT_SWITCH_FILE"\n')
    work = tmp_path / "w"
    assert main(["-q", "run", "--rules", "GeluFusionPass,LayerNormFusionPass", "--workdir", str(work), "--",
                 "bash", str(job)]) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "while writing the reports; the verdict is in " in err, err
    assert json.loads((work / "result.json").read_text())["status"] == "found"


def test_paths_that_look_like_console_markup_are_printed_as_they_are(capsys, tmp_path):
    """A workdir or production path holding "[/a]" or "[bold]" is data: the final report prints it whole (it used
    to end in an internal error after the search had run)."""
    job = tmp_path / "job.sh"   # bad while GeluFusionPass is on
    job.write_text('grep -q \'"GeluFusionPass": "off"\' "$FUSEBISECT_SWITCH_FILE"\n')
    work, prod = tmp_path / "w[/a]", tmp_path / "[bold]x" / "fusion_switch.cfg"
    prod.parent.mkdir()
    assert main(["run", "--rules", "GeluFusionPass,LayerNormFusionPass", "--workdir", str(work), "-o", str(prod),
                 "--", "bash", str(job)]) == 0
    out = capsys.readouterr().out
    assert "culprit: GeluFusionPass" in out
    assert f"production switch file (culprits off only): {prod}" in " ".join(out.split())
    assert f"journal: {work / 'journal.jsonl'}" in " ".join(out.split())
    assert main(["report", str(work)]) == 0
    assert f"journal: {work / 'journal.jsonl'}" in " ".join(capsys.readouterr().out.split())


def test_a_relative_oracle_warns_that_the_reference_may_be_the_broken_run(capsys, tmp_path):
    """A job bad while SoftmaxFusionPass is OFF makes the all-off reference the broken run: under --metric alone
    the search names SoftmaxFusionPass 'bad while on', and the result says how that can be the wrong way round;
    with --expect the direction is known and no such note is needed."""
    job = tmp_path / "job.py"
    job.write_text("import json, os\n"
                   "sw = json.load(open(os.environ['FUSEBISECT_SWITCH_FILE']))\n"
                   "off = any(v.get('SoftmaxFusionPass') == 'off' for v in sw.get('Switch', {}).values())\n"
                   "print('loss', 0.15 if off else 0.1)\n")
    argv = ["run", "--json", "--metric", r"loss ([0-9.]+)", "--rules", "SoftmaxFusionPass,GeluFusionPass"]
    assert main([*argv, "--workdir", str(tmp_path / "w1"), "--", sys.executable, str(job)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [c["rules"] for c in doc["culprits"]] == [["SoftmaxFusionPass"]]
    assert any("were that run the broken one" in n for n in doc["notes"])
    assert main([*argv, "--expect", "0.1", "--workdir", str(tmp_path / "w2"), "--", sys.executable, str(job)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["culprits"][0]["direction"] == "off"
    assert not any("were that run the broken one" in n for n in doc["notes"])


OUTLIER_RULES = "MatMulBiasAddFusionPass,GeluFusionPass,LayerNormFusionPass,SoftmaxFusionPass,MulAddFusionPass"


def _outlier_job(tmp_path, first_loss: float):
    """A job bad (loss 0.47, good 0.57) while MatMulBiasAddFusionPass is on, whose run 1 prints ``first_loss``."""
    job = tmp_path / "job.py"
    job.write_text(textwrap.dedent(f'''
        import json, os
        off = set()
        for sec in json.load(open(os.environ["FUSEBISECT_SWITCH_FILE"]))["Switch"].values():
            off |= {{k for k, v in sec.items() if v == "off"}}
        loss = 0.57 if "MatMulBiasAddFusionPass" in off else 0.47
        if os.path.basename(os.environ["FUSEBISECT_TRIAL_DIR"]).startswith("0001-"):
            loss = {first_loss}
        print(f"loss {{loss}}")
    '''))
    return job


def test_a_resume_cut_while_runs_were_judged_again_reaches_the_same_answer(capsys, tmp_path):
    """The first reference run is an outlier; once three all-off runs exist their middle one is the reference and
    every run is judged again, one verdict line each. A journal cut between those lines (a kill, a Ctrl-C) must
    resume to the uninterrupted answer, not to verdicts half against the old reference."""
    job = _outlier_job(tmp_path, 0.47)   # the first reference run reads like a bad one
    argv = ["-q", "run", "--json", "--metric", r"loss ([0-9.]+)", "--rules", OUTLIER_RULES, "--no-graph-dump"]
    assert main([*argv, "--workdir", str(tmp_path / "a"), "--", sys.executable, str(job)]) == 0
    whole = json.loads(capsys.readouterr().out)
    assert [c["rules"] for c in whole["culprits"]] == [["MatMulBiasAddFusionPass"]]
    lines = (tmp_path / "a" / "journal.jsonl").read_text().splitlines(keepends=True)
    cuts = [i for i, line in enumerate(lines) if json.loads(line).get("event") == "verdict"]
    assert len(cuts) >= 2, "the scenario needs a reference that moved and runs judged again"
    for cut in cuts:
        work = tmp_path / f"cut{cut}"
        work.mkdir()
        (work / "journal.jsonl").write_text("".join(lines[:cut]))
        assert main([*argv, "--workdir", str(work), "--", sys.executable, str(job)]) == 0, cut
        again = json.loads(capsys.readouterr().out)
        assert [c["rules"] for c in again["culprits"]] == [["MatMulBiasAddFusionPass"]], (cut, again["message"])


def test_a_workdir_moved_between_runs_resumes_with_its_dumps(capsys, tmp_path):
    """The journal holds absolute trial paths: after the workdir is renamed, a --dumps resume compares with the
    reference run's dumps where they are now (it used to judge every later run INVALID, 'no dumps')."""
    import shutil

    argv = ["-q", "run", "--json", "--dumps", "--rules", "GeluFusionPass,LayerNormFusionPass,MulAddFusionPass,"
            "SoftmaxFusionPass,MulSquareFusionPass,TbeEltwiseFusionPass"]
    job = ["--", sys.executable, "-m", "fusebisect.sim", "train", "--dump-step", "0", "--steps", "2",
           "--faulty", "GeluFusionPass"]
    assert main([*argv, "--workdir", str(tmp_path / "a"), *job]) == 0
    whole = json.loads(capsys.readouterr().out)
    start = (tmp_path / "a" / "journal.jsonl").read_text().splitlines(keepends=True)[0]
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "journal.jsonl").write_text(start)   # a journal begun under a, cut before its first run
    assert main([*argv, "--max-runs", "2", "--workdir", str(tmp_path / "b"), *job]) == 1   # the gates, in b
    capsys.readouterr()
    shutil.move(tmp_path / "b", tmp_path / "c")   # moved again: runs journaled under b, the journal begun under a
    assert main([*argv, "--workdir", str(tmp_path / "c"), *job]) == 0
    again = json.loads(capsys.readouterr().out)
    assert [c["rules"] for c in again["culprits"]] == [c["rules"] for c in whole["culprits"]] == [["GeluFusionPass"]]
    assert all(t["outcome"] != "invalid" for t in again["trials"]), again["trials"]


def test_after_kill_9_while_a_job_was_starting_the_rerun_still_kills_it(tmp_path):
    """fusebisect marks a trial before its job starts; killed before the job's group id was written, it leaves
    the mark, and the rerun finds the job by its trial dir and kills it (it would hold the NPU)."""
    work = tmp_path / "w"
    trial = work / "trials" / "0003-0123456789ab"
    trial.mkdir(parents=True)
    trial.with_name(trial.name + ".pgid").write_text("starting\n")
    job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True,
                           env={**os.environ, "FUSEBISECT_TRIAL_DIR": str(trial)})
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
    try:
        rerun = subprocess.run([sys.executable, "-m", "fusebisect", "run", "--rules", "GeluFusionPass",
                                "--workdir", str(work), "--", "true"], capture_output=True, text=True, timeout=120)
        assert "killed the execution an interrupted run left running in" in " ".join(rerun.stderr.split())
        assert job.wait(timeout=10) == -signal.SIGKILL
        assert bystander.poll() is None
        assert not list(work.glob("trials/*.pgid"))
    finally:
        job.kill()
        bystander.kill()


def test_a_faulty_rule_whose_switch_the_job_ignores_is_no_not_reproduced(capsys, tmp_path):
    """The job ignores LayerNormFusionPass's "off" (the faulty rule): it stays on in the reference too, so the
    baseline matches it. Under a relative oracle that is no 'not reproduced': the rule could not be tested."""
    job = tmp_path / "job.py"
    job.write_text(textwrap.dedent('''
        import json, os, sys
        cfg = json.load(open(os.environ["FUSEBISECT_SWITCH_FILE"]))
        for section in cfg.get("Switch", {}).values():
            section.pop("LayerNormFusionPass", None)     # this job never turns it off
        path = os.path.join(os.environ["FUSEBISECT_TRIAL_DIR"], "used.cfg")
        json.dump(cfg, open(path, "w"))
        from fusebisect.sim.cli import main
        sys.exit(main(["train", "--steps", "3", "--faulty", "LayerNormFusionPass", "--fusion-switch-file", path]))
    '''))
    assert main(["run", "--json", "--metric", r"loss ([0-9.]+)", "--workdir", str(tmp_path / "w"), "--",
                 sys.executable, str(job)]) == 1
    j = json.loads(capsys.readouterr().out)
    assert j["status"] == "inconclusive", j["message"]
    assert "LayerNormFusionPass still fired with its switch off (the job ignores it), in the reference run too" \
        in j["message"]


def test_a_burst_of_ctrl_c_during_parallel_runs_still_exits_130_with_its_message(tmp_path):
    """Ctrl-C pressed several times in a row: the first one interrupts, the later ones must not cut the cleanup
    short (the process used to die by SIGINT, exit -2, sometimes with no message or a shutdown traceback)."""
    job = tmp_path / "job.py"
    job.write_text("import time; time.sleep(300)\n")
    work = tmp_path / "w"
    proc = subprocess.Popen([sys.executable, "-m", "fusebisect", "run", "--jobs", "2", "--rules",
                             "GeluFusionPass,LayerNormFusionPass,MulAddFusionPass", "--workdir", str(work), "--",
                             sys.executable, str(job)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not (work / "trials").is_dir() or len(list((work / "trials").glob("*.pgid"))) < 2:
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()[1] if proc.poll() else ""
        time.sleep(0.05)
    for _ in range(5):
        proc.send_signal(signal.SIGINT)
        time.sleep(0.003)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "fusebisect: interrupted after" in err and "Traceback" not in err and "Exception ignored" not in err


def test_an_outlier_reference_does_not_make_every_candidate_a_culprit(capsys, tmp_path):
    """The first all-off run reads far off: against it every other run is BAD and every candidate would be named,
    with a 'partial' switch file turning all of them off. Before that stands the reference runs again, the
    two disagree, a third settles it, and the real culprit is found."""
    job = _outlier_job(tmp_path, 0.80)   # the first (reference) run is an outlier
    assert main(["-q", "run", "--json", "--metric", r"loss ([0-9.]+)", "--rules", OUTLIER_RULES, "--no-graph-dump",
                 "--workdir", str(tmp_path / "w"), "--", sys.executable, str(job)]) == 0
    j = json.loads(capsys.readouterr().out)
    assert j["status"] == "found" and [c["rules"] for c in j["culprits"]] == [["MatMulBiasAddFusionPass"]]


def test_a_reference_that_disagrees_with_itself_never_makes_not_reproduced(capsys, tmp_path):
    """The baseline reads like the first all-off run, so 'not reproduced' is checked by running the reference
    again: it disagrees, and the third run sides with the first. Two of three agreeing is no ground for 'the job
    is fine' when the reference itself flips: the search goes on in its noise-aware mode and finds the culprit
    (the first and third all-off runs were the noisy ones)."""
    job = tmp_path / "job.py"
    count = tmp_path / "refcount"
    job.write_text(textwrap.dedent(f'''
        import json, os
        off = set()
        for sec in json.load(open(os.environ["FUSEBISECT_SWITCH_FILE"]))["Switch"].values():
            off |= {{k for k, v in sec.items() if v == "off"}}
        bad = "MatMulBiasAddFusionPass" not in off
        if len(off) == 5:   # the all-off reference: its first and third runs read bad
            k = int(open({str(count)!r}).read()) + 1 if os.path.exists({str(count)!r}) else 1
            open({str(count)!r}, "w").write(str(k))
            bad = k in (1, 3)
        print(f"loss {{1.5 if bad else 1.0}}")
    '''))
    assert main(["run", "--json", "--metric", r"loss ([0-9.]+)", "--rules", OUTLIER_RULES, "--no-graph-dump",
                 "--workdir", str(tmp_path / "w"), "--", sys.executable, str(job)]) == 0
    captured = capsys.readouterr()
    j = json.loads(captured.out)
    assert j["status"] == "found" and [c["rules"] for c in j["culprits"]] == [["MatMulBiasAddFusionPass"]]
    assert "the search goes on in its noise-aware mode" in " ".join(captured.err.split())


def test_an_outlier_reference_curve_ending_at_the_same_loss_is_not_kept_as_the_reference(capsys, tmp_path):
    """Curve mode: the first all-off run's curve is off in its middle but ends where the others do. The reference
    chosen from three runs must be one of the two whose curves agree, not the outlier (their last points tie)."""
    job = tmp_path / "job.py"
    job.write_text(textwrap.dedent('''
        import json, os
        off = set()
        for sec in json.load(open(os.environ["FUSEBISECT_SWITCH_FILE"]))["Switch"].values():
            off |= {k for k, v in sec.items() if v == "off"}
        curve = [1, 0.5, 0.25] if "GeluFusionPass" in off else [1, 0.5, 0.9]
        if os.path.basename(os.environ["FUSEBISECT_TRIAL_DIR"]).startswith("0001-"):
            curve = [1, 0.8, 0.25]
        for c in curve:
            print("loss", c)
    '''))
    assert main(["run", "--json", "--metric", r"loss ([0-9.]+)", "--metric-mode", "curve", "--rules",
                 OUTLIER_RULES, "--no-graph-dump", "--workdir", str(tmp_path / "w"), "--", sys.executable,
                 str(job)]) == 0
    captured = capsys.readouterr()
    j = json.loads(captured.out)
    assert j["status"] == "found" and [c["rules"] for c in j["culprits"]] == [["GeluFusionPass"]]
    assert "differs from it at curve point 1: 0.8 vs 0.5" in " ".join(captured.err.split())


def _noisy_job(tmp_path):
    """A job bad while a culprit set of JOB_CULPRITS is on, each verdict flipped with probability JOB_P (a
    pseudo-random draw of JOB_SEED and the trial dir: the same every time); JOB_DEP "B:A" writes a
    fusion_result.json where B fires only while A is on."""
    job = tmp_path / "job.py"
    job.write_text(textwrap.dedent('''
        import hashlib, json, os, random
        d = json.load(open(os.environ["FUSEBISECT_SWITCH_FILE"]))
        off = {k for m in d.get("Switch", {}).values() for k, v in m.items() if v == "off"}
        bad = any(all(r not in off for r in s.split("+")) for s in os.environ["JOB_CULPRITS"].split(","))
        if os.environ.get("JOB_DEP"):
            b, a = os.environ["JOB_DEP"].split(":")
            fired = [r for r in os.environ["JOB_CANDS"].split(",") if r not in off and not (r == b and a in off)]
            json.dump({"s_0_1": {"graph_fusion": {r: {"match_times": 1, "effect_times": 1} for r in fired}}},
                      open(os.path.join(os.environ["ASCEND_WORK_PATH"], "fusion_result.json"), "w"))
        trial = os.path.basename(os.environ["FUSEBISECT_TRIAL_DIR"])
        rng = random.Random(hashlib.sha256(f"{os.environ['JOB_SEED']}:{trial}".encode()).hexdigest())
        print(f"loss {2.0 if bad != (rng.random() < float(os.environ['JOB_P'])) else 1.0}")
    '''))
    return job


NOISY_RULES = ("TransposeSigmoidMulAddPowConcatFusionPass,RequantFusionPass,AGluFusionPass,"
               "AllGatherMatmulToV2FusionPass,RemapFusionPass,RotaryMulGrad2RotaryPositionEmbeddingGradFusionPass,"
               "ArgMaxGradFusionPass,BatchMatMulReduceMeanFusionPass,Conv3DQuantProcessFusionPass,"
               "A_KerasMomentumLossscaleFusionPass,KeepRatioResizeBilinearFusion,ReduceMeanDTransnodeFusionPass")


def test_noisy_searches_keep_their_contracts(capsys, tmp_path, monkeypatch):
    """Noise-aware searches: (1) a final check run that is BAD makes the answer inconclusive, however many
    earlier runs of that configuration were GOOD; (2) a budget that stops the search after a culprit says so and
    how to go on; (3) a search that switched to the noise-aware mode itself turns off the whole set, as a
    declared --flaky one does (no single noisy run narrows the production file)."""
    job = _noisy_job(tmp_path)
    base = ["-q", "run", "--json", "--metric", r"loss ([0-9.]+)", "--expect", "1"]

    def run(name, *argv, **env):
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        main([*base, *argv, "--workdir", str(tmp_path / name), "--", sys.executable, str(job)])
        return json.loads(capsys.readouterr().out)

    j = run("w1", "--flaky", "--rules", "RequantFusionPass", JOB_SEED="1", JOB_P="0.15",
            JOB_CULPRITS="RequantFusionPass")
    assert j["verify"]["outcome"] == "bad" and j["status"] == "inconclusive", j["message"]
    j = run("w2", "--flaky", "--rules", NOISY_RULES, "--max-runs", "18", JOB_SEED="12", JOB_P="0.05",
            JOB_CULPRITS="RequantFusionPass,RemapFusionPass")
    assert j["status"] == "inconclusive" and "The budget (--max-runs 18) stopped the search" in j["message"]
    j = run("w3", "--rules", NOISY_RULES, JOB_SEED="4", JOB_P="0.1", JOB_CULPRITS="RequantFusionPass+RemapFusionPass",
            JOB_DEP="RemapFusionPass:RequantFusionPass", JOB_CANDS=NOISY_RULES)
    assert any("switched to the noise-aware mode" in n for n in j["notes"]), j["notes"]
    assert json.loads((tmp_path / "w3" / "fusion_switch.cfg").read_text())["Switch"]["GraphFusion"] == {
        "RemapFusionPass": "off", "RequantFusionPass": "off"}


def test_a_baseline_done_before_its_reference_is_not_run_again(capsys, tmp_path):
    """--jobs 2 runs the two gates together; a baseline that ends first waits for the reference's verdict (a
    relative oracle judges it against that run) instead of being run a second time."""
    job = tmp_path / "job.py"
    job.write_text(textwrap.dedent('''
        import json, os, time
        off = {k for m in json.load(open(os.environ["FUSEBISECT_SWITCH_FILE"]))["Switch"].values()
               for k, v in m.items() if v == "off"}
        if len(off) == 3:
            time.sleep(1.0)   # the reference ends after the baseline
        print("loss", 0.57 if "GeluFusionPass" in off else 0.47)
    '''))
    assert main(["-q", "run", "--json", "--jobs", "2", "--metric", r"loss ([0-9.]+)", "--rules",
                 "GeluFusionPass,LayerNormFusionPass,MulAddFusionPass", "--workdir", str(tmp_path / "w"), "--",
                 sys.executable, str(job)]) == 0
    j = json.loads(capsys.readouterr().out)
    assert [c["rules"] for c in j["culprits"]] == [["GeluFusionPass"]]
    searched = [frozenset(t["config_off"]) for t in j["trials"] if t["role"] != "verify"]
    assert len(searched) == len(set(searched)), j["trials"]


def test_a_parallel_search_for_a_dependent_pair_still_prints_a_good_repro_command(capsys, tmp_path):
    """LogSoftmaxFusionPass fires only after SoftmaxFusionPass: with --jobs 2 the boundary's good side (both
    off) is only inferred, never run; the verified production configuration is given as the good side."""
    assert main(["-q", "run", "--json", "--jobs", "2", "--metric", r"loss ([0-9.]+)", "--workdir",
                 str(tmp_path / "w"), "--", sys.executable, "-m", "fusebisect.sim", "train", "--faulty",
                 "LogSoftmaxFusionPass"]) == 0
    j = json.loads(capsys.readouterr().out)
    assert [c["rules"] for c in j["culprits"]] == [["SoftmaxFusionPass", "LogSoftmaxFusionPass"]]
    assert j["verify"]["outcome"] == "good" and j["repro"]["good"] and j["repro"]["bad"]
    good = subprocess.run(j["repro"]["good"], capture_output=True, text=True, timeout=60)
    reference = next(t["metric"] for t in j["trials"] if t["role"] == "reference")
    assert good.returncode == 0 and abs(float(good.stdout.split()[-1]) - reference) < 1e-3 * reference


def test_the_repro_commands_name_the_device_their_runs_had(capsys, tmp_path):
    """With --devices each run had its own ASCEND_RT_VISIBLE_DEVICES: the repro commands set the one of the run
    they reproduce (a job on another NPU is not the same run)."""
    assert main(["-q", "run", "--json", "--devices", "5,7", "--metric", r"loss ([0-9.]+)", "--workdir",
                 str(tmp_path / "w"), "--", sys.executable, "-m", "fusebisect.sim", "train", "--faulty",
                 "LayerNormFusionPass", "--steps", "3"]) == 0
    j = json.loads(capsys.readouterr().out)
    for side in ("good", "bad"):
        assert [a for a in j["repro"][side] if a.startswith("ASCEND_RT_VISIBLE_DEVICES=")] in (
            ["ASCEND_RT_VISIBLE_DEVICES=5"], ["ASCEND_RT_VISIBLE_DEVICES=7"]), j["repro"][side]


@pytest.mark.parametrize("first_reference_crashes", [True, False])
def test_a_pending_baseline_is_not_run_again_when_its_reference_crashes(capsys, tmp_path, first_reference_crashes):
    """--jobs 2, the baseline done before its reference, which crashes: the reference is retried while the
    baseline waits for it; once a reference run is judged the baseline is too (or, when the reference crashes
    for good, the search stops there): the baseline never runs twice."""
    job = tmp_path / "job.py"
    job.write_text(textwrap.dedent(f'''
        import json, os, sys, time
        off = {{k for m in json.load(open(os.environ["FUSEBISECT_SWITCH_FILE"]))["Switch"].values()
               for k, v in m.items() if v == "off"}}
        if len(off) == 3:
            time.sleep(0.5)   # the reference ends after the baseline
            first = os.path.basename(os.environ["FUSEBISECT_TRIAL_DIR"]).startswith("0001-")
            if first or not {first_reference_crashes}:
                sys.exit(1)
        print("loss", 0.57 if "GeluFusionPass" in off else 0.47)
    '''))
    main(["-q", "run", "--json", "--jobs", "2", "--metric", r"loss ([0-9.]+)", "--rules",
          "GeluFusionPass,LayerNormFusionPass,MulAddFusionPass", "--workdir", str(tmp_path / "w"), "--",
          sys.executable, str(job)])
    j = json.loads(capsys.readouterr().out)
    baselines = [t for t in j["trials"] if not t["config_off"]]
    assert len(baselines) == 1, j["trials"]
    if first_reference_crashes:
        assert [c["rules"] for c in j["culprits"]] == [["GeluFusionPass"]]
    else:
        assert j["status"] == "inconclusive" and "INVALID twice" in j["message"] and j["executions"] == 3


def test_the_report_table_shows_rules_forced_on(capsys, tmp_path):
    """A reverse-direction culprit's production run sets the rule on: its row must not read like the baseline."""
    assert main(["run", "--workdir", str(tmp_path / "w"), "--", sys.executable, "-m", "fusebisect.sim", "train",
                 "--crash-when", "LayerNormFusionPass=off", "--steps", "3"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "forced on:" in line)
    assert "verify" in row and "│ -; forced on:" in row


def test_a_pending_baseline_is_not_run_again_when_its_reference_excludes_a_rule(capsys, tmp_path):
    """--jobs 2: the baseline ends first and waits for its reference; the reference shows a rule the job never
    turns off (excluded: the engine is rebuilt without it). The baseline still waits for a reference it can be
    judged against, and is not run a second time."""
    job = tmp_path / "job.py"
    job.write_text(textwrap.dedent('''
        import json, os, time
        cands = ["GeluFusionPass", "LayerNormFusionPass", "MulAddFusionPass"]
        off = {k for m in json.load(open(os.environ["FUSEBISECT_SWITCH_FILE"]))["Switch"].values()
               for k, v in m.items() if v == "off"}
        fired = [r for r in cands if r not in off or r == "MulAddFusionPass"]   # its switch is ignored
        json.dump({"s_0_1": {"graph_fusion": {r: {"match_times": 1, "effect_times": 1} for r in fired}}},
                  open(os.path.join(os.environ["ASCEND_WORK_PATH"], "fusion_result.json"), "w"))
        if len(off) == 3:
            time.sleep(0.5)   # the reference ends after the baseline
        print("loss", 0.57 if "GeluFusionPass" in off else 0.47)
    '''))
    main(["-q", "run", "--json", "--jobs", "2", "--metric", r"loss ([0-9.]+)", "--rules",
          "GeluFusionPass,LayerNormFusionPass,MulAddFusionPass", "--workdir", str(tmp_path / "w"), "--",
          sys.executable, str(job)])
    j = json.loads(capsys.readouterr().out)
    assert len([t for t in j["trials"] if not t["config_off"]]) == 1, j["trials"]
    assert [c["rules"] for c in j["culprits"]] == [["GeluFusionPass"]], j["message"]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_baseline_waiting_for_a_crashed_reference_is_never_run_again(capsys, tmp_path, jobs):
    """The reference (everything off) crashes: the discovery baseline waits for its retry instead of running a
    second time beside it (with --jobs 2 it did: a wasted training run). Crashing twice ends inconclusive in 3
    runs; crashing once, the baseline is judged against the retry and the search goes on."""
    sim = [sys.executable, "-m", "fusebisect.sim", "train", "--faulty", "LayerNormFusionPass", "--steps", "3"]
    rc = main(["-q", "run", "--json", "--jobs", jobs, "--metric", r"loss ([0-9.]+)", "--workdir",
               str(tmp_path / "w1"), "--", *sim, "--crash-when", "MulSquareFusionPass=off"])
    j = json.loads(capsys.readouterr().out)
    assert rc == 1 and j["status"] == "inconclusive" and j["executions"] == 3, j["trials"]
    assert [t["config_off"] for t in j["trials"]].count([]) == 1
    job = tmp_path / "once.py"
    job.write_text(f"""import os, pathlib, subprocess, sys
flag = pathlib.Path({str(tmp_path / "crashed")!r})
if open(os.environ["FUSEBISECT_SWITCH_FILE"]).read().count('"off"') >= 10 and not flag.exists():
    flag.write_text("1")
    sys.exit(1)     # the first all-off run crashes, the next ones do not
sys.exit(subprocess.run({sim!r}).returncode)
""")
    rc = main(["-q", "run", "--json", "--jobs", jobs, "--metric", r"loss ([0-9.]+)", "--workdir",
               str(tmp_path / "w2"), "--", sys.executable, str(job)])
    j = json.loads(capsys.readouterr().out)
    assert rc == 0 and [c["rules"] for c in j["culprits"]] == [["LayerNormFusionPass"]], j["message"]
    assert [t["config_off"] for t in j["trials"]].count([]) == 1, j["trials"]
    assert (tmp_path / "crashed").exists()


def test_the_reports_fresh_sets_aside_name_the_files_where_they_are_now(capsys, tmp_path):
    """--fresh moves report.md/report.html written with the workdir's paths, which the new run fills: they are
    written again from the journal set aside, naming its own repro dirs, switch files and production file."""
    work = tmp_path / "w"
    sim = ["--", sys.executable, "-m", "fusebisect.sim", "train", "--steps", "2"]
    assert main(["-q", "run", "--metric", r"loss ([0-9.]+)", "--workdir", str(work), *sim,
                 "--faulty", "LayerNormFusionPass"]) == 0
    assert main(["-q", "run", "--fresh", "--metric", r"loss ([0-9.]+)", "--workdir", str(work), *sim,
                 "--faulty", "GeluFusionPass"]) == 0
    capsys.readouterr()
    [old] = (work / "previous").iterdir()
    md = (old / "report.md").read_text()
    # (the heading's path is Markdown-escaped text: an underscore as \\_)
    assert f"FUSEBISECT_TRIAL_DIR={old / 'repro' / 'good'}" in md and f"({old / 'fusion_switch.cfg'})" in md.replace(
        "\\_", "_")
    assert "LayerNormFusionPass" in md and '"GeluFusionPass": "off"' not in md
    assert str(old) in (old / "report.html").read_text()
    # rewritten as soon as they are set aside: a new run stopped in its first execution leaves them right too
    stop = "import os, signal; os.kill(os.getppid(), signal.SIGTERM)"   # the job stops fusebisect (143)
    proc = subprocess.run([sys.executable, "-m", "fusebisect", "-q", "run", "--fresh", "--workdir", str(work), "--",
                           sys.executable, "-c", stop], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 143, proc.stderr
    newest = max((work / "previous").iterdir())
    assert newest != old and f"FUSEBISECT_TRIAL_DIR={newest / 'repro' / 'good'}" in (newest / "report.md").read_text()


def test_flaky_with_rules_settles_the_reference_on_three_runs_up_front(capsys, tmp_path):
    """--flaky makes the all-off reference the middle of three runs before the search; with --rules (no
    discovery baseline before it) the settling found no reference yet and was skipped, so one outlier
    reference could decide every verdict."""
    rules = "LayerNormFusionPass,GeluFusionPass,MatMulBiasAddFusionPass,TbeEltwiseFusionPass"
    rc = main(["-q", "run", "--json", "--flaky", "--rules", rules, "--metric", r"loss ([0-9.]+)", "--workdir",
               str(tmp_path / "w"), "--", sys.executable, "-m", "fusebisect.sim", "train", "--steps", "3",
               "--faulty", "LayerNormFusionPass"])
    j = json.loads(capsys.readouterr().out)
    assert rc == 0 and [c["rules"] for c in j["culprits"]] == [["LayerNormFusionPass"]], j["message"]
    all_off = sorted(rules.split(","))
    assert [t["index"] for t in j["trials"] if sorted(t["config_off"]) == all_off][:3] == [1, 2, 3]


def test_all_off_runs_that_differ_beyond_the_tolerance_give_no_not_fusion(capsys, tmp_path):
    """The all-off runs wobble far beyond --rtol (1.0, 1.5, 1.2): once the reference settles on their middle, the
    others are BAD against it, which is the tolerance, not a cause outside fusion. Inconclusive, saying so,
    rather than not_fusion."""
    job = tmp_path / "job.py"
    job.write_text(f"""import json, os, pathlib
count = pathlib.Path({str(tmp_path / "count")!r})
switch = json.load(open(os.environ["FUSEBISECT_SWITCH_FILE"])).get("Switch", {{}}).get("GraphFusion", {{}})
if sum(v == "off" for v in switch.values()) == 3:   # every candidate off: the loss wobbles run to run
    n = int(count.read_text()) if count.exists() else 0
    count.write_text(str(n + 1))
    print(f"loss {{[1.0, 1.5, 1.2, 1.5, 1.2][min(n, 4)]}}")
else:
    print("loss 1.5")
""")
    rc = main(["-q", "run", "--json", "--rules", "GeluFusionPass,LayerNormFusionPass,SoftmaxFusionPass", "--metric",
               r"loss ([0-9.]+)", "--workdir", str(tmp_path / "w"), "--", sys.executable, str(job)])
    j = json.loads(capsys.readouterr().out)
    assert rc == 1 and j["status"] == "inconclusive", j["message"]
    assert j["message"].startswith("The all-candidates-off runs differ from each other beyond the tolerance (runs ")
    assert "--rtol 0.01" in j["message"]
    # curve mode: the curves differ mid-run and end alike; judged point by point, as the oracle judges runs
    curve = tmp_path / "curve.py"
    curve.write_text(f"""import pathlib
count = pathlib.Path({str(tmp_path / "count2")!r})
n = int(count.read_text()) if count.exists() else 0
count.write_text(str(n + 1))
print("loss: 1.0"); print(f"loss: {{1 + n}}"); print("loss: 0.5")
""")
    rc = main(["-q", "run", "--json", "--rules", "GeluFusionPass,LayerNormFusionPass,SoftmaxFusionPass,MulAddFusionPass",
               "--metric", r"loss: ([0-9.]+)", "--metric-mode", "curve", "--workdir", str(tmp_path / "w2"), "--",
               sys.executable, str(curve)])
    j = json.loads(capsys.readouterr().out)
    assert rc == 1 and j["status"] == "inconclusive" and not j["culprits"], j["message"]
    assert "curve point 1:" in j["message"] and "differ from each other beyond the tolerance" in j["message"]


def _fusing_job(tmp_path, body: str):
    """A stand-in CANN job: ``body`` (Python; ``text`` holds the switch file) sets ``fired``, the rules it fuses, and
    ``bad``; the job writes ``fired`` as its fusion_result.json and exits 1 when ``bad``."""
    job = tmp_path / "job.py"
    job.write_text("import json, os, sys\n"
                   "text = open(os.environ['FUSEBISECT_SWITCH_FILE']).read()\n"
                   + textwrap.dedent(body) +
                   "stats = {r: {'match_times': 1, 'effect_times': 1} for r in fired}\n"
                   "path = os.path.join(os.environ['ASCEND_WORK_PATH'], 'fusion_result.json')\n"
                   "json.dump({'session_and_graph_id_0_1': {'graph_fusion': stats}}, open(path, 'w'))\n"
                   "sys.exit(1 if bad else 0)\n")
    return job


def test_a_rule_outside_the_candidates_that_fires_with_every_bad_verdict_leaves_the_answer_open(capsys, tmp_path):
    """Turning passes off can let another pass fuse the pattern: here MulAddFusionPass (never a candidate: it
    does not fire in the default configuration) fires whenever any candidate is off, and it is what breaks the
    job. The runs then name rules 'bad while turned off' that only let it fire; it fired in every BAD run and in
    no GOOD one, so the verdict is inconclusive, naming it and the rerun that tests it."""
    job = _fusing_job(tmp_path, """
        rules = ['GeluFusionPass', 'LayerNormFusionPass', 'SoftmaxFusionPass', 'MatMulBiasAddFusionPass']
        fired = [r for r in rules if f'"{r}": "off"' not in text]
        if len(fired) < len(rules):
            fired.append('MulAddFusionPass')
        bad = 'MulAddFusionPass' in fired
        """)
    rc = main(["--quiet", "run", "--json", "--workdir", str(tmp_path / "w"), "--", sys.executable, str(job)])
    out = json.loads(capsys.readouterr().out)
    assert rc == 1 and out["status"] == "inconclusive"
    assert "MulAddFusionPass, not a candidate, fired in every BAD run" in out["message"]
    assert "--rules GeluFusionPass,LayerNormFusionPass,MatMulBiasAddFusionPass,SoftmaxFusionPass,MulAddFusionPass" \
        in out["message"]


def test_a_rule_the_job_reports_in_another_section_than_the_catalog_is_switched_where_the_job_reads_it(
        capsys, tmp_path):
    """This CANN reports TbeEltwiseFusionPass under graph_fusion (the catalog: UBFusion) and reads its switch
    there: written in UBFusion only, every run with it 'off' still fused it and the job was blamed for ignoring
    its switch. Both sections are written where the two disagree."""
    job = _fusing_job(tmp_path, """
        graph = json.loads(text).get('Switch', {}).get('GraphFusion', {})
        rules = ['GeluFusionPass', 'LayerNormFusionPass', 'TbeEltwiseFusionPass']
        fired = [r for r in rules if graph.get(r) != 'off']
        bad = 'TbeEltwiseFusionPass' in fired
        """)
    rc = main(["--quiet", "run", "--json", "--workdir", str(tmp_path / "w"), "--", sys.executable, str(job)])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and [c["rules"] for c in out["culprits"]] == [["TbeEltwiseFusionPass"]], out["message"]
    cfg = json.loads((tmp_path / "w" / "fusion_switch.cfg").read_text())
    assert cfg["Switch"]["GraphFusion"] == {"TbeEltwiseFusionPass": "off"}


def test_the_count_of_excluded_rules_says_why_they_were_left_out(capsys, tmp_path):
    """A forbidden-close pass and a name no pass can have were both left out: not both because they 'cannot be
    disabled'."""
    job = _fusing_job(tmp_path, """
        fired = ['AddNFusionPass', 'Bad Name', *(r for r in ('GeluFusionPass', 'LayerNormFusionPass')
                                                 if f'"{r}": "off"' not in text)]
        bad = 'GeluFusionPass' in fired
        """)
    rc = main(["run", "--workdir", str(tmp_path / "w"), "--", sys.executable, str(job)])
    err = " ".join(capsys.readouterr().err.split())
    assert rc == 0 and "2 candidate rules from the rules that fired in the baseline; 2 excluded (1 cannot be " \
        "disabled, 1 not switchable by name)" in err, err


def test_an_interaction_contradicted_by_its_own_verification_run_is_not_found(capsys, tmp_path):
    """LayerNormFusionPass alone is faulty; one flipped verdict (a GOOD run with it on) makes it look like a pair
    with LogSoftmaxFusionPass, which fires only with it on. The production check that keeps LayerNorm on and
    turns LogSoftmax off is BAD: an interaction would be fixed by that, so the pair is not the answer."""
    job = _fusing_job(tmp_path, f"""
        rules = ['GeluFusionPass', 'LayerNormFusionPass', 'LogSoftmaxFusionPass', 'MatMulBiasAddFusionPass']
        fired = [r for r in rules if f'"{{r}}": "off"' not in text]
        if 'LayerNormFusionPass' not in fired and 'LogSoftmaxFusionPass' in fired:
            fired.remove('LogSoftmaxFusionPass')
        bad = 'LayerNormFusionPass' in fired
        flag = {str(tmp_path / 'flipped')!r}
        if bad and 'LogSoftmaxFusionPass' not in fired and len(fired) < 3 and not os.path.exists(flag):
            open(flag, 'w').close()
            bad = False
        """)
    rc = main(["--quiet", "run", "--json", "--workdir", str(tmp_path / "w"), "--", sys.executable, str(job)])
    out = json.loads(capsys.readouterr().out)
    assert (tmp_path / "flipped").exists()   # the scenario happened
    assert rc == 1 and out["status"] == "inconclusive", out["message"]
    assert "with only LogSoftmaxFusionPass off, was BAD" in out["message"]
    cfg = json.loads((tmp_path / "w" / "fusion_switch.cfg").read_text())["Switch"]["GraphFusion"]
    assert cfg == {"LayerNormFusionPass": "off", "LogSoftmaxFusionPass": "off"}


def test_a_device_on_which_every_run_fails_is_named(capsys, tmp_path):
    job = tmp_path / "job.py"
    job.write_text(
        "import json, os, signal, sys, time\n"
        "time.sleep(0.1)\n"
        "if os.environ.get('ASCEND_RT_VISIBLE_DEVICES') == '1':\n"
        "    os.kill(os.getpid(), signal.SIGKILL)     # device 1 is broken\n"
        "text = open(os.environ['FUSEBISECT_SWITCH_FILE']).read()\n"
        "sys.exit(0 if '\"GeluFusionPass\": \"off\"' in text else 1)\n")
    rules = "GeluFusionPass,LayerNormFusionPass,SoftmaxFusionPass,MatMulBiasAddFusionPass,MulAddFusionPass"
    main(["--quiet", "run", "--json", "--devices", "0,1,2", "--rules", rules, "--workdir", str(tmp_path / "w"), "--",
          sys.executable, str(job)])
    out = json.loads(capsys.readouterr().out)
    assert any(n.startswith("every run on device 1 (") and "no run on devices 0, 2 was" in n for n in out["notes"]), \
        out["notes"]


def test_a_resume_with_other_jobs_checks_again_the_finished_jobs_it_no_longer_plans(tmp_path):
    """Stopped while the checks of a parallel round ran (their jobs finished), then resumed one run at a time: the
    new plan asks for other configurations, and those finished jobs were thrown away. Each is checked again and
    its verdict used; no job runs twice."""
    rules = ",".join(["ABatchnormFusionPass", "AArgMaxV2FusionPass", "AAMatMulNzToNdFusionPass",
                      "GeluFusionPass", "LayerNormFusionPass", "SoftmaxFusionPass", "MatMulBiasAddFusionPass",
                      "MulAddFusionPass"])
    block, started = tmp_path / "block", tmp_path / "started"
    block.touch()
    started.mkdir()
    check = tmp_path / "check.py"
    check.write_text(
        "import os, sys, time\n"
        "text = open(os.environ['FUSEBISECT_SWITCH_FILE']).read()\n"
        "off = text.count('\"off\"')\n"
        f"if 0 < off < 8:   # a search run, not a gate: held until {block.name} goes\n"
        f"    open(os.path.join({str(started)!r}, os.path.basename(os.environ['FUSEBISECT_TRIAL_DIR'])), 'w')\n"
        f"    while os.path.exists({str(block)!r}):\n"
        "        time.sleep(0.05)\n"
        "sys.exit(0 if '\"GeluFusionPass\": \"off\"' in text else 1)\n")
    jobs = tmp_path / "jobs.txt"
    job = ("import hashlib, os; text = open(os.environ['FUSEBISECT_SWITCH_FILE']).read(); "
           f"open({str(jobs)!r}, 'a').write(hashlib.sha256(text.encode()).hexdigest()[:12] + '\\n')")
    argv = [sys.executable, "-m", "fusebisect", "run", "--rules", rules, "--workdir", str(tmp_path / "w"),
            "--check", f"{sys.executable} {check}"]
    proc = subprocess.Popen([*argv, "--jobs", "3", "--", sys.executable, "-c", job], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while len(list(started.iterdir())) < 3 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert len(list(started.iterdir())) == 3, proc.stderr.read() if proc.poll() is not None else ""
        proc.terminate()
        assert proc.wait(timeout=30) == 143
        block.unlink()
        rerun = subprocess.run([*argv, "--jobs", "1", "--json", "--", sys.executable, "-c", job],
                               capture_output=True, text=True, timeout=120)
        assert rerun.returncode == 0, rerun.stderr
        out = json.loads(rerun.stdout)
        assert [c["rules"] for c in out["culprits"]] == [["GeluFusionPass"]]
        assert " ".join(rerun.stderr.split()).count("checking its output again") == 3
        assert not out["unjudged"], out["unjudged"]
        ran = jobs.read_text().split()
        assert len(ran) == len(set(ran)), "a job ran twice"
    finally:
        proc.kill()
