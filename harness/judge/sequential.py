"""Sequential tests whose errors hold at whatever batch of seeds they stop.

A claim's test asks of a run's seeds: are they as good as a faithful run
(H0: the mean per-seed value, or the success rate, is at least `level`), or
worse by the regression that matters (H1: at most `target - delta`, where
`target` is the faithful level's best estimate)? Values here are on the
unit scale, higher is better (harness.judge.levels maps a metric's units
and direction onto it).

The test looks after every batch of seeds, at most `looks` times (planned
before the first seed: the seed cap over the batch size), and stops at the
first look where either side's evidence reaches its bound:

- **FAIL** when the evidence against H0 reaches `1/alpha`: a faithful run
  fails with probability at most `alpha`, whichever look it stops at;
- **PASS** when the evidence against H1 reaches `1/beta` (`beta = 1 -
  power`): a run regressed by delta passes with probability at most `beta`;
- **INCONCLUSIVE** when neither has by the last seed: never a FAIL.

For a **mean** the evidence is a group-sequential two-sample t-test: at a
look with `n` seeds, Student's t of the run's mean against the faithful
seeds' (`reference_seeds` of them, with their `spread`), the two samples'
variances pooled, so the faithful seeds' own uncertainty is in the test
and the run's seeds show a spread the reference missed. Each look is
tested at `alpha / looks` (Bonferroni): the evidence is `1 / (looks * p)`,
p the one-sided p-value, and by the union bound a faithful run fails at
any of the looks with probability at most `alpha`. PASS is the same test
of the run against `target - delta` at `beta / looks`. A stated level
(`reference_seeds` 0) is a one-sample t-test on the run's seeds. The
pooled spread is at least a quarter of delta: faithful seeds that all
agree (every one at 1000, or never losing) do not prove the next one will.
The guarantee is Student's (normal seeds); skewed or bimodal returns can
break it, and harness.judge.errors measures the real rates by resampling
the faithful seeds.

For a **success rate** (each seed 0 or 1) against the faithful seeds, the
evidence to FAIL is a group-sequential Fisher exact test: at a look with
`n` seeds, the one-sided p-value of the run's successes given both
samples' (the hypergeometric chance of so few), tested at `alpha / looks`
as a mean's t-test is. It is exact, whatever the faithful rate: the test
conditions on the successes, so the faithful seeds' own draw is in it.
Against a stated level (`reference_seeds` 0) it is Wald's likelihood ratio
(a Bernoulli SPRT) of `level - delta` against `level`. To PASS, either
way, it is the likelihood ratio of `target` against `target - delta`; a
likelihood ratio is a nonnegative supermartingale under its hypothesis, so
by Ville's inequality it ever reaches `1/e` with probability at most `e`,
however many looks are taken.

Everything is numpy over a leading batch of simulated tests: the judge
calls it with one row, harness.judge.errors with thousands.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"
VERDICTS = (PASS, FAIL, INCONCLUSIVE)
KINDS = ("mean", "rate")
# A success rate's alternative is kept above 0 (a likelihood ratio of a rate of 0 is infinite).
MIN_RATE = 1e-3
# The smallest p-value kept (its log is the evidence): beyond it the evidence is past any bound.
MIN_P = 1e-300


class Test(NamedTuple):
    """A claim's sequential test, on the unit scale (higher is better).
    `level`, `spread` and `target` may be arrays (one test per row) for
    simulation."""

    kind: str  # "mean" (values in [0, 1]) or "rate" (values 0 or 1)
    level: np.ndarray | float  # H0: at least this (the faithful seeds' mean or rate, or a stated level)
    delta: float  # the regression that matters
    alpha: float  # the chance of failing a faithful run (of this test alone)
    beta: float  # the chance of passing a run regressed by delta: 1 - power
    spread: np.ndarray | float = 0.0  # the faithful seeds' standard deviation (a mean's)
    # The faithful level's best estimate; H1 is "at most target - delta". None: `level`.
    target: np.ndarray | float | None = None
    reference_seeds: int = 0  # the faithful seeds the level (and a mean's spread) come from; 0: a stated level
    looks: int = 1  # the most looks the test may take (alpha is split over them, but for a stated rate's SPRT)


class Decision(NamedTuple):
    """Where a test stopped; arrays with one entry per row of values."""

    verdict: np.ndarray  # PASS, FAIL or INCONCLUSIVE
    seeds: np.ndarray  # seeds used when it stopped (all of them when inconclusive)
    against_faithful: np.ndarray  # log of the evidence against H0 when it stopped (FAIL at log(1/alpha))
    against_regressed: np.ndarray  # log of the evidence against H1 (PASS at log(1/beta))


def _rows(x, shape: tuple[int, ...]) -> np.ndarray:
    return np.broadcast_to(np.asarray(x, dtype=np.float64), shape)[..., None]


def _t_evidence(
    test: Test, values: np.ndarray, at: np.ndarray, level: np.ndarray, target: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """A mean's log-evidence against H0 and against H1 at each look:
    `[rows, looks]` from values `[rows, seeds]`, the looks' last seed
    indexes `at` and each row's `level` and `target` (`[rows, 1]`)."""
    from scipy import special  # here: a command that judges no test does not pay for its import

    spread = _rows(test.spread, values.shape[:-1])
    n = (at + 1).astype(np.float64)
    total = np.cumsum(values, axis=-1)[:, at]
    mean = total / n
    squares = np.cumsum((values - values[:, :1]) ** 2, axis=-1)[:, at]  # about the first seed, for precision
    deviations = np.maximum(squares - (mean - values[:, :1]) ** 2 * n, 0.0)  # the run's sum of squared deviations
    faithful = test.reference_seeds
    df = max(faithful - 1, 0) + n - 1
    pooled = (max(faithful - 1, 0) * spread**2 + deviations) / np.maximum(df, 1)
    pooled = np.maximum(pooled, (test.delta / 4) ** 2)
    error = np.sqrt(pooled * ((1 / faithful if faithful else 0.0) + 1 / n))

    def log_evidence(t: np.ndarray) -> np.ndarray:
        p = np.where(df > 0, special.stdtr(np.maximum(df, 1), -t), 1.0)
        return -np.log(test.looks * np.maximum(p, MIN_P))

    return log_evidence((level - mean) / error), log_evidence((mean - (target - test.delta)) / error)


def _rate_evidence(
    test: Test, values: np.ndarray, at: np.ndarray, level: np.ndarray, target: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """A success rate's log-evidence against H0 and against H1 at each look,
    `[rows, looks]`: Fisher's exact test against the faithful seeds (the
    SPRT against a stated level) and the SPRT of H1."""
    successes = np.cumsum(values, axis=-1)[:, at]
    if test.reference_seeds:
        from scipy import stats  # here: a command that judges no test does not pay for its import

        faithful = test.reference_seeds
        faithful_successes = np.rint(level * faithful)
        n = (at + 1).astype(np.float64)
        # The chance of at most this many of the run's seeds succeeding, of
        # all the successes in both samples, were the run's seeds as the faithful ones.
        p = stats.hypergeom.cdf(successes, faithful + n, faithful_successes + successes, n)
        against_h0 = -np.log(test.looks * np.maximum(p, MIN_P))
    else:
        against_h0 = np.cumsum(_log_ratio(values, level - test.delta, level), axis=-1)[:, at]
    against_h1 = np.cumsum(_log_ratio(values, target, target - test.delta), axis=-1)[:, at]
    return against_h0, against_h1


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
    decides; none reached by the last seed is INCONCLUSIVE. ValueError for
    more looks than the test planned (`test.looks`)."""
    values = np.asarray(values, dtype=np.float64)
    single = values.ndim == 1
    values = np.atleast_2d(values)
    rows, seeds = values.shape
    if seeds == 0 or batch < 1:
        raise ValueError("a sequential test needs at least one seed and a batch of at least one")
    if test.kind not in KINDS:
        raise ValueError(f"unknown test kind {test.kind!r}: one of {', '.join(KINDS)}")
    at = np.unique(np.r_[np.arange(batch, seeds + 1, batch), seeds]) - 1  # the last seed of each look
    if (test.kind == "mean" or test.reference_seeds) and len(at) > test.looks:
        raise ValueError(f"{len(at)} looks at {seeds} seeds in batches of {batch}: the test planned {test.looks}")
    level = _rows(test.level, (rows,))
    target = level if test.target is None else _rows(test.target, (rows,))
    evidence = _t_evidence if test.kind == "mean" else _rate_evidence
    against_h0, against_h1 = evidence(test, values, at, level, target)
    fail = against_h0 >= np.log(1 / test.alpha)
    passed = against_h1 >= np.log(1 / test.beta)
    decided = fail | passed
    first = np.where(decided.any(axis=1), decided.argmax(axis=1), len(at) - 1)
    row = np.arange(rows)
    # A look where both bounds are reached (rare, possible with a wide gap) fails: a FAIL is never
    # made more likely than alpha allows, since it still needs the evidence against H0.
    verdict = np.where(fail[row, first], FAIL, np.where(passed[row, first], PASS, INCONCLUSIVE))
    out = Decision(verdict, at[first] + 1, against_h0[row, first], against_h1[row, first])
    return Decision(*(x[0] for x in out)) if single else out
