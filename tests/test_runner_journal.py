"""The journal: append + fsync per line, torn last line ignored, corruption in the middle reported, --fresh."""

from __future__ import annotations

import json

import pytest

from fusebisect.runner.journal import Journal, JournalError, decode_float, encode_float, set_aside_previous_run


def test_append_and_load(tmp_path):
    j = Journal(tmp_path / "w" / "journal.jsonl")
    assert j.load() == [] and not j.exists()
    j.append({"event": "start", "command": ["x"]})
    j.append({"event": "trial", "index": 1, "metric": encode_float(float("nan"))})
    recs = j.load()
    assert [r["event"] for r in recs] == ["start", "trial"]
    assert recs[1]["metric"] == "nan"
    assert str(decode_float(recs[1]["metric"])) == "nan"
    # plain JSON a person (or jq) can read: one object per line
    for line in (tmp_path / "w" / "journal.jsonl").read_text().splitlines():
        json.loads(line)


def test_torn_last_line_is_ignored_and_repaired(tmp_path):
    path = tmp_path / "journal.jsonl"
    j = Journal(path)
    j.append({"event": "start"})
    j.append({"event": "trial", "index": 1})
    with open(path, "ab") as f:
        f.write(b'{"event": "trial", "ind')  # the write in flight when the process died
    assert [r.get("index") for r in j.load()] == [None, 1]
    j.append({"event": "trial", "index": 2})
    assert [r.get("index") for r in j.load()] == [None, 1, 2]
    assert path.read_text().count("\n") == 3


def test_a_complete_last_record_without_its_newline_is_kept(tmp_path):
    """A last line that is a whole record but lacks its newline (an editor that strips it, a write cut just
    before it) is loaded, so the next append must keep it, not cut it as torn (a record the resume used, gone)."""
    path = tmp_path / "journal.jsonl"
    j = Journal(path)
    j.append({"event": "start"})
    j.append({"event": "trial", "index": 1})
    path.write_bytes(path.read_bytes()[:-1])
    assert [r.get("index") for r in j.load()] == [None, 1]
    j.append({"event": "trial", "index": 2})
    assert [r.get("index") for r in j.load()] == [None, 1, 2]
    assert path.read_text().count("\n") == 3


def test_corruption_in_the_middle_is_an_error(tmp_path):
    path = tmp_path / "journal.jsonl"
    path.write_text('{"event": "start"}\nnot json\n{"event": "trial"}\n')
    with pytest.raises(JournalError, match="line 2"):
        Journal(path).load()
    path.write_text('{"event": "start"}\n' + "[" * 100_000 + '\n{"event": "trial"}\n')   # no RecursionError
    with pytest.raises(JournalError, match="line 2 is nested too deeply"):
        Journal(path).load()
    # hand-edited fields of the wrong type: a clear error, never a crash in report or a resume
    for line, message in (('{"event": "trial", "index": 1, "off": [1, 2]}', "'off' must be a list of rule names"),
                          ('{"event": "trial", "index": 1, "outcome": "weird"}', "'outcome' must be one of"),
                          ('{"event": "result", "culprits": "x"}', "'culprits' must be a list"),
                          ('{"event": "executed", "index": "x"}', "'index' must be a run number"),
                          ('{"event": "verdict", "index": 0}', "'index' must be a run number"),
                          ('{"event": "start", "command": "python x"}', "'command' must be a list of strings"),
                          ('{"event": "trial", "index": 2, "trial_dir": 7}', "'trial_dir' must be a path \\(a string\\), "
                           "not 7"),
                          ('{"event": "trial", "index": 2, "metric": "x"}', "'metric' must be a number, \"nan\""),
                          ('{"event": "trial", "index": 2, "curve": [1, {}]}', "'curve\\[1\\]' must be a number"),
                          ('{"event": "executed", "index": 2, "seconds": "x"}', "'seconds' must be a number of "),
                          ('{"event": "executed", "index": 2, "exit_code": {}}', "'exit_code' must be an exit status"),
                          ('{"event": "executed", "index": 2, "key": {}}', "'key' must be a configuration key"),
                          ('{"event": "start", "workers": "x"}', "'workers' must be a whole number"),
                          ('{"event": "start", "workdir": 1}', "'workdir' must be a path"),
                          ('{"event": "start", "options": []}', "'options' must be an object"),
                          ('{"event": "start", "excluded": [5]}', "'excluded\\[0\\]' must be a \\{\"rule\": NAME"),
                          ('{"event": "start", "excluded": [{"rule": "X", "reason": 5}]}',
                           "'excluded\\[0\\]\\[\'reason\'\\]' must be a string or null"),
                          ('{"event": "start", "kinds": {"X": 1}}', "'kinds\\[\'X\'\\]' must be a rule kind"),
                          ('{"event": "dumps", "rows": 3}', "'rows' must be a list")):
        path.write_text('{"event": "start"}\n' + line + "\n")
        with pytest.raises(JournalError, match=f"line 2: {message}"):
            Journal(path).load()


def test_fresh_sets_the_previous_run_aside_and_deletes_nothing(tmp_path):
    w = tmp_path / "w"
    assert set_aside_previous_run(w) is None  # nothing to move
    (w / "trials" / "0001-abc").mkdir(parents=True)
    (w / "repro" / "good" / "dump").mkdir(parents=True)   # the reproduction commands' trial dirs
    for name in ("journal.jsonl", "result.json", "report.html", "report.md", "fusion_switch.cfg"):
        (w / name).write_text(name)
    (w / "out").mkdir()
    (w / "out" / "prod.cfg").write_text("prod")  # a production file the run wrote elsewhere in the workdir
    (w / "switch").mkdir()
    (w / "switch" / "fusion_switch.x.cfg").write_text("shared")
    target, moved = set_aside_previous_run(w, [w / "out" / "prod.cfg", tmp_path / "elsewhere.cfg"])
    assert target.parent == w / "previous"
    assert sorted(moved) == sorted(["journal.jsonl", "result.json", "report.html", "report.md",
                                    "fusion_switch.cfg", "trials", "repro", "out/prod.cfg"])
    for rel in moved:
        assert (target / rel).exists() and not (w / rel).exists()
    assert (target / "report.md").read_text() == "report.md" and (target / "trials" / "0001-abc").is_dir()
    assert (w / "switch" / "fusion_switch.x.cfg").read_text() == "shared"  # content-hashed, shared by runs
    assert (target / "switch" / "fusion_switch.x.cfg").read_text() == "shared"   # the run set aside keeps a copy
    (w / "journal.jsonl").write_text("second")
    second, _ = set_aside_previous_run(w)
    assert second != target and (second / "journal.jsonl").read_text() == "second"
    assert (target / "journal.jsonl").read_text() == "journal.jsonl"


def test_a_journal_that_cannot_be_written_is_named_with_how_to_resume(tmp_path):
    """A full disk or a file-size limit (EFBIG) stopped the run with the OS's words alone ('File too large'),
    naming no file and not saying a rerun resumes."""
    path = tmp_path / "journal.jsonl"
    path.mkdir()   # (any write fails)
    with pytest.raises(JournalError, match="cannot append to it .*rerun the same command to resume") as info:
        Journal(path).append({"event": "start"})
    assert str(path) in str(info.value)
