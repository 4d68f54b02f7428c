"""The interquartile mean and its stratified bootstrap interval."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as scipy_stats

from harness.stats import intervals


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8, 10, 13])
def test_iqm_is_scipys_25_percent_trimmed_mean(n):
    scores = np.random.RandomState(n).normal(size=n) * 100
    assert intervals.iqm(scores) == pytest.approx(scipy_stats.trim_mean(scores, 0.25))


def test_iqm_ignores_one_outlying_seed_among_eight():
    scores = np.array([10.0, 11, 12, 13, 14, 15, 16, 1e6])
    assert intervals.iqm(scores) == pytest.approx(np.mean([12, 13, 14, 15]))


def test_interval_is_reproducible_and_contains_the_point():
    scores = np.random.RandomState(1).uniform(0, 500, size=8)
    first = intervals.stratified_bootstrap_iqm(scores)
    assert first == intervals.stratified_bootstrap_iqm(scores), "a fixed random state gives the same interval"
    assert first.low <= first.point <= first.high and first.n == 8
    # The interval depends on the random state (and only on it): with many
    # seeds the resampled IQMs take many values, so another state shows.
    many = np.random.RandomState(1).uniform(0, 500, size=64)
    assert intervals.stratified_bootstrap_iqm(many, random_state=1) != intervals.stratified_bootstrap_iqm(many)


def test_interval_narrows_with_more_seeds():
    rng = np.random.RandomState(2)
    few = intervals.stratified_bootstrap_iqm(rng.normal(100, 10, size=4))
    many = intervals.stratified_bootstrap_iqm(rng.normal(100, 10, size=64))
    assert many.high - many.low < few.high - few.low
    assert many.low < 100 < many.high


def test_resampling_is_stratified_by_task():
    # Task 0 always scores 0 and task 1 always 100: resampling runs within
    # each task keeps half the scores at 0, so every resample has the same
    # IQM. Resampling across tasks would not.
    scores = np.array([[0.0, 100.0]] * 6)  # [runs, tasks]
    estimate = intervals.stratified_bootstrap_iqm(scores)
    assert estimate.low == estimate.point == estimate.high == 50.0
    assert estimate.n == 12


def test_overlap():
    a = intervals.Estimate(1.0, 0.0, 2.0, 4)
    assert a.overlaps(intervals.Estimate(3.0, 2.0, 4.0, 4))
    assert not a.overlaps(intervals.Estimate(3.0, 2.5, 4.0, 4))


def test_mean_band_over_seeds():
    values = np.array([[0.0, 10.0], [2.0, 10.0], [4.0, 10.0]])  # [seeds, points]
    mean, low, high = intervals.bootstrap_mean_band(values)
    np.testing.assert_allclose(mean, [2.0, 10.0])
    assert low[0] < 2.0 < high[0] and low[1] == high[1] == 10.0
