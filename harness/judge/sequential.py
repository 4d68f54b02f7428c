"""Sequential tests whose errors hold at whatever batch of seeds they stop.

A claim's test asks of a run's seeds: are they as good as a faithful run
(H0: the mean per-seed value, or the success rate, is at least `level`), or
worse by the regression that matters (H1: at most `level - delta`)? Values
here are on the unit scale, higher is better (harness.judge.levels maps a
metric's units and direction onto it).

H0's level may be a lower confidence bound on the faithful level and H1's
is then measured from the faithful estimate (`target`): a regressed run
is one `delta` below what faithful runs reach, not below the bound.

Two e-processes are kept, one against each hypothesis, each a nonnegative
supermartingale under the hypothesis it tests, so by Ville's inequality it
ever reaches 1/e with probability at most e, however many seeds are added
and wherever the test looks:

- **FAIL** when the evidence against H0 reaches `1/alpha`: a faithful run
  fails with probability at most `alpha`;
- **PASS** when the evidence against H1 reaches `1/beta` (`beta = 1 -
  power`); for a mean this side is a Gaussian likelihood ratio at the
  reference's spread, not a bounded bet, so its error is what
  harness.judge.errors measures rather than a guarantee;
- **INCONCLUSIVE** when neither has by the seed cap: never a FAIL.

For a success rate (each seed 0 or 1) the evidence is Wald's likelihood
ratio (a Bernoulli SPRT): of `level - delta` against `level` to FAIL, of
`target` against `target - delta` to PASS. For a
bounded mean it is a betting e-process (Waudby-Smith and Ramdas,
arXiv:2010.09686): each seed multiplies the wealth by `1 + lam (m0 - x)`
(against H0), with a bet `lam` fixed
before the seeds are seen, sized for a gap of `delta` at the spread the
reference showed (the Kelly bet of a Gaussian, `delta / (delta^2 + s^2)`)
and capped at 90% of the largest bet the bounds allow, so one seed never
stakes the whole wealth. A fixed bet is predictable, so the guarantee holds
for any spread; the spread only sizes the bet, and so the power.

Everything is numpy over a leading batch of simulated tests: the judge
calls it with one row, harness.judge.errors with thousands.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"
VERDICTS = (PASS, FAIL, INCONCLUSIVE)
KINDS = ("mean", "rate")
# The largest share of the wealth one seed may stake (of what the bounds allow).
BET_CAP = 0.9
# A success rate's alternative is kept above 0 (a likelihood ratio of a rate of 0 is infinite).
MIN_RATE = 1e-3


class Test(NamedTuple):
    """A claim's sequential test, on the unit scale (higher is better).
    `level` and `spread` may be arrays (one test per row) for simulation."""

    kind: str  # "mean" (values in [0, 1]) or "rate" (values 0 or 1)
    level: np.ndarray | float  # H0: at least this (the faithful level, or a lower bound on it)
    delta: float  # the regression that matters
    alpha: float  # the chance of failing a faithful run (of this test alone)
    beta: float  # the chance of passing a run regressed by delta: 1 - power
    spread: np.ndarray | float = 0.0  # the per-seed standard deviation the bets are sized for (means)
    # The faithful level's best estimate; H1 is "at most target - delta". None: `level`.
    target: np.ndarray | float | None = None


class Decision(NamedTuple):
    """Where a test stopped; arrays with one entry per row of values."""

    verdict: np.ndarray  # PASS, FAIL or INCONCLUSIVE
    seeds: np.ndarray  # seeds used when it stopped (all of them when inconclusive)
    against_faithful: np.ndarray  # log of the evidence against H0 when it stopped (FAIL at log(1/alpha))
    against_regressed: np.ndarray  # log of the evidence against H1 (PASS at log(1/beta))


def increments(test: Test, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each seed's log-evidence against H0 and against H1: `[rows, seeds]`
    from values `[rows, seeds]` on the unit scale."""
    values = np.asarray(values, dtype=np.float64)

    def per_row(x) -> np.ndarray:
        return np.broadcast_to(np.asarray(x, dtype=np.float64), values.shape[:-1])[..., None]

    level = per_row(test.level)
    target = level if test.target is None else per_row(test.target)
    if test.kind == "rate":
        return _log_ratio(values, level - test.delta, level), _log_ratio(values, target, target - test.delta)
    if test.kind != "mean":
        raise ValueError(f"unknown test kind {test.kind!r}: one of {', '.join(KINDS)}")
    spread = per_row(test.spread)
    m0 = np.clip(level, 0.0, 1.0)
    m1 = np.clip(target - test.delta, 0.0, 1.0)
    # Bets sized for the gap a regressed run shows: below H0's level by what is left of delta once the
    # level's own margin under the faithful estimate is taken (at least a quarter of delta), and above
    # H1's level by delta.
    gap = np.maximum(m0 - m1, test.delta / 4)
    with np.errstate(divide="ignore"):
        lam_fail = np.minimum(gap / (gap**2 + spread**2), BET_CAP / np.maximum(1 - m0, 1e-12))
    # PASS: the Gaussian likelihood ratio of the faithful estimate against H1 at the reference's spread
    # (at least a quarter of delta): bounded bets against H1 would be capped by the range's far end and
    # keep faithful runs waiting; this side's error, a regressed run passing, is 1 - power, measured.
    sigma2 = np.maximum(spread, test.delta / 4) ** 2
    against_regressed = test.delta / sigma2 * (values - (m1 + test.delta / 2))
    return np.log1p(lam_fail * (m0 - values)), against_regressed


def _log_ratio(values: np.ndarray, top: np.ndarray, bottom: np.ndarray) -> np.ndarray:
    """Each seed's log-likelihood ratio of success rate `top` against rate
    `bottom`: its running sum is a nonnegative supermartingale whenever the
    true rate is at or beyond `bottom`, on the side away from `top`."""
    bottom = np.clip(bottom, MIN_RATE, 1 - 1e-12)
    top = np.clip(top, MIN_RATE * 0.5, 1 - 1e-12)
    return values * np.log(top / bottom) + (1 - values) * np.log((1 - top) / (1 - bottom))


def decide(test: Test, values: np.ndarray, batch: int) -> Decision:
    """The test run over `values` (`[seeds]` or `[rows, seeds]`, unit scale,
    in the order the seeds were run), looked at after every `batch` seeds
    and after the last: the first look where either bound is reached
    decides; none reached by the last seed is INCONCLUSIVE."""
    values = np.asarray(values, dtype=np.float64)
    single = values.ndim == 1
    values = np.atleast_2d(values)
    rows, seeds = values.shape
    if seeds == 0 or batch < 1:
        raise ValueError("a sequential test needs at least one seed and a batch of at least one")
    against_h0, against_h1 = (np.cumsum(x, axis=-1) for x in increments(test, values))
    looks = np.unique(np.r_[np.arange(batch, seeds + 1, batch), seeds]) - 1  # indexes after each batch
    fail = against_h0[:, looks] >= np.log(1 / test.alpha)
    passed = against_h1[:, looks] >= np.log(1 / test.beta)
    decided = fail | passed
    first = np.where(decided.any(axis=1), decided.argmax(axis=1), len(looks) - 1)
    at = looks[first]
    row = np.arange(rows)
    # A look where both bounds are reached (rare, possible with a wide gap) fails: a FAIL is never
    # made more likely than alpha allows, since it still needs the evidence against H0.
    verdict = np.where(fail[row, first], FAIL, np.where(passed[row, first], PASS, INCONCLUSIVE))
    out = Decision(verdict, at + 1, against_h0[row, at], against_h1[row, at])
    return Decision(*(x[0] for x in out)) if single else out
