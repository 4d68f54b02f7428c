"""An algorithm's functions traced (never run) as a layout's program calls
them, without its devices: what the checks before a run need to know of the
algorithm (its metric names), and what the FLOP count walks.

`traced_once` lets those checks and the run's programs share one trace of
each function (per input shapes): a run traces its algorithm once before
its first iteration, not once for the checks and again for the programs.

On a mesh the runner calls `init`, `step` and `evaluate` per device, under
`shard_map`, with the `data` axis bound: an algorithm made for that axis
asks its size and averages over it (`jax.lax.pmean`), which fails where no
such axis is bound ("unbound axis name: data"). Here each function is
vmapped over the layout's data axis, under the same name and size, so the
trace sees the same axis and the same per-device shapes as the program,
whatever devices this process has.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from algorithms.base import Algorithm
from harness.run.devices import DATA
from harness.types import Layout


def traced_once(algorithm: Algorithm) -> Algorithm:
    """The algorithm with `init`, `step` and `evaluate` each wrapped in an
    inlined `jax.jit`: JAX keeps the function's trace for its input shapes,
    so every later program or check that calls it with the same shapes
    reuses that trace instead of running the Python again. Inlined, the
    traced operations go into the caller's program as they would unwrapped:
    the same operations, the same bits (tests/test_tracing.py)."""

    def once(fn):
        return None if fn is None else jax.jit(fn, inline=True)

    return algorithm._replace(
        init=once(algorithm.init),
        step=once(algorithm.step),
        evaluate=once(algorithm.evaluate),
        assess=once(algorithm.assess),
    )


def per_device(fn: Callable, layout: Layout | None, *, replicated: bool = False) -> Callable:
    """`fn` of one seed's state as one seed's devices run it: as it is
    without a mesh (`layout` None); on a mesh, over the `[data_axis, ...]`
    shards of the state (or, `replicated`, on the same inputs in every
    shard, as `init` gets its seed) with the `data` axis bound."""
    if layout is None:
        return fn
    return jax.vmap(fn, in_axes=None if replicated else 0, axis_name=DATA, axis_size=layout.data_axis)


def initial_state(algorithm: Algorithm, layout: Layout | None, numbers: dict[str, np.ndarray] | None = None) -> Any:
    """One seed's initial state, as shapes and dtypes (per device shard on
    a mesh: `[data_axis, ...]`); `numbers` (a sweep's, `[runs]` per name)
    give the first run's."""
    args: tuple = (jax.random.key(0),)
    if numbers is not None:
        args += ({name: np.asarray(values)[0] for name, values in numbers.items()},)
    return jax.eval_shape(per_device(algorithm.init, layout, replicated=True), *args)


def metric_names(algorithm: Algorithm, layout: Layout | None, numbers: dict[str, np.ndarray] | None = None) -> set[str]:
    """The names of the metrics the algorithm's step, evaluation and
    assessment produce under `layout`, found by tracing them."""
    state = initial_state(algorithm, layout, numbers)
    names = set(jax.eval_shape(per_device(algorithm.step, layout), state)[1])
    if algorithm.evaluate is not None:
        names |= set(jax.eval_shape(per_device(algorithm.evaluate, layout), state)[1])
    if algorithm.assess is not None:
        names |= set(jax.eval_shape(per_device(lambda s: (s, algorithm.assess(s)), layout), state)[1])
    return names
