"""fusebisect demo, the run reports (HTML/Markdown) and `fusebisect report` re-rendering from a journal."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from fusebisect.cli.app import main

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def demo_dumps(tmp_path_factory) -> Path:
    """One finished demo run with the dumps oracle, kept in a workdir (shared by the report tests)."""
    workdir = tmp_path_factory.mktemp("demo") / "work"
    rc = main(["--quiet", "demo", "--mode", "dumps", "--faulty", "GeluFusionPass", "--workdir", str(workdir),
               "--json"])
    assert rc == 0
    return workdir


@pytest.mark.parametrize("mode", ["metric", "check"])
def test_demo_finds_the_faulty_rule(mode, capsys):
    rc = main(["--quiet", "demo", "--mode", mode, "--faulty", "LayerNormFusionPass", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert out["status"] == "found"
    assert [c["rules"] for c in out["culprits"]] == [["LayerNormFusionPass"]]
    assert out["demo"] == {"faulty": "LayerNormFusionPass", "mode": mode}
    assert out["verify"]["outcome"] == "good"


def test_demo_check_compares_with_the_reference_of_the_seed_it_trains_with(capsys):
    """--seed changes the simulated job's data and weights: a check against the seed-0 reference called every
    run bad, and the demo ended not_fusion."""
    rc = main(["--quiet", "demo", "--mode", "check", "--seed", "3", "--steps", "3", "--faulty", "GeluFusionPass",
               "--json"])
    out = json.loads(capsys.readouterr().out)
    assert (rc, out["status"]) == (0, "found"), out["message"]
    assert [c["rules"] for c in out["culprits"]] == [["GeluFusionPass"]]


def test_demo_ignores_simulator_settings_left_in_the_environment(capsys, monkeypatch):
    monkeypatch.setenv("FUSEBISECT_SIM_CRASH_WHEN", "LayerNormFusionPass=off")   # every reference run would crash
    monkeypatch.setenv("FUSEBISECT_SIM_FLAKY", "1")
    rc = main(["demo", "--faulty", "LayerNormFusionPass", "--json"])
    captured = capsys.readouterr()
    assert rc == 0 and [c["rules"] for c in json.loads(captured.out)["culprits"]] == [["LayerNormFusionPass"]]
    assert "the demo's job ignores FUSEBISECT_SIM_CRASH_WHEN, FUSEBISECT_SIM_FLAKY" in captured.err


def test_demo_with_dumps_writes_reports_and_production_cfg(demo_dumps):
    result = json.loads((demo_dumps / "result.json").read_text())
    assert [c["rules"] for c in result["culprits"]] == [["GeluFusionPass"]]
    cfg = json.loads((demo_dumps / "fusion_switch.cfg").read_text())
    assert cfg == {"Switch": {"GraphFusion": {"GeluFusionPass": "off"}}}
    assert (demo_dumps / "report.html").is_file() and (demo_dumps / "report.md").is_file()


def test_demo_random_rule_is_reproducible_by_seed(capsys):
    assert main(["--quiet", "demo", "--seed", "3", "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["status"] == "found"
    assert [c["rules"] for c in first["culprits"]] == [[first["demo"]["faulty"]]]


def test_demo_picks_only_faults_the_job_shows_and_judges_interactions_fairly():
    from fusebisect.cli.cmd_demo import choose_faulty, demo_rules, demo_verdict, fault_shows

    # MulSquareFusionPass's fault (float16 Square saturating at 65504) never triggers in this job
    assert not fault_shows("MulSquareFusionPass", 20) and fault_shows("GeluFusionPass", 20)
    usable = ["MulSquareFusionPass", "GeluFusionPass"]
    assert {choose_faulty(usable, seed, 20) for seed in range(6)} == {"GeluFusionPass"}
    assert choose_faulty(demo_rules(), 7, 20) == choose_faulty(demo_rules(), 7, 20)
    # LogSoftmaxFusionPass fuses what SoftmaxFusionPass built: the symptom needs both on, one set names both
    assert "correct" in demo_verdict("LogSoftmaxFusionPass", [{"rules": ["SoftmaxFusionPass", "LogSoftmaxFusionPass"]}])
    assert "wrong" in demo_verdict("LogSoftmaxFusionPass", [{"rules": ["SoftmaxFusionPass"]}])
    assert "wrong" in demo_verdict("GeluFusionPass", [{"rules": ["GeluFusionPass"]}, {"rules": ["MulAddFusionPass"]}])
    assert "wrong" in demo_verdict("GeluFusionPass", [])
    # naming nothing is right when the job cannot show the fault
    assert "correct" in demo_verdict("MulSquareFusionPass", [], shows=False)
    assert "wrong" in demo_verdict("MulSquareFusionPass", [{"rules": ["GeluFusionPass"]}], shows=False)


def test_demo_rejects_a_rule_it_cannot_use(capsys):
    assert main(["demo", "--faulty", "AReduceSumFusionPass"]) == 2  # forbidden-close: cannot be switched off
    err = capsys.readouterr().err
    assert "AReduceSumFusionPass" in err and "cannot be switched off" in err
    assert main(["demo", "--mode", "nonsense"]) == 2
    capsys.readouterr()
    assert main(["demo", "--workdir", ""]) == 2   # an unset $WORKDIR: never the current directory
    assert "--workdir: empty path" in capsys.readouterr().err


def test_html_report_content(demo_dumps):
    html = (demo_dumps / "report.html").read_text()
    assert "Culprit found:</b> GeluFusionPass" in html
    assert "gelu usion pass" in html or "GraphFusion" in html  # catalog facts shown next to the culprit
    # plots: dump cosine along ops and the search timeline (the dumps oracle has no metric curve)
    assert html.count("<svg") == 2
    assert "first divergence" in html
    assert "Production fusion_switch.cfg" in html and '&quot;GeluFusionPass&quot;: &quot;off&quot;' in html
    assert "# good" in html and "# bad" in html
    # the rules kept out of the search (fired, but no switch file closes them) are in both reports
    excluded = json.loads((demo_dumps / "result.json").read_text())["excluded"]
    assert excluded and "Rules kept out of the search" in html
    md = (demo_dumps / "report.md").read_text()
    assert all(f"- {e['rule']}: {e['reason']}" in md for e in excluded)
    # the Markdown holds the HTML's facts without plots: the dump comparison's first divergence, the command
    assert "## Dump comparison: baseline vs reference" in md and "| gelu_Gelu_res_FusedMulAdd |" in md
    assert "## Command" in md and "fusebisect.sim train" in md
    # self-contained: no external URL anywhere, no scripts
    assert not re.search(r"https?://", html)
    assert "<script" not in html and "<link" not in html


def test_html_report_has_metric_curves_for_a_metric_run(tmp_path):
    workdir = tmp_path / "w"
    assert main(["--quiet", "demo", "--mode", "metric", "--faulty", "MulAddFusionPass", "--workdir",
                 str(workdir), "--json"]) == 0
    html = (workdir / "report.html").read_text()
    assert html.count("<svg") == 2  # metric curves + timeline
    for label in ("baseline (all rules at default)", "reference (candidates off)", "final (culprits off)"):
        assert label in html


def test_report_command_rerenders_from_the_journal(demo_dumps, tmp_path, capsys):
    out_html, out_md = tmp_path / "r.html", tmp_path / "r.md"
    assert main(["report", str(demo_dumps), "--html", str(out_html), "--markdown", str(out_md)]) == 0
    assert out_html.read_text() == (demo_dumps / "report.html").read_text()
    md = out_md.read_text()
    assert "**Culprit found:** GeluFusionPass" in md and "| verify |" in md
    assert main(["report", str(demo_dumps), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "found"


def test_report_of_an_interrupted_run(demo_dumps, tmp_path, capsys):
    work = tmp_path / "cut"
    work.mkdir()
    lines = (demo_dumps / "journal.jsonl").read_text().splitlines()
    keep = [ln for ln in lines if json.loads(ln)["event"] != "result"][:4]
    (work / "journal.jsonl").write_text("\n".join(keep) + "\n")
    assert main(["report", str(work), "--json"]) == 1
    partial = json.loads(capsys.readouterr().out)
    assert partial["status"] == "running" and partial["culprits"] == []
    assert main(["report", str(work), "--html", str(work / "r.html")]) == 1
    assert "Run not finished" in (work / "r.html").read_text()


def test_report_of_a_dir_without_journal(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path) in err and "journal" in err and "Traceback" not in err


def test_html_renders_in_headless_chromium(demo_dumps, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if chromium is None:
        pytest.skip("headless Chromium is not installed (.ci/run installs it)")
    shot = tmp_path / "report.png"
    proc = subprocess.run([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
                           "--window-size=1200,2400", f"--screenshot={shot}",
                           (demo_dumps / "report.html").as_uri()], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert shot.stat().st_size > 20_000  # a real page was painted, not a blank error page
    dom = subprocess.run([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile2'}", "--dump-dom",
                          (demo_dumps / "report.html").as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0
    assert "Culprit found:" in dom.stdout and dom.stdout.count("<svg") == 2


def test_run_writes_its_reports_into_the_workdir(tmp_path, capsys):
    import sys

    workdir = tmp_path / "w"
    rc = main(["--quiet", "run", "--metric", r"loss ([0-9.]+)", "--workdir", str(workdir), "--",
               sys.executable, "-m", "fusebisect.sim", "train", "--steps", "5", "--faulty", "SoftmaxFusionPass"])
    assert rc == 0
    assert "reports:" in capsys.readouterr().out
    assert "Culprit found:</b> SoftmaxFusionPass" in (workdir / "report.html").read_text()
    assert "**Culprit found:** SoftmaxFusionPass" in (workdir / "report.md").read_text()


def test_report_never_writes_over_the_runs_own_files_and_names_a_bad_journal_field(demo_dumps, tmp_path, capsys):
    journal = demo_dumps / "journal.jsonl"
    before = journal.read_bytes()
    link = tmp_path / "latest"
    link.symlink_to(demo_dumps)
    for flag in ("--markdown", "--html"):
        # however the path is spelt: through '..', or through a link to the workdir
        for out in (journal, demo_dumps / ".." / demo_dumps.name / "journal.jsonl", link / "result.json"):
            assert main(["report", str(demo_dumps), flag, str(out)]) == 2
            assert f"that is the run's own {out.name}" in capsys.readouterr().err
    assert journal.read_bytes() == before
    edited = tmp_path / "edited"
    shutil.copytree(demo_dumps, edited)
    text = (edited / "journal.jsonl").read_text()
    (edited / "journal.jsonl").write_text(re.sub(r'"index": *3,', '"index": "x",', text, count=1))
    assert main(["report", str(edited), "--html", str(tmp_path / "r.html")]) == 2
    assert "'index' must be a run number (a positive integer), not 'x'" in capsys.readouterr().err


def test_report_refuses_the_workdir_lock_and_the_runs_kept_under_previous(demo_dumps, tmp_path, capsys):
    """A report written over .lock is a new file: the running run's lock is on the old one, and a second run in
    the workdir would start; previous/ holds the journals and evidence --fresh kept. run --output refuses both."""
    work = tmp_path / "work"
    shutil.copytree(demo_dumps, work)
    kept = work / "previous" / "20260101-000000" / "journal.jsonl"
    kept.parent.mkdir(parents=True)
    kept.write_text("{}\n")
    (work / ".lock").write_text("")
    for flag in ("--markdown", "--html"):
        for out, said in ((work / ".lock", "that is the run's own .lock"),
                          (kept, "that is inside the run's previous/ directory"),
                          (work / "previous" / "new.md", "that is inside the run's previous/ directory"),
                          (work / "trials" / "new.md", "that is inside the run's trials/ directory")):
            assert main(["report", str(work), flag, str(out)]) == 2
            err = capsys.readouterr().err
            assert f"{flag} {out}: {said}" in err and "Traceback" not in err, err
    assert kept.read_text() == "{}\n" and (work / ".lock").read_text() == ""
    assert not (work / "previous" / "new.md").exists()


def test_markdown_cells_hold_data_as_text_and_every_report_shows_confidence_alike():
    """An op name with a newline split the Markdown row, and its '<b>' went through as HTML; the HTML showed a
    confidence of 1 as '1' where the terminal and the Markdown show '1.000'."""
    from fusebisect.report.html import render_run
    from fusebisect.report.markdown import render_run_markdown
    from fusebisect.report.model import RunView

    first = {"op": 'f|\n<b>&"Ml', "tensor": "t:output:0", "cosine": 0.5, "max_abs_error": 1.0,
             "pass_names": ["GeluFusionPass"], "ub_pass_name": None, "ground_truth": []}
    view = RunView(result={"status": "found", "message": "m", "culprits": [
        {"rules": ["GeluFusionPass"], "confidence": 1.0, "direction": "on", "fused_ops": ['f|\n<b>&"Ml']}]},
        dumps={"rows": [], "first_divergence": first})
    md = render_run_markdown(view)
    rows = [line for line in md.splitlines() if line.startswith("| ") and "GeluFusionPass" in line]
    assert len(rows) == 2 and all(r.endswith(" |") for r in rows), rows   # the culprit's and the divergence's
    assert "<b>" not in md and "&lt;b&gt;&amp;" in md and "f\\| &lt;b&gt;" in md
    assert "| 1.000 |" in md and "<td>1.000</td>" in render_run(view)
    # prose outside the tables too: a path in a message or note is text, not HTML or emphasis
    view = RunView(result={"status": "inconclusive", "message": "rerun in /tmp/md<b>x</b>/w*1*",
                           "notes": ["/tmp/a_b_c/fusion_switch.cfg no longer holds [it](x)"]},
                   excluded=[{"rule": "A_KerasMomentumLossscaleFusionPass", "reason": "forbidden-close <always>"}])
    md = render_run_markdown(view)
    assert "<b>" not in md and "<always>" not in md
    assert "**inconclusive**: rerun in /tmp/md&lt;b&gt;x&lt;/b&gt;/w\\*1\\*" in md
    assert "- /tmp/a\\_b\\_c/fusion\\_switch.cfg no longer holds \\[it\\](x)" in md
    assert "- A\\_KerasMomentumLossscaleFusionPass: forbidden-close &lt;always&gt;" in md
    # the production file's path in its heading (a backtick in it closed the code span it was in)
    view = RunView(result={"status": "found", "message": "m", "switch_file": "/tmp/fix`[l](u)<b>x*y*.cfg"})
    md = render_run_markdown(view, production_cfg="{}\n")
    assert "(/tmp/fix\\`\\[l\\](u)&lt;b&gt;x\\*y\\*.cfg)" in md and "<b>" not in md, md


def test_report_names_a_damaged_journal_and_hand_edits_that_change_its_meaning(demo_dumps, tmp_path, capsys):
    """An empty or torn journal is not 'not a workdir'; a start record whose candidates became a string (read as
    its letters) and a trial record without a run number are refused, not rendered as nonsense."""
    for name, text in (("empty", ""), ("torn", '{"event":"start","command":["py')):
        (tmp_path / name).mkdir()
        (tmp_path / name / "journal.jsonl").write_text(text)
        assert main(["report", str(tmp_path / name)]) == 2
        err = capsys.readouterr().err
        assert "journal.jsonl holds no complete record" in err and "not the workdir" not in err
    records = [json.loads(line) for line in (demo_dumps / "journal.jsonl").read_text().splitlines()]
    records = [r for r in records if r["event"] not in ("result", "verdict")]
    for edit, why in ((lambda rs: rs[0].update(candidates="abc"),
                       "line 1: 'candidates' must be a list of rule names, not \"abc\""),
                      (lambda rs: rs.insert(2, {"event": "trial"}), "'index' must be a run number (a positive integer), not None")):
        edited = tmp_path / f"edited{len(why)}"
        edited.mkdir()
        copy = [dict(r) for r in records]
        edit(copy)
        (edited / "journal.jsonl").write_text("".join(json.dumps(r) + "\n" for r in copy))
        assert main(["report", str(edited), "--json"]) == 2
        assert why in capsys.readouterr().err


def test_a_project_moved_with_its_workdir_inside_is_reported_where_it_is_now(tmp_path, capsys, monkeypatch):
    """The repro commands run in the directory the run began in: moved together with the workdir inside it
    (as a resume accepts), they and the Command section name where it is now, and run as printed."""
    import sys

    proj = tmp_path / "proj"
    proj.mkdir()
    job = proj / "job.sh"   # named by its absolute path: it moves with the project
    job.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m fusebisect.sim train "$@"\n')
    job.chmod(0o755)
    monkeypatch.chdir(proj)
    assert main(["--quiet", "run", "--metric", r"loss ([0-9.]+)", "--workdir", "wk", "--", str(job),
                 "--steps", "3", "--faulty", "GeluFusionPass"]) == 0
    capsys.readouterr()
    monkeypatch.chdir(tmp_path)
    proj.rename(tmp_path / "moved")
    assert main(["report", "moved/wk", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for side in ("good", "bad"):
        argv = doc["repro"][side]
        assert argv[:3] == ["env", "-C", str(tmp_path / "moved")]
        assert subprocess.run(argv, capture_output=True, timeout=120).returncode == 0   # (the job runs)
    assert main(["report", "moved/wk", "--markdown", str(tmp_path / "r.md")]) == 0
    assert f"cd {tmp_path / 'moved'} && {tmp_path / 'moved' / 'job.sh'} --steps 3" in (tmp_path / "r.md").read_text()
    assert all(str(proj) not in " ".join(doc["repro"][side]) for side in ("good", "bad"))
