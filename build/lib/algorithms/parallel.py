"""Data parallelism over a named axis, written so that results do not depend
on how many devices share the work.

A step runs on one shard of the env batch: `num_envs / D` envs on each of the
D devices of the axis (`D = 1` and `axis_name = None` off the mesh). Every
random draw that touches the env batch is made at the *global* batch shape
from a key all shards share, and each shard keeps its own slice; sums and
means over the batch are taken over the axis. So the same key gives the same
numbers on 1, 2 or 4 devices, up to the order of float reductions.

With `axis_name=None`, or an axis of one device, every function here is the
plain single-device operation, so code written with them is unchanged off
the mesh and costs nothing extra on a one-device mesh.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp


def size(axis_name: str | None) -> int:
    """Devices along the axis (static)."""
    return 1 if axis_name is None else jax.lax.axis_size(axis_name)


def _sharded(axis_name: str | None) -> str | None:
    """The axis, or None when there is nothing to share over (one device)."""
    return axis_name if axis_name is not None and size(axis_name) > 1 else None


def index(axis_name: str | None) -> jax.Array | int:
    """This shard's position along the axis."""
    axis_name = _sharded(axis_name)
    return 0 if axis_name is None else jax.lax.axis_index(axis_name)


def local_count(global_count: int, axis_name: str | None) -> int:
    """This shard's part of `global_count` items (the caller has checked that it divides)."""
    return global_count // size(axis_name)


def local_slice(x: jax.Array, axis_name: str | None, axis: int = 0) -> jax.Array:
    """This shard's contiguous part of a global array along `axis`."""
    axis_name = _sharded(axis_name)
    if axis_name is None:
        return x
    n = x.shape[axis] // size(axis_name)
    return jax.lax.dynamic_slice_in_dim(x, index(axis_name) * n, n, axis)


def split(key: jax.Array, global_count: int, axis_name: str | None) -> jax.Array:
    """The keys of this shard's items among `global_count`: the same key an
    item gets from `jax.random.split(key, global_count)` on one device."""
    axis_name = _sharded(axis_name)
    return local_slice(jax.random.split(key, global_count), axis_name)


def categorical(key: jax.Array, logits: jax.Array, axis_name: str | None) -> jax.Array:
    """`jax.random.categorical(key, global_logits)`, this shard's rows.

    Gumbel-max over noise drawn at the global shape, so a row samples the
    same action whichever device holds it."""
    axis_name = _sharded(axis_name)
    if axis_name is None:
        return jax.random.categorical(key, logits)
    shape = (logits.shape[0] * size(axis_name), *logits.shape[1:])
    noise = local_slice(jax.random.gumbel(key, shape, logits.dtype), axis_name)
    return jnp.argmax(logits + noise, axis=-1)


def normal(key: jax.Array, shape: tuple[int, ...], dtype: Any, axis_name: str | None) -> jax.Array:
    """`jax.random.normal(key, global_shape)`, this shard's rows (`shape` is
    the local one)."""
    axis_name = _sharded(axis_name)
    global_shape = (shape[0] * size(axis_name), *shape[1:])
    return local_slice(jax.random.normal(key, global_shape, dtype), axis_name)


def bernoulli(key: jax.Array, p: float, shape: tuple[int, ...], axis_name: str | None) -> jax.Array:
    """`jax.random.bernoulli(key, p, global_shape)`, this shard's rows."""
    axis_name = _sharded(axis_name)
    global_shape = (shape[0] * size(axis_name), *shape[1:])
    return local_slice(jax.random.bernoulli(key, p, global_shape), axis_name)


def psum(x: Any, axis_name: str | None) -> Any:
    axis_name = _sharded(axis_name)
    return x if axis_name is None else jax.lax.psum(x, axis_name)


def pmean(x: Any, axis_name: str | None) -> Any:
    axis_name = _sharded(axis_name)
    return x if axis_name is None else jax.lax.pmean(x, axis_name)


def all_gather(x: Any, axis_name: str | None, axis: int = 0) -> Any:
    """Every shard's part of each leaf, concatenated along `axis` in device order."""
    axis_name = _sharded(axis_name)
    if axis_name is None:
        return x
    return jax.tree.map(lambda leaf: jax.lax.all_gather(leaf, axis_name, axis=axis, tiled=True), x)


def mean_std(x: jax.Array, axis_name: str | None) -> tuple[jax.Array, jax.Array]:
    """Mean and standard deviation over every shard's `x` (equal sizes)."""
    axis_name = _sharded(axis_name)
    if axis_name is None:
        return x.mean(), x.std()
    mean = jax.lax.pmean(x.mean(), axis_name)
    return mean, jnp.sqrt(jax.lax.pmean(jnp.square(x - mean).mean(), axis_name))


# ------------------------------------------------- exact (logical) shards
#
# With `shards = L`, a batch is split into L logical shards of equal size,
# held L / D to a device; each shard's partial result is computed on its own
# (one shard at a time, so with the same shapes on every layout) and the L
# partials are gathered and added in shard order on every device. The sum
# is then the same bits on 1, 2 or 4 devices and on the plain program.


def local_shards(shards: int, axis_name: str | None) -> int:
    """Logical shards held by this device."""
    return shards // size(axis_name)


def fold_sum(parts: Any, axis_name: str | None) -> Any:
    """The sum over all L logical shards of per-shard values (`[L / D, ...]`
    here), gathered over the axis and added in shard order (0, 1, ..., L-1)."""

    def fold(x: jax.Array) -> jax.Array:
        total = x[0]
        for i in range(1, x.shape[0]):
            total = total + x[i]
        return total

    return jax.tree.map(fold, all_gather(parts, axis_name))


def fold_mean(parts: Any, axis_name: str | None) -> Any:
    """`fold_sum` divided by the number of logical shards."""
    shards = jax.tree.leaves(parts)[0].shape[0] * size(axis_name)
    return jax.tree.map(lambda x: x * (1.0 / shards), fold_sum(parts, axis_name))


def opaque_scan(f, carry: Any, xs: Any) -> tuple[Any, Any]:
    """`lax.scan(f, carry, xs)` with a trip count XLA cannot see, so that the
    loop is never unrolled or inlined and its body compiles the same way in
    every program (whatever surrounds it, on every layout)."""
    length = jax.tree.leaves(xs)[0].shape[0]
    first = jax.tree.map(lambda x: x[0], xs)
    _, out_shape = jax.eval_shape(f, carry, first)
    ys = jax.tree.map(lambda s: jnp.zeros((length, *s.shape), s.dtype), out_shape)

    def body(i, state):
        carry, ys = state
        carry, y = f(carry, jax.tree.map(lambda x: jax.lax.dynamic_index_in_dim(x, i, keepdims=False), xs))
        return carry, jax.tree.map(lambda buf, v: jax.lax.dynamic_update_index_in_dim(buf, v, i, 0), ys, y)

    trips = jax.lax.optimization_barrier(jnp.int32(length))
    return jax.lax.fori_loop(0, trips, body, (carry, ys))
