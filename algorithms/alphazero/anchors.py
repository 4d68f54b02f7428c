"""The anchors of an Elo ladder: players that depend on no run, so that a
rating against them means the same in every run, on every device.

- `random`: a uniformly random legal move (rated 0 by definition);
- `greedy`: one-ply lookahead, a winning move where there is one;
- `playouts_N`: search without a network: mctx's Gumbel MuZero search over
  the real game with N simulations, a uniform prior over the legal moves,
  every legal move considered at the root and no noise, each new node
  valued by one random playout to the game's end (Monte-Carlo tree search
  with the search AlphaZero's agent uses, its network replaced by
  playouts). Illegal moves are never searched, at the root or below.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mctx

from algorithms.alphazero.config import check_anchor
from algorithms.alphazero.opponents import greedy_player, random_player
from algorithms.alphazero.search import Games
from algorithms.base import Environment, TimeStep, random_legal_action
from algorithms.distributions import masked_logits


def anchor_player(env: Environment, name: str):
    """The anchor `name` as a player `(key, games) -> actions`."""
    check_anchor(name)
    if name == "random":
        return random_player(env)
    if name == "greedy":
        return greedy_player(env)
    return playout_player(env, int(name.removeprefix("playouts_")))


def playout_values(env: Environment, key: jax.Array, env_state, timestep: TimeStep) -> jax.Array:
    """One random playout from each of B positions to its game's end: the
    return of the player to move at the start (0 where the game is over)."""
    num_games = timestep.current_player.shape[0]
    player = timestep.current_player
    start_done = timestep.terminated | timestep.truncated

    def body(carry):
        env_state, timestep, total, finished, key = carry
        key, action_key, step_key = jax.random.split(key, 3)
        action = random_legal_action(action_key, timestep.legal_action_mask)
        env_state, timestep = jax.vmap(env.step)(env_state, action, jax.random.split(step_key, num_games))
        reward = jnp.take_along_axis(timestep.reward, player[:, None], axis=1)[:, 0]
        total = total + jnp.where(finished, 0.0, reward)
        return env_state, timestep, total, finished | timestep.terminated | timestep.truncated, key

    init = (env_state, timestep, jnp.zeros(num_games, jnp.float32), start_done, key)
    return jax.lax.while_loop(lambda carry: ~carry[3].all(), body, init)[2]


def playout_player(env: Environment, num_simulations: int):
    """Search with a uniform prior and random-playout values."""

    def act(key, games: Games):
        num_games = games.length.shape[0]
        root_key, search_key = jax.random.split(key)

        def uniform(timestep: TimeStep) -> jax.Array:
            return masked_logits(jnp.zeros(timestep.legal_action_mask.shape), timestep.legal_action_mask)

        def recurrent_fn(params, key, action, embedding):
            env_state, timestep = embedding
            mover = timestep.current_player
            step_key, playout_key = jax.random.split(key)
            env_state, next_ts = jax.vmap(env.step)(env_state, action, jax.random.split(step_key, num_games))
            done = next_ts.terminated | next_ts.truncated
            reward = jnp.take_along_axis(next_ts.reward, mover[:, None], axis=1)[:, 0]
            sign = jnp.where(next_ts.current_player == mover, 1.0, -1.0)
            value = playout_values(env, playout_key, env_state, next_ts)
            output = mctx.RecurrentFnOutput(
                reward=reward,
                discount=jnp.where(done, 0.0, sign),
                prior_logits=uniform(next_ts),
                value=jnp.where(done, 0.0, value),
            )
            return output, (env_state, next_ts)

        root = mctx.RootFnOutput(
            prior_logits=uniform(games.timestep),
            value=playout_values(env, root_key, games.env_state, games.timestep),
            embedding=(games.env_state, games.timestep),
        )
        out = mctx.gumbel_muzero_policy(
            None,
            search_key,
            root,
            recurrent_fn,
            num_simulations,
            invalid_actions=~games.timestep.legal_action_mask,
            max_num_considered_actions=env.num_actions,
            gumbel_scale=0.0,
        )
        return out.action

    return act
