"""Action distributions behind one interface: a categorical over legal
discrete actions, and a diagonal Gaussian over continuous ones.

A policy's head `[..., W]` parameterises its distribution: the logits
(`W = A` actions) or the Gaussian's mean and log standard deviation side by
side (`W = 2 A` for an A-dimensional action; the networks here learn one
state-independent log standard deviation per dimension and broadcast it).
`legal_action_mask [..., A]` masks discrete actions and is ignored by the
Gaussian (every continuous action is legal; bounds are the env adapter's to
enforce, by clipping what it sends to the env).

Sampling draws its noise at the global batch shape (`algorithms.parallel`),
so a row gets the same action whichever device holds it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from algorithms import parallel

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


class Distribution(NamedTuple):
    # (head, mask, action) -> the log-probability of `action` under it: [...]
    log_prob: Callable[[jax.Array, jax.Array, jax.Array], jax.Array]
    # (head, mask, action) -> (its log-probability, the entropy) for the
    # losses, computed together (one log-softmax for the categorical)
    log_prob_entropy: Callable[[jax.Array, jax.Array, jax.Array], tuple[jax.Array, jax.Array]]
    # (key, head, mask, axis_name) -> a sampled action, this shard's rows
    sample: Callable[[jax.Array, jax.Array, jax.Array, str | None], jax.Array]
    # (head, mask) -> the most likely action (greedy evaluation)
    mode: Callable[[jax.Array, jax.Array], jax.Array]
    # the width of the head for `num_actions` (actions or action dimensions)
    head_size: Callable[[int], int]
    continuous: bool


# ---------------------------------------------------------------- categorical


def masked_logits(logits: jax.Array, legal_action_mask: jax.Array) -> jax.Array:
    """Illegal actions get the lowest finite logit, so they are never sampled
    and their probability is exactly zero without producing NaNs."""
    return jnp.where(legal_action_mask, logits, jnp.finfo(logits.dtype).min)


def _categorical_log_prob_entropy(logits: jax.Array, mask: jax.Array, action: jax.Array) -> tuple[jax.Array, jax.Array]:
    log_pi = jax.nn.log_softmax(masked_logits(logits, mask))
    log_pi_a = jnp.take_along_axis(log_pi, action[..., None], -1)[..., 0]
    # Masked actions have probability exactly 0; where() keeps 0 * min-logit out.
    return log_pi_a, -jnp.where(mask, jnp.exp(log_pi) * log_pi, 0.0).sum(-1)


CATEGORICAL = Distribution(
    log_prob=lambda logits, mask, action: _categorical_log_prob_entropy(logits, mask, action)[0],
    log_prob_entropy=_categorical_log_prob_entropy,
    sample=lambda key, logits, mask, axis_name: parallel.categorical(key, masked_logits(logits, mask), axis_name),
    mode=lambda logits, mask: jnp.argmax(masked_logits(logits, mask), axis=-1),
    head_size=lambda num_actions: num_actions,
    continuous=False,
)


# ------------------------------------------------------- diagonal Gaussian


def gaussian_parts(head: jax.Array) -> tuple[jax.Array, jax.Array]:
    """`[..., 2 A]` -> mean `[..., A]`, log standard deviation `[..., A]`."""
    mean, log_std = jnp.split(head, 2, axis=-1)
    return mean, log_std


def _gaussian_log_prob(head: jax.Array, mask: jax.Array, action: jax.Array) -> jax.Array:
    del mask
    mean, log_std = gaussian_parts(head)
    z = (action - mean) * jnp.exp(-log_std)
    return (-0.5 * jnp.square(z) - log_std - _HALF_LOG_2PI).sum(-1)


def _gaussian_entropy(head: jax.Array) -> jax.Array:
    _, log_std = gaussian_parts(head)
    return (log_std + 0.5 + _HALF_LOG_2PI).sum(-1)


def _gaussian_sample(key: jax.Array, head: jax.Array, mask: jax.Array, axis_name: str | None) -> jax.Array:
    del mask
    mean, log_std = gaussian_parts(head)
    return mean + jnp.exp(log_std) * parallel.normal(key, mean.shape, mean.dtype, axis_name)


DIAGONAL_GAUSSIAN = Distribution(
    log_prob=_gaussian_log_prob,
    log_prob_entropy=lambda head, mask, action: (_gaussian_log_prob(head, mask, action), _gaussian_entropy(head)),
    sample=_gaussian_sample,
    mode=lambda head, mask: gaussian_parts(head)[0],
    head_size=lambda num_actions: 2 * num_actions,
    continuous=True,
)


def for_actions(discrete: bool) -> Distribution:
    return CATEGORICAL if discrete else DIAGONAL_GAUSSIAN
