"""``fusebisect run`` checks every option before the first execution and before the journal is written: a bad
value is one line on stderr, exit 2, no run of the job (which can take hours), no journal that would refuse the
corrected rerun."""

from __future__ import annotations

import json
import os
import sys

import pytest

from fusebisect.cli.app import main

M = "loss ([0-9.]+)"


@pytest.mark.parametrize("args,msg", [
    # values out of range
    (["--confidence", "1.5"], "--confidence must be between 0.5 and 1 (exclusive), got 1.5"),
    (["--confidence", "0.5"], "--confidence must be between 0.5 and 1"),
    (["--max-runs", "1"], "--max-runs must be >= 2"),
    (["--metric", M, "--rtol", "-1"], "--rtol must be >= 0"),
    (["--metric", M, "--atol", "inf"], "--atol must be a finite number >= 0, got inf"),
    (["--timeout", "inf"], "--timeout must be a finite number > 0, got inf"),
    (["--dumps", "--cosine", "1.5"], "--cosine must be between -1 and 1"),
    # the dump oracle maps fused ops through the GE graph dumps
    (["--dumps", "--no-graph-dump"], "--dumps with --no-graph-dump: the dump oracle maps fused ops"),
    (["--metric", M, "--expect", "nan"], "--expect must be a finite number"),
    # the production switch file's path, and the check command, are checked before the search, not after it
    (["-o", "{tmp}/no-such-dir/x.cfg"], "--output: directory {tmp}/no-such-dir does not exist"),
    (["-o", "{tmp}"], "--output: {tmp} is a directory"),
    (["-o", "{tmp}/fifo"], "--output: {tmp}/fifo is not a regular file (a device, FIFO or socket)"),
    (["-o", "/proc/x.cfg"], "--output: cannot write in /proc ("),
    (["-o", "{tmp}/w"], "--output {tmp}/w: that is the --workdir; the production switch file needs a file path"),
    # the lock of a --workdir the run has yet to create
    (["-o", "{tmp}/w/.lock"], "--output {tmp}/w/.lock: that is the run's own .lock in --workdir"),
    # a directory inside a --workdir the run has yet to create: the run creates the workdir only
    (["-o", "{tmp}/w/sub/x.cfg"], "--output: directory {tmp}/w/sub does not exist"),
    (["--workdir", ""], "--workdir: empty path"),
    (["--workdir", "/proc/fb/w"], "--workdir: cannot create /proc/fb/w in /proc ("),
    (["--workdir", "{tmp}/dangling"], "--workdir: {tmp}/dangling is a symbolic link to {tmp}/gone/w, which does not exist"),
    (["--workdir", "{tmp}/dangling/sub"], "--workdir: {tmp}/dangling is a symbolic link to {tmp}/gone/w, which does not "
                                          "exist"),
    (["--check", "no-such-check-program-xyz"], "--check: cannot run command 'no-such-check-program-xyz': not found"),
    (["--check", "{tmp}/check.sh"], "--check: cannot run command '{tmp}/check.sh': no such file"),
    (["--check", "--jobs", "2"], "--check needs a command, got the option '--jobs'"),
    # an oracle's options without their oracle would be ignored
    (["--expect", "0.5"], "--expect without --metric"),
    (["--rtol", "0.1", "--atol", "1"], "--rtol, --atol without --metric"),
    (["--metric-mode", "curve"], "--metric-mode without --metric"),
    (["--dumps", "--rtol", "0.1"], "--rtol without --metric"),
    (["--cosine", "0.9"], "--cosine without --dumps"),
    (["--metric", M, "--max-abs-error", "1"], "--max-abs-error without --dumps"),
    (["--metric", M, "--metric-mode", "curve", "--expect", "0.5"], "--expect with --metric-mode curve"),
    # candidates: a misspelt name would switch nothing off; a path is a file
    (["--rules", "LayerNormFusionpass,GeluFusionPass"],
     "--rules: unknown rule 'LayerNormFusionpass' (did you mean LayerNormFusionPass"),
    (["--rules", ""], "--rules: empty value"),
    (["--rules", "ALL,GeluFusionPass", "--allow-unknown-rules"], "--rules: ALL is the switch file's key"),
    (["--rules", "/no/such/file.txt"], "--rules: /no/such/file.txt: no such file"),
    (["--rules", "{tmp}"], "--rules: {tmp} is a directory"),
    # devices
    (["--devices", "a,b"], "--devices: 'a' is not a device id (a non-negative integer)"),
    (["--devices", "0,1,0"], "--devices: device 0 given more than once"),
    (["--devices", "0,00"], "--devices: device 0 given more than once"),
    (["--devices", "0,,1"], "--devices 0,,1: an empty device id"),
])
def test_bad_options_stop_before_any_run(args, msg, capsys, tmp_path):
    marker = tmp_path / "executed"
    work = tmp_path / "w"
    os.mkfifo(tmp_path / "fifo")
    os.symlink(tmp_path / "gone" / "w", tmp_path / "dangling")
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    rc = main(["run", "--workdir", str(work), *args, "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.startswith("fusebisect: error: ") and err.count("\n") == 1, err
    assert msg.replace("{tmp}", str(tmp_path)) in err
    assert not marker.exists() and not work.exists()


def test_the_production_file_never_replaces_what_the_run_reads_or_keeps(capsys, tmp_path):
    """-o naming the --rules file, the training script, the workdir's journal, or a symbolic link loop: a usage
    error before any run, and the file is left as it was."""
    rules = tmp_path / "rules.txt"
    rules.write_text("GeluFusionPass\n")
    script = tmp_path / "train.py"
    script.write_text("pass\n")
    work = tmp_path / "w"
    work.mkdir()
    (work / "journal.jsonl").write_text("")
    (tmp_path / "A").symlink_to(tmp_path / "B")
    (tmp_path / "B").symlink_to(tmp_path / "A")
    for out, msg in ((rules, "which --rules reads"), (script, "which the command reads"),
                     (work / "journal.jsonl", "that is the run's own journal.jsonl in --workdir"),
                     (tmp_path / "A", "cannot resolve the path")):
        rc = main(["run", "--workdir", str(work), "--rules", str(rules), "-o", str(out), "--",
                   sys.executable, str(script)])
        err = capsys.readouterr().err
        assert rc == 2 and msg in err and err.count("\n") == 1, err
    assert rules.read_text() == "GeluFusionPass\n" and script.read_text() == "pass\n"
    assert (work / "journal.jsonl").read_text() == ""
    # a file the command (or --check) names as --flag=PATH is read too
    params = tmp_path / "params.json"
    params.write_text('{"lr": 0.1}\n')
    for extra in (["--", sys.executable, str(script), f"--extra={params}"],
                  ["--check", f"python check.py --config={params}", "--", sys.executable, str(script)]):
        rc = main(["run", "--workdir", str(work), "--rules", str(rules), "-o", str(params), *extra])
        err = capsys.readouterr().err
        assert rc == 2 and f"--output {params}: that is {params}, which" in err, err
    assert params.read_text() == '{"lr": 0.1}\n'
    assert main(["run", "--workdir", str(tmp_path / "A"), "--", sys.executable, str(script)]) == 2
    err = capsys.readouterr().err
    assert "--workdir " in err and "cannot resolve the path" in err, err


def test_a_corrected_rerun_is_not_refused(capsys, tmp_path):
    work = tmp_path / "w"
    job = ["--", sys.executable, "-c", "pass"]
    assert main(["run", "--workdir", str(work), "--rules", "GeluFusionPass", "--confidence", "1.5", *job]) == 2
    rc = main(["-q", "run", "--json", "--workdir", str(work), "--rules", "GeluFusionPass", "--confidence", "0.9",
               *job])
    out = capsys.readouterr().out
    assert rc == 1 and json.loads(out)["status"] == "not_reproduced"


def test_allow_unknown_rules_accepts_a_custom_pass(capsys, tmp_path):
    rc = main(["-q", "run", "--json", "--workdir", str(tmp_path / "w"), "--rules", "MyCustomFusionPass",
               "--allow-unknown-rules", "--", sys.executable, "-c", "pass"])
    out = capsys.readouterr().out
    assert rc == 1 and json.loads(out)["candidate_rules"] == ["MyCustomFusionPass"]


def test_an_output_whose_backup_name_cannot_exist_is_refused_before_any_run(tmp_path, capsys):
    # the user's file is kept as NAME.bak before it is replaced: a name with no room for '.bak' would fail only
    # after the whole search
    prod = tmp_path / ("a" * 250 + ".cfg")
    prod.write_text("mine")
    marker = tmp_path / "executed"
    rc = main(["run", "--workdir", str(tmp_path / "w"), "-o", str(prod), "--", sys.executable, "-c",
               f"open({str(marker)!r}, 'w')"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and ".cfg.bak would be longer than the" in err, err
    assert err.startswith("fusebisect: error: --output: ")
    assert not marker.exists() and prod.read_text() == "mine"
    # the run's own file, written there by a finished run in the workdir: a rerun resumes (nothing to back up)
    job = tmp_path / "job.sh"   # bad while GeluFusionPass is on
    job.write_text('grep -q \'"GeluFusionPass": "off"\' "$FUSEBISECT_SWITCH_FILE"\n')
    ours = tmp_path / ("b" * 250 + ".cfg")
    argv = ["-q", "run", "--rules", "GeluFusionPass,LayerNormFusionPass", "--workdir", str(tmp_path / "w2"), "-o",
            str(ours), "--", "bash", str(job)]
    assert main(argv) == 0 and ours.is_file()
    capsys.readouterr()
    assert main(argv) == 0, capsys.readouterr().err


def test_the_production_file_is_never_the_workdirs_lock(capsys, tmp_path, monkeypatch):
    """-o WORKDIR/.lock: the run holds that file locked for its whole length, and the production file would
    replace it (a second run could then start in the same workdir). Refused like the journal, before any run."""
    monkeypatch.chdir(tmp_path)
    work = tmp_path / "w"
    job = tmp_path / "job.sh"   # bad while GeluFusionPass is on
    job.write_text('grep -q \'"GeluFusionPass": "off"\' "$FUSEBISECT_SWITCH_FILE"\n')
    argv = ["-q", "run", "--rules", "GeluFusionPass,LayerNormFusionPass", "--workdir", str(work)]
    assert main([*argv, "--", "bash", str(job)]) == 0   # a finished run: its lock file is there
    capsys.readouterr()
    lock = (work / ".lock").read_text()
    journal = (work / "journal.jsonl").read_text()
    for out in (work / ".lock", tmp_path / "." / "w" / ".lock"):
        rc = main([*argv, "-o", str(out), "--", "bash", str(job)])
        err = capsys.readouterr().err
        assert rc == 2 and err.count("\n") == 1, err
        assert f"--output {out}: that is the run's own .lock in --workdir" in err, err
    assert (work / ".lock").read_text() == lock and (work / "journal.jsonl").read_text() == journal


@pytest.mark.parametrize("name", ["fusion_switch.cfg", "prod.cfg"])
def test_an_output_in_the_workdir_the_run_creates_is_accepted(name, capsys, tmp_path, monkeypatch):
    """-o WORKDIR/NAME before the workdir exists (WORKDIR/fusion_switch.cfg is the default -o): the run creates
    the workdir, so the first run is not refused for a directory that does not exist yet (it was, and accepted
    once the workdir existed), and the production file is written there."""
    monkeypatch.chdir(tmp_path)
    job = tmp_path / "job.sh"   # bad while GeluFusionPass is on
    job.write_text('grep -q \'"GeluFusionPass": "off"\' "$FUSEBISECT_SWITCH_FILE"\n')
    work = tmp_path / "new" / "w"   # (its parent is missing too: the run creates both)
    out = work / name
    rc = main(["-q", "run", "--json", "--rules", "GeluFusionPass,LayerNormFusionPass", "--workdir", str(work), "-o",
               str(out), "--", "bash", str(job)])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    assert json.loads(cap.out)["switch_file"] == str(out)
    assert json.loads(out.read_text()) == {"Switch": {"GraphFusion": {"GeluFusionPass": "off"}}}
