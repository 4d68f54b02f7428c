"""Minibatch orders (algorithms.shuffle): the Feistel order is a permutation
that spreads every index, and every pair of neighbours, over the minibatches
as a uniformly random permutation does; PPO learns with it."""

from __future__ import annotations

import copy

import jax
import numpy as np
import pytest
from support import TINY_PPO, train

from algorithms.shuffle import feistel_order, order

DRAWS = 4000


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, 100, 512, 2560])
def test_feistel_order_is_a_permutation_that_changes_with_the_key(size):
    orders = np.asarray(jax.vmap(lambda k: feistel_order(k, size))(jax.random.split(jax.random.key(0), 8)))
    for drawn in orders:
        assert sorted(drawn.tolist()) == list(range(size))
    if size >= 7:
        assert len({tuple(drawn) for drawn in orders}) == 8


@pytest.mark.parametrize("shuffle", ["permutation", "feistel"])
def test_each_index_and_each_pair_of_neighbours_is_split_as_by_chance(shuffle):
    """512 indices in 4 minibatches (CartPole's PPO: 4 envs x 128 steps,
    flattened step-major), over 4,000 keys: every index lands in every
    minibatch a quarter of the time (within 5 standard errors), and indices
    1 apart (one step's neighbouring envs) or 4 apart (one env's consecutive
    steps) share a minibatch with probability 127/511, as under a uniform
    draw (observed within 0.001 of it for both orders)."""
    size, minibatches = 512, 4
    keys = jax.random.split(jax.random.key(1), DRAWS)
    orders = np.asarray(jax.jit(jax.vmap(lambda k: order(k, size, shuffle)))(keys))
    which = np.empty_like(orders)
    which[np.arange(DRAWS)[:, None], orders] = np.arange(size) // (size // minibatches)
    p = 1 / minibatches
    for m in range(minibatches):
        share = (which == m).mean(axis=0)
        assert np.abs(share - p).max() < 5 * np.sqrt(p * (1 - p) / DRAWS), (m, share.min(), share.max())
    for apart in (1, 4):
        together = (which[:, apart:] == which[:, :-apart]).mean()
        assert abs(together - (size // minibatches - 1) / (size - 1)) < 0.003, (apart, together)


def test_an_unknown_shuffle_is_refused():
    with pytest.raises(ValueError, match="unknown shuffle 'sorted'"):
        order(jax.random.key(0), 8, "sorted")


def test_ppo_with_the_feistel_order_improves_a_tiny_cartpole_run():
    spec = copy.deepcopy(TINY_PPO)
    spec["hyperparameters"]["shuffle"] = "feistel"
    _, result = train(spec)
    returns = result.metrics["episode_return"]
    early, late = returns[2:10].mean(), returns[-10:].mean()
    assert late > 2 * early, (early, late)
