"""A claim's test, made from the claim and the seeds a faithful run is known
by (harness.stats.sequential runs it).

Values move onto the unit scale, higher is better: a mean's per-seed values
are clipped to the claim's `range` and rescaled (flipped for `at_most` and
`below`); a share of seeds becomes each seed's indicator (1 when the seed
is past the claim's value, flipped likewise).

The level a faithful run reaches is the claim's number, or (`reference`)
it is learned from the faithful seeds at hand: the reference's, pooled with
the spec's unseen-seed runs, at least `MIN_FAITHFUL` of them. Those seeds
are a sample too, and the test takes them as one: a run's seeds are bet
against theirs pair by pair, a fair bet for a faithful run of any shape, so
a faithful run fails with probability at most `alpha`, the reference's own
draw included. The fewer the faithful seeds, the less power the test has
at `delta`: `harness validate --errors` measures it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from harness.experiment_spec.claims import REFERENCE, Claim
from harness.stats.sequential import Test
from harness.stats.stakes import SIZING_SEEDS

# Below this many faithful seeds a reference level is not a test: the seeds cannot show the spread and
# tails faithful runs have (a spread from 6 seeds can be a third of the true one), nor measure its errors.
MIN_FAITHFUL = 16


class Faithful(NamedTuple):
    """The per-seed values (the claim's metric and statistic over
    iterations, in its own units) of faithful runs, and where they come from."""

    values: np.ndarray  # [seeds]
    sources: tuple[str, ...]  # the records pooled
    seeds: tuple[int, ...] = ()  # each value's seed, in order


def unit(claim: Claim, values: np.ndarray) -> np.ndarray:
    """Per-seed values on the test's unit scale (higher is better)."""
    values = np.asarray(values, dtype=np.float64)
    if claim.over_seeds.name == "mean":
        low, high = claim.range
        scaled = (np.clip(values, low, high) - low) / (high - low)
    else:
        bound = claim.over_seeds.value
        scaled = (values >= bound if claim.over_seeds.name == "fraction_at_least" else values > bound).astype(float)
    return scaled if claim.higher_is_better else 1.0 - scaled


def to_units(claim: Claim, level: float) -> float:
    """A unit-scale level in the claim's own units (a share of seeds for a rate)."""
    if claim.over_seeds.name != "mean":
        return level if claim.higher_is_better else 1.0 - level
    low, high = claim.range
    return low + (level if claim.higher_is_better else 1.0 - level) * (high - low)


def delta_unit(claim: Claim) -> float:
    if claim.over_seeds.name != "mean":
        return float(claim.delta)
    low, high = claim.range
    return float(claim.delta) / (high - low)


def stated_level(claim: Claim) -> float:
    """A number bound on the unit scale."""
    number = float(claim.bound[1])
    if claim.over_seeds.name == "mean":
        low, high = claim.range
        number = (min(max(number, low), high) - low) / (high - low)
    return number if claim.higher_is_better else 1.0 - number


def spread(faithful: np.ndarray) -> np.ndarray:
    faithful = np.asarray(faithful, dtype=np.float64)
    return faithful.std(axis=-1, ddof=1) if faithful.shape[-1] > 1 else np.zeros(faithful.shape[:-1])


def bounds(claim: Claim, tests: int = 1) -> tuple[float, float]:
    """The log-evidence at which a claim's test FAILS and at which it PASSES,
    the claim one of `tests` test claims of its spec."""
    alpha, beta = split(claim, tests)
    return float(np.log(1 / alpha)), float(np.log(1 / beta))


def split(claim: Claim, tests: int) -> tuple[float, float]:
    """The claim's alpha and beta within a reproduction of `tests` test
    claims: alpha / tests each (Bonferroni), so that the spec's tests
    together fail a faithful reproduction with probability at most their
    alphas' mean; beta whole (a reproduction passes only when every test
    does, so a regressed claim passes it no more often than it passes)."""
    return float(claim.alpha) / max(tests, 1), 1.0 - float(claim.power)


def needed(claim: Claim) -> int:
    """The faithful seeds a claim's test needs: for a `reference` level,
    MIN_FAITHFUL to pair or rank with, and a test by ranks SIZING_SEEDS
    more to size its stakes on (harness.stats.stakes); none for a number."""
    if claim.bound[1] != REFERENCE:
        return 0
    return MIN_FAITHFUL + (SIZING_SEEDS if claim.compare == "ranks" else 0)


def untested(claim: Claim, faithful: np.ndarray | None) -> str:
    """Why a test claim cannot be a test with these faithful unit-scale
    values (`[seeds]`), or "" when it can."""
    seeds, need = 0 if faithful is None else np.shape(faithful)[-1], needed(claim)
    if seeds >= need:
        return ""
    if not seeds:
        return (
            "untested: its level is the reference's, and no faithful seeds other than the run's own were found "
            "(results/<spec>.json, results/unseen/)"
        )
    return f"untested: {seeds} faithful seeds, a test needs {need} (add unseen-seed runs: nox -s unseen)"


def make_test(claim: Claim, faithful: np.ndarray | None, tests: int = 1) -> Test | None:
    """The claim's test, the claim one of `tests` test claims of its spec
    (harness.stats.sequential): against a number bound (`faithful`
    unit-scale values, if any, only size its stakes), or, for a `reference`
    bound, against the `faithful` values `[seeds]` (or `[rows, seeds]`, one
    test per row, for simulation) themselves: the run's seeds paired with
    them, or ranked among all but the first SIZING_SEEDS (which size a rank
    test's stakes). None for a statement, or where `untested` says why."""
    if not claim.is_test or untested(claim, faithful):
        return None
    kind = "mean" if claim.over_seeds.name == "mean" else "rate"
    alpha, beta = split(claim, tests)
    delta = delta_unit(claim)
    floor = delta / 4  # seeds that all agree do not prove the next one will
    if faithful is not None and np.shape(faithful)[-1] > 1:
        faithful = np.asarray(faithful, dtype=np.float64)
        spread_of = np.maximum(spread(faithful), floor)
    else:
        spread_of = delta / 2
    if claim.bound[1] != REFERENCE:
        return Test(kind, stated_level(claim), delta, alpha, beta, spread_of)
    level = faithful.mean(axis=-1)
    if claim.compare == "ranks" and kind == "mean":  # stakes sized on the first seeds, ranks among the rest
        sizing, ranked = faithful[..., :SIZING_SEEDS], faithful[..., SIZING_SEEDS:]
        return Test(kind, level, delta, alpha, beta, spread_of, ranked, True, sizing)
    return Test(kind, level, delta, alpha, beta, spread_of, faithful)


def test_of(claim: Claim, faithful: np.ndarray | None, tests: int = 1) -> Test | None:
    """The one constructor of a claim's test from faithful values in the
    claim's units (`[seeds]`, or `[rows, seeds]` simulating), None where
    there are none: what the judge (harness.judge.claims) runs on a real
    reproduction and the errors simulation (harness.judge.errors) on each
    simulated one, so that the measured errors are the judged test's."""
    return make_test(claim, None if faithful is None else unit(claim, faithful), tests)


def pool(per_record: Sequence[tuple[str, dict[int, float]]]) -> Faithful:
    """Faithful values from several records (label, seed -> value), each seed
    counted once (the first record that has it): the same seed on two
    machines is one draw, not two."""
    seen: dict[int, float] = {}
    used = []
    for label, values in per_record:
        fresh = {seed: value for seed, value in values.items() if seed not in seen}
        if fresh:
            used.append(label)
        seen |= fresh
    order = sorted(seen)
    return Faithful(np.array([seen[seed] for seed in order], dtype=np.float64), tuple(used), tuple(order))


def design_and_confirming(faithful: Faithful, design: set[int]) -> tuple[Faithful, Faithful]:
    """The faithful seeds a claim was designed on (`design`) and the rest,
    which came after it was frozen: the seeds that confirm it."""
    keep = np.array([seed in design for seed in faithful.seeds], dtype=bool)
    seeds = np.array(faithful.seeds, dtype=np.int64)
    return (
        Faithful(faithful.values[keep], faithful.sources, tuple(int(s) for s in seeds[keep])),
        Faithful(faithful.values[~keep], faithful.sources, tuple(int(s) for s in seeds[~keep])),
    )
