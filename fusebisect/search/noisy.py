"""Bayesian posterior over "which rule is the culprit" when verdicts can be wrong (flaky targets).

Hypotheses (2n + 2 + n(n-1)/2): rule i is the culprit while ON (forward), rule i is the culprit while OFF
(reverse), nothing is wrong (every configuration GOOD), "not fusion" (every configuration BAD), and the pair
{i, j} is the culprit while both are ON (an interaction: either one off fixes it). Each verdict is flipped with
an unknown probability; the two flip rates (BAD read as GOOD, GOOD read as BAD) are unknown and marginalised
over a grid. Sufficient statistics are four counters per candidate and two per pair (runs with both on, and
how many of them were BAD), so the posterior is O(n^2) numpy operations; the pair counters are folded in only
when a posterior is asked for (a deterministic search never pays for them).
"""

from __future__ import annotations

import numpy as np

# Flip-rate grid and its prior weights: flat up to nearly 1/2. A prior that favours small rates makes the
# posterior overconfident on very noisy jobs (measured: at p=0.3, half of the culprits named at >= 0.95 were
# wrong); the flat prior costs about 4 more runs at p=0.1 and keeps the named ones right.
_GRID = np.array([0.002, 0.01, 0.03, 0.05, 0.075, 0.1, 0.125, 0.15, 0.175, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45,
                  0.49])
_GRID_W = np.ones(len(_GRID))
_LOGP = np.log(_GRID)
_LOGQ = np.log1p(-_GRID)
_LOGW = np.log(_GRID_W / _GRID_W.sum())

# Prior mass per hypothesis family (the pairs' share comes out of the single rules': interactions are rarer).
_MASS_FORWARD = 0.7
_MASS_REVERSE = 0.1
_MASS_NONE = 0.1
_MASS_ALWAYS = 0.1
_MASS_PAIR = 0.1
_PAIRS_MAX_N = 1024     # above this many candidates pairs are left out (n^2 counters)
_PRIOR_BOOST = 0.6  # share of the forward/reverse mass given to prior rules when a prior is set


def _mix(k: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Return log of sum_p w(p) p^k (1-p)^(m-k) for each (k, m) pair."""
    a = k[:, None] * _LOGP[None, :] + (m - k)[:, None] * _LOGQ[None, :] + _LOGW[None, :]
    mx = a.max(axis=1)
    return mx + np.log(np.exp(a - mx[:, None]).sum(axis=1))


class Posterior:
    """Posterior over the hypotheses given GOOD/BAD verdicts on OFF-sets.

    Index layout of :meth:`probabilities`: [0, n) forward rule i, [n, 2n) reverse rule i, 2n "nothing
    wrong", 2n+1 "always bad", then one per pair (i < j, in ``numpy.triu_indices`` order; :meth:`pair`).
    """

    def __init__(self, n: int) -> None:
        self.n = n
        self.on_bad = np.zeros(n)
        self.on_good = np.zeros(n)
        self.off_bad = np.zeros(n)
        self.off_good = np.zeros(n)
        self.tot_bad = 0
        self.tot_good = 0
        self.has_pairs = 2 <= n <= _PAIRS_MAX_N
        self._pending: list[tuple[np.ndarray, bool]] = []   # runs not yet folded into the pair counters
        self._iu = np.triu_indices(n, 1) if self.has_pairs else None
        self._both_on = np.zeros(len(self._iu[0]), dtype=np.int64) if self.has_pairs else None
        self._both_on_bad = np.zeros(len(self._iu[0]), dtype=np.int64) if self.has_pairs else None
        self.set_prior(())

    @property
    def pair_base(self) -> int:
        """Index of the first pair hypothesis."""
        return 2 * self.n + 2

    def pair(self, h: int) -> tuple[int, int]:
        """The two rules (i < j) of pair hypothesis ``h``."""
        k = h - self.pair_base
        return int(self._iu[0][k]), int(self._iu[1][k])

    @property
    def none_index(self) -> int:
        """Index of the "nothing wrong" hypothesis."""
        return 2 * self.n

    @property
    def always_index(self) -> int:
        """Index of the "always bad" hypothesis."""
        return 2 * self.n + 1

    def set_prior(self, rule_indices) -> None:
        """Favour ``rule_indices`` (e.g. the divergent fused op's passes); an empty list means uniform."""
        n = self.n
        w = np.full(n, 1.0 / n)
        idx = sorted(set(rule_indices))
        if idx and len(idx) < n:
            w = np.full(n, (1.0 - _PRIOR_BOOST) / (n - len(idx)))
            w[idx] = _PRIOR_BOOST / len(idx)
        forward = _MASS_FORWARD - (_MASS_PAIR if self.has_pairs else 0.0)
        parts = [np.log(w * forward), np.log(w * _MASS_REVERSE), [np.log(_MASS_NONE), np.log(_MASS_ALWAYS)]]
        if self.has_pairs:
            pairs = n * (n - 1) // 2
            parts.append(np.full(pairs, np.log(_MASS_PAIR / pairs)))
        self.log_prior = np.concatenate(parts)

    def add(self, off_indices, bad: bool) -> None:
        """Record one decisive verdict on the configuration whose OFF-set is ``off_indices``."""
        off = np.zeros(self.n, dtype=bool)
        off[list(off_indices)] = True
        if bad:
            self.on_bad += ~off
            self.off_bad += off
            self.tot_bad += 1
        else:
            self.on_good += ~off
            self.off_good += off
            self.tot_good += 1
        if self.has_pairs:
            self._pending.append((~off, bad))

    def _pair_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """(runs with both rules of each pair on, how many of those were BAD), pairs in ``triu`` order."""
        for on, bad in self._pending:
            both = on[self._iu[0]] & on[self._iu[1]]
            self._both_on += both
            if bad:
                self._both_on_bad += both
        self._pending.clear()
        return self._both_on, self._both_on_bad

    def probabilities(self) -> np.ndarray:
        """Return the normalised posterior (length 2n+2)."""
        on_n = self.on_bad + self.on_good
        off_n = self.off_bad + self.off_good
        total = self.tot_bad + self.tot_good
        # forward i: predicts BAD when i is on; reverse i: predicts BAD when i is off.
        fn = np.concatenate([self.on_good, self.off_good, [0.0, self.tot_good]])
        nb = np.concatenate([on_n, off_n, [0.0, total]])
        fp = np.concatenate([self.off_bad, self.on_bad, [self.tot_bad, 0.0]])
        ng = np.concatenate([off_n, on_n, [total, 0.0]])
        ll = _mix(fn, nb) + _mix(fp, ng)
        if self.has_pairs:   # pair {i, j}: predicts BAD when both are on
            both, both_bad = self._pair_counts()
            # a pair's likelihood depends only on (runs with both on, BAD among them), and the n^2/2 pairs share
            # few such counts: computed once per distinct count
            keys, where = np.unique(both * (total + 1) + both_bad, return_inverse=True)
            u_both, u_bad = keys // (total + 1), keys % (total + 1)
            u_ll = _mix(u_both - u_bad, u_both) + _mix(self.tot_bad - u_bad, total - u_both)
            ll = np.concatenate([ll, u_ll[where]])
        ll = ll + self.log_prior
        ll -= ll.max()
        p = np.exp(ll)
        return p / p.sum()

    def queries(self, post: np.ndarray, count: int = 1) -> list[tuple[float, list[int]]]:
        """Return up to ``count`` informative configurations as (predicted P(BAD), ON-list), best first.

        Candidates are ordered by (forward - reverse) posterior mass, plus the mass of the pairs they belong to;
        turning on a prefix of that order gives every achievable P(BAD) from "all off" to "all on" (a pair
        counts from the prefix holding both). The prefixes whose P(BAD) is nearest 1/2 (or nearest the
        quantiles j/(count+1) for parallel rounds) are the most informative; the alternatives after them
        include "everything on but r" for the three leading rules r each way.
        """
        n = self.n
        diff = post[:n] - post[n:2 * n]
        score = diff.copy()
        pair_post = post[self.pair_base:] if self.has_pairs else None
        if pair_post is not None:
            score += np.bincount(self._iu[0], pair_post, n) + np.bincount(self._iu[1], pair_post, n)
        order = np.argsort(-score, kind="stable")
        q = post[n:2 * n].sum() + post[self.always_index] + np.concatenate([[0.0], np.cumsum(diff[order])])
        if pair_post is not None:   # pair {i, j} is BAD from the prefix holding the later of the two on
            rank = np.empty(n, dtype=np.int64)
            rank[order] = np.arange(n)
            enters = np.maximum(rank[self._iu[0]], rank[self._iu[1]]) + 1
            q = q + np.cumsum(np.bincount(enters, pair_post, n + 1))
        targets = [0.5] if count == 1 else [j / (count + 1) for j in range(1, count + 1)]
        ranked = np.argsort(np.abs(q - 0.5), kind="stable")
        out: list[tuple[float, list[int]]] = []
        seen: set[int] = set()
        for t in targets:
            cand = np.argsort(np.abs(q - t), kind="stable")
            for j in cand:
                if int(j) not in seen:
                    seen.add(int(j))
                    out.append((float(q[j]), [int(x) for x in order[:j]]))
                    break
        # extra alternatives, used when a preferred one is INVALID: the other prefixes and, for the leading rules,
        # "everything on but it", nearest 1/2 first. When the run with only the leader on cannot be judged, those
        # still tell it alone from it with a partner (the partner off, the leader on), where every prefix that
        # holds the leader holds its likeliest partner too
        room = max(0, count + 6 - len(out))
        # (ranked by distance already: the first ``room`` prefixes not taken are all a prefix can add)
        extra = [(abs(float(q[j]) - 0.5), 0, float(q[j]), ("prefix", int(j)))
                 for j in ranked if int(j) not in seen][:room]
        fwd, rev = post[:n], post[n:2 * n]
        q_but = fwd.sum() - fwd + rev + post[self.always_index]
        if pair_post is not None:
            q_but = q_but + pair_post.sum() - (np.bincount(self._iu[0], pair_post, n)
                                               + np.bincount(self._iu[1], pair_post, n))
        # the leading rules both ways: the first of the order (bad while on) and the last (bad while off, whose
        # "only it off" run is the prefix of all but it)
        leaders = list(dict.fromkeys([*map(int, order[:3]), *map(int, order[::-1][:3])]))
        for rank, r in enumerate(leaders):
            extra.append((abs(float(q_but[r]) - 0.5), 1 + rank, float(q_but[r]), ("but", r)))
        extra.sort(key=lambda e: (e[0], e[1]))
        for _d, _k, qv, (kind, v) in extra[:room]:   # the ON-lists of those kept only
            out.append((qv, [int(x) for x in order[:v]] if kind == "prefix" else [int(x) for x in order if x != v]))
        return out
