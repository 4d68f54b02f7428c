"""The batched Gumbel MuZero search (`tree_search: batched`) against mctx's
on the same roots, the same network and the same keys: the same actions and
the same policy targets. Not bit for bit in general: the network evaluates
the B new nodes as one batch, where mctx's search (vmapped over the games)
evaluates batches of one, and XLA may round those matmuls differently."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from support import TINY_AZ

from algorithms.alphazero import batched_search
from algorithms.alphazero.networks import make_az_network
from algorithms.alphazero.search import Games, make_search
from algorithms.base import random_step
from harness import build
from harness import experiment_spec as spec_module

GAMES = 8


def positions(env, seed: int, moves: int):
    """GAMES positions after `moves` random moves (some games over and reset)."""
    env_state, timestep = jax.vmap(env.reset)(jax.random.split(jax.random.key(seed), GAMES))
    for i in range(moves):
        _, env_state, timestep = random_step(env, env_state, timestep, jax.random.key(100 * seed + i))
    return Games(env_state, timestep, jnp.zeros(GAMES), jnp.zeros(GAMES, jnp.int32))


def searches(env_id: str, network: dict, **hyperparameters):
    data = {
        **TINY_AZ,
        "env": {"suite": "pgx", "id": env_id},
        "network": network,
        "hyperparameters": {**TINY_AZ["hyperparameters"], **hyperparameters},
    }
    plan = build.build(spec_module.parse(data))
    config, env = plan.spec.hyperparameters, plan.env
    net = make_az_network(plan.spec.network, env.num_actions, env.observation_shape)
    games = positions(env, 0, 3)
    # Scaled-up random weights: a prior far from uniform, so that the search's
    # choices depend on it.
    params = jax.tree.map(lambda p: 3.0 * p, net.init(jax.random.key(1), games.timestep.observation[:1]))
    found = {}
    for tree_search in ("mctx", "batched"):
        search = make_search(config.model_copy(update={"tree_search": tree_search}), env, net)
        for explore in (True, False):
            fn = jax.jit(lambda p, k, g, search=search, explore=explore: search(p, k, g, jnp.float32(0.5), explore))
            found[tree_search, explore] = fn(params, jax.random.split(jax.random.key(2), GAMES), games)
    return found


def test_the_batched_search_chooses_as_mctx_s():
    # A depth limit below the game's length: nodes at the limit are
    # evaluated again, and the path the backup walks is cut short.
    found = searches("tic_tac_toe", {"kind": "mlp", "hidden_sizes": [16]}, num_simulations=24, max_depth=4)
    for explore in (True, False):
        (mctx_action, mctx_weights), (action, weights) = found["mctx", explore], found["batched", explore]
        np.testing.assert_array_equal(action, mctx_action)
        np.testing.assert_allclose(weights, mctx_weights, rtol=1e-5, atol=1e-7)
    # The noise made the self-play search choose differently from the
    # deterministic one somewhere: both paths were exercised.
    assert not np.array_equal(found["batched", True][1], found["batched", False][1])


def test_sequential_halving_schedule_is_mctx_s():
    from mctx._src import seq_halving

    for considered, simulations in [(16, 64), (4, 12), (9, 32), (2, 5), (1, 7), (16, 200)]:
        expected = np.asarray(seq_halving.get_table_of_considered_visits(considered, simulations))
        np.testing.assert_array_equal(batched_search.considered_visits(considered, simulations), expected)


def test_batched_is_for_gumbel_only():
    data = {**TINY_AZ, "hyperparameters": {**TINY_AZ["hyperparameters"], "search": "puct", "tree_search": "batched"}}
    with pytest.raises(spec_module.SpecError, match="hyperparameters: tree_search: batched is a Gumbel MuZero search"):
        spec_module.parse(data)


def deep_search(env, net, params, games, **hyperparameters):
    """The batched self-play search's (action, weights) on `games`, at the
    tiny spec's settings updated by `hyperparameters`."""
    config = spec_module.parse({**TINY_AZ, "hyperparameters": {**TINY_AZ["hyperparameters"], "tree_search": "batched"}})
    search = make_search(config.hyperparameters.model_copy(update=hyperparameters), env, net)
    keys = jax.random.split(jax.random.key(2), GAMES)
    return jax.jit(lambda p, k, g: search(p, k, g, jnp.float32(0.0), True))(params, keys, games)


def test_what_lies_below_a_terminal_step_never_reaches_the_root():
    """Late positions (3 moves left in 6 of the 8 games: a whole tree of 16 nodes
    at most) and 24 simulations, so that paths run past the game's end:
    stepping the nodes without keys or auto-reset (`search_step`), or
    cutting paths at a depth beyond the game's length, gives the same
    actions and policy targets, bit for bit, as the keyed step with its
    next game drawn."""
    plan = build.build(spec_module.parse(TINY_AZ))
    env = plan.env
    assert env.search_step is not None  # tic-tac-toe's step takes no key
    net = make_az_network(plan.spec.network, env.num_actions, env.observation_shape)
    games = positions(env, 3, 6)
    params = jax.tree.map(lambda p: 3.0 * p, net.init(jax.random.key(1), games.timestep.observation[:1]))
    want_action, want_weights = deep_search(env._replace(search_step=None), net, params, games, num_simulations=24)
    for max_depth in (None, 10):
        action, weights = deep_search(env, net, params, games, num_simulations=24, max_depth=max_depth)
        np.testing.assert_array_equal(action, want_action)
        np.testing.assert_array_equal(weights, want_weights)
    # A cut within the game's length does change them: the test can fail.
    _, weights = deep_search(env, net, params, games, num_simulations=24, max_depth=2)
    assert not np.array_equal(weights, want_weights)


def test_only_deterministic_games_step_without_keys():
    for env_id, keyless in (("tic_tac_toe", True), ("connect_four", True), ("2048", False)):
        data = {**TINY_AZ, "env": {"suite": "pgx", "id": env_id}}
        assert (build.build(spec_module.parse(data)).env.search_step is not None) is keyless


def test_a_wrapper_changes_what_the_search_step_returns_too():
    """A wrapped game's tree search must see the wrapped observations: the
    wrapper maps `search_step`'s time steps as it maps `step`'s. Here it
    hides the centre square (entries 8 and 9), where the move is played."""
    wrapper = {"name": "mask_observation", "indices": [8, 9]}
    plain = build.build(spec_module.parse(TINY_AZ)).env
    env = build.build(spec_module.parse({**TINY_AZ, "env": {**TINY_AZ["env"], "wrappers": [wrapper]}})).env
    state, _ = env.reset(jax.random.key(0))
    centre = jnp.int32(4)
    _, unwrapped = plain.search_step(state, centre)
    _, stepped = env.step(state, centre, jax.random.key(1))
    _, searched = env.search_step(state, centre)
    assert float(unwrapped.observation.reshape(-1)[8:10].sum()) == 1.0
    np.testing.assert_array_equal(searched.observation, stepped.observation)
    assert float(searched.observation.reshape(-1)[8:10].sum()) == 0.0
