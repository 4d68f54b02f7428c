"""AlphaZero's strength on a scale that stays put, where the game is solved:
the final network, searching without noise, against a perfect player, and
its moves held to the game-theoretic values.

The env gives each move's value for the mover (`Environment.solution`:
+1 a win, 0 a draw, -1 a loss under perfect play after it, below -1 where
the move is not legal). The perfect player picks at random among the moves
of the best value, so that its games differ. Metrics:

- `perfect_loss`: the agent's share of lost games against the perfect
  player, its side alternating; a perfect agent never loses;
- `perfect_first_loss`, `perfect_first_draw` (and `_second_`): the agent's
  share of lost and drawn games against the perfect player when it moved
  first (second);
- `perfect_games_kept`: the share of the agent's moves in those games that
  keep the value of the position it moved from;
- `perfect_positions_kept`: the same over every position the env lists
  (`Environment.positions`: for tic-tac-toe all 4,520 reachable positions
  with a move to make), each searched once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from algorithms import base
from algorithms.alphazero.opponents import games_of_play, play, searching_player
from algorithms.alphazero.search import Games
from algorithms.base import Environment


def perfect_player(env: Environment):
    """A player that keeps the value of every position, at random among the moves that do."""

    def act(key, games: Games):
        values = jax.vmap(env.solution)(games.env_state)
        best = values.max(axis=-1, keepdims=True)
        return jax.random.categorical(key, jnp.where(values == best, 0.0, -jnp.inf))

    return act


def kept(env: Environment, env_state: Any, action: jax.Array) -> jax.Array:
    """Whether `action` keeps the value of the position `env_state` (one game)."""
    values = env.solution(env_state)
    return values[action] == values.max()


def make_strength(env: Environment, search: Callable, num_games: int) -> Callable[[Any, jax.Array], base.Metrics]:
    """`strength(params, key) -> metrics`: `num_games` games against the
    perfect player (the agent's side alternating), and the agent's move at
    each of the env's positions."""

    def strength(params, key: jax.Array) -> base.Metrics:
        agent = searching_player(search, params)
        games_key, positions_key = jax.random.split(key)
        start, _ = games_of_play(env, games_key, num_games)  # the games `play` starts from
        first = start.timestep.current_player == jnp.arange(num_games) % env.num_players

        def keeps_value(games: Games, actions: jax.Array) -> jax.Array:
            return jax.vmap(lambda state, action: kept(env, state, action))(games.env_state, actions)

        total, moves, keeps = play(env, games_key, num_games, agent, perfect_player(env), keeps_value)
        states, timesteps = env.positions()
        count = timesteps.current_player.shape[0]
        at = Games(states, timesteps, jnp.zeros(count, jnp.float32), jnp.zeros(count, jnp.int32))
        actions = agent(positions_key, at)
        positions_kept = keeps_value(at, actions).mean()

        def share(mask, of):
            return jnp.where(of.any(), (mask & of).sum() / jnp.maximum(of.sum(), 1), jnp.nan)

        return {
            "perfect_loss": (total < 0).mean(),
            "perfect_first_loss": share(total < 0, first),
            "perfect_first_draw": share(total == 0, first),
            "perfect_second_loss": share(total < 0, ~first),
            "perfect_second_draw": share(total == 0, ~first),
            "perfect_games_kept": keeps.sum() / jnp.maximum(moves.sum(), 1),
            "perfect_positions_kept": positions_kept,
        }

    return strength
