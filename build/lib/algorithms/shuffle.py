"""Random orders of `range(size)` for minibatches: JAX's uniformly random
permutation, or a keyed bijection that needs no sort.

`jax.random.permutation` sorts the indices by random keys, several times
over; XLA's CPU sort runs a comparator call per comparison, so on a CPU it
is a large part of an update epoch at small sizes (about 55 µs for 512
indices, 2.4 ms for 8,192, where drawing the random bits takes 4 and 38 µs).
`feistel_order` computes `E_key(i)` for every index instead, with `E_key` a
Feistel network keyed by the random key: a bijection of `[0, 2^2h)`, built
from integer hashing alone. Its outputs below `size`, taken in the order of
their inputs, are a permutation of `range(size)` (a cumulative sum and one
scatter). It is a pseudo-random permutation, not a uniform draw from all
`size!`; for splitting a batch into minibatches what matters is that every
index is equally likely to land in every minibatch, and that neighbours
(consecutive steps of one env) are split up like any other pair, which
tests check.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

FEISTEL_ROUNDS = 6


def _mix(x: jax.Array) -> jax.Array:
    """A 32-bit integer hash with full avalanche (a multiply-xorshift finaliser)."""
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x7FEB352D)
    x = x ^ (x >> 15)
    x = x * jnp.uint32(0x846CA68B)
    return x ^ (x >> 16)


def feistel_order(key: jax.Array, size: int) -> jax.Array:
    """A keyed pseudo-random permutation of `range(size)`, `[size]` int32, without a sort."""
    half = max(1, (max(size - 1, 1).bit_length() + 1) // 2)  # 2^(2 half) >= size
    mask = jnp.uint32((1 << half) - 1)
    round_keys = jax.random.bits(key, (FEISTEL_ROUNDS,), jnp.uint32)
    index = jnp.arange(1 << (2 * half), dtype=jnp.uint32)
    left, right = index >> half, index & mask
    for r in range(FEISTEL_ROUNDS):
        left, right = right, left ^ (_mix(right ^ round_keys[r]) & mask)
    image = ((left << half) | right).astype(jnp.int32)
    kept = image < size
    slot = jnp.where(kept, jnp.cumsum(kept) - 1, size)  # out of range: dropped
    return jnp.zeros(size, jnp.int32).at[slot].set(image, mode="drop", unique_indices=True)


def order(key: jax.Array, size: int, shuffle: str) -> jax.Array:
    """`range(size)` in a random order: `shuffle` is `permutation`
    (`jax.random.permutation`) or `feistel` (`feistel_order`)."""
    if shuffle == "feistel":
        return feistel_order(key, size)
    if shuffle == "permutation":
        return jax.random.permutation(key, size)
    raise ValueError(f"unknown shuffle {shuffle!r}; use permutation or feistel")
