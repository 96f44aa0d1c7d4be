"""Simulated targets for the search engine: deterministic, interacting, reversed, flaky and crashing.

Used by the tests and ``benchmarks/bench_search.py``; pure (seeded ``random.Random`` only).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from .engine import Search
from .model import Outcome


@dataclass
class SimTarget:
    """A fake training job. Culprit sets are BAD while entirely ON (or, reverse, entirely OFF).

    ``flip``: probability each GOOD/BAD verdict is flipped (fresh per execution). ``invalid``: probability a
    configuration is INVALID, drawn once per configuration (sticky). ``spare``: configurations never made
    INVALID (e.g. the gates).
    """

    candidates: Sequence[str]
    culprits: Sequence[frozenset[str]]
    reverse: bool = False
    flip: float = 0.0
    invalid: float = 0.0
    seed: int = 0
    spare: Iterable[frozenset[str]] = ()
    runs: list[frozenset[str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._invalid: dict[frozenset[str], bool] = {frozenset(s): False for s in self.spare}
        self._all = frozenset(self.candidates)

    def truth(self, off: frozenset[str]) -> bool:
        """Return True when ``off`` is BAD without noise."""
        active = off if self.reverse else self._all - off
        return any(s <= active for s in self.culprits)

    def __call__(self, off: frozenset[str]) -> Outcome:
        """Run one execution of ``off`` and return its outcome."""
        off = frozenset(off)
        self.runs.append(off)
        if self.invalid:
            if off not in self._invalid:
                self._invalid[off] = self._rng.random() < self.invalid
            if self._invalid[off]:
                return Outcome.INVALID
        bad = self.truth(off)
        if self.flip and self._rng.random() < self.flip:
            bad = not bad
        return Outcome.BAD if bad else Outcome.GOOD


def drive(search: Search, target: Callable[[frozenset[str]], Outcome], *, limit: int = 10_000,
          events: list | None = None) -> int:
    """Run ``search`` against ``target`` until done; return the number of rounds (propose calls that
    returned configurations). Appends ("observe", (off, outcome)) to ``events`` when given. Raises
    RuntimeError if the engine stalls or exceeds ``limit`` executions (an engine bug)."""
    rounds = 0
    while not search.done:
        batch = search.propose()
        if not batch:
            raise RuntimeError("engine proposed nothing but is not done")
        rounds += 1
        for off in batch:
            out = target(off)
            if events is not None:
                events.append(("observe", (off, out)))
            search.observe(off, out)
        if search.executions > limit:
            raise RuntimeError("engine exceeded the execution limit")
    return rounds
