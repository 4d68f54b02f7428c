"""Stakes a test sizes from the faithful seeds it also bets against: a guard
that would catch the leak (issue 104). A paired test's stakes are sized by
the spread of the same faithful seeds that form one side of every pair: not
predictable, so Ville's inequality does not apply as the verdicts guide
says. Here the judge's own path, at alpha raised to 20% and on a small pool
(16 seeds) where a leak would be largest, is held against the same test
with its stakes sized by an independent sample of the same distribution
(predictable, so valid by the theorem): the judge's false failures must not
be measurably higher, as they are when the stakes peek at the run's first
pairs (4.6% and 5.8% against 3.2% and 3.6% measured). (A rank test sizes its stakes inside ranks.bets from
the pool it ranks among; it has no such guard yet.)"""

from __future__ import annotations

import numpy as np
import pytest

from harness.judge import levels
from harness.spec.claims import Claim
from harness.stats import sequential

ROWS = 20_000


def _claim(compare: str) -> Claim:
    fields = {"over_seeds": "mean", "at_least": "reference", "delta": 0.1, "range": [0, 1], "alpha": 0.2}
    return Claim.model_validate({"metric": "episode_return", **fields, "compare": compare})


def _rate(decision) -> tuple[float, float]:
    """The FAIL share and its standard error."""
    share = float(np.mean(decision.verdict == sequential.FAIL))
    return share, float(np.sqrt(share * (1 - share) / ROWS))


@pytest.mark.parametrize("draw", ["normal", "two-clusters"])
def test_a_paired_tests_stakes_sized_by_its_faithful_seeds_leak_no_measurable_false_failures(draw):
    rng = np.random.default_rng(104)

    def sample(shape):
        if draw == "normal":
            return np.clip(rng.normal(0.5, 0.1, shape), 0, 1)
        return np.clip(
            np.where(rng.random(shape) < 0.45, rng.normal(0.4, 0.08, shape), rng.normal(0.75, 0.1, shape)), 0, 1
        )

    claim, faithful, cap = _claim("pairs"), sample((ROWS, 16)), 32
    run = sample((ROWS, cap))
    judged = levels.make_test(claim, faithful)  # the judge's path: the stakes from the seeds it bets against
    independent = levels.make_test(claim, sample((ROWS, 16)))  # the same test's stakes from other seeds
    predictable = judged._replace(spread=independent.spread)
    assert not np.allclose(predictable.spread, judged.spread)
    own, own_se = _rate(sequential.decide(judged, run, 4))
    other, other_se = _rate(sequential.decide(predictable, run, 4))
    assert own <= claim.alpha / 2  # a raised alpha, still far from reached
    assert own <= other + 4 * np.hypot(own_se, other_se), (own, other)
    # The guard sees a leak this size: stakes sized by the first pairs' own differences.
    peeking = judged._replace(spread=np.maximum(np.abs(faithful[:, :4] - run[:, :4]).mean(axis=1) * 0.3, 0.025))
    leaked, leaked_se = _rate(sequential.decide(peeking, run, 4))
    assert leaked > other + 4 * np.hypot(leaked_se, other_se), (leaked, other)
