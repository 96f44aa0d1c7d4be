"""The journal: append + fsync per line, torn last line ignored, corruption in the middle reported, --fresh."""

from __future__ import annotations

import json

import pytest

from fusebisect.runner.journal import Journal, JournalError, decode_float, encode_float


def test_append_and_load(tmp_path):
    j = Journal(tmp_path / "w" / "journal.jsonl")
    assert j.load() == [] and not j.exists()
    j.append({"event": "start", "command": ["x"]})
    j.append({"event": "trial", "metric": encode_float(float("nan"))})
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


def test_corruption_in_the_middle_is_an_error(tmp_path):
    path = tmp_path / "journal.jsonl"
    path.write_text('{"event": "start"}\nnot json\n{"event": "trial"}\n')
    with pytest.raises(JournalError, match="line 2"):
        Journal(path).load()


def test_move_aside(tmp_path):
    path = tmp_path / "journal.jsonl"
    j = Journal(path)
    assert j.move_aside() is None
    j.append({"event": "start"})
    first = j.move_aside()
    j.append({"event": "start", "n": 2})
    second = j.move_aside()
    assert first != second and first.exists() and second.exists() and not path.exists()
