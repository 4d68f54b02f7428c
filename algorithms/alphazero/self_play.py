"""AlphaZero's self-play (`make_alphazero`'s collection): `num_envs` games
run in parallel for `collection_steps` moves under `lax.scan`, with
auto-reset, each move chosen by a search with exploration. Each move's
observation, search policy and player go into the game's buffer row; when a
game ends, all its moves get their value target, the final reward of the
player who made them (single-player tasks: the ranked reward of the
episode's return against the recent returns' quantile). Games cut by a time
limit never get one."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from algorithms import parallel
from algorithms.alphazero.buffer import Buffer, buffer_add, buffer_end_episodes
from algorithms.alphazero.config import AlphaZeroConfig
from algorithms.alphazero.ranked import RankedMemory, ranked_memory_add, ranked_reward, ranked_threshold
from algorithms.alphazero.search import Games
from algorithms.alphazero.state import SelfPlayStats
from algorithms.base import Environment

# What one call of self-play returns: the games, buffer and ranked memory
# after it, the figures of the games that ended during it (sums: count,
# length, return, draws) and the ranked-reward threshold it used.
SelfPlay = Callable[..., tuple[Games, Buffer, RankedMemory, dict, jax.Array]]


def make_self_play(
    config: AlphaZeroConfig, env: Environment, search: Callable, axis_name: str | None, shards: int | None
) -> SelfPlay:
    """`self_play(params, games, buffer, ranked, key)`. With `shards` (an
    exact layout), the figures of ended games are summed over all games in
    game order, the same bits on any number of devices."""
    single_player = env.num_players == 1

    def move(params, threshold, carry, key):
        games, buffer, ranked = carry
        search_key, env_key, coin_key = jax.random.split(key, 3)
        search_keys = parallel.split(search_key, config.num_envs, axis_name)
        action, policy = search(params, search_keys, games, threshold, explore=True)
        timestep = games.timestep
        buffer = buffer_add(buffer, timestep.observation, policy, timestep.current_player)
        env_keys = parallel.split(env_key, config.num_envs, axis_name)
        env_state, next_ts = jax.vmap(env.step)(games.env_state, action, env_keys)
        done = next_ts.terminated | next_ts.truncated
        episode_return = games.episode_return + next_ts.reward[:, 0]
        if single_player:
            outcome = ranked_reward(episode_return, threshold, coin_key, axis_name)[:, None]
            ranked = ranked_memory_add(ranked, episode_return, next_ts.terminated)
        else:
            outcome = next_ts.reward
        buffer = buffer_end_episodes(buffer, next_ts.terminated, next_ts.truncated, outcome)
        length = games.length + 1
        ended = {
            "count": done,
            "length": jnp.where(done, length, 0),
            "return": jnp.where(done, episode_return, 0.0),
            "draws": next_ts.terminated & jnp.all(next_ts.reward == 0, axis=-1),
        }
        if shards is None:
            ended = jax.tree.map(jnp.sum, ended)
        else:  # every game's, in game order, on every device: one sum on any layout
            ended = jax.tree.map(jnp.sum, parallel.all_gather(ended, axis_name))
        games = Games(env_state, next_ts, jnp.where(done, 0.0, episode_return), jnp.where(done, 0, length))
        return (games, buffer, ranked), ended

    def self_play(params, games: Games, buffer: Buffer, ranked: RankedMemory, key: jax.Array):
        if single_player:
            threshold = ranked_threshold(ranked, config.ranked_reward.quantile, axis_name)
        else:
            threshold = jnp.zeros(())
        keys = jax.random.split(key, config.collection_steps)
        (games, buffer, ranked), ended = jax.lax.scan(
            lambda carry, key: move(params, threshold, carry, key), (games, buffer, ranked), keys
        )
        ended = jax.tree.map(jnp.sum, ended)
        if shards is None:
            ended = parallel.psum(ended, axis_name)
        return games, buffer, ranked, ended, threshold

    return self_play


def latest_stats(previous: SelfPlayStats, ended: dict) -> SelfPlayStats:
    """The figures of the games that ended in this iteration's self-play,
    or `previous` where none did."""
    any_ended = ended["count"] > 0
    count = jnp.maximum(ended["count"], 1)
    return SelfPlayStats(
        length=jnp.where(any_ended, ended["length"] / count, previous.length),
        episode_return=jnp.where(any_ended, ended["return"] / count, previous.episode_return),
        draw_rate=jnp.where(any_ended, ended["draws"] / count, previous.draw_rate),
    )


def ready_fraction(buffer: Buffer, config: AlphaZeroConfig, axis_name: str | None, shards: int | None) -> jax.Array:
    """The fraction of the buffer's moves that have a value target (over
    all devices; exact on an exact layout: a count)."""
    if shards is None:
        return parallel.pmean(buffer.ready.mean(), axis_name)
    return parallel.psum(buffer.ready.sum(), axis_name) / (config.num_envs * config.capacity)
