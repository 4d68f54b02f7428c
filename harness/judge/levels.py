"""A claim's test, made from the claim and the seeds a faithful run is known
by (harness.judge.sequential runs it).

Values move onto the unit scale, higher is better: a mean's per-seed values
are clipped to the claim's `range` and rescaled (flipped for `at_most` and
`below`); a share of seeds becomes each seed's indicator (1 when the seed
is past the claim's value, flipped likewise).

The level a faithful run reaches is the claim's number, or (`reference`)
it is learned from the faithful seeds at hand: the reference's, pooled with
the spec's unseen-seed runs. Those seeds are a sample too, and the tests
take them as they are: harness.judge.sequential's two-sample t-test holds
a run's mean against theirs, their uncertainty in its error, and its
Fisher exact test a run's successes against theirs. Either way a faithful
run fails with probability at most `alpha`, the reference's own draw
included. The fewer the faithful seeds, the less power the test has at
`delta`: `harness validate --errors` measures it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from harness.judge.sequential import Test
from harness.spec_claims import REFERENCE, Claim


class Faithful(NamedTuple):
    """The per-seed values (the claim's metric and statistic over
    iterations, in its own units) of faithful runs, and where they come from."""

    values: np.ndarray  # [seeds]
    sources: tuple[str, ...]  # the records pooled


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


def bounds(claim: Claim) -> tuple[float, float]:
    """The log-evidence at which a claim's test FAILS and at which it PASSES."""
    return float(np.log(1 / float(claim.alpha))), float(np.log(1 / (1 - float(claim.power))))


def make_test(claim: Claim, faithful: np.ndarray | None, looks: int = 1) -> Test | None:
    """The claim's test, looked at up to `looks` times: its level from a
    number bound, or from `faithful` unit-scale values `[seeds]` (or
    `[rows, seeds]`, one test per row, for simulation) for a `reference`
    bound; None for a statement, or for a `reference` bound without
    faithful seeds."""
    if not claim.is_test:
        return None
    kind = "mean" if claim.over_seeds.name == "mean" else "rate"
    alpha, beta, delta = float(claim.alpha), 1.0 - float(claim.power), delta_unit(claim)
    if claim.bound[1] != REFERENCE:
        return Test(kind, stated_level(claim), delta, alpha, beta, looks=looks)
    if faithful is None or np.shape(faithful)[-1] == 0:
        return None
    faithful = np.asarray(faithful, dtype=np.float64)
    mean = faithful.mean(axis=-1)
    spread_of = spread(faithful) if kind == "mean" else 0.0
    return Test(kind, mean, delta, alpha, beta, spread_of, mean, faithful.shape[-1], looks)


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
    return Faithful(np.array([seen[seed] for seed in sorted(seen)], dtype=np.float64), tuple(used))
