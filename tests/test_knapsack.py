"""AlphaZero on Knapsack: the exact solver behind the optimality gap, and
the set network over items."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from support import TINY_AZ

from algorithms.alphazero.networks import make_az_network
from harness import build, envs
from harness import experiment_spec as spec_module
from harness.envs.jumanji_knapsack import knapsack_optimum
from harness.experiment_spec import NetworkSpec, SpecError


def brute_force(weights: np.ndarray, values: np.ndarray, capacity: float) -> float:
    best = 0.0
    for chosen in itertools.product((False, True), repeat=len(weights)):
        chosen = np.array(chosen)
        if weights[chosen].sum() <= capacity:
            best = max(best, float(values[chosen].sum()))
    return best


def test_the_solver_finds_the_brute_force_optimum_on_small_instances():
    rng = np.random.default_rng(0)
    size, count = 10, 120
    weights = rng.uniform(0, 1, (count, size)).astype(np.float32)
    values = rng.uniform(0, 1, (count, size)).astype(np.float32)
    # Fewer items in some instances (an item of no value is no item), and
    # capacities from nothing fits to everything fits.
    values[np.arange(size)[None] >= rng.integers(1, size + 1, count)[:, None]] = 0.0
    capacity = rng.uniform(0, size / 2, count).astype(np.float32)
    capacity[:3] = (0.0, 0.01, size)
    solved = np.asarray(jax.jit(jax.vmap(knapsack_optimum))(weights, values, capacity))
    expected = [
        brute_force(w.astype(np.float64), v.astype(np.float64), float(c))
        for w, v, c in zip(weights, values, capacity, strict=True)
    ]
    np.testing.assert_allclose(solved, expected, rtol=1e-5, atol=1e-6)
    assert solved[0] == 0.0 and solved[2] == pytest.approx(values[2].sum())


def test_jumanji_knapsack_states_give_their_optimum():
    """The env's optimum reads a state's items and budget, and no legal
    sequence of moves beats it (here: the greedy packing by value per weight)."""
    env, _ = envs.make("jumanji", "Knapsack-v1")
    states, _ = jax.vmap(env.reset)(jax.random.split(jax.random.key(0), 16))
    optimum = np.asarray(jax.jit(jax.vmap(env.optimum))(states))
    for i in range(16):
        w, v = np.asarray(states.weights[i]), np.asarray(states.values[i])
        room, greedy = 12.5, 0.0
        for item in np.argsort(-v / w):
            if w[item] <= room:
                room, greedy = room - w[item], greedy + v[item]
        assert greedy <= optimum[i] + 1e-5
        assert optimum[i] <= greedy + v.max()  # the fractional bound


def _item_set(observation_size: int = 3 * 7, actions: int = 7):
    network = NetworkSpec(kind="item_set", hidden_sizes=(16, 16), activation="relu", pooling_layers=2)
    net = make_az_network(network, actions, (observation_size,))
    return net, net.init(jax.random.key(0), jnp.zeros(observation_size))


def test_the_set_network_is_permutation_equivariant():
    net, params = _item_set()
    obs = jax.random.uniform(jax.random.key(1), (4, 3, 7))  # 4 positions, 3 features of 7 items
    permutation = np.array([3, 0, 6, 1, 5, 2, 4])
    logits, value = net.apply(params, obs.reshape(4, -1))
    permuted_logits, permuted_value = net.apply(params, obs[..., permutation].reshape(4, -1))
    np.testing.assert_allclose(permuted_logits, logits[:, permutation], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(permuted_value, value, rtol=1e-5, atol=1e-6)
    # Items are told apart by their features, not their place.
    assert not np.allclose(logits[:, 0], logits[:, 1])


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (
            {"algorithm": "ppo", "env": {"suite": "gymnax", "id": "CartPole-v1"}, "hyperparameters": {}},
            "item_set is a network for alphazero; ppo takes mlp",
        ),
        ({}, "item_set reads a flat observation of features per action (9 actions)"),
    ],
)
def test_the_set_network_needs_items(change, needle):
    data = {**TINY_AZ, "network": {"kind": "item_set", "hidden_sizes": [8]}, **change}
    with pytest.raises(SpecError) as error:
        build.build(spec_module.parse(data))
    assert "network.kind" in str(error.value) and needle in str(error.value)
