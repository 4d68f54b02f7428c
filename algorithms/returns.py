"""Return estimators, written for one trajectory `[T]` (vmap for batches)."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def discounted_returns(r_t: jax.Array, discount_t: jax.Array, bootstrap: jax.Array) -> jax.Array:
    """G_t = r_t + discount_t * G_{t+1}, with G_T = bootstrap.

    Args:
      r_t: rewards of the transitions t = 0..T-1, `[T]`.
      discount_t: gamma times 0 where transition t ended an episode, else
        gamma, `[T]`. A zero cuts the return at an episode boundary.
      bootstrap: the value of the state after the last transition, `[]`.

    Returns:
      G_t, `[T]`.
    """

    def backward(g_next, inputs):
        r, discount = inputs
        g = r + discount * g_next
        return g, g

    _, g_t = jax.lax.scan(backward, jnp.asarray(bootstrap, r_t.dtype), (r_t, discount_t), reverse=True)
    return g_t
