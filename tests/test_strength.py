"""AlphaZero's strength where the game is solved (harness.envs.pgx_tic_tac_toe,
algorithms.alphazero.strength): tic-tac-toe's values against known ones,
the perfect player, and the figures a solved env's runs get."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from algorithms.alphazero.strength import make_strength, perfect_player
from harness import envs
from harness.envs import pgx_tic_tac_toe as solved


def test_tic_tac_toe_is_solved_by_minimax():
    values, reachable = solved.solve()
    assert reachable.sum() == 5478  # positions reachable from the empty board
    assert (values.max(axis=1) > solved.ILLEGAL).sum() == 4520  # of them, with a move to make
    assert values[0].max() == 0 and (values[0] == 0).all()  # the empty board: a draw, whatever the first move
    # X in a corner: O's only drawing reply is the centre; an adjacent edge loses.
    x_corner = solved.code_of([2, 0, 0, 0, 0, 0, 0, 0, 0])  # from O's side: X's mark is "the other's"
    assert values[x_corner, 4] == 0 and values[x_corner, 1] == -1
    # The side to move can complete a line: that move wins; a move elsewhere lets the other win.
    wins = solved.code_of([1, 1, 0, 2, 2, 0, 0, 0, 0])
    assert values[wins, 2] == 1 and values[wins, 8] == -1 and values[wins, 0] == solved.ILLEGAL


@functools.cache
def _env():
    return envs.make("pgx", "tic_tac_toe")[0]


def _as_search(player):
    """A player as the search `make_strength` asks for."""

    def search(params, keys, games, threshold, explore):
        return player(keys[0], games), None

    return search


def _random(key, games):
    return jax.random.categorical(key, jnp.where(games.timestep.legal_action_mask, 0.0, -jnp.inf))


@pytest.mark.parametrize("name, player", [("perfect", None), ("random", _random)])
def test_the_perfect_player_never_loses_and_a_random_one_does(name, player):
    env = _env()
    agent = perfect_player(env) if player is None else player
    metrics = jax.jit(make_strength(env, _as_search(agent), 64))(None, jax.random.key(0))
    metrics = {k: float(v) for k, v in metrics.items()}
    if name == "perfect":
        assert metrics["perfect_first_loss"] == metrics["perfect_second_loss"] == 0.0
        assert metrics["perfect_first_draw"] == metrics["perfect_second_draw"] == 1.0
        assert metrics["perfect_games_kept"] == metrics["perfect_positions_kept"] == 1.0
    else:
        assert metrics["perfect_first_loss"] + metrics["perfect_second_loss"] > 0.5
        assert metrics["perfect_games_kept"] < 0.9 and metrics["perfect_positions_kept"] < 0.9


def test_positions_are_the_solved_ones_as_pgx_states():
    env = _env()
    states, timesteps = jax.jit(env.positions)()
    values = np.asarray(jax.vmap(env.solution)(states))
    assert values.shape == (4520, 9)
    np.testing.assert_array_equal(values > solved.ILLEGAL, np.asarray(timesteps.legal_action_mask))


def test_an_exact_reproduction_compares_a_figure_without_a_curve_seed_by_seed():
    """The assessment's figures have no curve: an exact verdict holds each
    seed's final value to the reference's, bit for bit."""
    from pathlib import Path

    from harness.judge import differences
    from harness.record import schema

    path = Path(__file__).resolve().parents[1] / "results" / "reinforce_cartpole.json"
    reference = schema.parse(path.read_text(), str(path))
    finals = {seed: {**values, "perfect_loss": 0.25} for seed, values in reference.per_seed_final.items()}
    reference = reference.model_copy(update={"per_seed_final": finals})
    assert differences.at_curve_points(reference, reference, "perfect_loss") is None
    changed = {**finals, str(reference.seeds[1]): {**finals[str(reference.seeds[1])], "perfect_loss": 0.5}}
    found = differences.at_curve_points(
        reference, reference.model_copy(update={"per_seed_final": changed}), "perfect_loss"
    )
    assert found["seed"] == reference.seeds[1] and found["count"] == 1
