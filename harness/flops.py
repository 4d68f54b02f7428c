"""FLOPs of a JAX function, counted from its jaxpr with loop trip counts.

XLA's `compiled.cost_analysis()` counts the body of a `while` loop once, so
for a pipeline made of nested `lax.scan`s it undercounts by the trip counts.
Here the jaxpr is walked instead: a `scan` multiplies its body by `length`,
`dot_general` and `conv_general_dilated` count 2 FLOPs per multiply-add, and
every other primitive counts one FLOP per output element (an upper bound for
data movement, a fair count for arithmetic). A `while` loop whose trip count
is not static is counted once and reported as such.
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

    @property
    def total(self) -> float:
        return self.matmul + self.other


def _size(aval: Any) -> int:
    shape = getattr(aval, "shape", ())
    return int(np.prod(shape)) if shape else 1


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
        elif name == "while":
            acc[2] += 1
            _count(eqn.params["body_jaxpr"].jaxpr, scale, acc)
        elif name == "cond":
            # The most expensive branch bounds what one call can cost.
            costs = []
            for branch in eqn.params["branches"]:
                sub = [0.0, 0.0, 0]
                _count(branch.jaxpr, scale, sub)
                costs.append(sub)
            worst = max(costs, key=lambda c: c[0] + c[1])
            acc[0] += worst[0]
            acc[1] += worst[1]
            acc[2] += worst[2]
        elif name == "dot_general":
            acc[0] += scale * _dot_flops(eqn)
        elif name == "conv_general_dilated":
            acc[0] += scale * _conv_flops(eqn)
        else:
            inner = [v for v in eqn.params.values() if hasattr(v, "jaxpr") or hasattr(v, "eqns")]
            if inner:  # pjit, custom_jvp_call, custom_vjp_call, remat, ...
                for sub in inner:
                    _count(getattr(sub, "jaxpr", sub), scale, acc)
            else:
                acc[1] += scale * sum(_size(v.aval) for v in eqn.outvars)


def count_flops(fn: Callable, *args: Any) -> FlopCount:
    """FLOPs of one call of `fn(*args)` (traced, not run)."""
    closed = jax.make_jaxpr(fn)(*args)
    acc = [0.0, 0.0, 0]
    _count(closed.jaxpr, 1.0, acc)
    return FlopCount(matmul=acc[0], other=acc[1], unbounded_loops=int(acc[2]))
