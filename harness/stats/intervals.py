"""Aggregate scores over seeds: the interquartile mean and its stratified
bootstrap confidence interval, as rliable computes them.

Agarwal et al., "Deep Reinforcement Learning at the Edge of the Statistical
Precipice" (NeurIPS 2021): with few seeds, report the interquartile mean
(IQM: the mean of the middle 50% of scores, robust to one outlying seed but
less noisy than the median) with a percentile bootstrap interval, where runs
are resampled with replacement *within* each task (stratified). A spec is one
task, so here the strata are usually a single column; the general form is
kept so that scores over several envs aggregate the same way.

The bootstrap draws from a `numpy.random.RandomState` with a fixed seed, so
the same scores always give the same interval.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

REPS = 50_000  # bootstrap resamples, as rliable's default
CONFIDENCE = 0.95
RANDOM_STATE = 0
# Seeds each side needs for two intervals to be compared: one seed's
# interval is a point, which any other machine's different bits would miss.
MIN_SEEDS = 2


class Estimate(NamedTuple):
    point: float  # the IQM of the scores
    low: float  # the confidence interval's bounds
    high: float
    n: int  # number of scores (seeds x tasks)

    def overlaps(self, other: Estimate) -> bool:
        return self.low <= other.high and other.low <= self.high

    def as_dict(self) -> dict[str, float | int]:
        return self._asdict()

    def __format__(self, spec: str) -> str:
        fmt = spec or ".4g"
        return f"{self.point:{fmt}} [{self.low:{fmt}}, {self.high:{fmt}}]"


def iqm(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    """Interquartile mean along `axis`: sort, drop `floor(n / 4)` scores at
    each end, average the rest (scipy.stats.trim_mean with 0.25, which
    rliable uses). With fewer than 4 scores nothing is dropped."""
    scores = np.sort(np.asarray(scores, dtype=np.float64), axis=axis)
    n = scores.shape[axis]
    cut = int(0.25 * n)
    return np.take(scores, np.arange(cut, n - cut), axis=axis).mean(axis=axis)


def stratified_bootstrap_iqm(
    scores: np.ndarray,
    *,
    reps: int = REPS,
    confidence: float = CONFIDENCE,
    random_state: int = RANDOM_STATE,
) -> Estimate:
    """IQM of `scores` with a stratified percentile bootstrap interval.

    Args:
      scores: `[runs]` (one task) or `[runs, tasks]`; each resample draws
        `runs` scores with replacement from each task's column.
      reps: number of bootstrap resamples.
      confidence: the interval's coverage, e.g. 0.95.
      random_state: seed of the `RandomState` that draws the resamples.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim == 1:
        scores = scores[:, None]
    runs, tasks = scores.shape
    if runs == 0:
        raise ValueError("no scores to aggregate")
    rng = np.random.RandomState(random_state)
    # [reps, runs, tasks]: column t of every resample comes from task t only.
    index = rng.randint(0, runs, size=(reps, runs, tasks))
    resampled = np.take_along_axis(np.broadcast_to(scores, (reps, runs, tasks)), index, axis=1)
    statistics = iqm(resampled.reshape(reps, runs * tasks))
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(statistics, [tail, 100 - tail])
    return Estimate(float(iqm(scores.reshape(-1))), float(low), float(high), runs * tasks)


def bootstrap_mean_band(
    values: np.ndarray,
    *,
    reps: int = 2_000,
    confidence: float = CONFIDENCE,
    random_state: int = RANDOM_STATE,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean over seeds of curves `[seeds, points]` and a percentile bootstrap
    band of that mean (seeds resampled together, one draw per resample for
    all points): `(mean, low, high)`, each `[points]`."""
    values = np.asarray(values, dtype=np.float64)
    seeds = values.shape[0]
    rng = np.random.RandomState(random_state)
    means = values[rng.randint(0, seeds, size=(reps, seeds))].mean(axis=1)  # [reps, points]
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(means, [tail, 100 - tail], axis=0)
    return values.mean(axis=0), low, high


def too_few_seeds(reference: int, reproduction: int) -> str:
    """Why the reference's and the reproduction's seed counts allow no
    statistical verdict, or "" when they do."""
    few = [
        f"{n} seed in the {side}"
        for n, side in [(reference, "reference"), (reproduction, "reproduction")]
        if n < MIN_SEEDS
    ]
    if not few:
        return ""
    return (
        f"{' and '.join(few)}: a statistical verdict needs {MIN_SEEDS} or more on each side (one seed's interval is a"
        " point); bit for bit, the spec is judged where the machine and versions match the reference's"
    )
