"""The search state is a fold over the journal: replaying any prefix resumes exactly where it stopped."""

from __future__ import annotations

import random

import pytest

from fusebisect.errors import UsageError
from fusebisect.search import Outcome, Search
from fusebisect.search.simulate import SimTarget, drive

SCENARIOS = [
    dict(n=120, sets=[{"R007"}], kw={}),
    dict(n=120, sets=[{"R007", "R099"}], kw={}),
    dict(n=90, sets=[{"R001"}, {"R050"}], kw={"workers": 3}),
    dict(n=80, sets=[{"R033"}], kw={"flaky": True}, flip=0.1),
    dict(n=80, sets=[{"R033"}], kw={}, invalid=0.2),
    dict(n=60, sets=[{"R012"}], kw={}, prior_at=2, prior=["R012", "R013"]),
]


def record(sc, seed=0):
    """Run a scenario; return (events, proposals-before-each-event, result)."""
    cands = [f"R{i:03d}" for i in range(sc["n"])]
    t = SimTarget(cands, [frozenset(x) for x in sc["sets"]], flip=sc.get("flip", 0.0),
                  invalid=sc.get("invalid", 0.0), seed=seed, spare=[frozenset(), frozenset(cands)])
    s = Search(cands, **sc["kw"])
    events, proposals = [], []
    while not s.done:
        if len(events) == sc.get("prior_at"):
            events.append(("prior", sc["prior"]))
            proposals.append(None)
            s.set_prior(sc["prior"])
        batch = s.propose()
        for off in batch:
            out = t(off)
            proposals.append(sorted(map(sorted, s.propose())))
            events.append(("observe", (off, out)))
            s.observe(off, out)
    return cands, events, proposals, s.result


@pytest.mark.parametrize("sc", SCENARIOS)
def test_replay_of_every_prefix_proposes_the_same_and_ends_the_same(sc):
    cands, events, proposals, result = record(sc)
    for i in range(len(events)):
        r = Search.replay(cands, events[:i], **sc["kw"])
        if events[i][0] == "observe":
            assert sorted(map(sorted, r.propose())) == proposals[i]
            assert events[i][1][0] in r.propose()
        for ev in events[i:]:  # feed the rest of the journal: same final answer
            if ev[0] == "observe":
                r.observe(*ev[1])
            else:
                r.set_prior(ev[1])
        assert r.done and r.result == result


def test_no_duplicate_executions_in_deterministic_mode():
    for seed in range(20):
        sc = dict(n=200, sets=[{f"R{random.Random(seed).randrange(200):03d}"}], kw={})
        _, events, _, _ = record(sc, seed)
        offs = [e[1][0] for e in events if e[0] == "observe"]
        assert len(offs) == len(set(offs))


def test_in_flight_configs_are_proposed_again_after_a_crash():
    cands = [f"R{i:03d}" for i in range(100)]
    t = SimTarget(cands, [frozenset({"R042"})])
    s = Search(cands, workers=3)
    events = []
    for _ in range(3):
        for off in s.propose():
            out = t(off)
            events.append(("observe", (off, out)))
            s.observe(off, out)
    in_flight = s.propose()
    assert in_flight
    resumed = Search.replay(cands, events, workers=3)
    assert resumed.propose() == in_flight


def test_unknown_event_is_an_error():
    with pytest.raises(UsageError):
        Search.replay(["A", "B"], [("bogus", None)])


def test_outcome_strings_are_accepted():
    s = Search(["A", "B"])
    s.observe(frozenset({"A", "B"}), "good")
    s.observe(frozenset(), Outcome.BAD)
    assert not s.done and s.propose()


def test_a_larger_budget_on_resume_runs_nothing_the_journal_already_settles():
    # Under --max-runs 10 the early look had no room: the look-for-more run came first and was GOOD. Resumed
    # with 12, the plan asks for the early look, which that GOOD run already implies: nothing more runs.
    cands = [f"Pass{i:03d}" for i in range(100)]
    t = SimTarget(cands, [frozenset({"Pass005"})])
    first = Search(cands, max_executions=10)
    drive(first, t)
    assert first.result.status == "found" and first.result.executions == 10
    events = [("observe", (off, Outcome.BAD if t.truth(off) else Outcome.GOOD)) for off in t.runs]
    resumed = Search.replay(cands, events, max_executions=12)
    assert resumed.done and resumed.propose() == []
    assert resumed.result.status == "found" and resumed.result.executions == 10
