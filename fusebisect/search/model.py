"""The search engine's vocabulary: outcomes of one execution, culprits, and the final result."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum


class Outcome(str, Enum):
    """What one execution of the user's command said about its configuration.

    GOOD: symptom absent. BAD: symptom present. INVALID: the configuration cannot be judged (crash, compile
    error, switch ignored) and is never counted as BAD. UNKNOWN: too noisy to call; the engine repeats it.
    """

    GOOD = "good"
    BAD = "bad"
    INVALID = "invalid"
    UNKNOWN = "unknown"


@dataclass
class Culprit:
    """One culprit set.

    ``rules`` is one rule, or several that only misbehave together (an interaction). ``direction`` is "on"
    when the symptom appears while these rules are on, "off" when it appears while they are turned off.
    ``confidence`` is 1.0 for a deterministic, confirmed answer, else the posterior probability.
    """

    rules: tuple[str, ...]
    confidence: float
    direction: str = "on"


@dataclass
class SearchResult:
    """The engine's verdict.

    ``status``: 'found' | 'not_reproduced' (baseline good) | 'not_fusion' (all candidates off still bad) |
    'inconclusive'. ``boundary`` is (good config, bad config) as OFF-sets differing only by the culprit
    set(s), so both sides can be reproduced. ``bound`` = ceil(log2 C(n,k)) + k + 3 for reporting.
    ``budget_stopped``: the execution budget ended the search before it could finish.
    """

    status: str
    culprits: list[Culprit]
    executions: int
    bound: int
    message: str
    boundary: tuple[frozenset[str], frozenset[str]] | None = None
    notes: list[str] = field(default_factory=list)
    budget_stopped: bool = False


def bound_for_sets(n: int, sizes: Sequence[int]) -> int:
    """The run budget for the culprit sets found (their sizes): independent single rules as
    :func:`theoretical_bound`; each interaction set of m rules adds m * ceil(log2 n) + 1 (an interaction pair
    alone: 2 * ceil(log2 n) + 4). With no set, the budget of one culprit."""
    singles = sum(1 for m in sizes if m == 1)
    sets = [m for m in sizes if m > 1]
    if not sets:
        return theoretical_bound(n, singles or 1)
    base = theoretical_bound(n, singles) if singles else 3
    return base + sum(m * math.ceil(math.log2(max(2, n))) + 1 for m in sets)


def target_text(bound: int, workers: int = 1, repeat: int = 1) -> str:
    """``bound`` as the messages and reports put it next to the runs used: "8" for one run per configuration,
    one at a time (what the bound counts); "8 one at a time" with several workers (a round of P configurations
    spends more runs for fewer rounds); "5 configurations, 10 runs at --repeat 2" when every configuration runs
    ``repeat`` times, so that it reads against the executions, which count every one of those runs."""
    text = f"{bound}" + (" one at a time" if workers > 1 else "")
    if repeat > 1:
        text = f"{bound} configurations" + (" one at a time" if workers > 1 else "") + \
            f", {bound * repeat} runs at --repeat {repeat}"
    return text


def theoretical_bound(n: int, k: int) -> int:
    """Return ceil(log2 C(n,k)) + k + 3, the run budget reported next to the executions used.

    ``k`` is clamped to [1, n]; never raises for n >= 1.
    """
    n = max(1, n)
    k = min(max(1, k), n)
    return math.ceil(math.log2(math.comb(n, k))) + k + 3 if math.comb(n, k) > 1 else k + 3
