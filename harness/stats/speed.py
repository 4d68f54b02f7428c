"""The speed test: every comparison of two sides' speed (a bench entry
against the project's other commit, the project against a peer, one JAX
line against another) asks one question and answers it one way.

The data are **rounds**. In each round both sides do the same counted work,
one after the other, the side that goes first alternating (`first`), so
that what the machine does in that minute (a neighbour on a core, a clock
change) falls on both. A round's observation is the log of its time ratio,
`d = ln(t_candidate / t_baseline)` per unit of work: above 0, the candidate
was slower in that round. Rates give the same: `d = ln(rate_baseline /
rate_candidate)`.

The question is asked of `x` (`slower_by`, per comparison): is the
candidate slower, or not slower by x? Two bets on each round's sign answer it:

- **against "not slower"**: payoff +1 when a round's candidate was slower,
  -1 when faster. Whenever a round is at least as likely faster as slower,
  given the rounds before it (a candidate not slower, in rounds that are
  independent draws), the payoff's mean is at most 0 and the wealth is a
  nonnegative supermartingale: by Ville's inequality it ever reaches
  `1/alpha` with probability at most alpha, at whatever round the test
  stops. **SLOWER** (a verdict's FAIL) is wrong at most `alpha` of the time.
- **against "slower by x"**: payoff +1 when a round's time ratio is below
  `1 + x`, -1 above. A candidate slower by x or more reaches `1/beta` with
  probability at most beta: **NOT SLOWER** (PASS) is wrong about a slowdown
  of x at most `beta` of the time, so P(SLOWER or UNDECIDED | slower by x)
  is at least 1 - beta (P(SLOWER) alone is what the cap leaves: measured
  in docs/guides/bench.md).
- Whichever bound is reached first decides; **UNDECIDED** when neither is
  at the cap. A slowdown between 0 and x may read either way: the nearer
  end wins more often (with little noise, NOT SLOWER up to close to x).

Only each round's sign enters, so no distribution is assumed: a round that
a burst of the neighbour's work made ten times slower counts as one round.
The price is the bound on what one round can win: about ln 2, so SLOWER
needs at least ln(1/alpha) / ln(1.9) rounds plus the stakes' mixture, and
NOT SLOWER ln(1/beta) / ln(1.9) (`rounds_to`). Stakes are a fixed grid,
mixed, so nothing is estimated from the rounds it bets on.

A run of many comparisons (a bench's entries) splits its alpha over them
(`alpha_each`), so the chance that any comparison of the run reads SLOWER
when none is slower is at most the run's alpha.

The ratio shown is the candidate's speed over the baseline's, the median
over rounds, with a distribution-free 95% interval for that median from the
rounds' order statistics (for reading; the verdict is the test's).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from harness.stats import verdict
from harness.stats.sequential import log_wealth

SLOWER, NOT_SLOWER, UNDECIDED = "slower", "not slower", "undecided"
OUTCOMES = (SLOWER, NOT_SLOWER, UNDECIDED)
WORDS = {SLOWER: verdict.FAIL, NOT_SLOWER: verdict.PASS, UNDECIDED: verdict.INCONCLUSIVE}

SLOWER_BY = 0.10  # x: the slowdown a comparison is asked about, unless an entry says otherwise
ALPHA = 0.05  # a run's chance of any SLOWER when nothing is slower, over all its comparisons
BETA = 0.10  # a comparison's chance of NOT SLOWER when it is slower by x
# The stakes mixed: fractions of the wealth bet on each round's sign.
STAKES = (0.2, 0.4, 0.6, 0.8, 0.9)
INTERVAL = 0.95  # the ratio's interval (order statistics of the rounds)


class SpeedTest(NamedTuple):
    """One comparison's test."""

    slower_by: float = SLOWER_BY  # x: a candidate slower by this share is to be caught
    alpha: float = ALPHA  # this comparison's chance of SLOWER when not slower (its share of a run's)
    beta: float = BETA  # its chance of NOT SLOWER when slower by x
    cap: int = 40  # rounds at most: UNDECIDED after them

    @property
    def log_slower_by(self) -> float:
        """x as a log time ratio: ln(1 + x)."""
        return math.log1p(self.slower_by)

    def check(self) -> SpeedTest:
        if not 0 < self.slower_by < 10:
            raise ValueError(f"slower_by must be above 0 (a share: 0.1 is 10%), not {self.slower_by}")
        for name in ("alpha", "beta"):
            if not 0 < getattr(self, name) < 1:
                raise ValueError(f"{name} must be between 0 and 1, not {getattr(self, name)}")
        if self.cap < 1:
            raise ValueError(f"cap must be at least 1 round, not {self.cap}")
        return self


def rounds_to(error: float) -> int:
    """The fewest rounds that can reach `1/error`: every one of them won."""
    n = 1
    while _log_mean_wealth(n) < math.log(1 / error):
        n += 1
    return n


def _log_mean_wealth(wins: int) -> float:
    return float(np.log(np.mean([(1 + s) ** wins for s in STAKES])))


def alpha_each(comparisons: int, alpha: float = ALPHA) -> float:
    """Each of `comparisons` tests' share of a run's alpha (Bonferroni)."""
    return alpha / max(1, comparisons)


class SpeedVerdict(NamedTuple):
    """What one comparison decided."""

    outcome: str  # SLOWER, NOT_SLOWER or UNDECIDED
    ratio: float  # the candidate's speed over the baseline's: the median round's (below 1: slower)
    low: float  # the ratio's 95% interval (the rounds' order statistics)
    high: float
    rounds: int  # rounds used when it stopped (all of them when undecided)
    evidence_slower: float  # log-evidence against "not slower" when it stopped (SLOWER at ln 1/alpha)
    evidence_not_slower: float  # against "slower by x" (NOT SLOWER at ln 1/beta)
    test: SpeedTest

    @property
    def word(self) -> str:
        """The verdict word (harness.stats.verdict): fail, pass or inconclusive."""
        return WORDS[self.outcome]

    def label(self, what: str = "") -> str:
        """`0.93x [0.90-0.96] SLOWER`, `... not slower by 10%` for a table's column."""
        decided = {
            SLOWER: f"SLOWER{what}",
            NOT_SLOWER: f"not slower{what} by {self.test.slower_by:.0%}",
            UNDECIDED: f"undecided{what} after {self.rounds} rounds",
        }[self.outcome]
        return f"{self.ratio:.2f}x [{self.low:.2f}-{self.high:.2f}] {decided}"

    def as_dict(self) -> dict:
        """For JSON, MLflow tags and params: plain values."""
        return {
            "outcome": self.outcome,
            "verdict": self.word,
            "ratio": self.ratio,
            "interval": [self.low, self.high],
            "rounds": self.rounds,
            "evidence_slower": self.evidence_slower,
            "evidence_not_slower": self.evidence_not_slower,
            "slower_by": self.test.slower_by,
            "alpha": self.test.alpha,
            "beta": self.test.beta,
            "cap": self.test.cap,
        }


def log_ratios(baseline: Sequence[float], candidate: Sequence[float], *, rates: bool = False) -> np.ndarray:
    """Each round's `ln(t_candidate / t_baseline)` from its seconds (per the
    same work), or from its rates with `rates` (higher is faster)."""
    a, b = np.asarray(baseline, dtype=np.float64), np.asarray(candidate, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"rounds must pair up: {a.shape} baseline against {b.shape} candidate")
    if np.any(~np.isfinite(a)) or np.any(~np.isfinite(b)) or np.any(a <= 0) or np.any(b <= 0):
        raise ValueError("every round's figure must be a positive number")
    return np.log(a / b) if rates else np.log(b / a)


def evidence(d: np.ndarray, test: SpeedTest) -> tuple[np.ndarray, np.ndarray]:
    """The log-evidence against "not slower" and against "slower by x"
    after each round, each `[rows, rounds]`, of log ratios `[rows, rounds]`."""
    d = np.atleast_2d(np.asarray(d, dtype=np.float64))
    rows = d.shape[0]
    stakes = np.broadcast_to(np.asarray(STAKES), (rows, len(STAKES)))
    return log_wealth((np.sign(d), stakes)), log_wealth((np.sign(test.log_slower_by - d), stakes))


def stops(d: np.ndarray, test: SpeedTest) -> tuple[np.ndarray, np.ndarray]:
    """Where each row of log ratios `[rows, rounds]` stops: its outcome and
    its rounds used, looked at after every round (numpy over rows: one
    comparison, or thousands simulated)."""
    d = np.atleast_2d(np.asarray(d, dtype=np.float64))[:, : test.cap]
    rounds = d.shape[1]
    slower, not_slower = evidence(d, test)
    never = rounds + 1

    def first(hit: np.ndarray) -> np.ndarray:
        return np.where(hit.any(axis=1), hit.argmax(axis=1) + 1, never)

    fail = first(slower >= math.log(1 / test.alpha))
    passed = first(not_slower >= math.log(1 / test.beta))
    outcome = np.where(fail < passed, SLOWER, np.where(passed < never, NOT_SLOWER, UNDECIDED))
    return outcome, np.minimum(np.minimum(fail, passed), rounds)


def decide(d: Sequence[float] | np.ndarray, test: SpeedTest) -> SpeedVerdict:
    """The verdict on one comparison's rounds (`log_ratios`): it stops at
    the first round where either side's evidence reaches its bound, at most
    `test.cap` rounds."""
    test = test.check()
    d = np.asarray(d, dtype=np.float64)[: test.cap]
    if d.size == 0:
        raise ValueError("a speed comparison needs at least one round")
    outcome, stop = (a[0] for a in stops(d[None, :], test))
    slower, not_slower = (e[0] for e in evidence(d[None, :stop], test))
    ratio, low, high = speed_ratio(d[:stop])
    return SpeedVerdict(str(outcome), ratio, low, high, int(stop), float(slower[-1]), float(not_slower[-1]), test)


def speed_ratio(d: np.ndarray) -> tuple[float, float, float]:
    """The candidate's speed over the baseline's, `exp(-median d)`, and a
    distribution-free INTERVAL interval for it from the order statistics
    (the whole range of the rounds where they are too few for one)."""
    from scipy import stats

    ordered = np.sort(np.asarray(d, dtype=np.float64))
    n = ordered.size
    k = int(stats.binom.ppf((1 - INTERVAL) / 2, n, 0.5))  # rounds below the interval's low end
    if k >= 1 and stats.binom.cdf(k - 1, n, 0.5) <= (1 - INTERVAL) / 2:
        lo, hi = ordered[k - 1], ordered[n - k]
    else:
        lo, hi = ordered[0], ordered[-1]
    return float(np.exp(-np.median(ordered))), float(np.exp(-hi)), float(np.exp(-lo))


def first(round_index: int) -> str:
    """Which side goes first in a round: the baseline in even rounds, the
    candidate in odd ones."""
    return "baseline" if round_index % 2 == 0 else "candidate"


def run_rounds(
    one_round: Callable[[int], tuple[float, float]],
    test: SpeedTest,
    *,
    rates: bool = False,
    done: Sequence[tuple[float, float]] = (),
) -> tuple[SpeedVerdict, list[tuple[float, float]]]:
    """Rounds until the test decides or its cap: `one_round(i)` runs round
    `i` (its side `first(i)` first) and returns (baseline, candidate)
    seconds, or rates with `rates`. `done`: rounds already run, counted
    first. Returns the verdict and every round's pair."""
    pairs = list(done)
    while True:
        if pairs:
            result = decide(log_ratios(*zip(*pairs, strict=True), rates=rates), test)
            if result.outcome != UNDECIDED or len(pairs) >= test.cap:
                return result, pairs
        pairs.append(tuple(one_round(len(pairs))))
