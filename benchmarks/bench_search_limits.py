"""Which worst-case run-count targets can any search meet at all? An exact answer for small n.

``bench_search.py`` measures the engine; this script asks whether *any* adaptive strategy, however clever,
meets the worst-case targets T1 (one culprit), T2 (two independent culprits) and T6 (one interaction pair)
together. It searches every decision tree exhaustively over a restricted world and prints, per n, whether a
strategy exists.

The world: the candidates are n rules; the truth is one culprit {a}, two independent culprits {a} and {b},
or one interaction pair {a, b} (BAD only when both are on). A run turns a set S of candidates on; it is BAD
iff a culprit set lies inside S. The two gates (all on BAD, all off GOOD) have been run. A strategy may run
any S next, chosen from everything seen. It may stop only when one hypothesis is left and its path holds
the runs the search protocol requires before it names a set:

- every culprit set was run on its own and was BAD (the dedicated confirmation);
- the run with the culprit sets off and everything else on was GOOD (the look-for-more run, which is the
  check of the production configuration);
- for an interaction pair, each member without its partner was GOOD (a GOOD run holding a but not b).

A strategy for the full problem (any monotone family of culprit sets) is also a strategy here, so a target
that no strategy meets here cannot be met at all. Deadlines count every run after the gates:
T1 ceil(log2 n) + 2 (i.e. ceil(log2 n) + 3 without the look-for-more run, as the T1 row of
``bench_search.py`` counts it), T2 ceil(log2 C(n,2)) + 3, T6 2 ceil(log2 n) + 2.

The search is exact: rules the current state cannot tell apart are interchangeable, so a run is chosen by
how many rules of each such class it turns on; states are memoised; a state is dropped when its
hypotheses cannot get distinct leaves within their deadlines (Kraft's inequality).

    python benchmarks/bench_search_limits.py              # n = 4..7 (about a minute)
    python benchmarks/bench_search_limits.py --quick      # n = 4..6 (seconds)
    python benchmarks/bench_search_limits.py --max-n 8    # also n = 8 (longer)
"""

from __future__ import annotations

import argparse
import functools
import itertools
import math
import sys
import time

ONE, TWO, PAIR = "one culprit", "two culprits", "interaction pair"


class World:
    """The hypotheses of one n with their deadlines (runs after the gates); a deadline of None leaves a class
    out."""

    def __init__(self, n: int, deadlines: dict[str, int | None]) -> None:
        self.n = n
        self.all = (1 << n) - 1
        # (needs all members on?, members mask, deadline, required runs as (must hold, must lack, BAD?))
        self.hyps: list[tuple[bool, int, int, tuple[tuple[int, int, bool], ...]]] = []
        full = self.all
        if deadlines.get(ONE) is not None:
            for a in range(n):
                A = 1 << a
                self.hyps.append((False, A, deadlines[ONE], ((A, full ^ A, True), (full ^ A, A, False))))
        for a, b in itertools.combinations(range(n), 2):
            A, B = 1 << a, 1 << b
            rest = full ^ A ^ B
            if deadlines.get(TWO) is not None:
                self.hyps.append((False, A | B, deadlines[TWO],
                                  ((A, full ^ A, True), (B, full ^ B, True), (rest, A | B, False))))
            if deadlines.get(PAIR) is not None:
                self.hyps.append((True, A | B, deadlines[PAIR],
                                  ((A | B, rest, True), (A, B, False), (B, A, False), (rest, A | B, False))))
        self._index = {(h[0], h[1]): i for i, h in enumerate(self.hyps)}
        self._swaps = {(x, y): [self._image(i, x, y) for i in range(len(self.hyps))]
                       for x, y in itertools.combinations(range(n), 2)}
        self.nodes = 0
        self.feasible = functools.lru_cache(maxsize=None)(self._feasible)

    @staticmethod
    def _swap(mask: int, x: int, y: int) -> int:
        if (mask >> x) & 1 != (mask >> y) & 1:
            mask ^= (1 << x) | (1 << y)
        return mask

    def _image(self, i: int, x: int, y: int) -> tuple[int, list[int]]:
        """The hypothesis that swapping rules x and y turns hypothesis i into, and where its required runs go."""
        both, members, _, runs = self.hyps[i]
        j = self._index[(both, self._swap(members, x, y))]
        image_runs = self.hyps[j][3]
        return j, [image_runs.index((self._swap(hold, x, y), self._swap(lack, x, y), bad))
                   for hold, lack, bad in runs]

    def _classes(self, state: dict[int, int]) -> list[list[int]]:
        """Rules that the state cannot tell apart (swapping them maps the state onto itself), grouped."""
        parent = list(range(self.n))

        def root(u: int) -> int:
            while parent[u] != u:
                u = parent[u]
            return u

        for x, y in itertools.combinations(range(self.n), 2):
            if root(x) == root(y):
                continue
            symmetric = True
            for h, done in state.items():
                j, moved = self._swaps[x, y][h]
                image_done = sum(1 << moved[r] for r in range(len(moved)) if (done >> r) & 1)
                if state.get(j) != image_done:
                    symmetric = False
                    break
            if symmetric:
                parent[root(y)] = root(x)
        groups: dict[int, list[int]] = {}
        for x in range(self.n):
            groups.setdefault(root(x), []).append(x)
        return list(groups.values())

    def _bad(self, h: int, run: int) -> bool:
        both, members, _, _ = self.hyps[h]
        return (run & members) == members if both else bool(run & members)

    def _feasible(self, state_items: tuple[tuple[int, int], ...], depth: int) -> bool:
        """Whether every hypothesis alive (with the required runs it has had, as bits) can be finished in time."""
        self.nodes += 1
        state = dict(state_items)
        if len(state) == 1:
            (h, done), = state.items()
            return depth + len(self.hyps[h][3]) - bin(done).count("1") <= self.hyps[h][2]
        if any(self.hyps[h][2] <= depth for h in state):
            return False
        if sum(2.0 ** (depth - self.hyps[h][2]) for h in state) > 1 + 1e-12:
            return False
        classes = self._classes(state)
        for counts in itertools.product(*(range(len(c) + 1) for c in classes)):
            run = sum(1 << x for c, k in zip(classes, counts) for x in c[:k])
            if run in (0, self.all):
                continue
            kids: tuple[dict[int, int], dict[int, int]] = ({}, {})
            for h, done in state.items():
                bad = self._bad(h, run)
                for r, (hold, lack, want_bad) in enumerate(self.hyps[h][3]):
                    if want_bad == bad and run & hold == hold and not run & lack:
                        done |= 1 << r
                kids[bad][h] = done
            if state in kids:      # splits nothing and completes nothing: never needed
                continue
            if all(not kid or self.feasible(tuple(sorted(kid.items())), depth + 1) for kid in kids):
                return True
        return False

    def solve(self) -> bool:
        return self.feasible(tuple((h, 0) for h in range(len(self.hyps))), 0)


def targets(n: int) -> dict[str, int]:
    """The deadlines (runs after the two gates) of T1, T2 (k=2) and T6."""
    L = math.ceil(math.log2(n))
    return {ONE: L + 2, TWO: math.ceil(math.log2(math.comb(n, 2))) + 3, PAIR: 2 * L + 2}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="n = 4..6 only")
    ap.add_argument("--max-n", type=int, default=7, help="largest n searched (default 7)")
    args = ap.parse_args(argv)
    sizes = range(4, 7 if args.quick else args.max_n + 1)
    # Every world holds the single culprits (a search must find them too): with their deadline when T1 is
    # part of the combination, else with one no strategy can miss.
    combos = [("T1-1", {ONE: -1}), ("T1", {ONE: 0}), ("T2", {TWO: 0}), ("T6", {PAIR: 0}),
              ("T1+T2", {ONE: 0, TWO: 0}), ("T1+T6", {ONE: 0, PAIR: 0}), ("T2+T6", {TWO: 0, PAIR: 0}),
              ("T1+T2+T6", {ONE: 0, TWO: 0, PAIR: 0})]
    print("Worst-case targets no strategy can meet (NO) and those some strategy meets in this world (yes);")
    print("exhaustive search. Totals count the 2 gates and every run, T1 with its look-for-more run.")
    print("T1-1: T1 one run sooner.")
    print(f"{'n':>3} {'T1':>3} {'T2':>3} {'T6':>3} " + "".join(f"{name:>10}" for name, _ in combos) + "   states  seconds")
    for n in sizes:
        t = targets(n)
        t0 = time.perf_counter()
        cells, states = [], 0
        impossible: list[set[str]] = []
        for name, slack in combos:
            classes = set(slack)
            if any(known <= classes for known in impossible):
                cells.append("NO*")    # holds a combination already impossible
                continue
            deadlines = {c: t[c] + s for c, s in slack.items()}
            deadlines.setdefault(ONE, 4 * n)
            world = World(n, deadlines)
            ok = world.solve()
            states += world.nodes
            if not ok and not any(slack.values()):
                impossible.append(classes)
            cells.append("yes" if ok else "NO")
        print(f"{n:>3} {t[ONE] + 2:>3} {t[TWO] + 2:>3} {t[PAIR] + 2:>3} " + "".join(f"{c:>10}" for c in cells)
              + f" {states:>8} {time.perf_counter() - t0:8.1f}")
    print("\nNO*: implied by a smaller combination that is NO. T1-1 is impossible for every n (the counting "
          "argument in bench_search.py). A NO for T1+T2 or T1+T6, or for all three, means the targets cannot all "
          "hold as worst cases, whatever the search does; a yes only means this restricted world does not rule "
          "them out.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
