"""``fusebisect report`` of a run interrupted in its 4th execution, then of the same run resumed to its end: the
baseline judged once the reference ran shows its verdict, the unfinished run's JSON has the finished one's keys,
and the interrupted execution's number (kept with its trial dir, never judged) is explained, not silently skipped.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from fusebisect.cli.app import main


def test_report_of_an_interrupted_run_then_of_its_resumption(tmp_path, capsys, monkeypatch):
    calls, hang, release = tmp_path / "calls", tmp_path / "hanging", tmp_path / "release"
    job = tmp_path / "job.py"
    job.write_text(textwrap.dedent(f'''
        import os, sys, time
        with open({str(calls)!r}, "a") as f:
            f.write("x")
        if os.path.getsize({str(calls)!r}) == 4 and not os.path.exists({str(release)!r}):
            open({str(hang)!r}, "w").close()
            time.sleep(300)
        from fusebisect.sim.cli import main
        sys.exit(main(["train", "--faulty", "GeluFusionPass", "--steps", "2"]))
    '''))
    work = tmp_path / "w"
    argv = ["run", "--metric", r"loss ([0-9.]+)", "--workdir", str(work), "--", sys.executable, str(job)]
    proc = subprocess.Popen([sys.executable, "-m", "fusebisect", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not hang.exists():
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()[1] if proc.poll() else ""
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=30)

    assert main(["report", str(work), "--json"]) == 1
    partial = json.loads(capsys.readouterr().out)
    assert partial["status"] == "running"
    baseline = partial["trials"][0]
    assert baseline["role"] == "baseline" and partial["trials"][1]["outcome"] == "good"
    assert baseline["outcome"] == "bad" and baseline["reason"].startswith("metric ")  # not "pending"
    assert [t["index"] for t in partial["trials"]] == [1, 2, 3] and partial["executions"] == 3
    [cut] = partial["unjudged"]
    assert cut["index"] == 4 and cut["trial_dir"].startswith(str(work / "trials" / "0004-"))
    assert {e["rule"] for e in partial["excluded"]} >= {"AReduceMeanFusionPass"}
    for key in ("bound", "switch_file", "verify", "repro", "engine_executions"):
        assert partial[key] is None, key
    started_in = os.getcwd()
    monkeypatch.chdir(tmp_path)   # a relative workdir still gives absolute paths, as trials[] has them
    assert main(["report", "w", "--json"]) == 1
    relative = json.loads(capsys.readouterr().out)
    assert relative["unjudged"] == partial["unjudged"] and relative["journal"] == str(work / "journal.jsonl")
    assert partial["notes"] == []   # every key of a finished run's JSON

    monkeypatch.chdir(started_in)   # (a resume runs where the run began)
    release.touch()
    assert main(["-q", "run", "--json", *argv[1:]]) == 0
    done = json.loads(capsys.readouterr().out)
    indices = [t["index"] for t in done["trials"]]
    assert 4 not in indices and indices == [1, 2, 3, *range(5, done["executions"] + 2)]
    assert [u["index"] for u in done["unjudged"]] == [4]
    assert main(["report", str(work)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"executions: {done['executions']}" in out
    assert "not counted: run 4, started but not judged (interrupted); output in " in out
    assert main(["report", str(work), "--markdown", str(tmp_path / "r.md")]) == 0
    assert "not counted: run 4, started but not judged (interrupted)" in (tmp_path / "r.md").read_text()


def test_report_of_a_run_stopped_before_its_first_execution_ended(tmp_path, capsys):
    (tmp_path / "w" / "trials" / "0001-baseline").mkdir(parents=True)
    assert main(["report", str(tmp_path / "w")]) == 2
    assert "stopped before its first execution ended" in capsys.readouterr().err
    (tmp_path / "other").mkdir()
    assert main(["report", str(tmp_path / "other")]) == 2
    assert "not the workdir of a fusebisect run" in capsys.readouterr().err


def test_report_of_a_run_still_going_and_of_a_resumed_one_says_so(tmp_path, capsys):
    """A run holding its workdir's lock is still going (not 'stopped': rerunning would be refused); a run
    resumed after its result (a raised --max-runs) and cut again reports what it judged since, not the old
    result."""
    from fusebisect.runner.journal import workdir_lock

    work = tmp_path / "w"
    (work / "trials" / "0001-baseline").mkdir(parents=True)
    with workdir_lock(work):
        assert main(["report", str(work)]) == 2
        err = capsys.readouterr().err
        assert f"a run (pid {os.getpid()}) is in its first execution" in err and "stopped" not in err
    argv = ["run", "--metric", r"loss ([0-9.]+)", "--workdir", str(work), "--fresh", "--max-runs", "3", "--",
            sys.executable, "-m", "fusebisect.sim", "train", "--faulty", "GeluFusionPass", "--steps", "2"]
    assert main(["-q", *argv]) == 1
    capsys.readouterr()
    with workdir_lock(work):   # resumed (a raised --max-runs), in its first new execution: not the old result
        assert main(["report", str(work), "--json"]) == 1
        assert json.loads(capsys.readouterr().out)["status"] == "running"
    (work / "trials" / "0004-0123456789ab").mkdir()   # ... and cut there: still no answer
    assert main(["report", str(work), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "running" and [u["index"] for u in doc["unjudged"]] == [4]
    (work / "trials" / "0004-0123456789ab").rmdir()
    journal = work / "journal.jsonl"
    lines = journal.read_text().splitlines(keepends=True)
    trial = next(line for line in lines if json.loads(line).get("event") == "trial")
    later = json.loads(trial)
    later["index"] = 4
    journal.write_text("".join(lines) + json.dumps(later) + "\n")   # a resumed run's fourth run, then cut
    assert main(["report", str(work), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "running" and doc["executions"] == 4
    resume = f"interrupted: rerun the same command in {os.getcwd()} to resume."   # where the run began
    assert (doc["message"], doc["running_pid"]) == (resume, None)
    assert main(["report", str(work)]) == 1   # the terminal says what the Markdown and HTML say
    out = capsys.readouterr().out
    assert out.startswith(resume)
    with workdir_lock(work):
        assert main(["report", str(work), "--json"]) == 1
        doc = json.loads(capsys.readouterr().out)
        assert doc["message"].startswith(f"the run is still going (pid {os.getpid()})")
        assert doc["running_pid"] == os.getpid()   # a number, as a pid is


def test_report_of_a_moved_workdir_shows_its_paths_where_they_are(tmp_path, capsys):
    """The journal and result hold absolute paths: after the workdir is renamed, the report's repro commands,
    trial dirs, production file and journal name the workdir as it is, not the path that no longer exists."""
    import shutil

    old, new = tmp_path / "m1", tmp_path / "m2"
    assert main(["-q", "run", "--metric", r"loss ([0-9.]+)", "--workdir", str(old), "--", sys.executable, "-m",
                 "fusebisect.sim", "train", "--faulty", "LayerNormFusionPass", "--steps", "3"]) == 0
    capsys.readouterr()
    shutil.move(old, new)
    assert main(["report", str(new), "--json"]) == 0
    text = capsys.readouterr().out
    doc = json.loads(text)
    assert str(old) + os.sep not in text and doc["journal"] == str(new / "journal.jsonl")
    assert doc["switch_file"] == str(new / "fusion_switch.cfg")
    assert any(arg == f"FUSEBISECT_TRIAL_DIR={new / 'repro' / 'good'}" for arg in doc["repro"]["good"])
    assert main(["report", str(new)]) == 0
    assert "LayerNormFusionPass" in capsys.readouterr().out   # the production file's text, read where it is


def test_reports_of_an_unfinished_run_keep_nan_metrics_and_say_whether_it_is_going(tmp_path, capsys):
    """A run cut before its end: --json writes a NaN metric as "nan" (null means no metric was read), and the
    Markdown/HTML banners say 'interrupted' or, while the workdir's lock is held, that the run is going."""
    from fusebisect.runner.journal import workdir_lock

    job = tmp_path / "job.py"
    job.write_text(textwrap.dedent('''
        import os, sys
        text = open(os.environ["FUSEBISECT_SWITCH_FILE"]).read()
        print("loss 1.0" if '"LayerNormFusionPass": "off"' in text else "loss nan")
    '''))
    work = tmp_path / "w"
    assert main(["-q", "run", "--metric", r"loss ([0-9.]+)", "--rules", "LayerNormFusionPass,GeluFusionPass",
                 "--max-runs", "3", "--workdir", str(work), "--", sys.executable, str(job)]) in (0, 1)
    capsys.readouterr()
    journal = work / "journal.jsonl"
    lines = journal.read_text().splitlines(keepends=True)
    journal.write_text("".join(line for line in lines if json.loads(line).get("event") != "result"))
    assert main(["report", str(work), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "running" and "nan" in [t["metric"] for t in doc["trials"]]
    md = tmp_path / "r.md"
    assert main(["report", str(work), "--markdown", str(md)]) == 1
    assert f"**Run not finished**: interrupted: rerun the same command in {os.getcwd()} to resume." in md.read_text()
    with workdir_lock(work):
        assert main(["report", str(work), "--markdown", str(md)]) == 1
        assert f"the run is still going (pid {os.getpid()})" in md.read_text()
    capsys.readouterr()


def test_an_op_name_with_dollars_is_drawn_as_text(tmp_path):
    """matplotlib reads $...$ as math: the first divergent op's name in the cosine plot is text."""
    from fusebisect.report.plots import cosine_along_ops

    svg = cosine_along_ops(["a", "fc1$_{$"], [1.0, 0.2], first_divergence=1, threshold=0.99)
    assert "<svg" in svg


def test_a_resumed_run_that_goes_on_takes_its_old_result_and_reports_away(tmp_path):
    """A run stopped by --max-runs has result.json and reports; resumed with a larger budget it goes on, and
    once it has judged a run of its own those files are no longer its answer (a CI job reading them would see
    a verdict the run has moved on from): they go, and are written again at its end."""
    work = tmp_path / "w"
    hang, release = tmp_path / "hanging", tmp_path / "release"
    job = tmp_path / "job.py"
    job.write_text(textwrap.dedent(f'''
        import os, sys, time
        if os.path.basename(os.environ["FUSEBISECT_TRIAL_DIR"]).startswith("0005-") and not os.path.exists(
                {str(release)!r}):
            open({str(hang)!r}, "w").close()
            time.sleep(300)
        from fusebisect.sim.cli import main
        sys.exit(main(["train", "--faulty", "GeluFusionPass", "--steps", "2"]))
    '''))
    argv = [sys.executable, "-m", "fusebisect", "-q", "run", "--metric", r"loss ([0-9.]+)", "--workdir", str(work)]
    assert subprocess.run([*argv, "--max-runs", "3", "--", sys.executable, str(job)], capture_output=True,
                          timeout=120).returncode == 1
    assert (work / "result.json").exists() and (work / "report.md").exists()
    proc = subprocess.Popen([*argv, "--max-runs", "20", "--", sys.executable, str(job)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not hang.exists():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        assert not (work / "result.json").exists() and not (work / "report.md").exists()
    finally:
        release.touch()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)


def test_the_markdown_and_html_tables_list_runs_in_run_number_order(tmp_path, capsys):
    """With --jobs, runs end in another order than they start: the journal holds them as judged, but the reports'
    execution tables list them by run number, as the terminal report and the JSON do."""
    import re
    import sys

    from fusebisect.cli.app import main

    work = tmp_path / "w"
    rc = main(["-q", "run", "--jobs", "3", "--metric", r"loss ([0-9.]+)", "--workdir", str(work), "--", sys.executable,
               "-m", "fusebisect.sim", "train", "--steps", "2", "--faulty", "GeluFusionPass,MatMulBiasAddFusionPass"])
    assert rc == 0, capsys.readouterr().err
    journal = [json.loads(line) for line in (work / "journal.jsonl").read_text().splitlines()]
    judged = [ev["index"] for ev in journal if ev.get("event") == "trial"]
    assert main(["report", str(work), "--markdown", str(tmp_path / "r.md"), "--html", str(tmp_path / "r.html")]) == 0
    rows = [int(m) for m in re.findall(r"^\| (\d+) \|", (tmp_path / "r.md").read_text(), re.M)]
    assert rows == sorted(judged) and len(rows) == len(judged)
    cells = [int(m) for m in re.findall(r"<tr><td>(\d+)</td>", (tmp_path / "r.html").read_text())]
    assert cells[-len(judged):] == sorted(judged)


def test_a_runs_note_names_the_ignored_switches_once():
    """A run INVALID because its switch was ignored: its reason already names the rules, and the Markdown/HTML
    note repeated them."""
    from fusebisect.report.model import TrialView, trial_note

    t = TrialView(number=3, role="search", off=["A", "B"], outcome="invalid", metric=None, curve=[], seconds=1.0,
                  reason="switch ignored: A, B", ignored=["A", "B"], switch_file=None, trial_dir=None)
    assert trial_note(t) == "switch ignored: A, B"
    t.reason = "crash (exit 1)"
    assert trial_note(t) == "crash (exit 1) (switch ignored: A, B)"


def test_a_verdict_that_names_no_culprit_shows_no_run_count_target(tmp_path, capsys):
    """The target is the bound for the culprit sets found: not_reproduced has none to meet (it read 'run-count
    target 8'); a found verdict keeps it."""
    import sys

    from fusebisect.cli.app import main

    sim = ["--", sys.executable, "-m", "fusebisect.sim", "train", "--steps", "2"]
    assert main(["run", "--metric", r"loss ([0-9.]+)", "--workdir", str(tmp_path / "a"), *sim]) == 1
    out = capsys.readouterr().out
    assert "not_reproduced" in out and "run-count target" not in out
    main(["report", str(tmp_path / "a"), "--markdown", str(tmp_path / "a.md")])
    assert "run-count target" not in (tmp_path / "a.md").read_text()
    assert main(["run", "--metric", r"loss ([0-9.]+)", "--workdir", str(tmp_path / "b"), *sim,
                 "--faulty", "GeluFusionPass"]) == 0
    assert "run-count target" in capsys.readouterr().out


@pytest.mark.parametrize("edit, said", [
    (lambda rs: rs[-1]["culprits"][0].pop("direction"), "culprits.0: 'direction' is a required property"),
    (lambda rs: rs[-1]["culprits"][0].update(confidence="high"), "culprits.0.confidence: 'high' is not of type"),
    (lambda rs: rs[-1].update(trials=[1, 2]), "trials.0: 1 is not of type 'object'"),
    (lambda rs: rs[-1].update(verify="good"), "verify: 'good' is not of type"),
    (lambda rs: rs[0].update(excluded=["a"]), "'excluded[0]' must be a {\"rule\": NAME, \"reason\": TEXT} object"),
    (lambda rs: rs[0].update(version=2), "journal version 2 is not 1"),
    (lambda rs: rs.pop(0), "the first record is not a start record"),
])
def test_a_journal_edited_or_of_another_version_is_refused_in_one_line(tmp_path, capsys, edit, said):
    """The terminal report ended in an internal error (exit 3) on a result record without a field or with one of
    another type, the HTML on others; a journal of another version, or without its start record, was rendered
    as if it were one of this version's."""
    work = tmp_path / "w"
    assert main(["-q", "run", "--metric", r"loss ([0-9.]+)", "--workdir", str(work), "--", sys.executable, "-m",
                 "fusebisect.sim", "train", "--faulty", "GeluFusionPass", "--steps", "2"]) == 0
    journal = work / "journal.jsonl"
    records = [json.loads(line) for line in journal.read_text().splitlines()]
    assert records[-1]["event"] == "result"
    from fusebisect.report.model import _result_error   # what run writes is what the schema describes

    assert _result_error({k: v for k, v in records[-1].items() if k != "event"}) is None
    assert _result_error(json.loads((work / "result.json").read_text())) is None
    edit(records)
    journal.write_text("".join(json.dumps(r) + "\n" for r in records))
    capsys.readouterr()
    for extra in ([], ["--json"], ["--html", str(tmp_path / "r.html")], ["--markdown", str(tmp_path / "r.md")]):
        assert main(["report", str(work), *extra]) == 2, extra
        err = capsys.readouterr().err
        assert said in err and str(journal) in err and "internal error" not in err and err.count("\n") == 1, err
