"""Sequential tests whose false failures hold for bounded seeds of any
shape, at whatever seed they stop.

A claim's test asks of a run's seeds, on the unit scale (values in [0, 1],
higher is better; harness.judge.levels maps a metric's units and direction
onto it): are they as good as a faithful run, or worse by the regression
that matters? Each side's evidence is a **betting e-process**
(Waudby-Smith and Ramdas, "Estimating means of bounded random variables by
betting"; Shafer and Vovk's testing by betting): a gambler starts with 1
and, seed by seed, stakes a fixed fraction `lam` of their wealth on a
payoff in [-1, 1] that is fair (mean at most 0) under the hypothesis
tested. The wealth is then a nonnegative supermartingale, and by Ville's
inequality it ever reaches `1/a` with probability at most `a`, at any seed
and after any number of looks. The evidence is the log of the wealth,
averaged over a few stakes (an average of e-processes is one), so a stake
sized for the wrong spread costs a little evidence, never validity.

With faithful seeds (a `reference` level) the run's seeds are **paired**,
in order, with the faithful seeds, and each pair's difference is bet on,
scaled by `scale` (the spread a difference of two faithful seeds has) and
clipped to [-1, 1]:

- **against a faithful run (H0)**: payoff `clip((faithful - run) / scale)`.
  A faithful run's seed and a faithful seed are two draws of one
  distribution, so the difference is symmetric about 0 and any odd,
  bounded function of it is a fair bet: the FAIL side keeps its alpha
  for values of any shape (two clusters, rare failures, clipped ends), and
  the faithful seeds' own draw is in the pair. No normal theory and no
  estimate of the faithful level enter.
- **against a regressed run (H1)**: payoff `clip((run - faithful + delta) /
  scale)`, fair when the run is the faithful distribution moved down by
  delta; for a share (each seed 0 or 1) the linear payoff `run - faithful
  + delta`, fair for any run whose rate is delta or more below the
  faithful one. harness.judge.errors measures the PASS side under other
  shapes of regression.

A run has at most as many pairs as there are faithful seeds; its later
seeds add no evidence. A claim that compares by `ranks` bets instead on
each run seed's rank among all the faithful seeds (harness.stats.ranks):
as valid for any shape, and fewer seeds decide when single seeds vary
widely. Against a stated `level` (no faithful seeds) the
bets are one-sample and linear, `level - x` and `x - regressed`, fair for
any run at or above `level` (at or below `regressed`).

The test looks after every batch of seeds and stops at the first look
where either side's evidence reaches its bound:

- **FAIL** when the evidence against H0 reaches `1/alpha`: a faithful run
  fails with probability at most `alpha`;
- **PASS** when the evidence against H1 reaches `1/beta`: a regressed run
  passes with probability at most `beta`;
- **INCONCLUSIVE** when neither has by the last seed: never a FAIL. The
  evidence is anytime-valid, so looks are free and a reproduction may go
  on past its cap without spending its errors again.

Each stake is fixed before the seed it is staked on, from what came
before it (harness.stats.stakes): a paired test's from the faithful seeds
of the pairs before, a rank test's from faithful seeds it never ranks
against, so each bet is fair given everything before it and Ville's
inequality holds as a theorem, not as a measurement.

Everything is numpy over a leading batch of simulated tests: the judge
calls it with one row, harness.judge.errors with thousands.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from harness.stats import ranks, stakes
from harness.stats.verdict import FAIL, INCONCLUSIVE, PASS  # a test's verdicts are the verdict's words

KINDS = ("mean", "rate")


class Test(NamedTuple):
    """A claim's sequential test, on the unit scale (higher is better).
    Arrays have a leading row per simulated test."""

    kind: str  # "mean" (values in [0, 1]) or "rate" (values 0 or 1)
    level: np.ndarray | float  # the faithful level: the faithful seeds' mean, or a stated number
    delta: float  # the regression to catch, on the unit scale
    alpha: float  # the chance of failing a faithful run (this test's share of the reproduction's alpha)
    # At most the chance of passing a run regressed by delta (PASS at log(1/beta)): 1 - the claim's
    # power, which is the chance of FAILING that run (never INCONCLUSIVE at the cap: measured).
    beta: float
    # A faithful seed's spread (at least delta / 4): what sizes a stated level's stakes (a paired test
    # sizes each pair's on the pairs before it, harness.stats.stakes).
    spread: np.ndarray | float
    # The faithful seeds a run's seeds are paired with (in order) or ranked among, `[seeds]` or
    # `[rows, seeds]`; None: the level is stated.
    faithful: np.ndarray | None = None
    ranks: bool = False  # a mean held against the faithful seeds by rank (harness.stats.ranks), not in pairs
    # A test by ranks: the faithful seeds that size its stakes, never ranked against (stakes.SIZING_SEEDS).
    sizing: np.ndarray | None = None


class Decision(NamedTuple):
    """Where a test stopped; arrays with one entry per row of values."""

    verdict: np.ndarray  # PASS, FAIL or INCONCLUSIVE
    seeds: np.ndarray  # seeds used when it stopped (all of them when inconclusive)
    against_faithful: np.ndarray  # log of the evidence against H0 when it stopped (FAIL at log(1/alpha))
    against_regressed: np.ndarray  # log of the evidence against H1 (PASS at log(1/beta))


def _column(x, rows: int) -> np.ndarray:
    return np.broadcast_to(np.asarray(x, dtype=np.float64), (rows,))


def _rows(x, rows: int) -> np.ndarray:
    """Seeds `[seeds]` or `[rows, seeds]` as `[rows, seeds]`."""
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    return np.broadcast_to(x, (rows, x.shape[1]))


def log_wealth(*bets: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """log of the mixture's wealth after each seed, `[rows, seeds]`, of
    `(payoff, stakes)` bets: each seed's payoff `[rows, seeds]` (at least
    -1) and the stakes on it, `[rows, stakes, seeds]` (or `[rows, stakes]`,
    the same on every seed); the mixture's wealth is the mean of every
    stake's on every payoff."""
    logs = np.concatenate(
        [
            np.cumsum(np.log1p((lam if lam.ndim == 3 else lam[:, :, None]) * payoff[:, None, :]), axis=-1)
            for payoff, lam in bets
        ],
        axis=1,
    )  # [rows, stakes, seeds]
    top = logs.max(axis=1)
    return top + np.log(np.exp(logs - top[:, None, :]).mean(axis=1))


@functools.cache
def _normal() -> np.ndarray:
    """256 quantiles of a standard normal: the spread of a faithful seed's
    difference, sampled evenly, that the stakes are sized on."""
    from scipy import special  # here: a command that judges no test does not pay for its import

    return special.ndtri((np.arange(256) + 0.5) / 256)


def evidence(test: Test, values: np.ndarray, ties: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The log-evidence against H0 and against H1 after each seed, each
    `[rows, seeds]`, of values `[rows, seeds]` (a test by ranks breaks their
    ties by `ties`, `[rows, seeds]`: see `decide`)."""
    fail_bets, pass_bets = bets(test, values, ties)
    return log_wealth(*fail_bets), log_wealth(*pass_bets)


Bet = tuple[np.ndarray, np.ndarray]  # each seed's payoff [rows, seeds], the stakes on it [rows, stakes(, seeds)]


def bets(test: Test, values: np.ndarray, ties: np.ndarray | None = None) -> tuple[list[Bet], list[Bet]]:
    """The bets against H0 and against H1 of values `[rows, seeds]`: each
    a `(payoff, stakes)`, every stake fixed before the seed it is staked on
    (harness.stats.stakes)."""
    rows, seeds = values.shape
    delta = test.delta
    if test.faithful is None:  # a stated level: one-sample linear bets, fair for any shape
        level = _column(test.level, rows)[:, None]
        regressed = level - delta
        # Payoffs scaled into [-1, 1]; staked for a run at the other level with the faithful spread (of
        # seeds never bet on).
        fail_unit = np.maximum(level, 1 - level)
        pass_unit = np.maximum(regressed, 1 - regressed)
        fail_payoff, pass_payoff = (level - values) / fail_unit, (values - regressed) / pass_unit
        z = _normal()[None, :] * _column(test.spread, rows)[:, None]
        fail_lam = stakes.kelly(np.clip((delta + z) / fail_unit, -1, 1))
        pass_lam = stakes.kelly(np.clip((delta + z) / pass_unit, -1, 1))
        return [(fail_payoff, fail_lam)], [(pass_payoff, pass_lam)]
    faithful = _rows(test.faithful, rows)
    if test.ranks and test.kind == "mean":
        if ties is None:
            raise ValueError(
                "a test by ranks breaks ties by draws of the run's own: ranks.tie_breaks(seeds) for a run,"
                " fresh uniform draws for a simulated one"
            )
        if test.sizing is None:
            raise ValueError("a test by ranks sizes its stakes on faithful seeds it never ranks against: `sizing`")
        ties = np.broadcast_to(np.asarray(ties, dtype=np.float64), values.shape)
        return ranks.bets(faithful, _rows(test.sizing, rows), values, delta, ties)
    pairs = min(seeds, faithful.shape[1])
    difference = np.zeros_like(values)
    difference[:, :pairs] = faithful[:, :pairs] - values[:, :pairs]
    paired = np.arange(seeds) < pairs
    # What each pair's stakes are sized on: the pairs before it (a seed past the last pair bets
    # nothing: its payoff is 0).
    before = np.pad(faithful[:, :pairs], ((0, 0), (0, seeds - pairs)), mode="edge")
    run_before = np.pad(values[:, :pairs], ((0, 0), (0, seeds - pairs)), mode="edge")
    if test.kind == "rate":  # 0 or 1 a seed: the difference is its own payoff
        rate, grid = stakes.earlier_rate(before), np.linspace(0.0, 1.0, stakes.GRID)
        # Under the alternative: the faithful rate against it less delta (a fail), and the faithful rate
        # against itself (a pass), each pair's difference -1, 0 or 1 with its chance.
        fail_lam = stakes.read_off(
            lambda r: stakes.kelly(_pair_outcomes(r[:, None], np.clip(r - delta, 0, 1)[:, None])), grid, rate
        )
        pass_lam = stakes.read_off(
            lambda r: stakes.kelly((delta - _pair_outcomes(r[:, None], r[:, None])) / (1 + delta)), grid, rate
        )
        fail_payoff = difference
        pass_payoff = np.where(paired, (delta - difference) / (1 + delta), 0.0)
        return [(fail_payoff, fail_lam)], [(pass_payoff, pass_lam)]
    # Two payoffs a side: the difference scaled by a faithful difference's spread and clipped (a shift
    # of every seed), and the difference itself (a few seeds collapsing far).
    scale = np.sqrt(2) * stakes.earlier_spread(before, run_before, delta)
    grid = np.sqrt(2) * np.geomspace(delta / 4, 0.75, stakes.GRID)  # a spread of values in [0, 1] is below 0.71
    z = _normal()[None, :]

    def shifted(s):  # a pair's difference scaled and clipped, for a run delta below faithful
        return stakes.kelly(np.clip(delta / s[:, None] + z, -1, 1))

    shift_lam = stakes.read_off(shifted, grid, scale)
    fail_bets = [
        (np.clip(difference / scale, -1, 1), shift_lam),
        (difference, stakes.read_off(lambda s: stakes.kelly(np.clip(delta + s[:, None] * z, -1, 1)), grid, scale)),
    ]
    pass_bets = [
        (np.where(paired, np.clip((delta - difference) / scale, -1, 1), 0.0), shift_lam),
        (
            np.where(paired, (delta - difference) / (1 + delta), 0.0),
            stakes.read_off(
                lambda s: stakes.kelly(np.clip((delta + s[:, None] * z) / (1 + delta), -1, 1)), grid, scale
            ),
        ),
    ]
    return fail_bets, pass_bets


def _pair_outcomes(faithful_rate: np.ndarray, run_rate: np.ndarray) -> np.ndarray:
    """`faithful - run` of a pair of seeds at these rates, as 256 samples
    `[rows, 256]` in proportion to their chances (a deterministic sample)."""
    plus = faithful_rate * (1 - run_rate)
    minus = (1 - faithful_rate) * run_rate
    grid = (np.arange(256) + 0.5) / 256
    return np.where(grid < plus, 1.0, np.where(grid > 1 - minus, -1.0, 0.0))


def decide(test: Test, values: np.ndarray, batch: int, ties: np.ndarray | None = None) -> Decision:
    """The test run over `values` (`[seeds]` or `[rows, seeds]`, unit scale,
    in the order the seeds were run), looked at after every `batch` seeds
    and after the last: the first look where either bound is reached
    decides; none reached by the last seed is INCONCLUSIVE. A test by ranks
    needs `ties` (the shape of `values`): `ranks.tie_breaks` of the run's
    seeds, or, simulating runs, fresh uniform draws for each."""
    values = np.asarray(values, dtype=np.float64)
    single = values.ndim == 1
    values = np.atleast_2d(values)
    rows, seeds = values.shape
    if seeds == 0 or batch < 1:
        raise ValueError("a sequential test needs at least one seed and a batch of at least one")
    if test.kind not in KINDS:
        raise ValueError(f"unknown test kind {test.kind!r}: one of {', '.join(KINDS)}")
    if np.any((values < 0) | (values > 1)):
        raise ValueError("a sequential test takes values on the unit scale, in [0, 1]")
    at = np.unique(np.r_[np.arange(batch, seeds + 1, batch), seeds]) - 1  # the last seed of each look
    ties = None if ties is None else np.atleast_2d(np.asarray(ties, dtype=np.float64))
    against_h0, against_h1 = (side[:, at] for side in evidence(test, values, ties))
    fail = against_h0 >= np.log(1 / test.alpha)
    passed = against_h1 >= np.log(1 / test.beta)
    decided = fail | passed
    first = np.where(decided.any(axis=1), decided.argmax(axis=1), len(at) - 1)
    row = np.arange(rows)
    # A look where both bounds are reached (possible when the two levels are close) fails: a FAIL
    # is never made more likely than alpha allows, since it still needs the evidence against H0.
    verdict = np.where(fail[row, first], FAIL, np.where(passed[row, first], PASS, INCONCLUSIVE))
    out = Decision(verdict, at[first] + 1, against_h0[row, first], against_h1[row, first])
    return Decision(*(x[0] for x in out)) if single else out
