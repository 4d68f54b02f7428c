"""Networks, in flax.linen. Configured by any object with the attributes of
the spec's `network:` section (`kind`, `hidden_sizes`, `activation`, and
`gru_size` for `kind: gru`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

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


class GRUActorCritic(nn.Module):
    """An MLP embedding, a GRU cell, and linear actor and critic heads.

    Called one step at a time: `(carry [..., H], obs [..., *obs], reset [...])`
    -> `(carry, logits [..., A], value [...])`. The carry is zeroed where
    `reset` is set, that is, on the first step of an episode, so memory never
    leaks across episodes; it is otherwise carried across rollout fragments.
    """

    num_actions: int
    hidden_sizes: Sequence[int]
    gru_size: int
    activation: str
    observation_ndim: int

    @nn.compact
    def __call__(self, carry, obs, reset):
        act = _ACTIVATIONS[self.activation]
        batch_shape = obs.shape[: obs.ndim - self.observation_ndim]
        x = obs.reshape(*batch_shape, -1)
        for size in self.hidden_sizes:
            x = act(_dense(size, np.sqrt(2.0))(x))
        carry = jnp.where(reset[..., None], jnp.zeros_like(carry), carry)
        carry, y = nn.GRUCell(self.gru_size, name="gru")(carry, x)
        logits = _dense(self.num_actions, 0.01)(y)
        value = _dense(1, 1.0)(y)
        return carry, logits, jnp.squeeze(value, -1)


class Policy(NamedTuple):
    """A network behind one interface, recurrent or not.

    `apply(params, carry, obs, reset) -> (carry, logits, value)` takes one
    step for any batch shape; a feed-forward policy has an empty carry
    (`[..., 0]`) and ignores `reset`.
    """

    init: Callable[[jax.Array, jax.Array], Any]  # (key, one observation) -> params
    initial_carry: Callable[[tuple[int, ...]], jax.Array]  # batch shape -> zeros [..., H]
    apply: Callable[..., tuple[jax.Array, jax.Array, jax.Array]]
    recurrent: bool


def make_policy(network: Any, num_actions: int, observation_shape: tuple[int, ...]) -> Policy:
    """The policy for the spec's `network:` section (`kind: mlp | gru`)."""
    ndim = len(observation_shape)
    if network.kind == "mlp":
        net = ActorCritic(num_actions, tuple(network.hidden_sizes), network.activation, ndim)

        def apply(params, carry, obs, reset):
            del reset
            logits, value = net.apply(params, obs)
            return carry, logits, value

        return Policy(
            init=net.init,
            initial_carry=lambda batch_shape: jnp.zeros((*batch_shape, 0), jnp.float32),
            apply=apply,
            recurrent=False,
        )
    if network.kind == "gru":
        net = GRUActorCritic(num_actions, tuple(network.hidden_sizes), network.gru_size, network.activation, ndim)

        def initial_carry(batch_shape):
            return jnp.zeros((*batch_shape, network.gru_size), jnp.float32)

        return Policy(
            init=lambda key, obs: net.init(key, initial_carry(()), obs, jnp.ones((), bool)),
            initial_carry=initial_carry,
            apply=net.apply,
            recurrent=True,
        )
    raise ValueError(f"unknown network kind {network.kind!r}")


def unroll(policy: Policy, params: Any, carry: jax.Array, obs: jax.Array, reset: jax.Array):
    """The policy over a fragment: `carry [B, H]` at its start, `obs [T, B, ...]`,
    `reset [T, B]` -> `logits [T, B, A]`, `value [T, B]`. A feed-forward policy
    takes the whole fragment in one batch; a recurrent one steps through time."""
    if not policy.recurrent:
        _, logits, value = policy.apply(params, carry, obs, reset)
        return logits, value

    def step(carry, inputs):
        carry, logits, value = policy.apply(params, carry, *inputs)
        return carry, (logits, value)

    _, (logits, value) = jax.lax.scan(step, carry, (obs, reset))
    return logits, value


def masked_logits(logits: jax.Array, legal_action_mask: jax.Array) -> jax.Array:
    """Illegal actions get the lowest finite logit, so they are never sampled
    and their probability is exactly zero without producing NaNs."""
    return jnp.where(legal_action_mask, logits, jnp.finfo(logits.dtype).min)
