"""Simulated seeds and claims the tests of the verdicts share (tests of
harness.stats: pure numpy)."""

from __future__ import annotations

import numpy as np

from harness.experiment_spec.claims import Claim


def share_of(decision, verdict):
    return float(np.mean(decision.verdict == verdict))


def claim_of(**fields):
    return Claim.model_validate({"metric": "episode_return", **fields})


def two_clusters(rng, shape, miss=0.08):
    """A goal reached or not: most seeds near 0.95, `miss` of them at 0."""
    return (rng.random(shape) > miss) * np.clip(rng.normal(0.95, 0.02, shape), 0, 1)


def rare_failures(rng, shape):
    """Normal seeds with 1 in 20 collapsed to 0: a left tail a t-test misses."""
    return np.where(rng.random(shape) < 0.05, 0.0, np.clip(rng.normal(0.8, 0.05, shape), 0, 1))
