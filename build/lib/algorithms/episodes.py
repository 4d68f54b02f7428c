"""Episode return and length bookkeeping shared by the on-policy algorithms."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from algorithms import parallel


class EpisodeStats(NamedTuple):
    running_return: jax.Array  # [B] return of each env's current episode
    running_length: jax.Array  # [B] steps of each env's current episode
    last_return: jax.Array  # [] mean return of the episodes that ended last (on every shard)
    last_length: jax.Array  # []


class Ended(NamedTuple):
    """The episodes that ended at one step (of this device's envs), per
    logical shard of them (`[S]`, S = 1 unless the run's layout is exact)."""

    count: jax.Array  # [S] episodes
    return_sum: jax.Array  # [S] their returns, summed
    length_sum: jax.Array  # [S] their lengths, summed


def step_episode_stats(
    stats: EpisodeStats, reward: jax.Array, done: jax.Array, shards: int = 1
) -> tuple[EpisodeStats, Ended]:
    """Accumulate one step of B envs, summed over each of `shards` equal
    groups of them. The running figures are updated here; the last ended
    episodes' figures are set by `finish_episode_stats`, once per rollout,
    from the `Ended` of every step."""
    episode_return = stats.running_return + reward
    episode_length = stats.running_length + 1

    def per_shard(x: jax.Array) -> jax.Array:
        return x.reshape(shards, -1).sum(-1)

    ended = Ended(
        per_shard(done.astype(jnp.int32)),
        per_shard(jnp.where(done, episode_return, 0.0)),
        per_shard(jnp.where(done, episode_length, 0)),
    )
    running = stats._replace(
        running_return=jnp.where(done, 0.0, episode_return),
        running_length=jnp.where(done, 0, episode_length),
    )
    return running, ended


def finish_episode_stats(
    stats: EpisodeStats, ended: Ended, axis_name: str | None = None, exact: bool = False
) -> EpisodeStats:
    """After a rollout of T steps (`ended` is `[T, S]`): the last step at
    which episodes ended (on any shard of `axis_name`) gives the figures,
    averaged over the episodes that ended there; with none, the previous ones
    stay. One reduction over the axis per rollout, not one per step; `exact`
    adds the logical shards' sums in shard order (`parallel.fold_sum`)."""
    if exact:
        count, return_sum, length_sum = parallel.fold_sum(tuple(jnp.moveaxis(x, 1, 0) for x in ended), axis_name)
    else:
        count, return_sum, length_sum = parallel.psum(tuple(x.sum(-1) for x in ended), axis_name)
    any_ended = count > 0
    # Index of the last step with an ending (0 when there is none; unused then).
    last = count.shape[0] - 1 - jnp.argmax(any_ended[::-1])
    episodes = jnp.maximum(count[last], 1)
    return stats._replace(
        last_return=jnp.where(any_ended.any(), return_sum[last] / episodes, stats.last_return),
        last_length=jnp.where(any_ended.any(), (length_sum[last] / episodes).astype(jnp.float32), stats.last_length),
    )


def init_episode_stats(num_envs: int) -> EpisodeStats:
    return EpisodeStats(
        running_return=jnp.zeros((num_envs,), jnp.float32),
        running_length=jnp.zeros((num_envs,), jnp.int32),
        last_return=jnp.zeros((), jnp.float32),
        last_length=jnp.zeros((), jnp.float32),
    )
