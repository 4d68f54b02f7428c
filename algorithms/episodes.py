"""Episode return and length bookkeeping shared by the on-policy algorithms."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from algorithms import parallel


class EpisodeStats(NamedTuple):
    running_return: jax.Array  # [B] return of each env's current episode
    running_length: jax.Array  # [B] steps of each env's current episode
    last_return: jax.Array  # [] mean return of the episodes that ended last
    last_length: jax.Array  # []


def update_episode_stats(
    stats: EpisodeStats, reward: jax.Array, done: jax.Array, axis_name: str | None = None
) -> EpisodeStats:
    """Accumulate one step of B envs; an ended episode's figures replace the
    last ones (averaged over the envs whose episodes ended at this step, on
    every shard of `axis_name`)."""
    episode_return = stats.running_return + reward
    episode_length = stats.running_length + 1
    ended, return_sum, length_sum = parallel.psum(
        (done.sum(), jnp.where(done, episode_return, 0.0).sum(), jnp.where(done, episode_length, 0).sum()),
        axis_name,
    )
    any_ended = ended > 0
    mean_return = return_sum / jnp.maximum(ended, 1)
    mean_length = length_sum / jnp.maximum(ended, 1)
    return EpisodeStats(
        running_return=jnp.where(done, 0.0, episode_return),
        running_length=jnp.where(done, 0, episode_length),
        last_return=jnp.where(any_ended, mean_return, stats.last_return),
        last_length=jnp.where(any_ended, mean_length.astype(jnp.float32), stats.last_length),
    )


def init_episode_stats(num_envs: int) -> EpisodeStats:
    return EpisodeStats(
        running_return=jnp.zeros((num_envs,), jnp.float32),
        running_length=jnp.zeros((num_envs,), jnp.int32),
        last_return=jnp.zeros((), jnp.float32),
        last_length=jnp.zeros((), jnp.float32),
    )
