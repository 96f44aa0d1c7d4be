"""Bayesian posterior over "which rule is the culprit" when verdicts can be wrong (flaky targets).

Hypotheses (2n + 2): rule i is the culprit while ON (forward), rule i is the culprit while OFF (reverse),
nothing is wrong (every configuration GOOD), and "not fusion" (every configuration BAD). Each verdict is
flipped with an unknown probability; the two flip rates (BAD read as GOOD, GOOD read as BAD) are unknown and
marginalised over a grid with a prior that favours rates <= 0.2. Sufficient statistics are four counters per
candidate, so adding an observation and computing the posterior are O(n) numpy operations.
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

# Prior mass per hypothesis family.
_MASS_FORWARD = 0.7
_MASS_REVERSE = 0.1
_MASS_NONE = 0.1
_MASS_ALWAYS = 0.1
_PRIOR_BOOST = 0.6  # share of the forward/reverse mass given to prior rules when a prior is set


def _mix(k: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Return log of sum_p w(p) p^k (1-p)^(m-k) for each (k, m) pair."""
    a = k[:, None] * _LOGP[None, :] + (m - k)[:, None] * _LOGQ[None, :] + _LOGW[None, :]
    mx = a.max(axis=1)
    return mx + np.log(np.exp(a - mx[:, None]).sum(axis=1))


class Posterior:
    """Posterior over the 2n+2 hypotheses given GOOD/BAD verdicts on OFF-sets.

    Index layout of :meth:`probabilities`: [0, n) forward rule i, [n, 2n) reverse rule i, 2n "nothing
    wrong", 2n+1 "always bad".
    """

    def __init__(self, n: int) -> None:
        self.n = n
        self.on_bad = np.zeros(n)
        self.on_good = np.zeros(n)
        self.off_bad = np.zeros(n)
        self.off_good = np.zeros(n)
        self.tot_bad = 0
        self.tot_good = 0
        self.set_prior(())

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
        lp = np.concatenate([np.log(w * _MASS_FORWARD), np.log(w * _MASS_REVERSE),
                             [np.log(_MASS_NONE), np.log(_MASS_ALWAYS)]])
        self.log_prior = lp

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
        ll = _mix(fn, nb) + _mix(fp, ng) + self.log_prior
        ll -= ll.max()
        p = np.exp(ll)
        return p / p.sum()

    def queries(self, post: np.ndarray, count: int = 1) -> list[tuple[float, list[int]]]:
        """Return up to ``count`` informative configurations as (predicted P(BAD), ON-list), best first.

        Candidates are ordered by (forward - reverse) posterior mass; turning on a prefix of that order gives
        every achievable P(BAD) from "all off" to "all on". The prefixes whose P(BAD) is nearest 1/2 (or
        nearest the quantiles j/(count+1) for parallel rounds) are the most informative.
        """
        n = self.n
        diff = post[:n] - post[n:2 * n]
        order = np.argsort(-diff, kind="stable")
        q = post[n:2 * n].sum() + post[self.always_index] + np.concatenate([[0.0], np.cumsum(diff[order])])
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
        for j in ranked:  # extra alternatives (used when a preferred one is INVALID)
            if int(j) not in seen and len(out) < count + 6:
                seen.add(int(j))
                out.append((float(q[j]), [int(x) for x in order[:j]]))
        return out
