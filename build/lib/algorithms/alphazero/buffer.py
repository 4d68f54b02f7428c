"""AlphaZero's episode replay buffer: a row of `capacity` moves per game,
written in lockstep, whose moves get their value target when the game ends."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from algorithms import parallel


class Buffer(NamedTuple):
    """Experiences of B games, `capacity` moves per game row, written in
    lockstep (every game makes one move per self-play step)."""

    observation: jax.Array  # [B, C, *obs]
    policy: jax.Array  # [B, C, A] search policy
    player: jax.Array  # [B, C] int32, who was to move
    value: jax.Array  # [B, C] value target, once known
    pending: jax.Array  # [B, C] bool, the move's game is still being played
    ready: jax.Array  # [B, C] bool, the move has its value target
    pointer: jax.Array  # [] int32, the next column to write


def buffer_init(num_envs: int, capacity: int, observation_shape: tuple[int, ...], num_actions: int) -> Buffer:
    shape = (num_envs, capacity)
    return Buffer(
        observation=jnp.zeros((*shape, *observation_shape), jnp.float32),
        policy=jnp.zeros((*shape, num_actions), jnp.float32),
        player=jnp.zeros(shape, jnp.int32),
        value=jnp.zeros(shape, jnp.float32),
        pending=jnp.zeros(shape, bool),
        ready=jnp.zeros(shape, bool),
        pointer=jnp.zeros((), jnp.int32),
    )


def buffer_add(buffer: Buffer, observation: jax.Array, policy: jax.Array, player: jax.Array) -> Buffer:
    """One move of every game, overwriting the oldest column."""
    p = buffer.pointer

    def put(column, x):
        return column.at[:, p].set(x)

    return buffer._replace(
        observation=put(buffer.observation, observation),
        policy=put(buffer.policy, policy),
        player=put(buffer.player, player),
        value=put(buffer.value, 0.0),
        pending=put(buffer.pending, True),
        ready=put(buffer.ready, False),
        pointer=(p + 1) % buffer.pending.shape[1],
    )


def buffer_end_episodes(buffer: Buffer, terminated: jax.Array, truncated: jax.Array, outcome: jax.Array) -> Buffer:
    """Close the games that ended: a terminated game's pending moves get the
    final `outcome [B, num_players]` of the player who made each; a truncated
    game's pending moves are dropped without a target."""
    ended = terminated[:, None] & buffer.pending
    target = jnp.take_along_axis(outcome, buffer.player, axis=1)
    return buffer._replace(
        value=jnp.where(ended, target, buffer.value),
        ready=buffer.ready | ended,
        pending=buffer.pending & ~(terminated | truncated)[:, None],
    )


def buffer_sample(buffer: Buffer, key: jax.Array, size: int, axis_name: str | None = None):
    """`size` moves drawn uniformly (with replacement) from those with
    targets; `weight` is 0 for every draw when there are none yet.

    Under `axis_name` the buffer's rows are sharded: the draw is made over the
    global buffer, and each shard gets its `size / D` part of the draws
    (wherever their rows live)."""
    ready = parallel.all_gather(buffer.ready, axis_name).reshape(-1)
    count = ready.sum()
    probabilities = jnp.where(count > 0, ready / jnp.maximum(count, 1), 1.0 / ready.shape[0])
    index = jax.random.choice(key, ready.shape[0], (size,), p=probabilities)
    weight = (count > 0).astype(jnp.float32) * ready[parallel.local_slice(index, axis_name)].astype(jnp.float32)
    fields = (buffer.observation, buffer.policy, buffer.value)
    if parallel.size(axis_name) == 1:
        observation, policy, value = (x.reshape(-1, *x.shape[2:])[index] for x in fields)
        return observation, policy, value, weight
    # Each shard fills in the draws from its own rows (zeros elsewhere); a
    # reduce-scatter sums them and hands every shard its part.
    rows, capacity = buffer.ready.shape
    row, column = jnp.divmod(index, capacity)
    local_row = row - parallel.index(axis_name) * rows
    mine = (local_row >= 0) & (local_row < rows)
    local_row = jnp.clip(local_row, 0, rows - 1)

    def take(x):
        values = x[local_row, column]
        return jnp.where(mine.reshape(-1, *[1] * (values.ndim - 1)), values, 0)

    observation, policy, value = jax.lax.psum_scatter(
        tuple(take(x) for x in fields), axis_name, scatter_dimension=0, tiled=True
    )
    return observation, policy, value, weight
