"""Networks, in flax.linen. Configured by any object with the attributes of
the spec's `network:` section (`kind`, `hidden_sizes`, `activation`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

_ACTIVATIONS = {"tanh": nn.tanh, "relu": nn.relu}


def _dense(features: int, scale: float) -> nn.Dense:
    return nn.Dense(features, kernel_init=nn.initializers.orthogonal(scale), bias_init=nn.initializers.zeros)


class MLP(nn.Module):
    hidden_sizes: Sequence[int]
    activation: str
    out_features: int
    out_scale: float

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = _ACTIVATIONS[self.activation]
        for size in self.hidden_sizes:
            x = act(_dense(size, np.sqrt(2.0))(x))
        return _dense(self.out_features, self.out_scale)(x)


class ActorCritic(nn.Module):
    """Separate actor and critic MLPs over a flattened observation.

    Input `[..., *observation_shape]`; returns logits `[..., num_actions]` and
    value `[...]`. Orthogonal initialisation, with a small final actor layer
    (scale 0.01) so the initial policy is near uniform.
    """

    num_actions: int
    hidden_sizes: Sequence[int]
    activation: str
    observation_ndim: int

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        batch_shape = obs.shape[: obs.ndim - self.observation_ndim]
        x = obs.reshape(*batch_shape, -1)
        logits = MLP(self.hidden_sizes, self.activation, self.num_actions, 0.01, name="actor")(x)
        value = MLP(self.hidden_sizes, self.activation, 1, 1.0, name="critic")(x)
        return logits, jnp.squeeze(value, -1)


def make_actor_critic(network: Any, num_actions: int, observation_shape: tuple[int, ...]) -> nn.Module:
    if network.kind != "mlp":
        raise ValueError(f"unknown network kind {network.kind!r}")
    return ActorCritic(
        num_actions=num_actions,
        hidden_sizes=tuple(network.hidden_sizes),
        activation=network.activation,
        observation_ndim=len(observation_shape),
    )


def masked_logits(logits: jax.Array, legal_action_mask: jax.Array) -> jax.Array:
    """Illegal actions get the lowest finite logit, so they are never sampled
    and their probability is exactly zero without producing NaNs."""
    return jnp.where(legal_action_mask, logits, jnp.finfo(logits.dtype).min)
