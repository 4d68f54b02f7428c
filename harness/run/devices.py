"""The `("seed", "data")` device mesh and the seed-batched programs placed on
it (a multi-process job's start and collectives: harness.run.cluster).

Data parallelism has the semantics of `pmap`, written with `jax.shard_map`:
every state leaf is laid out `[num_seeds, data_axis, ...]`, one block per
device. Seeds are split over the mesh's `seed` axis; along `data`, each device
holds a replica of the parameters and its shard of the env batch (and of the
replay buffer), and the algorithm, made with `axis_name="data"`, averages
gradients and metrics over the axis. Random draws are made at the global
batch shape (`algorithms.parallel`), so the same spec gives the same curves
on 1, 2 or 4 devices, up to float reduction order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from harness.run import host_devices
from harness.run.cluster import gather_to_host
from harness.types import Layout

SEED, DATA = "seed", "data"


class LayoutError(ValueError):
    """A device layout that cannot work: `key` is the spec key at fault."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(message)


def resolve(devices: Any, num_seeds: int, available: int | None = None, platform: str | None = None) -> Layout:
    """The layout a spec's `devices:` section asks for, checked against the
    devices there are (`available`, default: every process's, on `platform`,
    default: JAX's) and the seeds. Whether the env batch splits is the
    algorithm's to say (`Registration`)."""
    available = jax.device_count() if available is None else available
    platform = jax.default_backend() if platform is None else platform
    if devices.host_devices is not None and platform == "cpu" and _default_layout(devices):
        return _seeds_over_host_devices(devices.host_devices, num_seeds, available)
    count = available if devices.count == "all" else devices.count
    if count > available:
        raise LayoutError("devices.count", f"{count} devices asked for, but only {available} are available")
    if jax.process_count() > 1 and count != available:
        raise LayoutError(
            "devices.count",
            f"a job of {jax.process_count()} processes must use every device ({available}, or all), not {count}",
        )
    seed_axis, data_axis = devices.seed_axis, devices.data_axis
    if seed_axis is None and data_axis is None:
        seed_axis = 1
    if seed_axis is None:
        if count % data_axis:
            raise LayoutError("devices.data_axis", f"data_axis {data_axis} does not divide the {count} devices")
        seed_axis = count // data_axis
    if data_axis is None:
        if count % seed_axis:
            raise LayoutError("devices.seed_axis", f"seed_axis {seed_axis} does not divide the {count} devices")
        data_axis = count // seed_axis
    if seed_axis * data_axis != count:
        raise LayoutError(
            "devices",
            f"seed_axis x data_axis = {seed_axis} x {data_axis} = {seed_axis * data_axis} is not the {count} devices",
        )
    if num_seeds % seed_axis:
        raise LayoutError("devices.seed_axis", f"seed_axis {seed_axis} does not divide the {num_seeds} seeds")
    return Layout(seed_axis, data_axis)


def _default_layout(devices: Any) -> bool:
    return devices.count == 1 and devices.seed_axis is None and devices.data_axis is None


def _seeds_over_host_devices(host: int | str, num_seeds: int, available: int) -> Layout:
    """`devices.host_devices` on a CPU with the layout left to it: the seeds
    spread over that many host devices (`cores`: as many as divide them)."""
    count = host_devices.resolve(host, num_seeds, devices=available)
    if count > available:
        raise LayoutError(
            "devices.host_devices",
            f"{count} host devices asked for, but this process has {available}: the split is set before JAX"
            f" starts its devices (harness train does it; elsewhere set XLA_FLAGS={host_devices.FLAG}={count})",
        )
    if num_seeds % count:
        raise LayoutError("devices.host_devices", f"{count} host devices do not divide the {num_seeds} seeds")
    return Layout(count, 1)


def make_mesh(layout: Layout) -> Mesh:
    """The first `layout.count` devices (all of them in a multi-process job)
    as a `seed_axis x data_axis` mesh."""
    chosen = np.array(jax.devices()[: layout.count]).reshape(layout.seed_axis, layout.data_axis)
    return Mesh(chosen, (SEED, DATA))


# ------------------------------------------------------------- placement


def _squeeze_data(tree: Any) -> Any:
    return jax.tree.map(lambda x: x[:, 0], tree)


def _expand_data(tree: Any, axis: int = 1) -> Any:
    return jax.tree.map(lambda x: jnp.expand_dims(x, axis), tree)


def on_mesh(fn: Callable, mesh: Mesh | None, *, metrics_axis: int) -> Callable:
    """`fn(state) -> (state, metrics)` over a seed-batched state, as one shard
    per device of `mesh` (unchanged without one). Metrics, equal along `data`
    (the algorithm averages them), come out with a trailing data axis; their
    seed axis is `metrics_axis`."""
    if mesh is None:
        return fn

    def per_device(state):
        state, metrics = fn(_squeeze_data(state))
        return _expand_data(state), _expand_data(metrics, metrics_axis + 1)

    metrics_spec = P(*([None] * metrics_axis), SEED, DATA)
    return _shard_map(per_device, mesh, (P(SEED, DATA), metrics_spec))


def init_on_mesh(init: Callable, mesh: Mesh | None) -> Callable:
    """`init(inputs) -> state` over per-run inputs (leaves `[S]`: the seeds,
    a sweep's numbers), one shard per device on `mesh`, where it takes them
    as `[S, data_axis]` (see `per_run`)."""
    if mesh is None:
        return init

    def per_device(inputs):
        return _expand_data(init(_squeeze_data(inputs)))

    return _shard_map(per_device, mesh, P(SEED, DATA))


def _shard_map(per_device: Callable, mesh: Mesh, out_specs: Any) -> Callable:
    """`jax.shard_map` of `per_device` over one tree laid out `P(SEED, DATA)`,
    with no array of size 0 crossing into or out of it: XLA's SPMD
    partitioner in jaxlib 0.11.2 crashes (a segmentation fault while
    compiling) on one, e.g. a feed-forward policy's empty recurrent carry.
    Such an array holds no values: an input is made inside as zeros of its
    block's shape, and an output leaves as one element in place of each
    axis of size 0, cut back to 0 outside. What the program computes is
    unchanged."""
    blocks = (mesh.shape[SEED], mesh.shape[DATA])

    def run(tree):
        leaves, treedef = jax.tree.flatten(tree)
        empty_axes: list[tuple[int, ...]] = []  # per output leaf, found while tracing

        def inner(kept):
            given = iter(kept)
            local = [
                jnp.zeros((x.shape[0] // blocks[0], x.shape[1] // blocks[1], *x.shape[2:]), x.dtype)
                if x.size == 0
                else next(given)
                for x in leaves
            ]
            out, out_def = jax.tree.flatten(per_device(jax.tree.unflatten(treedef, local)))
            empty_axes[:] = [tuple(i for i, n in enumerate(x.shape) if n == 0) for x in out]
            filled = [jnp.zeros(tuple(n or 1 for n in x.shape), x.dtype) if x.size == 0 else x for x in out]
            return jax.tree.unflatten(out_def, filled)

        mapped = jax.shard_map(inner, mesh=mesh, in_specs=(P(SEED, DATA),), out_specs=out_specs, check_vma=False)
        out, out_def = jax.tree.flatten(mapped([x for x in leaves if x.size]))
        cut = [
            x[tuple(slice(0, 0) if i in axes else slice(None) for i in range(x.ndim))] if axes else x
            for x, axes in zip(out, empty_axes, strict=True)
        ]
        return jax.tree.unflatten(out_def, cut)

    return run


def per_run(inputs: Any, mesh: Mesh | None) -> Any:
    """Per-run inputs (numpy leaves `[S]`) as the initialisation takes them:
    device arrays `[S]`, or on a mesh `[S, data_axis]`, placed on its
    devices (in every process)."""
    if mesh is None:
        return jax.tree.map(jnp.asarray, inputs)

    def place(values: np.ndarray) -> jax.Array:
        values = np.repeat(np.asarray(values)[:, None], mesh.shape[DATA], axis=1)
        sharding = NamedSharding(mesh, P(SEED, DATA))
        return jax.make_array_from_callback(values.shape, sharding, lambda index: values[index])

    return jax.tree.map(place, inputs)


def metrics_to_host(tree: Any, mesh: Mesh | None) -> Any:
    """Metrics as numpy arrays in this process; on a mesh, the copy of the
    first device along `data` (every device along it holds the same)."""
    if mesh is None:
        return jax.device_get(tree)
    return jax.tree.map(lambda x: np.asarray(x)[..., 0], gather_to_host(tree))
