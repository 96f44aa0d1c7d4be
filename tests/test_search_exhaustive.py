"""Deterministic search, every placement at small n: each single culprit, interaction pair and pair of
independent culprits is found exactly, confirmed by its own run, never run twice, within the run bounds."""

from __future__ import annotations

import itertools
import math

import pytest

from fusebisect.search import Search
from fusebisect.search.engine import _EARLY_FIRST
from fusebisect.search.simulate import SimTarget, drive


def names(n):
    return [f"Pass{i:03d}" for i in range(n)]


def L(n):
    return math.ceil(math.log2(n))


def run(cands, sets, reverse=False):
    t = SimTarget(cands, sets, reverse=reverse)
    s = Search(cands)
    drive(s, t)
    r = s.result
    assert r.status == "found", (sets, r.message)
    assert {frozenset(c.rules) for c in r.culprits} == set(sets), (sets, r.culprits)
    assert all(c.direction == ("off" if reverse else "on") and c.confidence == 1.0 for c in r.culprits)
    assert len(t.runs) == len(set(t.runs)), f"{sets}: a configuration was executed twice"
    assert r.executions == len(t.runs)
    everything = frozenset(cands)
    for c in r.culprits:   # each set confirmed by a run with only that set active
        only = frozenset(c.rules) if reverse else everything - frozenset(c.rules)
        assert only in t.runs, sets
    good, bad = r.boundary
    assert not t.truth(good) and t.truth(bad)
    # the production configuration (every culprit set off) was run, or is implied by a GOOD run
    culprits = frozenset().union(*sets)
    production = everything - culprits if reverse else culprits
    assert production in t.runs or any(
        not t.truth(x) and ((x <= production) if not reverse else (x >= production)) for x in t.runs), sets
    return r.executions, t.runs.count(production)


def placements(n, kind):
    c = names(n)
    if kind == "single":
        return [[frozenset({x})] for x in c]
    if kind == "pair":
        return [[frozenset(p)] for p in itertools.combinations(c, 2)]
    return [[frozenset({a}), frozenset({b})] for a, b in itertools.combinations(c, 2)]


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("n", [2, 3, 4, 5, 7, 8, 9, 12, 16, 17])
def test_every_placement_small_n(n, reverse):
    cands = names(n)
    for kind in ("single", "pair", "k2"):
        worst = 0
        for sets in placements(n, kind):
            ex, production_runs = run(cands, sets, reverse)
            worst = max(worst, ex)
            if kind == "single":
                # L+4 counting every run; the production configuration (culprit off) is run once at most
                assert ex <= L(n) + 4, sets
                assert ex - production_runs <= L(n) + 3, sets
        if kind == "pair":
            assert worst <= 2 * L(n) + 6
        elif kind == "k2":
            assert worst <= 2 * L(n) + 6


@pytest.mark.parametrize("kind", ["single", "pair", "k2"])
def test_every_placement_n40(kind):
    n = 40
    cands = names(n)
    counts = [run(cands, sets) for sets in placements(n, kind)]
    ex = [e for e, _ in counts]
    if kind == "single":
        assert max(ex) <= L(n) + 4
        assert max(e - p for e, p in counts) <= L(n) + 3
        # the mean over every position: near log2(n) + 3.5, plus the early look's fifth of a run
        assert sum(ex) / n <= math.log2(n) + 3.6 + _EARLY_FIRST
    elif kind == "pair":
        assert max(ex) <= 2 * L(n) + 6
        assert sum(ex) / len(ex) <= 2 * L(n) + 4
    else:
        assert max(ex) <= 2 * L(n) + 2 * 2 + 2
        assert sum(ex) / len(ex) <= math.ceil(math.log2(math.comb(n, 2))) + 5
