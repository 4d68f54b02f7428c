"""AlphaZero: search, buffer targets, ranked rewards, Elo, legality, and
end-to-end determinism, on real pgx and jumanji environments."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from support import TINY_AZ

from algorithms import alphazero
from algorithms.alphazero import AlphaZeroConfig
from algorithms.alphazero.networks import make_az_network
from algorithms.base import Environment
from harness import envs
from harness.experiment_spec import NetworkSpec, SpecError
from harness.run import runner


def tic_tac_toe() -> Environment:
    return envs.make("pgx", "tic_tac_toe")[0]


def position(env: Environment, moves: list[int]) -> alphazero.Games:
    """The game after `moves` (cells 0-8, X first), as a batch of one (the
    env's step jitted: one compile, not one per operation)."""
    state, timestep = jax.jit(env.reset)(jax.random.key(0))
    step = jax.jit(env.step)
    for cell in moves:
        state, timestep = step(state, jnp.int32(cell), jax.random.key(1))
        assert not timestep.terminated
    batch = jax.tree.map(lambda x: x[None], (state, timestep))
    return alphazero.Games(*batch, jnp.zeros(1), jnp.zeros(1, jnp.int32))


@functools.cache
def _searcher(search: str):
    """tic-tac-toe, a network's parameters and the jitted search (compiled
    once per kind of search, for every position)."""
    env = tic_tac_toe()
    # Gumbel with the batched search, the published specs' (it chooses as
    # mctx's does: test_batched_search); PUCT with mctx's.
    config = AlphaZeroConfig(
        search=search, num_simulations=128, tree_search="batched" if search == "gumbel" else "mctx"
    )
    net = make_az_network(NetworkSpec(kind="mlp", hidden_sizes=(16,)), env.num_actions, env.observation_shape)
    params = net.init(jax.random.key(0), jnp.zeros(env.observation_shape))
    return env, params, jax.jit(alphazero.make_search(config, env, net), static_argnames="explore")


@pytest.mark.parametrize("search", ["gumbel", "puct"])
@pytest.mark.parametrize(
    ("moves", "expected", "why"),
    [
        ([0, 3, 1, 4], 2, "X completes the top row"),
        ([0, 3, 8, 4], 5, "X blocks O's middle row"),
    ],
)
def test_search_wins_and_blocks(search, moves, expected, why):
    env, params, search_fn = _searcher(search)
    games = position(env, moves)
    for seed in range(3):
        action, policy = search_fn(params, jax.random.key(seed)[None], games, jnp.zeros(()), explore=False)
        assert int(action[0]) == expected, why
        assert np.all(np.asarray(policy[0])[~np.asarray(games.timestep.legal_action_mask[0])] == 0)


def test_value_targets_carry_each_players_outcome():
    """A real game X0 O3 X1 O4 X2: X's moves are worth +1, O's -1."""
    env = tic_tac_toe()
    state, timestep = env.reset(jax.random.key(0))
    buffer = alphazero.buffer_init(1, 8, env.observation_shape, env.num_actions)
    x_player = int(timestep.current_player)
    for cell in [0, 3, 1, 4, 2]:
        buffer = alphazero.buffer_add(
            buffer, timestep.observation[None], jnp.zeros((1, env.num_actions)), timestep.current_player[None]
        )
        state, timestep = env.step(state, jnp.int32(cell), jax.random.key(1))
        buffer = alphazero.buffer_end_episodes(
            buffer, timestep.terminated[None], timestep.truncated[None], timestep.reward[None]
        )
    assert bool(timestep.terminated)
    players = np.asarray(buffer.player[0, :5])
    np.testing.assert_array_equal(players == x_player, [True, False, True, False, True])
    np.testing.assert_array_equal(np.asarray(buffer.value[0, :5]), np.where(players == x_player, 1.0, -1.0))
    assert np.asarray(buffer.ready[0, :5]).all() and not np.asarray(buffer.ready[0, 5:]).any()
    assert not np.asarray(buffer.pending).any()


def test_truncated_episodes_never_get_targets():
    buffer = alphazero.buffer_init(2, 4, (1,), 2)
    for _ in range(3):
        buffer = alphazero.buffer_add(buffer, jnp.zeros((2, 1)), jnp.zeros((2, 2)), jnp.zeros(2, jnp.int32))
    outcome = jnp.array([[1.0], [1.0]])
    buffer = alphazero.buffer_end_episodes(buffer, jnp.array([True, False]), jnp.array([False, True]), outcome)
    np.testing.assert_array_equal(np.asarray(buffer.ready), [[1, 1, 1, 0], [0, 0, 0, 0]])
    assert not np.asarray(buffer.pending).any()
    # The truncated row has nothing to sample; the other row is all that is drawn.
    _, _, value, weight = alphazero.buffer_sample(buffer, jax.random.key(0), 64)
    assert np.asarray(weight).all() and np.all(np.asarray(value) == 1.0)
    _, _, _, weight = alphazero.buffer_sample(alphazero.buffer_init(2, 4, (1,), 2), jax.random.key(0), 8)
    assert not np.asarray(weight).any()


def test_ranked_reward_rule():
    memory = alphazero.ranked_memory_init(2, 4)
    threshold = alphazero.ranked_threshold(memory, 0.75)
    assert np.isneginf(float(threshold))  # nothing remembered yet: everything ranks +1
    returns = jnp.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])
    for pair in returns.reshape(4, 2):
        memory = alphazero.ranked_memory_add(memory, pair, jnp.array([True, True]))
    threshold = float(alphazero.ranked_threshold(memory, 0.75))
    assert threshold == pytest.approx(np.quantile(np.arange(1, 9), 0.75))  # 6.25
    ranked = alphazero.ranked_reward(jnp.array([7.0, 6.0, 1.0]), jnp.float32(threshold), jax.random.key(0))
    np.testing.assert_array_equal(np.asarray(ranked), [1.0, -1.0, -1.0])
    # A tie is a fair coin.
    ties = alphazero.ranked_reward(jnp.full(1000, 5.0), jnp.float32(5.0), jax.random.key(1))
    assert set(np.unique(np.asarray(ties))) == {-1.0, 1.0}
    assert abs(float(ties.mean())) < 0.1
    # Only ended episodes enter the memory, and the oldest entry makes way.
    memory = alphazero.ranked_memory_add(memory, jnp.array([100.0, 100.0]), jnp.array([True, False]))
    np.testing.assert_array_equal(np.asarray(memory.returns), [[100, 3, 5, 7], [2, 4, 6, 8]])


def test_elo_rating():
    one = jnp.array([True, False])
    # Score 0.75 against a 0-rated player is 400 log10(3) above it.
    rating = alphazero.elo_rating(jnp.array([0.75, 0.0]), jnp.array([0.0, 0.0]), one)
    assert float(rating) == pytest.approx(400 * np.log10(3), abs=0.5)
    even = alphazero.elo_rating(jnp.array([0.5, 0.5]), jnp.array([100.0, 300.0]), jnp.array([True, True]))
    assert float(even) == pytest.approx(200.0, abs=0.5)
    assert float(alphazero.elo_rating(jnp.zeros(2), jnp.zeros(2), jnp.zeros(2, bool))) == 0.0


def count_illegal(env: Environment) -> Environment:
    """The env, counting in its state the moves made against its legal mask."""

    def reset(key):
        state, timestep = env.reset(key)
        return (state, timestep.legal_action_mask, jnp.int32(0)), timestep

    def step(state, action, key):
        inner, mask, illegal = state
        inner, timestep = env.step(inner, action, key)
        return (inner, timestep.legal_action_mask, illegal + (~mask[action]).astype(jnp.int32)), timestep

    def search_step(state, action):
        # The search tree's moves (below the root, unmasked) never reach
        # the games' states: only the self-play moves are counted.
        inner, _, illegal = state
        inner, timestep = env.search_step(inner, action)
        return (inner, timestep.legal_action_mask, illegal), timestep

    return env._replace(reset=reset, step=step, search_step=search_step)


def test_self_play_never_plays_an_illegal_move():
    """On connect_four, where a full column's move is illegal mid-game (the
    masking is the search's, the same for every pgx game), with the batched
    search, the published specs'."""
    env = count_illegal(envs.make("pgx", "connect_four")[0])
    config = AlphaZeroConfig(num_envs=64, collection_steps=16, num_simulations=4, train_steps=1, tree_search="batched")
    algorithm = alphazero.make_alphazero(
        config, env, network=NetworkSpec(kind="mlp", hidden_sizes=(16,)), optimizer=optax.adam(1e-3)
    )
    state, _ = runner.init_state(algorithm, (0, 1))
    chunk = runner.make_chunk(algorithm.step, 4)
    state, metrics = chunk(state)
    state, metrics = chunk(state)
    games_finished = int(np.asarray(metrics["games_finished"]).sum())
    assert games_finished > 100  # many complete random-ish games per seed
    assert int(np.asarray(state.games.env_state[2]).sum()) == 0


def test_tiny_alphazero_runs_are_bit_identical(tiny_az_runs):
    (plan, first), (_, second) = tiny_az_runs
    assert plan.num_iterations == 12
    assert set(first.metrics) >= {"loss", "policy_loss", "value_loss", "draw_rate", "episode_length"}
    assert set(first.evaluation) >= {"eval_random_win", "eval_greedy_loss", "eval_best_draw", "elo"}
    assert first.evaluation_iterations == (3, 6, 9, 12)
    for name in first.metrics:
        np.testing.assert_array_equal(first.metrics[name], second.metrics[name], err_msg=name)
    for name in first.evaluation:
        np.testing.assert_array_equal(first.evaluation[name], second.evaluation[name], err_msg=name)
    rates = sum(first.evaluation[f"eval_random_{k}"] for k in ("win", "draw", "loss"))
    np.testing.assert_allclose(rates, 1.0)


def test_a_resnet_maps_its_seeds_one_after_another(tiny_az_runs):
    """What `Algorithm.map_seeds` changes is the runner's (see
    test_reinforce's test of mapped seeds); AlphaZero asks for it with a
    ResNet only."""
    plan, _ = tiny_az_runs[0]
    config = AlphaZeroConfig(num_envs=4, collection_steps=2, num_simulations=2, train_steps=1)
    resnet = NetworkSpec(kind="resnet", num_blocks=1, num_channels=4)
    assert alphazero.make_alphazero(config, tic_tac_toe(), network=resnet, optimizer=optax.adam(1e-3)).map_seeds
    assert not plan.algorithm.map_seeds  # the tiny spec's MLP


@pytest.mark.parametrize(
    ("change", "key", "needle"),
    [
        ({"network": {"kind": "resnet"}, "env": {"suite": "gymnax", "id": "CartPole-v1"}}, "network.kind", "board"),
        ({"network": {"kind": "gru"}}, "network.kind", "alphazero takes resnet, mlp, item_set"),
        ({"env": {"suite": "gymnax", "id": "Pendulum-v1"}}, "env.id", "discrete"),
    ],
)
def test_bad_alphazero_specs(change, key, needle):
    from harness import build
    from harness import experiment_spec as spec_module

    with pytest.raises(SpecError) as error:
        build.build(spec_module.parse({**TINY_AZ, **change}))
    assert f": {key}" in str(error.value) and needle in str(error.value)


def test_resnet_is_refused_for_ppo():
    from harness import experiment_spec as spec_module

    data = {
        "name": "x",
        "algorithm": "ppo",
        "env": {"suite": "gymnax", "id": "CartPole-v1"},
        "seeds": [0],
        "budget": {"env_steps": 1000},
        "network": {"kind": "resnet"},
    }
    with pytest.raises(
        SpecError, match="network.kind: resnet is a network for alphazero; ppo takes mlp, gru, grid, grid_gru"
    ):
        spec_module.parse(data)


def test_resnet_forms_agree():
    """Search runs the ResNet's convolutions; training differentiates their
    matmul form (`conv_gradient: matmul`) or the convolutions themselves
    (`conv`): the same outputs and, to float rounding, the same gradients."""
    obs = jax.random.normal(jax.random.key(1), (5, 6, 7, 2))

    def net(conv_gradient, for_gradients):
        spec = NetworkSpec(kind="resnet", num_blocks=2, num_channels=8, conv_gradient=conv_gradient)
        return make_az_network(spec, 7, (6, 7, 2), for_gradients=for_gradients)

    search = net("matmul", for_gradients=False)
    train = {name: net(name, for_gradients=True) for name in ("matmul", "conv")}
    params = search.init(jax.random.key(0), jnp.zeros((6, 7, 2)))
    outputs = jax.jit(search.apply)(params, obs)
    for form in train.values():
        for a, b in zip(outputs, jax.jit(form.apply)(params, obs), strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)

    def gradient(form):
        return jax.jit(jax.grad(lambda p: sum(jnp.sum(jnp.sin(out)) for out in form.apply(p, obs))))(params)

    for a, b in zip(*(jax.tree.leaves(gradient(form)) for form in train.values()), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)


def test_alphazero_reproduction_is_judged_on_its_evaluation_curves(tiny_az_runs):
    from harness.judge import reproduce
    from harness.sessions import results

    (plan, first), (_, second) = tiny_az_runs
    reference = results.make_results(plan, first, 1.0, 0.0)
    verdict = reproduce.judge(reference, results.make_results(plan, second, 1.0, 0.0), "reference")
    assert verdict.mode == "exact" and verdict.passed
    assert [m.name for m in verdict.metrics if m.name == "eval_random_win" and m.gates]
    curve = reference.evaluation_curves.metrics["eval_random_win"]["1"]
    curve[0] = curve[0] + 0.25  # a planted change in one seed's evaluation curve
    verdict = reproduce.judge(reference, results.make_results(plan, second, 1.0, 0.0), "reference")
    failed = [m.name for m in verdict.metrics if not m.passed]
    assert not verdict.passed and failed == ["eval_random_win"]
