"""Deterministic search: correctness and run-count properties over simulated targets."""

from __future__ import annotations

import math
from collections import Counter
import random
import statistics

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fusebisect.errors import UsageError
from fusebisect.search import Outcome, Search
from fusebisect.search.engine import _EARLY_FIRST
from fusebisect.search.simulate import SimTarget, drive


def names(n):
    return [f"Pass{i:03d}" for i in range(n)]


def log2c(n):
    return math.ceil(math.log2(n))


@st.composite
def scenarios(draw):
    n = draw(st.integers(2, 300))
    k = draw(st.integers(1, 3))
    sizes = [draw(st.sampled_from([1, 1, 2])) for _ in range(k)]
    while sum(sizes) > n:
        sizes.pop()
    seed = draw(st.integers(0, 2**32 - 1))
    rng = random.Random(seed)
    picked = rng.sample(range(n), sum(sizes))
    cands = names(n)
    sets, at = [], 0
    for s in sizes:
        sets.append(frozenset(cands[i] for i in picked[at:at + s]))
        at += s
    reverse = draw(st.booleans())
    workers = draw(st.sampled_from([1, 1, 2, 3]))
    return cands, sets, reverse, workers


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_finds_exactly_the_culprit_sets(sc):
    cands, sets, reverse, workers = sc
    s = Search(cands, workers=workers)
    t = SimTarget(cands, sets, reverse=reverse)
    drive(s, t)
    r = s.result
    assert r.status == "found"
    assert {frozenset(c.rules) for c in r.culprits} == set(sets)
    assert all(c.direction == ("off" if reverse else "on") and c.confidence == 1.0 for c in r.culprits)
    assert len(t.runs) == len(set(t.runs)), "a configuration was executed twice"
    assert r.executions == len(t.runs)
    # the boundary pair reproduces both sides and differs only by culprit rules
    good, bad = r.boundary
    assert not t.truth(good) and t.truth(bad)
    assert (good ^ bad) in set(sets) or (good ^ bad) == frozenset().union(*sets)
    assert bad in t.runs  # the good side is observed or implied by an observed GOOD superset
    # every culprit set was confirmed by a run with only that set active
    for c in r.culprits:
        only = frozenset(c.rules) if reverse else frozenset(cands) - frozenset(c.rules)
        assert only in t.runs


@settings(max_examples=120, deadline=None)
@given(st.integers(2, 300), st.data())
def test_single_culprit_run_bound(n, data):
    cands = names(n)
    c = data.draw(st.sampled_from(cands))
    s = Search(cands)
    drive(s, SimTarget(cands, [frozenset({c})]))
    # 2 gates + binary search + confirmation + the look-for-more run.
    assert s.result.executions <= log2c(n) + 4
    assert s.result.bound == log2c(n) + 4


@pytest.mark.parametrize("n", [3, 40, 100, 256, 257, 300])
def test_single_culprit_average(n):
    # Every leaf needs its own "only r on" run (BAD) and the "r off" look-for-more run (GOOD), so with 2
    # gates no strategy averages below about log2(n) + 3.5 when n is a power of two. A culprit in the first
    # fifth of the order also pays the early look for a second one: a fifth of a run on average.
    cands = names(n)
    runs = []
    for c in cands:
        s = Search(cands)
        drive(s, SimTarget(cands, [frozenset({c})]))
        runs.append(s.result.executions)
    assert statistics.mean(runs) <= math.log2(n) + 3.6 + _EARLY_FIRST
    assert max(runs) <= log2c(n) + 4
    if n == 300:
        assert statistics.mean(runs) <= log2c(n) + 3


@settings(max_examples=60, deadline=None)
@given(st.integers(8, 300), st.integers(2, 3), st.integers(0, 10**6))
def test_independent_culprits_never_worse_than_naive_plus_one(n, k, seed):
    cands = names(n)
    sets = [frozenset({c}) for c in random.Random(seed).sample(cands, k)]
    s = Search(cands)
    drive(s, SimTarget(cands, sets))
    assert {frozenset(c.rules) for c in s.result.culprits} == set(sets)
    assert s.result.executions <= k * log2c(n) + 2 * k + 2


@settings(max_examples=80, deadline=None)
@given(st.integers(2, 300), st.integers(0, 10**6), st.booleans())
def test_interaction_pair_is_one_set(n, seed, reverse):
    cands = names(n)
    pair = frozenset(random.Random(seed).sample(cands, 2))
    s = Search(cands)
    t = SimTarget(cands, [pair], reverse=reverse)
    drive(s, t)
    assert [frozenset(c.rules) for c in s.result.culprits] == [pair]
    # 1-minimality is established by runs: for each member some executed GOOD configuration had it active
    # without its partner (monotonicity then makes "that member alone" GOOD)
    for rule in pair:
        other = next(iter(pair - {rule}))
        active = [(r if reverse else frozenset(cands) - r) for r in t.runs if not t.truth(r)]
        assert any(rule in a and other not in a for a in active)
    assert s.result.executions <= 2 * log2c(n) + 6
    assert s.result.bound == 2 * log2c(n) + 4      # the bound reported is the pair's (T6), not two singles'


def test_bounds_reported_for_mixed_culprit_sets():
    from fusebisect.search.model import bound_for_sets

    assert bound_for_sets(300, [1]) == 13 and bound_for_sets(300, [1, 1]) == 21 and bound_for_sets(300, []) == 13
    assert bound_for_sets(10, [2]) == 12 and bound_for_sets(300, [2]) == 22
    assert bound_for_sets(300, [2, 1]) == 13 + 2 * 9 + 1


def test_interaction_pair_average_near_target():
    n, cands = 300, names(300)
    rng = random.Random(7)
    runs = []
    for _ in range(200):
        pair = frozenset(rng.sample(cands, 2))
        s = Search(cands)
        drive(s, SimTarget(cands, [pair]))
        runs.append(s.result.executions)
    assert statistics.mean(runs) <= 2 * log2c(n) + 4


def test_gates_not_reproduced_and_not_fusion():
    # the gate that ends the search is run twice: one flaky verdict must not end it
    cands = names(10)
    s = Search(cands)
    t = SimTarget(cands, [])
    drive(s, t)
    assert s.result.status == "not_reproduced" and s.result.executions == 3
    assert t.runs.count(frozenset()) == 2
    s = Search(cands)
    t = SimTarget(cands, [frozenset()])
    drive(s, t)
    assert s.result.status == "not_fusion" and s.result.executions == 3
    assert t.runs.count(frozenset(cands)) == 2


def test_a_flipped_gate_switches_to_the_noise_aware_mode_instead_of_stopping():
    cands = names(40)
    flips = {frozenset(): 1}   # the first baseline run says GOOD although the culprit is on

    def target(off):
        bad = "Pass007" in (set(cands) - set(off))
        if flips.get(off):
            flips[off] -= 1
            bad = not bad
        return Outcome.BAD if bad else Outcome.GOOD

    s = Search(cands)
    drive(s, target)
    assert s.result.status == "found" and s.result.culprits[0].rules == ("Pass007",)
    assert any("disagreed" in n for n in s.result.notes)


def test_first_round_is_both_gates():
    cands = names(5)
    s = Search(cands)
    first = s.propose()
    assert set(first) == {frozenset(cands), frozenset()}
    assert s.role(frozenset(cands)) == "reference" and s.role(frozenset()) == "baseline"
    assert s.propose() == first  # a query, not a state change


def test_invalid_gate_is_retried_once_then_inconclusive():
    cands = names(6)
    s = Search(cands)
    calls = []

    def target(off):
        calls.append(off)
        return Outcome.INVALID if not off else Outcome.GOOD

    drive(s, target)
    assert s.result.status == "inconclusive"
    assert calls.count(frozenset()) == 2


def test_unknown_is_repeated_and_invalid_never_counts_as_bad():
    cands = names(64)
    culprit = "Pass017"
    seen: dict = {}

    def target(off):
        seen[off] = seen.get(off, 0) + 1
        bad = culprit not in off
        if seen[off] == 1 and len(off) not in (0, 64):
            return Outcome.UNKNOWN
        return Outcome.BAD if bad else Outcome.GOOD

    s = Search(cands)
    drive(s, target)
    assert [c.rules for c in s.result.culprits] == [(culprit,)]
    assert all(v <= 2 for v in seen.values())


@pytest.mark.parametrize("seed", range(40))
def test_ten_percent_invalid_configs_still_correct(seed):
    cands = names(300)
    rng = random.Random(seed)
    c = rng.choice(cands)
    t = SimTarget(cands, [frozenset({c})], invalid=0.1, seed=seed, spare=[frozenset(), frozenset(cands)])
    s = Search(cands)
    drive(s, t)
    assert s.result.status == "found" and [x.rules for x in s.result.culprits] == [(c,)]
    assert len(t.runs) == len(set(t.runs))


def test_repeat_runs_every_configuration_n_times():
    cands = names(32)
    target = SimTarget(cands, [frozenset({"Pass005"})])
    s = Search(cands, repeat=3)
    drive(s, target)
    assert [(c.rules, c.confidence) for c in s.result.culprits] == [(("Pass005",), 1.0)]
    assert set(Counter(target.runs).values()) == {3}


def test_repeat_runs_that_disagree_switch_to_the_noise_aware_mode():
    """A majority of three can be wrong too: runs of one configuration that disagree mean a noisy job, whose
    culprit is named from every run with the posterior it has, never with confidence 1."""
    cands = names(32)
    votes: dict = {}

    def target(off):
        votes[off] = votes.get(off, 0) + 1
        bad = "Pass005" not in off
        if votes[off] == 2:  # the second of three runs always lies
            bad = not bad
        return Outcome.BAD if bad else Outcome.GOOD

    s = Search(cands, repeat=3)
    drive(s, target)
    [culprit] = s.result.culprits
    assert culprit.rules == ("Pass005",) and 0.95 <= culprit.confidence < 1
    assert any("disagreed" in n for n in s.result.notes)


@pytest.mark.parametrize("workers", [2, 3, 7])
def test_parallel_rounds_bound(workers):
    n, cands = 300, names(300)
    bound = math.ceil(math.log(n) / math.log(workers + 1) - 1e-9) + 2
    for c in cands[::7]:
        s = Search(cands, workers=workers)
        rounds = drive(s, SimTarget(cands, [frozenset({c})]))
        assert [x.rules for x in s.result.culprits] == [(c,)]
        assert rounds <= bound


def test_parallel_never_proposes_more_than_workers_after_gates():
    cands = names(100)
    s = Search(cands, workers=3)
    t = SimTarget(cands, [frozenset({"Pass042"})])
    first = True
    while not s.done:
        batch = s.propose()
        assert len(batch) <= (2 if first else 3)
        first = False
        for off in batch:
            s.observe(off, t(off))


def test_prior_pointing_at_culprit_takes_four_runs():
    cands = names(300)
    s = Search(cands, prior=["Pass123"])
    drive(s, SimTarget(cands, [frozenset({"Pass123"})]))
    assert s.result.executions == 4


@pytest.mark.parametrize("seed", range(30))
def test_wrong_prior_costs_at_most_two_runs(seed):
    cands = names(300)
    rng = random.Random(seed)
    c = rng.choice(cands)
    prior = rng.sample([x for x in cands if x != c], rng.randint(1, 3))
    plain = Search(cands)
    drive(plain, SimTarget(cands, [frozenset({c})]))
    s = Search(cands, prior=prior)
    drive(s, SimTarget(cands, [frozenset({c})]))
    assert [x.rules for x in s.result.culprits] == [(c,)]
    assert s.result.executions <= plain.result.executions + 2


def test_prior_set_after_gates_is_used():
    cands = names(300)
    t = SimTarget(cands, [frozenset({"Pass200"})])
    s = Search(cands)
    for off in s.propose():
        s.observe(off, t(off))
    s.set_prior(["Pass200", "NotACandidate"])
    assert s.propose() == [frozenset(cands) - {"Pass200"}]
    drive(s, t)
    assert s.result.executions == 4


def _early_looks(t, c, cands):
    """The run right after culprit c's confirmation ("only c on") when it is not the look-for-more run {c}."""
    nxt = t.runs[t.runs.index(frozenset(cands) - {c}) + 1:][:1]
    return [off for off in nxt if off != frozenset({c})]


def test_early_look_saves_the_look_for_more_run_when_a_second_culprit_follows():
    # A first culprit early in the order: the next run keeps it off and turns on the first 60 % of the suspects
    # after it. A second culprit there makes that run BAD, so "everything on but the first" is implied BAD
    # and not run; the boundary's bad side is still a configuration that was run.
    cands = names(300)
    t = SimTarget(cands, [frozenset({"Pass010"}), frozenset({"Pass100"})])
    s = Search(cands)
    drive(s, t)
    assert {c.rules for c in s.result.culprits} == {("Pass010",), ("Pass100",)}
    (look,) = _early_looks(t, "Pass010", cands)
    assert t.truth(look) and "Pass183" not in look and "Pass184" in look
    assert frozenset({"Pass010"}) not in t.runs
    good, bad = s.result.boundary
    assert bad in t.runs and t.truth(bad) and not t.truth(good)


def test_early_look_costs_one_culprit_one_run_within_its_bound():
    cands = names(300)
    for c, looks in (("Pass010", 1), ("Pass059", 1), ("Pass061", 0), ("Pass250", 0)):
        t = SimTarget(cands, [frozenset({c})])
        s = Search(cands)
        drive(s, t)
        assert [x.rules for x in s.result.culprits] == [(c,)]
        assert len(_early_looks(t, c, cands)) == looks, c
        assert not any(t.truth(off) for off in _early_looks(t, c, cands))
        assert frozenset({c}) in t.runs                          # the production check still runs
        assert s.result.executions <= math.ceil(math.log2(300)) + 4


def test_early_look_leaves_the_last_run_of_a_budget_to_the_look_for_more_run():
    cands = names(300)
    plain = Search(cands)
    drive(plain, SimTarget(cands, [frozenset({"Pass010"})]))
    assert plain.result.executions == 12                          # with the early look
    for budget in (11, 12):
        t = SimTarget(cands, [frozenset({"Pass010"})])
        s = Search(cands, max_executions=budget)
        drive(s, t)
        assert s.result.status == "found" and [c.rules for c in s.result.culprits] == [("Pass010",)], budget
        assert len(_early_looks(t, "Pass010", cands)) == budget - 11
        assert t.runs[-1] == frozenset({"Pass010"})


@pytest.mark.parametrize("n, culprit, looks", [(40, "Pass007", 1), (38, "Pass006", 0), (10, "Pass001", 0)])
def test_early_look_needs_32_suspects_after_the_culprit(n, culprit, looks):
    # with rules faulty one by one a second culprit among few suspects is unlikely: no early look there
    cands = names(n)
    t = SimTarget(cands, [frozenset({culprit})])
    s = Search(cands)
    drive(s, t)
    assert len(_early_looks(t, culprit, cands)) == looks


def test_progress_counts_the_early_look_and_the_look_for_more_run():
    cands = names(300)
    t = SimTarget(cands, [frozenset({"Pass010"})])
    s = Search(cands)
    confirmation = frozenset(cands) - {"Pass010"}
    while confirmation not in t.runs:
        for off in s.propose():
            s.observe(off, t(off))
    (look,) = s.propose()
    assert look != frozenset({"Pass010"})
    p = s.progress()
    assert p["phase"] == "verify" and p["found"] == 1 and p["runs_remaining_estimate"] == 2
    s.observe(look, t(look))
    assert s.propose() == [frozenset({"Pass010"})] and s.progress()["runs_remaining_estimate"] == 1


def test_prior_pointing_at_an_early_culprit_takes_four_runs():
    # the early look serves a culprit found by the search, not one the prior named
    cands = names(300)
    s = Search(cands, prior=["Pass003"])
    drive(s, SimTarget(cands, [frozenset({"Pass003"})]))
    assert s.result.executions == 4


def test_progress_reports_phase_and_counts():
    cands = names(128)
    s = Search(cands)
    t = SimTarget(cands, [frozenset({"Pass077"})])
    p = s.progress()
    assert p == {"phase": "gates", "candidates_left": 128, "runs_remaining_estimate": 11, "executions": 0,
                 "found": 0}
    seen = []
    while not s.done:
        for off in s.propose():
            s.observe(off, t(off))
        seen.append(s.progress())
    assert seen[-1]["phase"] == "done" and seen[-1]["runs_remaining_estimate"] == 0
    lefts = [p["candidates_left"] for p in seen[1:-1] if p["phase"] == "search"]
    assert lefts == sorted(lefts, reverse=True) and lefts[-1] == 1
    # the culprit found: one run (looking for more among the other rules) remains if there is no other
    assert {k: seen[-2][k] for k in ("phase", "found", "candidates_left", "runs_remaining_estimate")} == \
        {"phase": "verify", "found": 1, "candidates_left": 127, "runs_remaining_estimate": 1}
    # --repeat 2: every configuration runs twice, the look-for-more run too
    s = Search(cands, repeat=2)
    seen = []
    while not s.done:
        for off in s.propose():
            s.observe(off, t(off))
        seen.append(s.progress())
    assert [p["runs_remaining_estimate"] for p in seen if p["phase"] == "verify"] == [2, 1]


def test_single_candidate():
    s = Search(["OnlyPass"])
    drive(s, SimTarget(["OnlyPass"], [frozenset({"OnlyPass"})]))
    assert s.result.status == "found" and s.result.executions == 2


def test_usage_errors():
    with pytest.raises(UsageError):
        Search([])
    with pytest.raises(UsageError, match="duplicate"):
        Search(["A", "A"])
    with pytest.raises(UsageError):
        Search(["A"], repeat=0)
    with pytest.raises(UsageError):
        Search(["A"], workers=0)
    with pytest.raises(UsageError):
        Search(["A"], confidence=1.0)
    s = Search(["A", "B"])
    with pytest.raises(UsageError, match="not one of"):
        s.observe(frozenset({"C"}), Outcome.GOOD)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.sampled_from([0.1, 0.3]), st.integers(0, 10**6))
def test_invalid_configs_never_lead_to_a_confirmed_wrong_set(sc, rate, seed):
    cands, sets, reverse, workers = sc
    t = SimTarget(cands, sets, reverse=reverse, invalid=rate, seed=seed,
                  spare=[frozenset(), frozenset(cands)])
    s = Search(cands, workers=workers)
    drive(s, t)
    r = s.result
    assert len(t.runs) == len(set(t.runs))  # an INVALID configuration is never run again
    assert r.status in ("found", "inconclusive")
    for c in r.culprits:
        if c.confidence == 1.0:
            assert frozenset(c.rules) in set(sets)
        else:
            assert any(frozenset(c.rules) <= x for x in sets) or r.notes
    if r.status == "found" and all(c.confidence == 1.0 for c in r.culprits) and not r.notes:
        assert {frozenset(c.rules) for c in r.culprits} == set(sets)


def test_a_culprit_whose_run_alone_crashes_stays_unconfirmed_and_the_note_says_what_the_runs_show():
    """Only the culprit on never builds. Runs of it with two rules harmless alone, both BAD, rule out one
    partner but not a partner in each (two pairs sharing it): named alone at 0.5, the note says both."""
    cands = [f"P{i:02d}" for i in range(20)]
    culprit = "P13"
    # (the two partners tried first: the rules just before it and first in the order)
    for sets in ([frozenset({culprit})], [frozenset({culprit, "P12"}), frozenset({culprit, "P00"})]):
        target = SimTarget(cands, sets)

        def run(off, target=target):
            if frozenset(cands) - off == {culprit}:
                target.runs.append(off)
                return Outcome.INVALID
            return target(off)

        s = Search(cands)
        drive(s, run)
        assert [(c.rules, c.confidence) for c in s.result.culprits] == [((culprit,), 0.5)], sets
        assert any("were both BAD: it needs no partner unless it has one in each of them" in n
                   for n in s.result.notes), s.result.notes


def test_a_reference_that_never_runs_says_why_nothing_follows_and_what_to_do():
    """Turning every candidate off often breaks the build: the search cannot start without that gate."""
    cands = [f"P{i}" for i in range(8)]
    s = Search(cands)
    while not s.done:
        for off in s.propose():
            s.observe(off, Outcome.INVALID if off == frozenset(cands) else Outcome.BAD)
    assert s.result.status == "inconclusive" and s.executions == 3
    assert "cures the symptom is unknown" in s.result.message and "--rules" in s.result.message


def test_a_round_of_several_workers_never_runs_past_max_executions():
    """workers=8 and a budget of 3: the engine used to hand out a whole round (9 runs) before the budget stopped
    it, while its message quoted the budget of 3."""
    from fusebisect.search.simulate import SimTarget, drive

    cands = [f"R{i}" for i in range(8)]
    for workers, repeat in ((8, 1), (3, 2)):
        s = Search(cands, workers=workers, repeat=repeat, max_executions=3)
        drive(s, SimTarget(cands, [frozenset({"R3"})]))
        assert s.executions <= 3 and s.result.status == "inconclusive", (workers, repeat, s.executions)


def test_a_budget_that_cuts_a_round_keeps_the_culprit_its_confirmation_showed():
    """With workers, a culprit's confirmation (only it on) shares a round with the look-for-more run; a budget that
    leaves room for the first only must still name the culprit, as the same budget does one run at a time."""
    cands = [f"R{i:02d}" for i in range(40)]
    for culprit in range(0, 40, 3):
        for budget in range(4, 16):
            target = SimTarget(cands, [frozenset({cands[culprit]})])
            s = Search(cands, workers=3, max_executions=budget)
            drive(s, target)
            alone = frozenset(cands) - {cands[culprit]}   # the OFF-set of the run with only the culprit on
            if alone in target.runs:
                assert [c.rules for c in s.result.culprits] == [(cands[culprit],)], (culprit, budget, s.result)


@pytest.mark.parametrize("n", [3, 8, 10, 25])
def test_suspects_left_by_invalid_runs_are_all_counted_in_the_message(n):
    """Every run but the gates INVALID (a job whose switch goes unchecked once any rule is off): the verdict says how
    many suspects it could not separate, and the names it lists plus the '(+N more)' it leaves out add up to them."""
    cands = names(n)

    def target(off):
        if not off:
            return Outcome.BAD
        return Outcome.GOOD if off == frozenset(cands) else Outcome.INVALID

    s = Search(cands)
    drive(s, target)
    r = s.result
    assert r.status == "inconclusive" and f"the last {n} suspects" in r.message
    shown = r.message.split(" suspects (", 1)[1].rsplit(").", 1)[0].split(", ")
    more = int(shown.pop()[1:-len(" more")]) if shown[-1].startswith("+") else 0
    assert set(shown) <= set(cands) and len(shown) + more == n, r.message


@pytest.mark.parametrize("workers", [1, 3])
def test_the_target_under_repeat_reads_against_the_runs_it_counts(workers):
    """--repeat 2 runs every configuration twice: the message counts every run, so its target is put in runs too
    (it read 'in 8 runs (target 5)' for 4 configurations run twice). ``bound`` keeps one run per configuration."""
    cands = names(2)
    once, twice = Search(cands, workers=workers), Search(cands, workers=workers, repeat=2)
    for s in (once, twice):
        drive(s, SimTarget(cands, [frozenset({"Pass000"})]))
        assert s.result.status == "found"
    bound = once.result.bound
    assert twice.result.bound == bound and twice.executions == 2 * once.executions
    at_a_time = " one at a time" if workers > 1 else ""
    assert f"in {once.executions} runs (target {bound}{at_a_time}):" in once.result.message
    assert (f"in {twice.executions} runs (target {bound} configurations{at_a_time}, {2 * bound} runs at --repeat 2):"
            in twice.result.message), twice.result.message


def test_when_every_run_with_one_rule_on_is_invalid_the_runs_with_one_rule_off_decide():
    """A job that cannot run with a single rule on: every split of the last two suspects is INVALID. Runs with
    everything on but one suspect still run: the GOOD one shows which suspect every culprit set needs, and the
    search names it (unconfirmed: its own run cannot be judged) instead of stopping at two suspects."""
    cands = names(10)
    culprit = cands[1]
    target = SimTarget(cands, [frozenset([culprit])])

    def job(off):
        if len(off) == len(cands) - 1:   # exactly one rule on
            target.runs.append(frozenset(off))
            return Outcome.INVALID
        return target(off)

    s = Search(cands)
    drive(s, job)
    assert [c.rules for c in s.result.culprits] == [(culprit,)], s.result.message
    assert "Too many invalid runs" not in s.result.message
    assert frozenset([culprit]) in target.runs   # decided by the run with only the culprit off
