"""Optimizer transformations for exact layouts (`devices.shards`): the same
updates as optax's Adam, global-norm clipping and linear schedule, written
so that XLA compiles their arithmetic the same way in every program.

Why: XLA rewrites a division by a broadcast scalar (`x / s`) into a product
with the reciprocal (`x * (1 / s)`) in some programs and not in others (it
depends on what else is fused), and the two round differently. optax divides
by broadcast scalars in Adam's bias corrections and in clipping, so the same
gradients gave different parameters on one device and on two. Here every
such division is a scalar reciprocal followed by a product, and Adam's
`b^t` is a running product rather than `pow`. Results differ from optax's in
the last bits (not in distribution), which is why they are used only where
exactness across layouts is asked for.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax


class AdamState(NamedTuple):
    mu: Any
    nu: Any
    b1_power: jax.Array  # b1 ** t, a running product
    b2_power: jax.Array


def scale_by_adam(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> optax.GradientTransformation:
    """Adam's scaling (Kingma and Ba 2015), bias-corrected; eps outside the square root, as optax."""

    def init(params: Any) -> AdamState:
        zeros = jax.tree.map(jnp.zeros_like, params)
        return AdamState(zeros, zeros, jnp.ones((), jnp.float32), jnp.ones((), jnp.float32))

    def update(grads: Any, state: AdamState, params: Any = None) -> tuple[Any, AdamState]:
        del params
        mu = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, state.mu, grads)
        nu = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, state.nu, grads)
        b1_power, b2_power = state.b1_power * b1, state.b2_power * b2
        c1, c2 = 1.0 / (1.0 - b1_power), 1.0 / (1.0 - b2_power)
        updates = jax.tree.map(lambda m, v: (m * c1) / (jnp.sqrt(v * c2) + eps), mu, nu)
        return updates, AdamState(mu, nu, b1_power, b2_power)

    return optax.GradientTransformation(init, update)


def clip_by_global_norm(max_norm: float) -> optax.GradientTransformation:
    """Scale the updates down to a global norm of `max_norm` when above it."""

    def update(updates: Any, state: Any, params: Any = None) -> tuple[Any, Any]:
        del params
        norm = optax.global_norm(updates)
        scale = jnp.where(norm < max_norm, 1.0, max_norm * (1.0 / norm))
        return jax.tree.map(lambda t: t * scale.astype(t.dtype), updates), state

    return optax.GradientTransformation(lambda params: optax.EmptyState(), update)


def linear_schedule(init_value: float, transition_steps: int) -> optax.Schedule:
    """From `init_value` down to 0 over `transition_steps`, then 0."""
    step = 1.0 / transition_steps

    def schedule(count: jax.Array) -> jax.Array:
        done = jnp.minimum(count, transition_steps).astype(jnp.float32)
        return init_value * (1.0 - done * step)

    return schedule
