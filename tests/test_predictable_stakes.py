"""Every stake fixed before the seed it bets on (harness.stats.stakes): the
condition under which Ville's inequality makes a test's alpha a theorem.

Each test builds the judge's own test (levels.make_test) twice: once from
the values, once with every value a stake may not see replaced by fresh
draws, and asserts that the stakes it may see are unchanged. Stakes sized
on the whole faithful pool (the rules before version 4) fail these on the
first pair: the pool's spread and level move with every faithful seed.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.experiment_spec.claims import Claim
from harness.judge import levels
from harness.stats import sequential, stakes

ROWS, POOL, SEEDS = 40, 40, 24


def _claim(**fields) -> Claim:
    base = {"metric": "episode_return", "at_least": "reference", "delta": 0.1, "alpha": 0.05}
    return Claim.model_validate({**base, **fields})


CLAIMS = {
    "paired mean": _claim(over_seeds="mean", range=[0, 1]),
    "paired share": _claim(over_seeds={"fraction_at_least": 0.5}, delta=0.2),
}


def _draw(rng, claim: Claim, shape) -> np.ndarray:
    values = np.clip(rng.normal(0.55, 0.15, shape), 0, 1)
    return values if claim.over_seeds.name == "mean" else (values >= 0.5).astype(float)


def _stakes(claim: Claim, pool: np.ndarray, run: np.ndarray, ties=None) -> list[np.ndarray]:
    """Every bet's stakes `[rows, stakes, seeds]`, as the judge sizes them."""
    test = levels.make_test(claim, pool)
    fail, passing = sequential.bets(test, run, ties)
    return [
        np.broadcast_to(lam if lam.ndim == 3 else lam[:, :, None], (ROWS, lam.shape[1], SEEDS))
        for _, lam in fail + passing
    ]


@pytest.mark.parametrize("name", CLAIMS)
@pytest.mark.parametrize("pair", [0, 1, 2, 7, 15])
def test_a_paired_tests_stake_on_a_pair_sees_only_the_pairs_before_it(name, pair):
    claim, rng = CLAIMS[name], np.random.default_rng(4)
    pool, run = _draw(rng, claim, (ROWS, POOL)), _draw(rng, claim, (ROWS, SEEDS))
    later_pool, later_run = pool.copy(), run.copy()
    later_pool[:, pair:] = _draw(rng, claim, (ROWS, POOL - pair))  # this pair, every later one, the unpaired
    later_run[:, pair:] = _draw(rng, claim, (ROWS, SEEDS - pair))
    changed = False
    for seen, other in zip(_stakes(claim, pool, run), _stakes(claim, later_pool, later_run), strict=True):
        np.testing.assert_array_equal(seen[..., : pair + 1], other[..., : pair + 1])
        changed |= not np.array_equal(seen, other)
    assert changed  # later pairs' stakes do see them


def test_a_rank_tests_stakes_see_neither_the_seeds_it_ranks_against_nor_the_run():
    claim, rng = _claim(over_seeds="mean", range=[0, 1], compare="ranks"), np.random.default_rng(5)
    pool, run, ties = rng.random((ROWS, POOL)), rng.random((ROWS, SEEDS)), rng.random((ROWS, SEEDS))
    other_pool = pool.copy()
    other_pool[:, stakes.SIZING_SEEDS :] = rng.random((ROWS, POOL - stakes.SIZING_SEEDS))
    for seen, other in zip(
        _stakes(claim, pool, run, ties), _stakes(claim, other_pool, rng.random((ROWS, SEEDS)), ties), strict=True
    ):
        np.testing.assert_array_equal(seen, other)
    # ... and the seeds that size them are never ranked against: the payoffs do not move with them.
    resized = pool.copy()
    resized[:, : stakes.SIZING_SEEDS] = rng.random((ROWS, stakes.SIZING_SEEDS))
    payoffs = [bet[0] for side in sequential.bets(levels.make_test(claim, pool), run, ties) for bet in side]
    moved = [bet[0] for side in sequential.bets(levels.make_test(claim, resized), run, ties) for bet in side]
    for before, after in zip(payoffs, moved, strict=True):
        np.testing.assert_array_equal(before, after)


def test_a_rank_test_needs_the_seeds_that_size_it_besides_the_seeds_it_ranks_against():
    claim = _claim(over_seeds="mean", range=[0, 1], compare="ranks")
    needed = levels.MIN_FAITHFUL + stakes.SIZING_SEEDS
    assert levels.make_test(claim, np.linspace(0, 1, needed - 1)) is None
    assert f"a test needs {needed}" in levels.untested(claim, np.linspace(0, 1, needed - 1))
    test = levels.make_test(claim, np.linspace(0, 1, needed))
    assert test.sizing.shape == (stakes.SIZING_SEEDS,) and test.faithful.shape == (levels.MIN_FAITHFUL,)


def test_a_stated_levels_stakes_see_no_run_value():
    claim, rng = _claim(over_seeds="mean", range=[0, 1], at_least=0.5), np.random.default_rng(6)
    pool = rng.random((ROWS, POOL))
    for seen, other in zip(
        _stakes(claim, pool, rng.random((ROWS, SEEDS))), _stakes(claim, pool, rng.random((ROWS, SEEDS))), strict=True
    ):
        np.testing.assert_array_equal(seen, other)


@pytest.mark.parametrize("draw", ["normal", "two-clusters"])
def test_a_faithful_run_fails_a_paired_test_at_most_alpha_on_a_small_pool(draw):
    """The theorem, seen: alpha raised to 20% on a 16-seed pool, where a
    leak would be largest, and the judge's false failures stay under it."""
    rng, rows = np.random.default_rng(104), 20_000

    def sample(shape):
        if draw == "normal":
            return np.clip(rng.normal(0.5, 0.1, shape), 0, 1)
        return np.clip(
            np.where(rng.random(shape) < 0.45, rng.normal(0.4, 0.08, shape), rng.normal(0.75, 0.1, shape)), 0, 1
        )

    claim = _claim(over_seeds="mean", range=[0, 1], alpha=0.2)
    decision = sequential.decide(levels.make_test(claim, sample((rows, 16))), sample((rows, 32)), 4)
    share = float(np.mean(decision.verdict == sequential.FAIL))
    assert share + 4 * np.sqrt(share * (1 - share) / rows) <= claim.alpha / 2, share
