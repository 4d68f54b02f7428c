"""The speed test (harness.stats.speed): its verdicts on rounds whose
answer is known, and its errors, simulated with the judge's own functions
at a raised alpha so that a leak would show."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.stats import speed, verdict

ROWS = 4000


def _aa_rounds(rng: np.random.Generator, rounds: int, *, slower: float = 0.0) -> np.ndarray:
    """Log time ratios of rounds in which both sides meet the same machine:
    a drifting load shared by the round, each call's own jitter, and now
    and then a neighbour's burst on one call (heavy tails, skewed times);
    the candidate's timed work `1 + slower` times the baseline's."""
    shared = rng.lognormal(0.0, 0.3, (ROWS, rounds))  # the machine's state in that round
    base = shared * rng.lognormal(0.0, 0.04, (ROWS, rounds))
    cand = shared * rng.lognormal(0.0, 0.04, (ROWS, rounds)) * (1 + slower)
    bursts = rng.random((ROWS, rounds, 2)) < 0.1
    base = base * np.where(bursts[..., 0], rng.uniform(1.5, 4.0, (ROWS, rounds)), 1.0)
    cand = cand * np.where(bursts[..., 1], rng.uniform(1.5, 4.0, (ROWS, rounds)), 1.0)
    return np.log(cand / base)


def test_clear_rounds_decide_at_the_fewest_rounds_their_bounds_allow():
    test = speed.SpeedTest(alpha=0.001, beta=0.1)
    same = speed.decide(np.full(40, 0.001), test)
    assert same.outcome == speed.NOT_SLOWER and same.word == verdict.PASS
    assert same.rounds == speed.rounds_to(0.1) == 5
    slow = speed.decide(np.full(40, math.log(1.25)), test)
    assert slow.outcome == speed.SLOWER and slow.word == verdict.FAIL
    assert slow.rounds == speed.rounds_to(0.001)
    assert slow.ratio == pytest.approx(0.8) and slow.label().startswith("0.80x [0.80-0.80] SLOWER")
    # Rounds split evenly about both ends: undecided at the cap, never a verdict.
    split = np.tile([-0.05, 0.05, 0.5, -0.5], 10)
    stuck = speed.decide(split, speed.SpeedTest(cap=20))
    assert stuck.outcome == speed.UNDECIDED and stuck.rounds == 20 and stuck.word == verdict.INCONCLUSIVE


def test_one_enormous_round_is_one_round():
    """A neighbour's burst that makes one round 10x slower weighs as much as any other slower round."""
    rounds = np.array([0.01, -0.01, math.log(10.0), -0.02, 0.01, -0.01, 0.0, 0.01, -0.01, 0.02])
    result = speed.decide(rounds, speed.SpeedTest(alpha=0.01))
    assert result.outcome == speed.NOT_SLOWER


def test_false_slower_stays_within_alpha_on_a_noisy_machine():
    """A/A: the same work on both sides, heavy-tailed skewed times, at a
    raised alpha (10%): SLOWER at most alpha of the time (with the Monte
    Carlo error of 4000 rows), at whatever round each stopped."""
    rng = np.random.default_rng(11)
    test = speed.SpeedTest(alpha=0.10, beta=0.10, cap=60)
    outcome, rounds = speed.stops(_aa_rounds(rng, test.cap), test)
    false_slower = np.mean(outcome == speed.SLOWER)
    assert false_slower < 0.10 + 3 * math.sqrt(0.1 * 0.9 / ROWS)
    assert np.mean(outcome == speed.NOT_SLOWER) > 0.8  # and it mostly decides


def test_a_slowdown_of_x_reads_not_slower_at_most_beta_of_the_time():
    rng = np.random.default_rng(12)
    test = speed.SpeedTest(slower_by=0.10, alpha=speed.alpha_each(35), beta=0.20, cap=60)
    outcome, _ = speed.stops(_aa_rounds(rng, test.cap, slower=0.10), test)
    assert np.mean(outcome == speed.NOT_SLOWER) < 0.20 + 3 * math.sqrt(0.2 * 0.8 / ROWS)
    assert np.mean(outcome == speed.SLOWER) > 0.5  # the power these rounds leave at the cap


def test_rounds_run_until_the_test_decides_alternating_which_side_goes_first():
    order: list[str] = []

    def one_round(index: int) -> tuple[float, float]:
        order.append(speed.first(index))
        return 1.0, 1.3  # seconds: the candidate 30% slower

    result, pairs = speed.run_rounds(one_round, speed.SpeedTest(alpha=0.01))
    assert result.outcome == speed.SLOWER and len(pairs) == result.rounds == speed.rounds_to(0.01)
    assert order[:3] == ["baseline", "candidate", "baseline"]
    faster, _ = speed.run_rounds(lambda i: (100.0, 130.0), speed.SpeedTest(), rates=True)
    assert faster.outcome == speed.NOT_SLOWER and faster.ratio == pytest.approx(1.3)


def test_the_ratio_interval_holds_the_median_ratio():
    rng = np.random.default_rng(13)
    covered = 0
    for _ in range(400):
        d = rng.normal(math.log(1.05), 0.05, 30)
        _, low, high = speed.speed_ratio(d)
        covered += low <= 1 / 1.05 <= high
    assert covered / 400 > 0.9


@pytest.mark.parametrize(
    "baseline, candidate, message",
    [([1.0, 2.0], [1.0], "pair up"), ([1.0, 0.0], [1.0, 1.0], "positive"), ([1.0], [float("nan")], "positive")],
)
def test_rounds_that_are_not_pairs_of_positive_figures_are_refused(baseline, candidate, message):
    with pytest.raises(ValueError, match=message):
        speed.log_ratios(baseline, candidate)


def test_a_run_splits_its_alpha_over_its_comparisons():
    assert speed.alpha_each(35) == pytest.approx(speed.ALPHA / 35)
    with pytest.raises(ValueError, match="slower_by"):
        speed.SpeedTest(slower_by=0).check()
