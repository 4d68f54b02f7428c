"""AlphaZero's networks: a ResNet for boards, an MLP for small games and a
set network for tasks whose moves pick items, each with a policy head and a
tanh value head (`make_az_network`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from algorithms.networks import dense, flatten, trunk


def neighbourhoods(x: jax.Array) -> jax.Array:
    """Each cell's 3x3 neighbourhood (zero-padded) stacked on the channel
    axis: `[N, H, W, C]` -> `[N, H, W, 9 C]`, made of slices only."""
    height, width = x.shape[1], x.shape[2]
    padded = jnp.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    return jnp.concatenate([padded[:, i : i + height, j : j + width] for i in range(3) for j in range(3)], axis=-1)


class Conv3x3(nn.Module):
    """A 3x3 'same' convolution, computed either by XLA's convolution or as
    a matmul over neighbourhoods; both forms share one kernel and agree.

    The matmul form is for gradients: on XLA's CPU backend the backward pass
    of a convolution whose kernel is vmapped over seeds fell back to slow
    loops (a 2-block ResNet's training step took 20x longer), while a
    matmul stays a batched matmul under `vmap`. The forward pass is faster
    as a convolution, so search uses that.
    """

    features: int
    as_matmul: bool = False

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        kernel = self.param("kernel", nn.initializers.lecun_normal(), (3, 3, x.shape[-1], self.features))
        bias = self.param("bias", nn.initializers.zeros, (self.features,))
        if self.as_matmul:
            y = neighbourhoods(x) @ kernel.reshape(-1, self.features)
        else:
            y = jax.lax.conv_general_dilated(x, kernel, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return y + bias


class ResidualBlock(nn.Module):
    channels: int
    as_matmul: bool = False

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        y = nn.relu(nn.LayerNorm()(x))
        y = Conv3x3(self.channels, self.as_matmul)(y)
        y = nn.relu(nn.LayerNorm()(y))
        y = Conv3x3(self.channels, self.as_matmul)(y)
        return x + y


class AZResNet(nn.Module):
    """The AlphaZero network: a 3x3 conv stem, `num_blocks` residual blocks
    of `num_channels`, a policy head (1x1 conv, dense to the actions) and a
    value head (1x1 conv, dense, tanh). LayerNorm stands in for batch norm so
    that the network has no batch statistics to carry or synchronise.

    Input `[..., H, W, C]`; returns logits `[..., A]` and value `[...]` in [-1, 1].
    """

    num_actions: int
    num_blocks: int
    num_channels: int
    as_matmul: bool = False  # convolutions as matmuls: the form to differentiate

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        batch_shape = obs.shape[:-3]
        x = obs.reshape(-1, *obs.shape[-3:])
        x = Conv3x3(self.num_channels, self.as_matmul)(x)
        for _ in range(self.num_blocks):
            x = ResidualBlock(self.num_channels, self.as_matmul)(x)
        x = nn.relu(nn.LayerNorm()(x))
        # 1x1 convolutions are dense layers over the channel axis.
        p = nn.relu(nn.Dense(2)(x)).reshape(x.shape[0], -1)
        logits = nn.Dense(self.num_actions)(p)
        v = nn.relu(nn.Dense(1)(x)).reshape(x.shape[0], -1)
        v = nn.relu(nn.Dense(self.num_channels)(v))
        value = nn.tanh(nn.Dense(1)(v))
        return logits.reshape(*batch_shape, -1), value.reshape(batch_shape)


class AZMLP(nn.Module):
    """A shared MLP trunk with policy and tanh value heads, for small games."""

    num_actions: int
    hidden_sizes: Sequence[int]
    activation: str
    observation_ndim: int
    align: int = 1  # > 1: row-stable dense layers (`networks.Dense`), for exact layouts

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        x = trunk(flatten(obs, self.observation_ndim), self.hidden_sizes, self.activation, self.align)
        logits = dense(self.num_actions, 0.01, self.align)(x)
        value = nn.tanh(dense(1, 1.0, self.align)(x))
        return logits, jnp.squeeze(value, -1)


class AZItemSet(nn.Module):
    """Items as a set, one item per action (jumanji Knapsack's): the flat
    observation holds F features of each of the A items as F blocks of A
    (`[w_0..w_A, v_0..v_A, packed_0.., ...]`), read as `[A, F]`.

    A shared per-item encoder (`hidden_sizes`), then `pooling_layers`
    residual blocks in which every item sees the mean of all items'
    encodings (DeepSets-style pooling: what is packed, how much room is
    used), a policy logit per item from its own encoding and a tanh value
    from the mean and max over items. Permuting the items permutes the
    logits and leaves the value; what is learnt about one item holds for all.
    """

    num_actions: int
    hidden_sizes: Sequence[int]
    activation: str
    pooling_layers: int
    align: int = 1  # as AZMLP's

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        batch_shape = obs.shape[:-1]
        items = jnp.swapaxes(obs.reshape(*batch_shape, -1, self.num_actions), -1, -2)
        act = nn.relu if self.activation == "relu" else nn.tanh
        x = trunk(items, self.hidden_sizes, self.activation, self.align)
        width = self.hidden_sizes[-1]
        for _ in range(self.pooling_layers):
            context = jnp.broadcast_to(x.mean(axis=-2, keepdims=True), x.shape)
            x = x + act(dense(width, 1.0, self.align)(jnp.concatenate([x, context], axis=-1)))
        logits = dense(1, 0.01, self.align)(x)[..., 0]
        pooled = jnp.concatenate([x.mean(axis=-2), x.max(axis=-2)], axis=-1)
        value = nn.tanh(dense(1, 1.0, self.align)(act(dense(width, 1.0, self.align)(pooled))))
        return logits, jnp.squeeze(value, -1)


def make_az_network(
    network: Any, num_actions: int, observation_shape: tuple[int, ...], *, for_gradients: bool = False, align: int = 1
) -> nn.Module:
    """The AlphaZero network for the spec's `network:` section (`kind: resnet
    | mlp | item_set`). `for_gradients` picks the form that is fastest to differentiate;
    it has the same parameters and outputs. `align` > 1: row-stable dense
    layers (mlp and item_set; exact layouts)."""
    if network.kind == "resnet":
        return AZResNet(num_actions, network.num_blocks, network.num_channels, as_matmul=for_gradients)
    if network.kind == "mlp":
        return AZMLP(num_actions, tuple(network.hidden_sizes), network.activation, len(observation_shape), align)
    if network.kind == "item_set":
        return AZItemSet(num_actions, tuple(network.hidden_sizes), network.activation, network.pooling_layers, align)
    raise ValueError(f"AlphaZero has no {network.kind!r} network; use resnet, mlp or item_set")
