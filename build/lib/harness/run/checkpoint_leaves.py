"""A training state as checkpoints hold it: on the host, leaf by leaf, and
back onto devices (harness.run.checkpoint writes and reads the leaves).

The state is one pytree with a leading seed axis. On the host its leaves
are numpy arrays named "00000", "00001", ... in tree order, typed PRNG keys
as their raw key data; each has its key path (`leaf_paths`) and a CRC32 of
its bytes (`checksums`). Filling (`fill`) puts saved leaves into a template
of the same structure, on the template's devices and sharding, so a state
saved on one device layout comes back on another. A checkpoint as read is
its leaves and the iteration it follows (`Found`).
"""

from __future__ import annotations

import zlib
from typing import Any, NamedTuple

import jax
import numpy as np

from harness.run import cluster


def _is_key(leaf: Any) -> bool:
    return isinstance(leaf, jax.Array) and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key)


class Snapshot(NamedTuple):
    """A state on the host: its leaves as numpy arrays, typed keys as key data."""

    leaves: dict[str, np.ndarray]  # "00000" ... in tree order
    paths: list[str]  # each leaf's key path
    keys: list[int]  # which leaves were typed PRNG keys


def snapshot(state: Any) -> Snapshot:
    """Copy `state` to host memory (blocking until it is computed). The
    copies are numpy arrays of their own: a later chunk that donates the
    state's device buffers cannot change them. In a multi-process job every
    process gets the whole state (a collective: all must call it)."""
    flat, _ = jax.tree_util.tree_flatten_with_path(state)
    device_leaves = [jax.random.key_data(leaf) if _is_key(leaf) else leaf for _, leaf in flat]
    host = cluster.gather_to_host(device_leaves)
    return Snapshot(
        {f"{i:05d}": np.array(leaf, copy=True) for i, leaf in enumerate(host)},
        [jax.tree_util.keystr(path) for path, _ in flat],
        [i for i, (_, leaf) in enumerate(flat) if _is_key(leaf)],
    )


def checksums(leaves: dict[str, np.ndarray]) -> dict[str, int]:
    return {name: zlib.crc32(np.ascontiguousarray(leaf).view(np.uint8).reshape(-1)) for name, leaf in leaves.items()}


def leaf_paths(template: Any) -> list[str]:
    return [jax.tree_util.keystr(path) for path, _ in jax.tree_util.tree_flatten_with_path(template)[0]]


def host_shapes(template: Any) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Each leaf's shape and dtype as stored (typed keys as key data)."""
    out = {}
    for i, leaf in enumerate(jax.tree_util.tree_leaves(template)):
        data = jax.eval_shape(jax.random.key_data, leaf) if _is_key(leaf) else leaf
        out[f"{i:05d}"] = (tuple(data.shape), np.dtype(data.dtype))
    return out


def _place(value: np.ndarray, sharding: jax.sharding.Sharding) -> jax.Array:
    """A host array onto `sharding`'s devices; in a multi-process job each
    process places the blocks of its own devices (every process holds the
    whole value)."""
    if sharding.is_fully_addressable:
        return jax.device_put(value, sharding)
    return jax.make_array_from_callback(value.shape, sharding, lambda index: value[index])


def fill(template: Any, leaves: dict[str, np.ndarray]) -> Any:
    """The template's pytree with the saved leaves (checked against it by
    `Checkpointer.read_latest`), on the template's devices."""
    flat, treedef = jax.tree_util.tree_flatten(template)
    out = []
    for i, leaf in enumerate(flat):
        value = _place(leaves[f"{i:05d}"], leaf.sharding)
        out.append(jax.random.wrap_key_data(value, impl=jax.random.key_impl(leaf)) if _is_key(leaf) else value)
    return jax.tree_util.tree_unflatten(treedef, out)


# A checkpoint as read: its leaves (host arrays, by tree position) and the
# iteration it follows.
Found = tuple[dict[str, np.ndarray], int]
