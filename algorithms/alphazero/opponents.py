"""Evaluation: whole games between the agent and fixed opponents (a
uniform-random player, a greedy one-ply player, earlier parameters), and
approximate Elo ratings against a pool of earlier parameters."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from algorithms import parallel
from algorithms.alphazero.search import Games
from algorithms.base import Environment, random_legal_action

ELO_RANGE = 100_000.0  # ratings are searched in [-ELO_RANGE, ELO_RANGE]


def searching_player(search: Callable, params: Any, threshold: jax.Array | None = None):
    """The network `params` searching without noise (`search`:
    `alphazero.search.make_search`), each game under its own key, as a
    player; single-player tasks rank the tree's outcomes against
    `threshold`, as in self-play."""

    def act(key, games: Games):
        keys = jax.random.split(key, games.length.shape[0])
        return search(params, keys, games, jnp.zeros(()) if threshold is None else threshold, explore=False)[0]

    return act


def random_player(env: Environment):
    def act(key, games: Games):
        return random_legal_action(key, games.timestep.legal_action_mask)

    return act


def greedy_player(env: Environment):
    """One-ply lookahead: the legal move with the largest immediate reward
    for the mover (a win, in a board game), ties broken at random."""

    def act(key, games: Games):
        num_games = games.length.shape[0]
        actions = jnp.arange(env.num_actions)
        step_keys = jax.random.split(jax.random.fold_in(key, 1), num_games)

        def rewards_of(env_state, timestep, step_key):
            def try_action(action):
                _, next_ts = env.step(env_state, action, step_key)
                return next_ts.reward[timestep.current_player]

            return jax.vmap(try_action)(actions)

        rewards = jax.vmap(rewards_of)(games.env_state, games.timestep, step_keys)
        noise = jax.random.uniform(key, rewards.shape, maxval=1e-3)
        return jnp.argmax(jnp.where(games.timestep.legal_action_mask, rewards + noise, -jnp.inf), axis=-1)

    return act


def start_games(env: Environment, key: jax.Array, num_games: int, axis_name: str | None = None) -> Games:
    """`num_games` new games (this shard's part of them, under `axis_name`)."""
    env_state, timestep = jax.vmap(env.reset)(parallel.split(key, num_games, axis_name))
    local = parallel.local_count(num_games, axis_name)
    return Games(env_state, timestep, jnp.zeros(local, jnp.float32), jnp.zeros(local, jnp.int32))


def games_of_play(env: Environment, key: jax.Array, num_games: int) -> tuple[Games, jax.Array]:
    """The games `play(env, key, num_games, ...)` starts from, and the key
    its moves are drawn from."""
    start_key, loop_key = jax.random.split(key)
    return start_games(env, start_key, num_games), loop_key


def optimality_gap(env: Environment, key: jax.Array, num_games: int, totals: jax.Array) -> tuple[jax.Array, jax.Array]:
    """For the games `play(env, key, num_games, ...)` played, with returns
    `totals [num_games]`: each game's optimum (`env.optimum` of its start)
    and its gap `1 - return / optimum` (0 where the optimum is 0)."""
    games, _ = games_of_play(env, key, num_games)
    optimum = jax.vmap(env.optimum)(games.env_state)
    gap = jnp.where(optimum > 0, 1.0 - totals / jnp.where(optimum > 0, optimum, 1.0), 0.0)
    return optimum, gap


def play(env: Environment, key: jax.Array, num_games: int, agent, opponent, tally=None):
    """Play `num_games` games to their end, the agent as player `g % 2` of
    game g (player 0 in a single-player task, where `opponent` is unused).
    `agent` and `opponent` map `(key, games) -> actions [num_games]`.
    Returns the agent's total reward per game; with `tally` (`(games,
    actions) -> [num_games] bool`), also, per game, how many moves the agent
    made and of how many of them `tally` held: `(totals, moves, held)`."""
    games, loop_key = games_of_play(env, key, num_games)
    agent_player = jnp.arange(num_games) % env.num_players

    def body(carry):
        games, total, finished, key, *counts = carry
        key, agent_key, opponent_key, step_key = jax.random.split(key, 4)
        action = agent(agent_key, games)
        if env.num_players > 1:
            action = jnp.where(games.timestep.current_player == agent_player, action, opponent(opponent_key, games))
        if tally is not None:
            mine = (games.timestep.current_player == agent_player) & ~finished
            counts = [counts[0] + mine, counts[1] + (mine & tally(games, action))]
        env_state, timestep = jax.vmap(env.step)(games.env_state, action, jax.random.split(step_key, num_games))
        reward = jnp.take_along_axis(timestep.reward, agent_player[:, None], axis=1)[:, 0]
        total = total + jnp.where(finished, 0.0, reward)
        finished = finished | timestep.terminated | timestep.truncated
        return Games(env_state, timestep, games.episode_return, games.length + 1), total, finished, key, *counts

    def cond(carry):
        return ~carry[2].all()

    counts = () if tally is None else (jnp.zeros(num_games, jnp.int32), jnp.zeros(num_games, jnp.int32))
    init = (games, jnp.zeros(num_games, jnp.float32), jnp.zeros(num_games, bool), loop_key, *counts)
    out = jax.lax.while_loop(cond, body, init)
    return out[1] if tally is None else (out[1], out[4], out[5])


def by_slices(players, sizes: tuple[int, ...]):
    """One `(key, games) -> actions` from several, each playing its own
    consecutive slice of the games (`sizes[i]` games for `players[i]`)."""

    def act(key, games: Games):
        actions, start = [], 0
        for i, (player, size) in enumerate(zip(players, sizes, strict=True)):
            part = jax.tree.map(lambda x, a=start, b=start + size: x[a:b], games)
            actions.append(player(jax.random.fold_in(key, i), part))
            start += size
        return jnp.concatenate(actions)

    return act


def pool_params_count(pool_params: Any) -> int:
    return jax.tree.leaves(pool_params)[0].shape[0]


def outcome_rates(total: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Win, draw and loss rates from the agent's per-game totals."""
    return (total > 0).mean(), (total == 0).mean(), (total < 0).mean()


def elo_expected(difference: jax.Array) -> jax.Array:
    return 1.0 / (1.0 + 10.0 ** (-difference / 400.0))


def bisect(increasing: Callable, low: jax.Array, high: jax.Array, steps: int) -> jax.Array:
    """Where `increasing` crosses 0 in [low, high], after `steps` halvings."""

    def halve(_, bounds):
        low, high = bounds
        mid = (low + high) / 2
        up = increasing(mid) > 0
        return jnp.where(up, low, mid), jnp.where(up, mid, high)

    low, high = jax.lax.fori_loop(0, steps, halve, (low, high))
    return (low + high) / 2


def elo_rating(scores: jax.Array, ratings: jax.Array, valid: jax.Array) -> jax.Array:
    """The rating R at which the expected score against the valid opponents
    (ratings R_j) equals the score achieved: the maximum-likelihood Elo of a
    newcomer against a fixed pool, found by bisection. 0 with no opponents."""

    def surplus(r):
        return jnp.sum(jnp.where(valid, elo_expected(r - ratings) - scores, 0.0))

    rating = bisect(surplus, jnp.float32(-ELO_RANGE), jnp.float32(ELO_RANGE), 60)
    return jnp.where(valid.any(), rating, 0.0)


class Pool(NamedTuple):
    """Earlier parameters, with their ratings, for evaluation."""

    params: Any  # [P, ...]
    rating: jax.Array  # [P]
    valid: jax.Array  # [P] bool
    age: jax.Array  # [P] int32, when each was added (evaluation count)


def pool_init(params: Any, size: int) -> Pool:
    """A pool of `size` slots holding only `params` (rated 0)."""
    return Pool(
        params=jax.tree.map(lambda p: jnp.broadcast_to(p, (size, *p.shape)), params),
        rating=jnp.zeros(size, jnp.float32),
        valid=jnp.arange(size) == 0,
        age=jnp.zeros(size, jnp.int32),
    )


def pool_admit(pool: Pool, params: Any, rating: jax.Array, evaluation: jax.Array) -> Pool:
    """`params`, rated `rating` at evaluation number `evaluation`, take a
    free slot, else the oldest one that does not hold the best rating."""
    size = pool.rating.shape[0]
    best = jnp.argmax(jnp.where(pool.valid, pool.rating, -jnp.inf))
    order = jnp.where(~pool.valid, -1, jnp.where(jnp.arange(size) == best, jnp.iinfo(jnp.int32).max, pool.age))
    slot = jnp.argmin(order)
    return Pool(
        params=jax.tree.map(lambda p, new: p.at[slot].set(new), pool.params, params),
        rating=pool.rating.at[slot].set(rating),
        valid=pool.valid.at[slot].set(True),
        age=pool.age.at[slot].set(evaluation),
    )
