"""Ranked rewards for single-player tasks: an episode's return against the
`quantile` of recent returns gives +1 above, -1 below and a fair coin on a
tie (Laterre et al. 2018)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from algorithms import parallel


class RankedMemory(NamedTuple):
    """Recent complete episode returns, `memory` per game row."""

    returns: jax.Array  # [B, M]
    valid: jax.Array  # [B, M] bool
    pointer: jax.Array  # [B] int32


def ranked_memory_init(num_envs: int, memory: int) -> RankedMemory:
    return RankedMemory(
        jnp.zeros((num_envs, memory), jnp.float32), jnp.zeros((num_envs, memory), bool), jnp.zeros(num_envs, jnp.int32)
    )


def ranked_threshold(memory: RankedMemory, quantile: float, axis_name: str | None = None) -> jax.Array:
    """The `quantile` of the remembered returns (of every shard's rows); -inf
    while there are none."""
    valid, returns = parallel.all_gather((memory.valid, memory.returns), axis_name)
    values = jnp.where(valid, returns, jnp.nan).reshape(-1)
    threshold = jnp.nanquantile(values, quantile)
    return jnp.where(valid.any(), threshold, -jnp.inf)


def ranked_reward(returns: jax.Array, threshold: jax.Array, key: jax.Array, axis_name: str | None = None) -> jax.Array:
    """+1 above the threshold, -1 below, a fair coin on a tie."""
    coin = jnp.where(parallel.bernoulli(key, 0.5, returns.shape, axis_name), 1.0, -1.0)
    return jnp.where(returns > threshold, 1.0, jnp.where(returns < threshold, -1.0, coin))


def ranked_memory_add(memory: RankedMemory, returns: jax.Array, ended: jax.Array) -> RankedMemory:
    rows = jnp.arange(returns.shape[0])
    column = memory.pointer
    return RankedMemory(
        returns=memory.returns.at[rows, column].set(jnp.where(ended, returns, memory.returns[rows, column])),
        valid=memory.valid.at[rows, column].set(memory.valid[rows, column] | ended),
        pointer=jnp.where(ended, (column + 1) % memory.returns.shape[1], column),
    )
