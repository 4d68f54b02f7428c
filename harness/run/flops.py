"""FLOPs of a JAX function, counted from its jaxpr with loop trip counts.

XLA's `compiled.cost_analysis()` counts the body of a `while` loop once, so
for a pipeline made of nested `lax.scan`s it undercounts by the trip counts.
Here the jaxpr is walked instead: a `scan` multiplies its body by `length`,
`dot_general` and `conv_general_dilated` count 2 FLOPs per multiply-add, and
every other primitive counts one FLOP per output element (an upper bound for
data movement, a fair count for arithmetic). A `while` loop whose trip count
is not static is counted once and reported as such.

Bytes are counted the same way: every primitive reads its inputs and writes
its outputs. XLA fuses chains of element-wise primitives and keeps their
intermediates in registers and caches, so this is an upper bound on the
memory traffic, not a measurement of it.

XLA's own count of a compiled program (`xla_cost`, `xla_flops`) is kept beside
it for comparison: exact for a program without loops (the device ceiling's
matmul), the body counted once for one with them.

Used by the benchmark suite (benchmarks/machinery/) and meant for any command
that sets a program's achieved FLOP/s against the device's ceiling
(`harness.run.ceiling`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np


class FlopCount(NamedTuple):
    matmul: float  # FLOPs in dot_general and convolutions
    other: float  # one per output element of every other primitive
    unbounded_loops: int  # while loops counted once (trip count unknown)
    bytes: float = 0.0  # read and written by every primitive, unfused (an upper bound)

    @property
    def total(self) -> float:
        return self.matmul + self.other

    def scaled(self, factor: float) -> FlopCount:
        """The FLOPs and bytes of `factor` times this work (the loops as they are)."""
        return self._replace(matmul=self.matmul * factor, other=self.other * factor, bytes=self.bytes * factor)


def _size(aval: Any) -> int:
    shape = getattr(aval, "shape", ())
    return int(np.prod(shape)) if shape else 1


def _nbytes(aval: Any) -> float:
    dtype = getattr(aval, "dtype", None)
    try:
        itemsize = np.dtype(dtype).itemsize
    except TypeError:  # extended dtypes (PRNG keys): count their data as 8 bytes
        itemsize = 8
    return float(_size(aval) * itemsize)


def _io_bytes(eqn: Any) -> float:
    return sum(_nbytes(v.aval) for v in (*eqn.invars, *eqn.outvars))


def _dot_flops(eqn: Any) -> float:
    lhs = eqn.invars[0].aval
    (contract_lhs, _), _ = eqn.params["dimension_numbers"]
    contracted = math.prod(lhs.shape[d] for d in contract_lhs)
    return 2.0 * _size(eqn.outvars[0].aval) * contracted


def _conv_flops(eqn: Any) -> float:
    rhs = eqn.invars[1].aval
    # Each output element sums over the kernel's input features and window.
    dims = eqn.params["dimension_numbers"]
    out_feature_dim = dims.rhs_spec[0]
    per_output = _size(rhs) / rhs.shape[out_feature_dim]
    return 2.0 * _size(eqn.outvars[0].aval) * per_output / eqn.params.get("feature_group_count", 1)


def _count(jaxpr: Any, scale: float, acc: list[float]) -> None:
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "scan":
            _count(eqn.params["jaxpr"].jaxpr, scale * eqn.params["length"], acc)
        elif name == "shard_map":  # its body runs on every device of the mesh
            _count(eqn.params["jaxpr"], scale * eqn.params["mesh"].size, acc)
        elif name == "while":
            acc[2] += 1
            _count(eqn.params["body_jaxpr"].jaxpr, scale, acc)
        elif name == "cond":
            # The most expensive branch bounds what one call can cost.
            costs = []
            for branch in eqn.params["branches"]:
                sub = [0.0, 0.0, 0, 0.0]
                _count(branch.jaxpr, scale, sub)
                costs.append(sub)
            worst = max(costs, key=lambda c: c[0] + c[1])
            for i, value in enumerate(worst):
                acc[i] += value
        elif name == "dot_general":
            acc[0] += scale * _dot_flops(eqn)
            acc[3] += scale * _io_bytes(eqn)
        elif name == "conv_general_dilated":
            acc[0] += scale * _conv_flops(eqn)
            acc[3] += scale * _io_bytes(eqn)
        else:
            inner = [v for v in eqn.params.values() if hasattr(v, "jaxpr") or hasattr(v, "eqns")]
            if inner:  # pjit, custom_jvp_call, custom_vjp_call, remat, ...
                for sub in inner:
                    _count(getattr(sub, "jaxpr", sub), scale, acc)
            else:
                acc[1] += scale * sum(_size(v.aval) for v in eqn.outvars)
                acc[3] += scale * _io_bytes(eqn)


def count_jaxpr(closed: Any) -> FlopCount:
    """FLOPs and bytes of one evaluation of a (closed) jaxpr."""
    acc = [0.0, 0.0, 0, 0.0]
    _count(getattr(closed, "jaxpr", closed), 1.0, acc)
    return FlopCount(matmul=acc[0], other=acc[1], unbounded_loops=int(acc[2]), bytes=acc[3])


def count_flops(fn: Callable, *args: Any) -> FlopCount:
    """FLOPs of one call of `fn(*args)` (traced, not run)."""
    return count_jaxpr(jax.make_jaxpr(fn)(*args))


def per_iteration(chunk: Any, iterations: int) -> FlopCount:
    """One iteration's share of a chunk program of `iterations` iterations,
    counted from the jaxpr its compile traced (`Programs(keep_traces=True)`):
    the same count as its step over the run's seeds, without tracing the
    step a second time."""
    return count_jaxpr(chunk).scaled(1 / iterations)


def xla_cost(compiled: Any) -> dict[str, float]:
    """XLA's cost analysis of a compiled program (its loop bodies counted
    once): "flops" and "bytes accessed", where the backend reports them; an
    empty dict where it implements no cost analysis."""
    try:
        cost = compiled.cost_analysis()
    except Exception:  # noqa: BLE001  (not every backend implements it)
        return {}
    if isinstance(cost, list):
        cost = cost[0] if cost else {}
    return {k: float(v) for k, v in (cost or {}).items() if k in ("flops", "bytes accessed")}


def xla_flops(compiled: Any) -> float | None:
    """XLA's FLOPs of one call of a compiled program; None where it reports none."""
    return xla_cost(compiled).get("flops")


def over_seeds(fn: Callable, layout: Any) -> Callable:
    """`fn` of one seed over a run's state, for counting: vmapped over the
    seeds; on a mesh (`layout` not None) the state is `[seeds, data, ...]`,
    and each seed's shards are vmapped as its data axis."""
    from harness.run.tracing import per_device

    return jax.vmap(per_device(fn, layout))
