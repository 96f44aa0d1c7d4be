"""Group-testing bookkeeping: sets as bitmasks and what the monotone model lets us infer from observations.

A configuration is tested through its *active* set: the candidates whose state can trigger the symptom (the
rules left ON in the forward direction, the rules turned OFF in the reverse one). The model is monotone: a
configuration is BAD iff some culprit set is entirely active. So a BAD active set makes every superset BAD
and a GOOD active set makes every subset GOOD; nothing else is inferred.
"""

from __future__ import annotations

from collections.abc import Iterable


def mask_of(indices: Iterable[int]) -> int:
    """Return the bitmask with the given candidate indices set."""
    m = 0
    for i in indices:
        m |= 1 << i
    return m


def bits_of(mask: int) -> list[int]:
    """Return the candidate indices set in ``mask``, ascending."""
    out = []
    i = 0
    while mask:
        if mask & 1:
            out.append(i)
        mask >>= 1
        i += 1
    return out


def popcount(mask: int) -> int:
    """Return the number of candidates in ``mask``."""
    return bin(mask).count("1")


class Knowledge:
    """Decisive verdicts (GOOD/BAD) per active set, with monotone inference.

    ``add`` returns False when the new verdict contradicts what was known (evidence of noise or of a
    non-monotone target); the verdict is recorded anyway.
    """

    def __init__(self) -> None:
        self.bad: list[int] = []    # active sets judged BAD
        self.good: list[int] = []   # active sets judged GOOD

    def implied(self, active: int) -> str | None:
        """Return 'bad' or 'good' when observations imply the verdict of ``active``, else None."""
        for b in self.bad:
            if b & ~active == 0:
                return "bad"
        for g in self.good:
            if active & ~g == 0:
                return "good"
        return None

    def consistent(self, active: int, verdict: str) -> bool:
        """Return True when ``verdict`` for ``active`` agrees with every recorded verdict."""
        if verdict == "good":
            return not any(b & ~active == 0 for b in self.bad)
        return not any(active & ~g == 0 for g in self.good)

    def add(self, active: int, verdict: str) -> bool:
        """Record a decisive verdict; return False if it contradicts earlier ones."""
        ok = self.consistent(active, verdict)
        (self.bad if verdict == "bad" else self.good).append(active)
        return ok


# Split sizes are chosen by dynamic programming over the expected number of runs for one culprit, with the
# worst case as tie-break. State "G": the interval follows a GOOD prefix, so its last suspect needs its own
# confirmation run; intervals of <= ``scan`` suspects are tested one by one (each BAD answer is its own
# confirmation). State "Z": the interval starts at the beginning (a BAD prefix test of one suspect *is* its
# confirmation). Above _DP_MAX suspects the split is balanced.
#
# Scanning three suspects one by one costs one culprit 1+2+3 runs against 2+2+3 for a split, but a culprit
# that turns out to need a partner pays every one of those single runs for nothing. So the first search of a
# job (where an interaction pair shows up) scans two (SCAN); searches that follow a confirmed culprit, and
# the search for a partner inside a prefix, scan three (SCAN_LATER).
SCAN = 2
SCAN_LATER = 3
_DP_MAX = 512
_TABLES: dict[int, tuple[list[tuple[int, int, int]], list[tuple[int, int, int]]]] = {}


def _tables(scan: int, limit: int) -> tuple[list[tuple[int, int, int]], list[tuple[int, int, int]]]:
    """Return the (G, Z) tables for intervals of up to ``limit`` suspects: (total runs, worst, best h)."""
    if scan not in _TABLES:
        G = [(0, 0, 0), (1, 1, 0)]
        for s in range(2, scan + 1):
            G.append((s * (s + 1) // 2, s, 0))      # scanned: the i-th suspect costs i runs
        _TABLES[scan] = (G, [(0, 0, 0), (0, 0, 0)])
    G, Z = _TABLES[scan]
    while len(G) <= limit:
        s = len(G)
        G.append(min((s + G[h][0] + G[s - h][0], 1 + max(G[h][1], G[s - h][1]), h) for h in range(1, s)))
    while len(Z) <= limit:
        s = len(Z)
        Z.append(min((s + Z[h][0] + G[s - h][0], 1 + max(Z[h][1], G[s - h][1]), h) for h in range(1, s)))
    return G, Z


def best_split(size: int, at_start: bool, scan: int = SCAN) -> int:
    """Return how many suspects (from the front of an interval of ``size`` >= 2) the next test turns on.

    ``at_start``: the interval is at the beginning of the order (no GOOD prefix before it). ``scan``: the
    widest interval that is tested one suspect at a time.
    """
    if size > _DP_MAX:
        return size // 2
    G, Z = _tables(scan, size)
    return (Z if at_start else G)[size][2]


def split_choices(size: int, rng, preferred: int | None = None) -> list[tuple[str, int]]:
    """Return candidate ways to split an interval of ``size`` (>= 2) elements, best first.

    Each choice is ('head', h) = the first h elements, ('tail', h) = the last h, or ('rand', h) = a random
    h-subset drawn from ``rng`` when used. ``preferred`` (default balanced) comes first; the others serve
    when that configuration was INVALID ("choose a different split").
    """
    half = preferred if preferred is not None and 1 <= preferred < size else size // 2
    sizes = [half]
    for d in range(1, size):
        for h in (half + d, half - d):
            if 1 <= h < size and h not in sizes:
                sizes.append(h)
    out: list[tuple[str, int]] = []
    for h in sizes[:4]:
        out.append(("head", h))
        out.append(("tail", h))
    for h in sizes[:2]:
        out.append(("rand", h))
        out.append(("rand", h))
    return out
