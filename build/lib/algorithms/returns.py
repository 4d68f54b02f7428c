"""Return estimators, written for one trajectory `[T]` (vmap for batches)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

# The backward recursions are a few scalar operations per step: unrolled 16
# steps per loop trip, a loop trip's fixed cost is paid 16 times less often
# (the same operations in the same order, so the same bits).
UNROLL = 16


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

    _, g_t = jax.lax.scan(backward, jnp.asarray(bootstrap, r_t.dtype), (r_t, discount_t), reverse=True, unroll=UNROLL)
    return g_t


class Advantages(NamedTuple):
    advantage: jax.Array  # [T] for the policy gradient
    target: jax.Array  # [T] value targets (v_s)


def vtrace_gae(
    r_t: jax.Array,
    discount_t: jax.Array,
    v_t: jax.Array,
    bootstrap: jax.Array,
    *,
    lambda_: float = 1.0,
    log_rho_t: jax.Array | None = None,
    rho_clip: float = 1.0,
    c_clip: float = 1.0,
) -> Advantages:
    """GAE and V-trace in one recursion (Espeholt et al. 2018, eq. 1;
    Schulman et al. 2016), for one trajectory.

        delta_t = rho_t (r_t + discount_t V(x_{t+1}) - V(x_t))
        v_t - V(x_t) = delta_t + discount_t c_t (v_{t+1} - V(x_{t+1}))

    with rho_t = min(rho_clip, pi/mu) and c_t = lambda * min(c_clip, pi/mu).
    With all ratios 1 (on-policy; `log_rho_t=None`) this is exactly GAE(lambda):
    `target - v_t` is the GAE advantage, and `advantage` is that same value.
    Off-policy, `advantage` is V-trace's policy-gradient advantage
    rho_t (r_t + discount_t v_{t+1} - V(x_t)).

    Args:
      r_t: rewards of transitions t = 0..T-1, `[T]`.
      discount_t: gamma, or 0 where transition t ended an episode, `[T]`.
      v_t: value estimates V(x_t) of the states the transitions start from, `[T]`.
      bootstrap: V(x_T), the value after the last transition, `[]`.
      lambda_: the trace-decay parameter.
      log_rho_t: log pi(a_t|x_t) - log mu(a_t|x_t), `[T]`, or None for ratios of 1.
      rho_clip, c_clip: V-trace's clipping thresholds (rho-bar and c-bar).
    """
    v_tp1 = jnp.concatenate([v_t[1:], jnp.asarray(bootstrap, v_t.dtype)[None]])
    if log_rho_t is None:
        rho_t = jnp.ones_like(v_t)
        c_t = jnp.full_like(v_t, lambda_)
    else:
        ratio = jnp.exp(log_rho_t)
        rho_t = jnp.minimum(rho_clip, ratio)
        c_t = lambda_ * jnp.minimum(c_clip, ratio)
    delta_t = rho_t * (r_t + discount_t * v_tp1 - v_t)

    def backward(acc, inputs):
        delta, discount, c = inputs
        acc = delta + discount * c * acc
        return acc, acc

    _, error_t = jax.lax.scan(
        backward, jnp.zeros((), v_t.dtype), (delta_t, discount_t, c_t), reverse=True, unroll=UNROLL
    )
    target_t = v_t + error_t
    if log_rho_t is None:
        return Advantages(advantage=error_t, target=target_t)
    target_tp1 = jnp.concatenate([target_t[1:], jnp.asarray(bootstrap, v_t.dtype)[None]])
    return Advantages(advantage=rho_t * (r_t + discount_t * target_tp1 - v_t), target=target_t)
