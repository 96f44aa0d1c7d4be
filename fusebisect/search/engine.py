"""The pure search engine: which configurations to run next, and what the outcomes prove.

Protocol (the runner drives it; nothing here does I/O, reads the clock, or draws unseeded randomness)::

    s = Search(candidates, workers=2)
    while not s.done:
        for off in s.propose():          # OFF-sets to run now (a query: calling it twice returns the same)
            s.observe(off, run(off))      # Outcome.GOOD / BAD / INVALID / UNKNOWN
    s.result                              # SearchResult

``propose()`` returns the configurations of the current round that have not been observed yet; it returns []
with ``done`` False only while a round is still being observed. ``role(off)`` names why a configuration was
asked for ('reference', 'baseline', 'search', 'confirm', 'verify', 'repeat'). The state is a fold over the
journal: ``Search.replay(candidates, events)`` rebuilds it from ("observe", (off, outcome)) and
("prior", rules) events, so resuming is replaying.

The algorithm follows Go's cmd/bisect:

1. Gates: run with every candidate off (the reference) and with none off (the baseline). Baseline good ->
   not_reproduced; all-off still bad -> not_fusion (either only after the gate that decides it gave the same
   verdict twice; two different verdicts switch to the noise-aware mode); baseline good but all-off bad ->
   the reverse direction (the symptom needs rules to be OFF). INVALID gates are retried once, then the
   search is inconclusive.
2. Find a set: the first prior rules (if any) are tested alone; then the engine binary-searches the
   shortest BAD prefix of the candidate order (adaptive group testing; everything after the prefix is
   off), choosing split sizes that minimise the expected runs. The prefix's last element r is needed. If
   r alone reproduces the symptom the set is {r}; otherwise r needs partners, which are searched for the
   same way inside the prefix with r kept on (Go's "keep one half on, recurse into the other"). The set
   returned is 1-minimal. With P workers each round tests P prefixes ((P+1)-ary splitting).
3. Confirm it before accusing anyone: a dedicated run with only that set active must be BAD.
4. Skip it and look for more: rerun with the set(s) found turned off and everything else on. GOOD -> done.
   When the first culprit found is a single rule in the first fifth of the order, the run before that one
   keeps it off and turns on only the first 60 % of the suspects after it: the search names the earliest
   culprit of the order first, so an early one is where further culprits are likely. BAD there is the next
   search's first split and makes the look-for-more run implied BAD, one run saved; GOOD costs one run.
   Only with one worker, for a culprit the prior did not name, with at least 32 suspects after it, and while
   one culprit still ends within L+4.

Nothing is inferred except through the monotone model (a BAD set makes its supersets BAD, a GOOD set makes
its subsets GOOD), and no configuration is run twice unless a repeat is needed. INVALID configurations are
never treated as BAD: the engine picks a different split; when every split of the last few suspects is INVALID,
it runs everything but one of them on (GOOD: that one is in every culprit set). UNKNOWN ones are repeated. ``repeat=N`` runs every
configuration N times and takes the majority (deterministic mode) as long as a configuration's runs agree; runs
that disagree switch to the noise-aware mode, which weighs every run.

Run counts (n candidates, L = ceil(log2 n), executions include the 2 gates and every confirmation):
one culprit takes at most L+4 and on average about log2(n)+3.7 (n=300: mean 12.0, of which the early look
of step 4 costs 0.2; it saves two and three culprits 0.2 and 0.3). Nothing that accuses r
only after seeing both "only r on" BAD and "r off, everything else on" GOOD can guarantee fewer: each of
those two runs names a single rule, so the later one of them for the accused rule carries no information;
c runs after the gates can therefore settle at most 2^(c-2) candidates, i.e. L+2 runs after the gates.
k independent culprits take at most k*L + 2k + 2; an interaction pair about 2L+3.5 on average (worst 2L+6).
The set's 1-minimality (each member alone is harmless) is not run again when monotonicity already implies
it: the prefix search observed a GOOD configuration holding the earlier member without the later one, and
the partner search one holding the later member without its partner (or ran it alone). The pair's
worst case stays above 2L+4: the single-culprit split plan (scanning the last two suspects alone)
spends a third run there when the culprit turns out to need a partner; keeping it out of those
intervals costs single culprits more on average than the pair saves in the worst case. Searches that
follow a confirmed culprit, and partner searches, scan the last three suspects alone (1+2+3 runs against
2+2+3 for a split): there a culprit needing a partner is rare, and k=3 gains about 0.15 runs on average,
the pair 0.1. With a prior, its first two rules are tested alone first: a right prior answers in 4 runs
(5 when the culprit is its second rule), a wrong one costs those two runs at most.

When a third member of an interaction set would be needed, the BAD run behind it is repeated once first: a
single wrong verdict produces the same picture. If the run that should show a rule suffices alone is
INVALID, the rule is run with one other rule, twice (a GOOD answer proves it needs a partner, which is then
searched for); when nothing decides, the rule is named alone with confidence 0.5 and a note.

When verdicts contradict each other, or the runs of one configuration disagree (or with ``flaky=True`` from
the start), the engine switches to a noise
aware mode: a Bayesian posterior over "rule i is the culprit" (either direction), "rules i and j together"
(an interaction, bad only while both are on), "nothing wrong" and "always bad", with unknown flip rates; each next configuration is the one whose predicted P(BAD) is nearest
1/2, and a culprit is named only when its posterior reaches ``confidence`` and its two confirmation runs
were observed. Below that, after ``max_executions``, the verdict is inconclusive. Then, as in Go's loop,
the run with that culprit off is run until two of its runs agree (up to three): two GOOD and no BAD end the
search; anything else makes it go on over the other rules with that culprit kept off, from the runs that had it
off, until "nothing more" reaches ``confidence`` (each culprit sought has its own run budget): two GOOD of three
would leave a second culprit at 20 % when one verdict in five flips. A rule bad while
turned off is named only when the run with only it on is GOOD the same way; BAD there (another rule bad while
off, which this mode does not search) ends the search inconclusive.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence

from fusebisect.errors import UsageError

from .groups import SCAN, SCAN_LATER, Knowledge, best_split, bits_of, mask_of, popcount, split_choices
from .model import Culprit, Outcome, SearchResult, bound_for_sets, target_text
from .noisy import Posterior

_MAX_SETS = 16          # stop looking for more culprit sets after this many
_UNKNOWN_REPEATS = 3    # UNKNOWN verdicts tolerated per configuration before it counts as INVALID
PRIOR_SINGLES = 2       # prior rules tested on their own before the group search
_ALL_BUT_TRIES = 3      # suspects run "everything on but it" when every split of the last few is INVALID
_EARLY_FIRST = 0.2      # a first culprit within this share of the order: look among the next suspects early
_EARLY_SHARE = 0.6      # the share of the suspects after it that this run turns on
_EARLY_MIN = 32         # fewer suspects after it: the look-for-more run comes first (with rules faulty one by
                        # one, a second culprit among few suspects is unlikely and the early look mostly costs)


class _OutOfBudget(Exception):
    """Raised inside the search generator when max_executions is reached."""


class Search:
    """Adaptive group-testing search over fusion-rule candidates (see the module docstring)."""

    def __init__(self, candidates: Sequence[str], *, prior: Sequence[str] = (), flaky: bool = False,
                 repeat: int = 1, workers: int = 1, confidence: float = 0.95,
                 max_executions: int | None = None, seed: int = 0) -> None:
        """Create a search; raises UsageError for no/duplicate candidates or out-of-range options."""
        cands = [str(c) for c in candidates]
        if not cands:
            raise UsageError("no candidate rules to search")
        dup = sorted({c for c in cands if cands.count(c) > 1})
        if dup:
            raise UsageError(f"duplicate candidate rule(s): {', '.join(dup)}")
        if repeat < 1:
            raise UsageError(f"--repeat must be >= 1, got {repeat}")
        if workers < 1:
            raise UsageError(f"--jobs must be >= 1, got {workers}")
        if not 0.5 < confidence < 1.0:
            raise UsageError(f"--confidence must be between 0.5 and 1 (exclusive), got {confidence}")
        if max_executions is not None and max_executions < 2:
            raise UsageError(f"--max-executions must be >= 2, got {max_executions}")
        self.candidates: tuple[str, ...] = tuple(cands)
        self.flaky = bool(flaky)                # declared noisy up front
        self.repeat = int(repeat)               # runs per configuration, majority vote
        self.workers = int(workers)             # configurations proposed per round
        self.confidence = float(confidence)     # posterior needed to name a culprit (noise-aware mode)
        self.max_executions = max_executions    # user cap; None = engine default
        self.seed = int(seed)                   # seeds the only randomness (alternative splits)
        self.done = False                       # True once ``result`` is set
        self.result: SearchResult | None = None
        self._n = len(cands)
        self._index = {c: i for i, c in enumerate(cands)}
        self._all = (1 << self._n) - 1
        self._history: list[tuple[int, Outcome]] = []     # the journal, as (off mask, outcome)
        self._obs: dict[int, list[Outcome]] = {}          # outcomes per OFF mask
        self._roles: dict[int, str] = {}
        self._noisy = self.flaky
        self._noisy_start = 0                  # executions when the noise-aware mode started
        self._post = Posterior(self._n)
        self._direction: str | None = None     # 'on' | 'off' once the gates decided
        self._know = Knowledge()
        self._prior: tuple[int, ...] = ()
        self._notes: list[str] = []
        self._found: list[list[int]] = []
        self._noisy_named: list[tuple[int, float]] = []
        self._noisy_verify: tuple[int, int] | None = None   # (sets found, runs left if none) while repeating one
        self._noisy_top: tuple[int, float] | None = None
        self._unconfirmed: set[int] = set()
        self._stuck: list[int] = []
        self._early = False                    # while the early look of step 4 runs (for the run estimate)
        self._orphans: list[tuple[int, int]] = []   # the last round before a restart: (off, runs seen when asked)
        self._phase = "gates"
        self._left = self._n
        self._batch: list[tuple[int, int]] = []
        if prior:
            self._set_prior_names(prior)
        self._restart()

    # ------------------------------------------------------------------ public API
    @property
    def noisy(self) -> bool:
        """True once the search runs in its noise-aware mode (declared flaky, or switched to it itself)."""
        return self._noisy

    @property
    def executions(self) -> int:
        """Return the number of outcomes observed so far (every execution counts)."""
        return len(self._history)

    def propose(self) -> list[frozenset[str]]:
        """Return the OFF-sets to run now (at most ``workers``, the two gates together at the start).

        An empty list means done (``self.done``) or that this round is still being observed. Never raises.
        """
        if self.done:
            return []
        return [self._names(off) for off, base in self._batch if len(self._obs.get(off, ())) <= base]

    def role(self, off: Iterable[str]) -> str:
        """Return why ``off`` was proposed: reference, baseline, search, confirm, verify or repeat."""
        return self._roles.get(self._mask_names(off), "search")

    def observe(self, off: Iterable[str], outcome: Outcome | str) -> None:
        """Record the outcome of running configuration ``off``; raises UsageError for unknown rule names.

        Observations of configurations that were not proposed are kept as knowledge. After ``done`` they
        are recorded but do not change the result.
        """
        off_mask = self._mask_names(off)
        outcome = Outcome(outcome)
        prev = self._judge(off_mask)[0]
        self._history.append((off_mask, outcome))
        self._obs.setdefault(off_mask, []).append(outcome)
        if outcome in (Outcome.GOOD, Outcome.BAD):
            self._post.add(bits_of(off_mask), outcome is Outcome.BAD)
        if self.done:
            return
        # Runs of one configuration that disagree (--repeat's runs included: a majority of them can be wrong too,
        # and a culprit named from it would carry a confidence of 1 it does not have) mean a noisy job.
        if not self._noisy and self._direction is None and \
                {Outcome.GOOD, Outcome.BAD} <= set(self._obs[off_mask]):
            self._enter_noisy(f"the runs of {self._describe(off_mask)} disagreed")
            return
        if not self._noisy and self._direction is not None:
            new = self._judge(off_mask)[0]
            obs = self._obs[off_mask]
            clash = Outcome.GOOD in obs and Outcome.BAD in obs
            if new in (Outcome.GOOD, Outcome.BAD) and new is not prev:
                if prev in (Outcome.GOOD, Outcome.BAD):
                    clash = True
                    self._rebuild_knowledge()
                else:
                    clash = clash or not self._know.add(self._active(off_mask), new.value)
            if clash:
                self._enter_noisy(f"the verdict on {self._describe(off_mask)} contradicted earlier ones")
                return
        self._advance()

    def set_prior(self, rules: Sequence[str]) -> None:
        """Test ``rules`` first (e.g. the pass names of the first divergent fused op); unknown names are
        ignored. Takes effect immediately (the search is re-planned from what is already known)."""
        self._set_prior_names(rules)
        if not self.done:
            self._restart()

    def settle(self) -> None:
        """End the search now because the configurations it still waits for will not be run (the runner's run
        budget ran out in the middle of a round): the result is what the budget stop gives. Never raises."""
        if self.done:
            return
        try:
            self._gen.throw(_OutOfBudget())
        except StopIteration as stop:
            self._finish(stop.value)
            return
        self._finish(self._budget_result())

    def progress(self) -> dict:
        """Return {"phase", "candidates_left", "runs_remaining_estimate", "executions", "found"} for display.

        phase: gates | search | confirm | verify (looking for more: candidates_left are the rules not found,
        one run if none of them is a culprit) | noisy | done. In the noise-aware mode candidates_left counts the
        rules a hypothesis with posterior above 1% names (alone, or in a pair). found: culprit sets found so far.
        """
        left = max(1, self._left)
        if self.done:
            est = 0
        elif self._phase == "verify" and not self._noisy:   # the look-for-more run's runs still to do (--repeat)
            est = max(1, sum(self.repeat - len(self._verdicts(off)) for off, _base in self._batch))
            if self._early:   # the early look's runs, then the look-for-more run's
                est += self.repeat
        elif self._noisy_verify is not None:   # (set only while the noise-aware mode repeats a look-for-more run)
            est = self._noisy_verify[1]   # looking for more: the repeats that end the search if there is none
        elif self._noisy:
            est = max(1, math.ceil((math.log2(left) + 4.3) / 0.53))
        else:
            est = (math.ceil(math.log2(left)) + 2 + (2 if self._phase == "gates" else 0)) * self.repeat
        found = len(self._found) + len(self._noisy_named)
        if self._noisy_verify is not None and not self.done:
            found = self._noisy_verify[0]   # the set whose look-for-more run is being repeated counts
        return {"phase": "done" if self.done else self._phase, "candidates_left": self._left,
                "runs_remaining_estimate": est, "executions": self.executions, "found": found}

    @classmethod
    def replay(cls, candidates: Sequence[str], events: Iterable[tuple[str, object]], **kw) -> "Search":
        """Return a Search rebuilt from journal events ("observe", (off, outcome)) and ("prior", rules).

        Raises UsageError for an unknown event kind or rule name.
        """
        s = cls(candidates, **kw)
        for kind, payload in events:
            if kind == "observe":
                off, outcome = payload  # type: ignore[misc]
                s.observe(off, outcome)
            elif kind == "prior":
                s.set_prior(payload)  # type: ignore[arg-type]
            else:
                raise UsageError(f"unknown journal event {kind!r}")
        return s

    # ------------------------------------------------------------------ plumbing
    def _names(self, mask: int) -> frozenset[str]:
        return frozenset(self.candidates[i] for i in bits_of(mask))

    def _mask_names(self, names: Iterable[str]) -> int:
        if isinstance(names, str):
            names = [names]
        m = 0
        for r in names:
            i = self._index.get(r)
            if i is None:
                raise UsageError(f"rule {r!r} is not one of this search's candidates")
            m |= 1 << i
        return m

    def _describe(self, off: int) -> str:
        k = popcount(off)
        if k == 0:
            return "the baseline"
        if k == self._n:
            return "the all-off reference"
        names = sorted(self._names(off))
        return "off=" + (",".join(names) if k <= 3 else f"{','.join(names[:3])},... ({k} rules)")

    def _set_prior_names(self, rules: Sequence[str]) -> None:
        if isinstance(rules, str):
            rules = [rules]
        idx: list[int] = []
        for r in rules:
            i = self._index.get(r)
            if i is not None and i not in idx:
                idx.append(i)
        self._prior = tuple(idx)
        self._post.set_prior(idx)

    def _active(self, off: int) -> int:
        """Map an OFF mask to the active set (and back: the map is an involution)."""
        return off if self._direction == "off" else self._all ^ off

    _off = _active

    def _rebuild_knowledge(self) -> None:
        self._know = Knowledge()
        if self._direction is None:
            return
        for off in self._obs:
            v = self._judge(off)[0]
            if v in (Outcome.GOOD, Outcome.BAD):
                self._know.add(self._active(off), v.value)

    def _enter_noisy(self, why: str) -> None:
        self._noisy = True
        self._noisy_start = self.executions
        self._notes.append(f"{why}; switched to the noise-aware mode")
        self._restart()

    def _restart(self) -> None:
        # a caller runs at most ``workers`` configurations at once: beside the run whose outcome restarted the
        # search, at most workers - 1 of the round asked before can still be running
        self._orphans = [(off, base) for off, base in self._batch
                         if len(self._obs.get(off, ())) <= base][:self.workers - 1]
        self._inferable = False                # the request waited for may be settled by inference
        self._gen = self._main()
        self._batch = []
        self._found = []
        self._noisy_named = []
        self._noisy_top = None
        self._unconfirmed = set()
        self._stuck = []
        self._early = False
        self._short_of_confirmation = False
        self._budget_stopped = False   # set where the budget ends the search (reported in the result)
        self._advance()

    def _advance(self) -> None:
        while not self.done:
            if self._batch and any(len(self._obs.get(off, ())) <= base for off, base in self._batch) \
                    and not self._settled_by_inference():
                return
            try:
                req = next(self._gen)
            except StopIteration as stop:
                self._finish(stop.value)
                return
            self._batch = [(off, len(self._obs.get(off, ()))) for off, _ in req]
            for off, role in req:
                self._roles[off] = role

    def _settled_by_inference(self) -> bool:
        """Whether the one configuration the deterministic search waits for is now implied by observations it did
        not ask for (a journal resumed under another plan, e.g. a larger budget): then it is not run."""
        if len(self._batch) != 1 or not self._inferable or self._noisy or self._direction is None:
            return False
        return self._know.implied(self._active(self._batch[0][0])) is not None

    def _finish(self, result: SearchResult) -> None:
        self.done = True
        self.result = result
        self._batch = []
        self._phase = "done"

    def _cap(self, named: int = 0) -> int:
        if self._noisy:   # a budget per culprit sought (``named`` found so far)
            default = self._noisy_start + (1 + named) * math.ceil(3 * math.log2(max(2, self._n)) + 30)
        else:
            default = 4 * self._n + 64
        return self.max_executions if self.max_executions is not None else default

    def _spent(self) -> int:
        """Executions, and the runs of the round asked before a restart (the switch to the noise-aware mode) that
        may still be running (at most workers - 1, not observed yet): they count against the budget."""
        return self.executions + sum(len(self._obs.get(off, ())) <= base for off, base in self._orphans)

    def _ask(self, items: list[tuple[int, str]]):
        left = self._cap() - self._spent()
        if left <= 0:
            raise _OutOfBudget
        # a round never runs past the budget: the configurations left out are asked again, and then the budget
        # stops the search
        yield items[:left]

    def _judge(self, off: int, retries: int = 0) -> tuple[Outcome | None, bool]:
        """Return (verdict so far, whether another run of ``off`` is needed)."""
        obs = self._obs.get(off, ())
        g = obs.count(Outcome.GOOD)
        b = obs.count(Outcome.BAD)
        inv = obs.count(Outcome.INVALID)
        unk = obs.count(Outcome.UNKNOWN)
        need = self.repeat
        limit = 3 * need + 3
        if g + b >= need or (g + b > 0 and len(obs) >= limit):
            if g != b:
                return (Outcome.GOOD if g > b else Outcome.BAD), False
            return (Outcome.INVALID, False) if len(obs) >= limit else (None, True)
        if g + b == 0 and inv > retries:
            return Outcome.INVALID, False
        if g + b == 0 and unk >= _UNKNOWN_REPEATS * need:
            return Outcome.INVALID, False
        if len(obs) >= limit:
            return Outcome.INVALID, False
        return None, True

    def _test_offs(self, items: list[tuple[int, str]], retries: int = 0, infer: bool = False):
        """Generator: run OFF masks until each has a verdict; return the verdicts in order.

        ``infer``: a configuration the monotone model implies needs no run. That is checked again after every
        round: observations the search did not ask for (a resumed journal whose runs followed another plan, e.g.
        under a smaller budget) can settle a configuration it still waits for, which then is not run."""
        while True:
            need: list[tuple[int, str]] = []
            res: list[Outcome] = []
            for off, role in items:
                imp = self._know.implied(self._active(off)) if infer else None
                if imp:
                    res.append(Outcome(imp))
                    continue
                v, more = self._judge(off, retries)
                if more:
                    need.append((off, "repeat" if off in self._obs else role))
                res.append(v)  # type: ignore[arg-type]
            if not need:
                return res
            self._inferable = infer     # (while it waits: see _advance)
            try:
                yield from self._ask(need)
            finally:
                self._inferable = False

    def _test_many(self, items: list[tuple[int, str]], direct: bool = False):
        """Generator: verdicts for active masks, using monotone inference unless ``direct``."""
        return (yield from self._test_offs([(self._off(active), role) for active, role in items], infer=not direct))

    def _test(self, active: int, role: str, direct: bool = False, extra: int | None = None):
        """Generator: the verdict on one active mask (``extra``: another active mask run in the same round)."""
        items = [(active, role)]
        if extra is not None and self.workers > 1 and extra != active:
            items.append((extra, "verify"))
        try:
            return (yield from self._test_many(items, direct))[0]
        except _OutOfBudget:
            # the budget cut the round after its own configuration was judged: that verdict stands (a culprit
            # confirmed in the round is not lost because the look-for-more run beside it could not run)
            if len(items) > 1:
                implied = None if direct else self._know.implied(active)
                if implied:
                    return Outcome(implied)
                v, more = self._judge(self._off(active))
                if v is not None and not more:
                    return v
            raise

    def _known_invalid(self, active: int) -> bool:
        off = self._off(active)
        return off in self._obs and self._judge(off)[0] is Outcome.INVALID

    # ------------------------------------------------------------------ the search
    def _main(self):
        try:
            if self._noisy:
                return (yield from self._noisy_main())
            return (yield from self._det_main())
        except _OutOfBudget:
            return self._budget_result()

    def _det_main(self):
        self._phase = "gates"
        ref, base = yield from self._test_offs([(self._all, "reference"), (0, "baseline")], retries=1)
        if Outcome.INVALID in (ref, base):
            if ref is Outcome.INVALID and base is Outcome.INVALID:
                return self._result("inconclusive", [], "Neither the baseline (default configuration) nor the "
                                    "all-candidates-off reference run could be judged twice: the job does not run "
                                    "to a verdict whatever the switches; nothing can be concluded.")
            if ref is Outcome.INVALID:
                # every search starts from "all off cures it": without that run nothing tells a fusion rule
                # from any other cause; a job that cannot build with every candidate off needs fewer candidates
                return self._result("inconclusive", [], "The all-candidates-off reference run could not be judged "
                                    "twice, so whether turning the rules off cures the symptom is unknown; nothing "
                                    "can be concluded (if the job fails with all of them off, narrow the "
                                    "candidates with --rules).")
            return self._result("inconclusive", [], "The baseline run could not be judged twice; nothing can be "
                                "concluded.")
        stop_gate = 0 if base is Outcome.GOOD else self._all   # the gate a single flipped verdict would fake
        if base is ref and self.repeat == 1 and len(self._verdicts(stop_gate)) == 1:
            # A verdict that ends the search without an answer must not rest on one run: run that gate once
            # more. A disagreement is caught by observe() and switches to the noise-aware mode.
            yield from self._ask([(stop_gate, "repeat")])
        if base is Outcome.GOOD and ref is Outcome.GOOD:
            return self._result("not_reproduced", [], "The baseline (default configuration) is good, twice: "
                                "the symptom does not reproduce.")
        if base is Outcome.BAD and ref is Outcome.BAD:
            return self._result("not_fusion", [], f"With all {self._n} candidate rules off the symptom is "
                                "still there, twice: the switchable fusion rules are not its only cause.")
        self._direction = "on" if base is Outcome.BAD else "off"
        self._rebuild_knowledge()
        # The order stays the candidates' own: the prior acts through its first rules being tested alone
        # (a BAD answer is also the confirmation), so a wrong prior costs exactly those runs.
        order = list(range(self._n))
        first = True
        while True:
            used = mask_of(i for s in self._found for i in s)
            U = [i for i in order if not (used >> i) & 1]
            if not U:
                break
            self._phase = "verify"
            self._left = len(U)
            if len(self._found) == 1:
                yield from self._look_early(U)
            v = yield from self._test(mask_of(U), "verify")
            if v is Outcome.GOOD:
                break
            if v is not Outcome.BAD:
                # Look for more with each half instead; a BAD half is searched on its own.
                U = yield from self._bad_half(U)
                if U is None:
                    self._notes.append("the run looking for more culprits was invalid and neither half is "
                                       "bad; a set spanning both halves cannot be excluded")
                    break
            self._phase = "search"
            S = yield from self._find_set(U, 0, self._prior if first else (), spec=mask_of(U),
                                          scan=SCAN if first else SCAN_LATER)
            if S is None:
                break
            self._phase = "confirm"
            smask = mask_of(S)
            for s in self._minimality_gaps(S):
                yield from self._test(smask & ~(1 << s), "confirm")
            v = yield from self._test(smask, "confirm", direct=True)
            if v is Outcome.INVALID:
                self._unconfirmed.update(S)
            self._found.append(S)
            first = False
            if len(self._found) >= _MAX_SETS:
                self._notes.append(f"stopped after {_MAX_SETS} culprit sets")
                break
        return self._det_result()

    def _look_early(self, U: list[int]):
        """Generator: after a first culprit found early in the order, look for more among the first
        ``_EARLY_SHARE`` of the suspects after it before the look-for-more run (see the module docstring).

        The run is the first split of the next search: BAD (another culprit there) makes the look-for-more
        run implied BAD and saves it. GOOD costs a single culprit one run; with more culprits it is a split the
        next search would have run anyway. Taken only where one culprit keeps its worst case: at most
        ceil(log2 n) + 2 configurations so far, and a budget with room for it and the look-for-more run.
        """
        first = self._found[0]
        if len(first) != 1 or self.workers > 1 or first[0] in self._prior[:PRIOR_SINGLES]:
            return
        if len(self._obs) > math.ceil(math.log2(self._n)) + 2 or self._spent() + 2 * self.repeat > self._cap():
            return   # (a budget without room for both runs keeps its last one for the look-for-more run)
        lo, hi = self._bounds(U, 0)
        lo = lo or 0
        rest = len(U) - lo
        if hi is not None or rest < _EARLY_MIN or lo > _EARLY_FIRST * len(U):
            return
        self._early = True      # the look-for-more run follows: two runs if there is nothing more
        try:
            yield from self._test(mask_of(U[:lo + round(_EARLY_SHARE * rest)]), "search")
        finally:
            self._early = False

    def _minimality_gaps(self, S: list[int]) -> list[int]:
        """Return the members s of S whose 1-minimality fact "S minus s is GOOD" is not yet established.

        Used by the deterministic search only: a fact implied by monotonicity from an observed GOOD
        configuration (one whose active set contains S minus s but not s) is established and costs no run.
        (The noise-aware mode names single rules only, each after its own two direct confirmation runs.)
        """
        if len(S) < 2:
            return []
        smask = mask_of(S)
        return [s for s in S if self._know.implied(smask & ~(1 << s)) != "good"]

    def _bad_half(self, U: list[int]):
        """Generator: the first half of U (in order) whose run is BAD, or None."""
        if len(U) < 2:
            return None
        mid = len(U) // 2
        for half in (U[:mid], U[mid:]):
            v = yield from self._test(mask_of(half), "verify")
            if v is Outcome.BAD:
                return half
        return None

    def _bounds(self, order: list[int], F: int) -> tuple[int | None, int | None]:
        """Return (largest m with prefix m implied GOOD, smallest m with prefix m implied BAD)."""
        n = len(order)
        prefix = [F]
        for i in order:
            prefix.append(prefix[-1] | (1 << i))
        know = self._know
        hi = None
        if know.implied(prefix[n]) == "bad":
            a, b = 0, n
            while a < b:
                m = (a + b) // 2
                if know.implied(prefix[m]) == "bad":
                    b = m
                else:
                    a = m + 1
            hi = a
        lo = None
        if know.implied(prefix[0]) == "good":
            a, b = 0, n
            while a < b:
                m = (a + b + 1) // 2
                if know.implied(prefix[m]) == "good":
                    a = m
                else:
                    b = m - 1
            lo = a
        return lo, hi

    def _find_set(self, U: list[int], F: int, prior: Sequence[int] = (), spec: int | None = None,
                  scan: int = SCAN_LATER):
        """Generator: a 1-minimal S within U such that S plus the forced-on F is BAD (None when stuck).

        Preconditions (established by the caller): U+F is BAD and F alone is GOOD. ``scan``: intervals of
        up to this many suspects after a GOOD prefix are tested one suspect at a time (see ``groups``).
        """
        order = list(U)
        lo, hi = self._bounds(order, F)
        lo = 0 if lo is None else lo
        hi = len(order) if hi is None else hi
        all_but_tried = False
        for a in prior[:PRIOR_SINGLES]:
            if a in order[lo:hi]:
                v = yield from self._test((1 << a) | F, "search")
                if v is Outcome.BAD:
                    return [a]
        while hi - lo > 1:
            self._left = hi - lo
            size = hi - lo
            head = mask_of(order[:lo]) | F
            if self.workers > 1:
                pts = self._parallel_points(order, head, lo, hi)
                if pts:
                    cfgs = [mask_of(order[lo:m]) | head for m in pts]
                    vs = yield from self._test_many([(c, "search") for c in cfgs])
                    for m, v in zip(pts, vs):
                        if v is Outcome.BAD:
                            hi = min(hi, m)
                        elif v is Outcome.GOOD:
                            lo = max(lo, m)
                    continue
            elif size <= scan and lo > 0:
                # Test the last few suspects on their own: a BAD answer is also the confirmation. If all
                # are GOOD alone, the culprit needs partners and the prefix split below decides.
                for j, x in enumerate(order[lo:hi]):
                    self._left = hi - lo - j   # the suspects not yet run alone
                    v = yield from self._test((1 << x) | F, "search")
                    if v is Outcome.BAD:
                        return [x]
            seg = order[lo:hi]
            rng = random.Random(f"{self.seed}:{F}:{lo}:{','.join(map(str, seg))}")
            choice = None
            for kind, h in split_choices(size, rng, best_split(size, lo == 0, scan)):
                T = seg[:h] if kind == "head" else seg[-h:] if kind == "tail" else rng.sample(seg, h)
                cfg = head | mask_of(T)
                if not self._known_invalid(cfg):
                    choice = (T, cfg)
                    break
            if choice is None:
                if F == 0 and spec is not None and not all_but_tried:
                    # every split of these suspects is INVALID (a job that cannot run with few rules on): runs with
                    # everything on but one suspect are closer to the baseline. GOOD shows that suspect is in
                    # every culprit set, so every prefix without it is GOOD, which moves the interval's start.
                    all_but_tried = True
                    for x in seg[:_ALL_BUT_TRIES]:
                        if (yield from self._test(spec & ~(1 << x), "search")) is Outcome.GOOD:
                            break
                    new_lo, new_hi = self._bounds(order, F)
                    lo = max(lo, new_lo or 0)
                    hi = min(hi, hi if new_hi is None else new_hi)
                    continue
                self._stuck = seg
                return None
            T, cfg = choice
            v = yield from self._test(cfg, "search")
            if v is Outcome.INVALID:
                continue
            tset = set(T)
            order[lo:hi] = T + [x for x in seg if x not in tset]
            if v is Outcome.BAD:
                hi = lo + len(T)
            else:
                lo = lo + len(T)
        if hi - lo != 1:
            self._stuck = order[lo:hi]
            return None
        r = order[lo]
        self._left = 1
        if lo == 0:
            return [r]
        self._phase = "confirm"
        v = yield from self._test((1 << r) | F, "confirm",
                                  extra=(spec & ~(1 << r)) if spec is not None else None)
        if v is Outcome.BAD:
            return [r]
        if v is Outcome.INVALID:
            # Whether r suffices alone cannot be run; any GOOD superset of {r} proves it does not. Two runs of
            # r with one other rule decide a pair (r's partner can be in at most one of them): rules of the GOOD
            # prefix first, harmless alone, whose runs say the most.
            extra = [x for x in dict.fromkeys(order[lo - 1:lo] + order[:1] + order[lo + 1:lo + 2] + order[-1:])
                     if x != r]
            judged, bad_with = 0, set()
            for x in extra:
                if judged >= 2 or self._know.implied((1 << r) | F) == "good":
                    break
                w = yield from self._test((1 << r) | (1 << x) | F, "confirm")
                judged += w in (Outcome.GOOD, Outcome.BAD)
                if w is Outcome.BAD and self._know.implied((1 << x) | F) == "good":
                    bad_with.add(x)
            if self._know.implied((1 << r) | F) != "good":
                self._unconfirmed.add(r)
                if len(bad_with) >= 2:
                    # one partner is in at most one of those runs; a partner in each (two pairs sharing r) is not
                    # ruled out, so the set stays unconfirmed
                    self._notes.append(f"the run with only {self.candidates[r]} was invalid; runs of it with "
                                       f"{' and with '.join(self.candidates[x] for x in sorted(bad_with))}, each "
                                       "harmless alone, were both BAD: it needs no partner unless it has one in each "
                                       "of them; it is named alone (turning it off fixes the symptom)")
                else:
                    self._notes.append(f"the run with only {self.candidates[r]} was invalid; it is named alone: "
                                       "turning it off fixes the symptom and no run showed it needs a partner")
                return [r]
        if F:
            # A third member (or more) is needed: interactions that large are rare, a single wrong BAD
            # verdict produces the same picture. Repeat the BAD premise once; a disagreement is caught by
            # observe() and switches to the noise-aware mode.
            premise = self._off(mask_of(order[:lo + 1]) | F)
            if len(self._obs.get(premise, ())) == 1:
                yield from self._ask([(premise, "repeat")])
        self._phase = "search"
        sub = yield from self._find_set(order[:lo], F | (1 << r))
        if sub is None:
            return None
        return [r] + sub

    def _parallel_points(self, order: list[int], head: int, lo: int, hi: int) -> list[int]:
        """Return up to ``workers`` prefix lengths in (lo, hi) splitting it evenly, avoiding INVALID ones."""
        size = hi - lo
        p = min(self.workers, size - 1)
        free = [m for m in range(lo + 1, hi) if not self._known_invalid(mask_of(order[lo:m]) | head)]
        pts: list[int] = []
        for j in range(1, p + 1):
            want = lo + size * j / (p + 1)
            best = min((m for m in free if m not in pts), key=lambda m: (abs(m - want), m), default=None)
            if best is not None:
                pts.append(best)
        return sorted(pts)

    # ------------------------------------------------------------------ noise-aware mode
    def _confirm_set(self, culprit: int, found_mask: int = 0) -> list[tuple[int, str]]:
        """The two runs that confirm forward culprit set ``culprit`` (a mask): only it on must be BAD, it off
        (with the sets already named, ``found_mask``) must be GOOD."""
        return [(self._all ^ culprit, "confirm"), (found_mask | culprit, "verify")]

    def _confirm_configs(self, h: int, found_mask: int = 0) -> list[tuple[int, str]]:
        """The two runs that confirm hypothesis ``h``; ``found_mask``: forward culprits already named, kept off."""
        n = self._n
        if h < n:       # forward: only i on must be BAD, i off (with those named) must be GOOD
            return self._confirm_set(1 << h, found_mask)
        if h < 2 * n:   # reverse: only i off must be BAD, only i on must be GOOD
            i = h - n
            return [(1 << i, "confirm"), (self._all ^ (1 << i), "verify")]
        return [(self._all, "reference"), (0, "baseline")]

    def _verdicts(self, off: int) -> list[Outcome]:
        """The decisive (GOOD/BAD) outcomes observed for ``off``, in order."""
        return [o for o in self._obs.get(off, ()) if o in (Outcome.GOOD, Outcome.BAD)]

    def _decided(self, off: int) -> bool:
        return bool(self._verdicts(off))

    def _noisy_main(self):
        self._phase = "gates"
        gates = [(off, role) for off, role in ((self._all, "reference"), (0, "baseline"))
                 if not self._decided(off)]
        if gates:
            yield from self._test_offs(gates, retries=1)
        self._phase = "noisy"
        found: list[tuple[int, float]] = []     # forward culprit sets named so far: (rule mask, posterior)
        self._noisy_named = found               # (a budget stop reports them)
        found_mask = 0
        while True:
            if found and found_mask == self._all:   # every candidate named: none left to look among
                self._notes.append("every candidate is named: no other rule was left to look for")
                return self._noisy_found(found)
            model, rest = self._level_model(found_mask)
            post = model.probabilities()
            top = int(post.argmax())
            p = float(post[top])
            if not found:
                self._noisy_top = (top, p)          # (a budget stop names the most likely hypothesis)
            self._left = self._rules_left(model, rest, post)
            cap = self._cap(len(found))
            m = model.n
            if found and m <= top < model.pair_base and p >= self.confidence:
                # "nothing more" (or a picture no further culprit explains): the culprits found are the answer
                if top != 2 * m:
                    self._notes.append("after the culprits found, no further single culprit explains the runs")
                return self._noisy_found(found)
            if p >= self.confidence:
                g = rest[top] if top < m else top     # a rule, or (before any is named) another hypothesis
                if top < m:
                    culprit = 1 << rest[top]
                elif top >= model.pair_base:   # an interaction: bad only while both are on
                    a, b = model.pair(top)
                    culprit = (1 << rest[a]) | (1 << rest[b])
                else:
                    culprit = 0
                missing = [(off, role) for off, role in
                           (self._confirm_set(culprit, found_mask) if culprit else self._confirm_configs(g))
                           # (a confirmation run is tried twice: in a noisy job one skip may be a passing one)
                           if not self._decided(off) and not self._known_invalid_off(off, retries=1)]
                if missing:
                    # the engine's own cap yields to a leading hypothesis's confirmation runs; --max-runs does not
                    room = cap - self._spent() + (len(missing) if self.max_executions is None else 0)
                    if len(missing) > room:
                        self._short_of_confirmation = True   # no room for its confirmation runs: not named
                        raise _OutOfBudget
                    self._phase = "confirm"
                    yield missing[:self.workers]
                    continue
                if not found and self._n <= g < 2 * self._n:
                    # bad while off: the run with only it on (every other candidate off) must be GOOD, seen twice
                    # (a majority of up to three runs); BAD there means another rule is bad while off too
                    only_on = self._all ^ (1 << (g - self._n))
                    decided = self._verdicts(only_on)
                    bad = decided.count(Outcome.BAD)
                    if 0 < len(decided) < 3 and max(bad, len(decided) - bad) < 2 and self._spent() < cap:
                        self._phase = "verify"
                        yield [(only_on, "repeat")]
                        continue
                    if 2 * bad > len(decided):
                        name = self.candidates[g - self._n]
                        return self._result("inconclusive", [], f"{name} is bad while turned off (p={p:.3f}), but "
                                            f"with only it on the job was still bad ({bad} of {len(decided)} runs): "
                                            "another rule is bad while off too, which the noise-aware mode does not "
                                            "search. Rerun without --flaky, or with --rules leaving "
                                            f"{name} out.")
                if not found and not culprit:
                    if self._n <= g < 2 * self._n and not self._decided(1 << (g - self._n)):
                        # bad while off, and the run with only it off could never be judged: nothing tells it from
                        # it with a partner (both off needed), as for a rule bad while on: named at 0.5, with why
                        name = self.candidates[g - self._n]
                        self._notes.append(f"the run with only {name} off was invalid; named all the same: turning "
                                           "it on fixes the symptom and no run showed it needs a partner")
                        return self._noisy_result(g, min(p, 0.5), named=True)
                    return self._noisy_result(g, p)
                names = " and ".join(self.candidates[i] for i in bits_of(culprit))
                if not self._decided(self._all ^ culprit):
                    # its run with only it on could never be judged: nothing tells it from it with a partner (the
                    # posterior's lead is the prior's), as in the deterministic mode: named at 0.5, with why
                    p = min(p, 0.5)
                    note = (f"the run with only {names} on was invalid; named as the set all the same: turning it "
                            "off fixes the symptom and no run showed it needs a partner")
                    if note not in self._notes:
                        self._notes.append(note)
                # Go's loop: with this culprit off, is the job still bad? Only then look for another one. The
                # verdict there must be seen twice (a majority of up to three runs), GOOD as much as BAD.
                lfm = found_mask | culprit
                decided = self._verdicts(lfm)
                bad = decided.count(Outcome.BAD)
                good = len(decided) - bad
                # either way: a single flipped GOOD there would name one culprit of two and end the search
                if 0 < len(decided) < 3 and max(bad, good) < 2 and self._spent() < cap:
                    self._phase = "verify"
                    # for progress: the sets found with this one, the rules not found, the runs left if none
                    self._left = self._n - popcount(lfm)
                    self._noisy_verify = (len(found) + 1, max(1, 2 - good))
                    yield [(lfm, "repeat")]
                    self._noisy_verify = None
                    continue
                if max(bad, good) < 2:
                    self._notes.append(f"the run with {names} off was not judged by two agreeing runs "
                                       "(run budget, or invalid runs): a further culprit is not ruled out")
                if good >= 2 and not bad:   # seen GOOD, and only GOOD: nothing more
                    return self._noisy_found(found + [(culprit, p)])
                # otherwise the search goes on with it off, where "nothing more" must reach the confidence too: two
                # GOOD runs of three leave a second culprit at 20 % when one verdict in five flips
                found.append((culprit, p))
                found_mask |= culprit
                if bad >= 2 and bad > good:
                    self._notes.append(f"with {names} off the job was still bad: looking for more")
                continue
            if self._spent() >= cap:
                if found:
                    self._notes.append("stopped at the run budget before ruling out more culprits")
                    self._budget_stopped = True
                    return self._noisy_found(found)
                self._budget_stopped = True
                return self._noisy_result(top, p, exhausted=True)
            picks: list[tuple[int, str]] = []
            for _q, on in model.queries(post, count=self.workers):
                off = self._all ^ mask_of(rest[j] for j in on)
                if self._known_invalid_off(off) or any(off == o for o, _ in picks):
                    continue
                picks.append((off, "repeat" if off in self._obs else "search"))
                if len(picks) >= min(self.workers, cap - self._spent()):
                    break
            if not picks:
                if found:
                    return self._noisy_found(found)
                return self._noisy_result(top, p, exhausted=True)
            self._phase = "noisy"
            yield picks

    @staticmethod
    def _rules_left(model: Posterior, rest: list[int], post) -> int:
        """How many candidate rules a hypothesis still holding more than 1 % of the posterior names (a single
        rule either way, or a member of a pair)."""
        m = model.n
        rules = set()
        for h in map(int, (post > 0.01).nonzero()[0]):
            if h < 2 * m:
                rules.add(rest[h % m])
            elif h >= model.pair_base:
                rules.update(rest[i] for i in model.pair(h))
        return len(rules)

    def _level_model(self, found_mask: int) -> tuple[Posterior, list[int]]:
        """The posterior to search with: the running one before any culprit is named; after that, one over the
        remaining rules built from the runs that had every named culprit off (its "nothing wrong" hypothesis
        is "no further culprit"). Returns (posterior, the rule index of each of its candidates)."""
        if not found_mask:
            return self._post, list(range(self._n))
        rest = [i for i in range(self._n) if not (found_mask >> i) & 1]
        where = {g: j for j, g in enumerate(rest)}
        model = Posterior(len(rest))
        for off, outcome in self._history:
            if outcome in (Outcome.GOOD, Outcome.BAD) and off & found_mask == found_mask:
                model.add([where[g] for g in bits_of(off) if g in where], outcome is Outcome.BAD)
        return model, rest

    def _known_invalid_off(self, off: int, retries: int = 0) -> bool:
        """No decisive run, and INVALID more than ``retries`` times or UNKNOWN as often as the deterministic mode
        tolerates."""
        obs = self._obs.get(off, ())
        if not obs or Outcome.GOOD in obs or Outcome.BAD in obs:
            return False
        return obs.count(Outcome.INVALID) > retries or obs.count(Outcome.UNKNOWN) >= _UNKNOWN_REPEATS * self.repeat

    # ------------------------------------------------------------------ results
    def _result(self, status: str, culprits: list[Culprit], message: str,
                boundary: tuple[frozenset[str], frozenset[str]] | None = None) -> SearchResult:
        return SearchResult(status=status, culprits=culprits, executions=self.executions,
                            bound=bound_for_sets(self._n, [len(c.rules) for c in culprits]), message=message,
                            boundary=boundary,
                            notes=list(self._notes), budget_stopped=self._budget_stopped)

    def _det_result(self) -> SearchResult:
        found = self._found
        if not found:
            if self._stuck:
                # the first 8 named, and how many more: the count alone says how far the search got
                names = ", ".join([self.candidates[i] for i in self._stuck[:8]]
                                  + ([f"+{len(self._stuck) - 8} more"] if len(self._stuck) > 8 else []))
                return self._result("inconclusive", [], f"Too many invalid runs to separate the last "
                                    f"{len(self._stuck)} suspects ({names}).")
            return self._result("inconclusive", [], "No culprit set could be isolated.")
        culprits = [Culprit(rules=tuple(self.candidates[i] for i in S), confidence=self._set_confidence(S),
                            direction=self._direction or "on") for S in found]
        if self._direction == "on":
            # the bad side is a run with the sets found before the last one off; when the early look made that
            # run implied rather than run, another set's, else the baseline (then the sides differ by all sets)
            union = mask_of(i for S in found for i in S)
            sides = [union & ~mask_of(S) for S in reversed(found)]
            bad = next((off for off in sides if self._judge(off)[0] is Outcome.BAD), 0)
            boundary = (self._names(union), self._names(bad))
        else:
            boundary = (frozenset(), self._names(mask_of(found[0])))
        parts = ["+".join(c.rules) for c in culprits]
        kind = "turned on" if self._direction == "on" else "turned off"
        target = bound_for_sets(self._n, [len(s) for s in found])
        # P workers run P configurations a round: fewer rounds, more runs than one at a time; --repeat N runs
        # each configuration N times, and the runs counted here are all of them
        msg = (f"{len(culprits)} culprit set(s) in {self.executions} runs "
               f"(target {target_text(target, self.workers, self.repeat)}): {'; '.join(parts)} "
               f"(bad while {kind}).")
        if self._stuck:
            self._notes.append(f"{len(self._stuck)} suspects could not be separated (invalid runs)")
        return self._result("found", culprits, msg, boundary)

    def _set_confidence(self, S: list[int]) -> float:
        """1.0 for a set confirmed by its dedicated run, 0.5 when that run was INVALID (see the notes)."""
        return 0.5 if set(S) & self._unconfirmed else 1.0

    def _budget_result(self) -> SearchResult:
        self._budget_stopped = True
        if self._noisy and self._noisy_named:
            self._notes.append("stopped at the run budget before ruling out more culprits")
            return self._noisy_found(self._noisy_named)
        if self._noisy and self._noisy_top is not None:
            top, p = self._noisy_top
            if self._short_of_confirmation:
                return self._result("inconclusive", [], f"{self._hyp_name(top)} leads (p={p:.3f}), but the run "
                                    f"budget ({self._cap()}) left no room for the runs that confirm it; nothing "
                                    "is named without them.")
            return self._noisy_result(top, p, exhausted=True)
        if self._found:
            self._notes.append("stopped at max_executions while looking for more culprits")
            return self._det_result()
        return self._result("inconclusive", [], f"Stopped at the execution budget ({self._cap()}) "
                            "before a culprit was isolated.")

    def _noisy_found(self, found: list[tuple[int, float]]) -> SearchResult:
        """The result of the noise-aware mode once one or more forward culprit sets (masks) were named, in
        order."""
        culprits = [Culprit(rules=tuple(self.candidates[i] for i in bits_of(s)), confidence=round(p, 4),
                            direction="on") for s, p in found]
        union = 0
        for s, _ in found:
            union |= s
        boundary = (self._names(union), self._names(union & ~found[-1][0]))
        if len(found) == 1:
            c, p = culprits[0], found[0][1]
            what = (f"{c.rules[0]} is the culprit" if len(c.rules) == 1 else
                    f"{' + '.join(c.rules)} together are the culprit (an interaction: either one off fixes it)")
            return self._result("found", culprits, f"{what} (bad while turned on) with posterior {p:.3f} after "
                                f"{self.executions} runs.", boundary)
        names = ", ".join(f"{'+'.join(c.rules)} ({p:.3f})" for c, (_, p) in zip(culprits, found))
        return self._result("found", culprits, f"{len(found)} culprits (bad while turned on), with their "
                            f"posteriors: {names}; after {self.executions} runs.", boundary)

    def _noisy_result(self, top: int, p: float, exhausted: bool = False, named: bool = False) -> SearchResult:
        n = self._n
        if p < self.confidence and not named:   # (``named``: a rule named below it, with a note saying why)
            best = self._hyp_name(top)
            # three decimals: 0.949 must not read as the 0.95 it did not reach
            return self._result("inconclusive", [], f"No hypothesis reached {self.confidence:.2f} within "
                                f"{self.executions} runs; most likely: {best} (p={p:.3f}).")
        if top == 2 * n:
            return self._result("not_reproduced", [], f"The symptom does not reproduce (p={p:.2f}).")
        if top == 2 * n + 1:
            return self._result("not_fusion", [], f"The symptom is there with all candidate rules off "
                                f"(p={p:.2f}): not caused by the switchable fusion rules.")
        if top >= self._post.pair_base:
            a, b = self._post.pair(top)
            return self._noisy_found([((1 << a) | (1 << b), p)])
        i = top if top < n else top - n
        direction = "on" if top < n else "off"
        name = self.candidates[i]
        boundary = ((frozenset({name}), frozenset()) if direction == "on"
                    else (frozenset(), frozenset({name})))
        return self._result("found", [Culprit(rules=(name,), confidence=round(p, 4), direction=direction)],
                            f"{name} is the culprit (bad while turned {direction}) with posterior {p:.3f} "
                            f"after {self.executions} runs.", boundary)

    def _hyp_name(self, h: int) -> str:
        n = self._n
        if h >= self._post.pair_base:
            a, b = self._post.pair(h)
            return f"{self.candidates[a]} + {self.candidates[b]} (together)"
        if h < n:
            return self.candidates[h]
        if h < 2 * n:
            return f"{self.candidates[h - n]} (off)"
        return "nothing wrong" if h == 2 * n else "not fusion"
