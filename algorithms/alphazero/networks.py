"""AlphaZero's networks: a ResNet for boards, an MLP for small games and a
set network for tasks whose moves pick items, each with a policy head and a
tanh value head (`make_az_network`)."""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from algorithms import convolution
from algorithms.config import NetworkConfig
from algorithms.layers import dense, flatten, trunk


def neighbourhoods(x: jax.Array) -> jax.Array:
    """Each cell's 3x3 neighbourhood (zero-padded) stacked on the channel
    axis: `[N, H, W, C]` -> `[N, H, W, 9 C]`, made of slices only."""
    height, width = x.shape[1], x.shape[2]
    padded = jnp.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    return jnp.concatenate([padded[:, i : i + height, j : j + width] for i in range(3) for j in range(3)], axis=-1)


def conv3x3(x: jax.Array, kernel: jax.Array) -> jax.Array:
    """A 3x3 'same' convolution `[N, H, W, C] x [3, 3, C, D] -> [N, H, W, D]`
    whose gradients are native-layout convolutions (`algorithms.convolution`).
    AlphaZero's ResNet runs its seeds one after another
    (`Algorithm.map_seeds`), so its kernel is never batched."""
    return convolution.conv(x, kernel, "SAME")


class Conv3x3(nn.Module):
    """A 3x3 'same' convolution, computed either by XLA's convolution
    (`conv3x3`, with its gradients as native-layout convolutions) or as a
    matmul over neighbourhoods; both forms share one kernel and agree.

    The matmul form is the older way to differentiate (`network:
    {conv_gradient: matmul}`, the default, which the published references
    were made with): a matmul stays a matmul under `vmap` and in loops, but
    its neighbourhoods are 9x the activations, which leaves the cache at
    training's batch sizes. Search, which never differentiates, always uses
    the convolution.
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
            y = conv3x3(x, kernel)
        return y + bias


# Batch normalisation's running averages, as pgx's AlphaZero network (haiku's
# BatchNorm with decay 0.9 and its default epsilon).
BATCH_NORM_MOMENTUM = 0.9
BATCH_NORM_EPSILON = 1e-5


def normalization(batch_norm: bool, training: bool, axis_name: str | None) -> nn.Module:
    """Layer normalisation (per position, over the channels), or batch
    normalisation (per channel): over the batch, and over the devices of
    `axis_name`, when `training` (its running averages updated in the
    `batch_stats` collection); by those running averages otherwise. Made
    inside the caller's compact method, so that it is the caller's child."""
    if not batch_norm:
        return nn.LayerNorm()
    return nn.BatchNorm(
        use_running_average=not training,
        momentum=BATCH_NORM_MOMENTUM,
        epsilon=BATCH_NORM_EPSILON,
        axis_name=axis_name if training else None,
    )


class ResidualBlock(nn.Module):
    channels: int
    as_matmul: bool = False
    batch_norm: bool = False
    training: bool = False
    axis_name: str | None = None

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        y = nn.relu(normalization(self.batch_norm, self.training, self.axis_name)(x))
        y = Conv3x3(self.channels, self.as_matmul)(y)
        y = nn.relu(normalization(self.batch_norm, self.training, self.axis_name)(y))
        y = Conv3x3(self.channels, self.as_matmul)(y)
        return x + y


class AZResNet(nn.Module):
    """The AlphaZero network: a 3x3 conv stem, `num_blocks` residual blocks
    of `num_channels`, a policy head (1x1 conv, dense to the actions) and a
    value head (1x1 conv, dense, tanh).

    Each block normalises before its activations: LayerNorm by default, so
    that the network has no batch statistics to carry or synchronise; with
    `batch_norm`, batch normalisation (`normalization`), whose running
    averages are the `batch_stats` collection, updated by the network built
    with `training` (the one differentiated) and read by the one without (the
    one search evaluates). In search it is a per-channel scale and shift,
    where LayerNorm computes each position's statistics.

    Input `[..., H, W, C]`; returns logits `[..., A]` and value `[...]` in [-1, 1].
    """

    num_actions: int
    num_blocks: int
    num_channels: int
    as_matmul: bool = False  # convolutions as matmuls (network.conv_gradient: matmul, to differentiate)
    batch_norm: bool = False  # network.normalization: batch
    training: bool = False  # batch_norm: the batch's statistics, and update the running averages
    axis_name: str | None = None  # batch_norm, training: the statistics over this data-parallel axis too

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        batch_shape = obs.shape[:-3]
        x = obs.reshape(-1, *obs.shape[-3:])
        x = Conv3x3(self.num_channels, self.as_matmul)(x)
        for _ in range(self.num_blocks):
            x = ResidualBlock(self.num_channels, self.as_matmul, self.batch_norm, self.training, self.axis_name)(x)
        x = nn.relu(normalization(self.batch_norm, self.training, self.axis_name)(x))
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
    align: int = 1  # > 1: row-stable dense layers (`layers.Dense`), for exact layouts
    initialization: str = "orthogonal"  # or "lecun" (`layers.INITIALIZERS`)

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        x = trunk(
            flatten(obs, self.observation_ndim), self.hidden_sizes, self.activation, self.align, self.initialization
        )
        logits = dense(self.num_actions, 0.01, self.align, self.initialization)(x)
        value = nn.tanh(dense(1, 1.0, self.align, self.initialization)(x))
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
    network: NetworkConfig,
    num_actions: int,
    observation_shape: tuple[int, ...],
    *,
    for_gradients: bool = False,
    align: int = 1,
    axis_name: str | None = None,
) -> nn.Module:
    """The AlphaZero network for the spec's `network:` section (`kind: resnet
    | mlp | item_set`). `for_gradients` picks the form to differentiate (the
    ResNet's `conv_gradient`); it has the same parameters and outputs.
    `align` > 1: row-stable dense layers (mlp and item_set; exact layouts).
    With `normalization: batch`, the one `for_gradients` normalises by the
    batch's statistics over `axis_name` too, and updates their averages."""
    if network.kind == "resnet":
        return AZResNet(
            num_actions,
            network.num_blocks,
            network.num_channels,
            as_matmul=for_gradients and network.conv_gradient != "conv",
            batch_norm=network.normalization == "batch",
            training=for_gradients,
            axis_name=axis_name if for_gradients else None,
        )
    if network.kind == "mlp":
        return AZMLP(
            num_actions,
            tuple(network.hidden_sizes),
            network.activation,
            len(observation_shape),
            align,
            network.initialization,
        )
    if network.kind == "item_set":
        return AZItemSet(num_actions, tuple(network.hidden_sizes), network.activation, network.pooling_layers, align)
    raise ValueError(f"AlphaZero has no {network.kind!r} network; use resnet, mlp or item_set")
