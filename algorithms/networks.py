"""Networks, in flax.linen. Configured by any object with the attributes of
the spec's `network:` section (`kind`, `hidden_sizes`, `activation`, and
`gru_size` for `kind: gru`; the grid agent's options for `kind: grid | grid_gru`).
AlphaZero's networks are in `algorithms.alphazero.networks`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from algorithms import convolution
from algorithms.config import GRID_KINDS, NetworkConfig
from algorithms.distributions import CATEGORICAL, Distribution, for_actions
from algorithms.layers import ACTIVATIONS, MLP, dense, flatten, trunk

# Network kinds with a memory (`Policy.recurrent`): trained on whole env fragments.
RECURRENT_KINDS = ("gru", "grid_gru")
# The kinds `make_policy` builds: what the on-policy algorithms take (mlp first, the default).
ON_POLICY_KINDS = ("mlp", "gru", "grid", "grid_gru")


class ActorCritic(nn.Module):
    """Separate actor and critic MLPs over a flattened observation.

    Input `[..., *observation_shape]`; returns logits `[..., num_actions]`
    (continuous: the Gaussian head `[..., 2 num_actions]`) and value `[...]`.
    Orthogonal initialisation, with a small final actor layer (scale 0.01) so
    the initial policy is near uniform (near-zero means); or `initialization: lecun`
    (`layers.INITIALIZERS`).
    """

    num_actions: int
    hidden_sizes: Sequence[int]
    activation: str
    observation_ndim: int
    align: int = 1
    continuous: bool = False  # the actor's head: Gaussian means, and a learned log std
    initialization: str = "orthogonal"

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        x = flatten(obs, self.observation_ndim)
        actor = MLP(
            self.hidden_sizes, self.activation, self.num_actions, 0.01, self.align, self.initialization, name="actor"
        )
        logits = actor(x)
        value = MLP(self.hidden_sizes, self.activation, 1, 1.0, self.align, self.initialization, name="critic")(x)
        return _gaussian_head(self, logits) if self.continuous else logits, jnp.squeeze(value, -1)


def _gaussian_head(module: nn.Module, mean: jax.Array) -> jax.Array:
    """A diagonal Gaussian's head `[..., 2 A]` (`algorithms.distributions`):
    the means, and one state-independent log standard deviation per action
    dimension (a parameter `log_std` of `module`, initially 0), broadcast."""
    log_std = module.param("log_std", nn.initializers.zeros, (mean.shape[-1],))
    return jnp.concatenate([mean, jnp.broadcast_to(log_std, mean.shape)], axis=-1)


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
    align: int = 1  # the GRU's own layers are gru_size wide: exact layouts ask for a multiple of 16
    continuous: bool = False  # as ActorCritic's

    @nn.compact
    def __call__(self, carry, obs, reset):
        x = trunk(flatten(obs, self.observation_ndim), self.hidden_sizes, self.activation, self.align)
        carry = jnp.where(reset[..., None], jnp.zeros_like(carry), carry)
        carry, y = nn.GRUCell(self.gru_size, name="gru")(carry, x)
        logits = dense(self.num_actions, 0.01, self.align)(y)
        value = dense(1, 1.0, self.align)(y)
        return carry, _gaussian_head(self, logits) if self.continuous else logits, jnp.squeeze(value, -1)


class NativeConv(nn.Module):
    """`nn.Conv` (stride 1, VALID, with a bias; the same parameters, names
    and initialisation) whose gradients are native-layout convolutions
    (`algorithms.convolution`: `network: {conv_gradient: conv}`)."""

    features: int
    kernel_size: tuple[int, int]
    kernel_init: Callable
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        kernel = self.param("kernel", self.kernel_init, (*self.kernel_size, x.shape[-1], self.features), jnp.float32)
        bias = self.param("bias", nn.initializers.zeros, (self.features,), jnp.float32)
        x, kernel, bias = (a.astype(self.dtype) for a in (x, kernel, bias))
        return convolution.conv(x, kernel, "VALID") + bias


class GridEncoder(nn.Module):
    """A grid observation `[..., H, W, C]` -> features `[..., F]`: each of the
    first `id_channels` channels holds ids (tile, colour, direction, ...),
    each embedded with a table of its own (`vocabulary` ids of
    `embedding_size` features); the other channels enter as they are; then
    2x2 convolutions (VALID, ReLU) of `conv_channels`, flattened; with
    `native_gradients`, convolutions whose gradients are native-layout ones
    (`NativeConv`)."""

    id_channels: int
    vocabulary: int
    embedding_size: int
    conv_channels: Sequence[int]
    dtype: Any = jnp.float32
    native_gradients: bool = False

    @classmethod
    def of(cls, agent: nn.Module) -> GridEncoder:
        """The encoder of a grid agent, from the agent's fields of the same names."""
        return cls(**{field: getattr(agent, field) for field in cls._FIELDS})

    _FIELDS = ("id_channels", "vocabulary", "embedding_size", "conv_channels", "dtype", "native_gradients")

    @nn.compact
    def __call__(self, grid: jax.Array) -> jax.Array:
        ids = grid[..., : self.id_channels].astype(jnp.int32)
        parts = [
            nn.Embed(self.vocabulary, self.embedding_size, dtype=self.dtype, name=f"embed_{i}")(ids[..., i])
            for i in range(self.id_channels)
        ]
        x = jnp.concatenate([*parts, grid[..., self.id_channels :].astype(self.dtype)], axis=-1)
        batch = x.shape[:-3]
        x = x.reshape(-1, *x.shape[-3:])
        kernel_init = nn.initializers.orthogonal(np.sqrt(2.0))
        for i, channels in enumerate(self.conv_channels):
            if self.native_gradients:
                conv = NativeConv(channels, (2, 2), kernel_init, self.dtype, name=f"Conv_{i}")
            else:
                conv = nn.Conv(channels, (2, 2), padding="VALID", kernel_init=kernel_init, dtype=self.dtype)
            x = nn.relu(conv(x))
        return x.reshape(*batch, -1)


class GridActorCritic(nn.Module):
    """The grid agent without memory: one grid encoder (`GridEncoder`)
    shared by an actor and a critic MLP (`hidden_sizes` of `activation`,
    then linear; orthogonal, the actor's last layer at scale 0.01). For grid
    observations of ids (xminigrid) or of binary channels (MinAtar's
    `[10, 10, C]`, with `id_channels` 0). Input `[..., H, W, C]`; returns
    logits `[..., A]` and value `[...]`, float32 whatever `dtype` computes."""

    num_actions: int
    hidden_sizes: Sequence[int]
    id_channels: int
    vocabulary: int
    embedding_size: int
    conv_channels: Sequence[int]
    activation: str = "relu"
    dtype: Any = jnp.float32
    native_gradients: bool = False  # network.conv_gradient: conv (GridEncoder)

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        encoder = GridEncoder.of(self)
        x = encoder(obs)

        def head(out_features: int, scale: float, name: str) -> jax.Array:
            mlp = MLP(self.hidden_sizes, self.activation, out_features, scale, name=name)
            return mlp(x.astype(jnp.float32))

        return head(self.num_actions, 0.01, "actor"), jnp.squeeze(head(1, 1.0, "critic"), -1)


class GridGRUActorCritic(nn.Module):
    """The recurrent grid agent of the xland-minigrid PPO baseline: the
    grid encoder, the previous action (embedded) and previous reward, a GRU,
    and actor and critic heads (`head_sizes` layers of `activation`, then
    linear; the baseline's is tanh).

    With `previous_action_reward`, the observation's last two channels hold
    the previous action and reward on every tile (the env wrapper
    `observe_previous_action_reward`); they are read at one tile and kept out
    of the convolutions. Called one step at a time like `GRUActorCritic`; the
    memory is zeroed where `reset` is set. `dtype` is the compute dtype
    (bfloat16 on accelerators); parameters, the memory and the outputs stay
    float32.
    """

    num_actions: int
    head_sizes: Sequence[int]
    gru_size: int
    id_channels: int
    vocabulary: int
    embedding_size: int
    conv_channels: Sequence[int]
    action_embedding_size: int
    previous_action_reward: bool
    activation: str = "tanh"
    dtype: Any = jnp.float32
    native_gradients: bool = False  # network.conv_gradient: conv (GridEncoder)

    @nn.compact
    def __call__(self, carry, obs, reset):
        grid = obs[..., :-2] if self.previous_action_reward else obs
        encoder = GridEncoder.of(self)
        parts = [encoder(grid)]
        if self.previous_action_reward:
            action = obs[..., 0, 0, -2].astype(jnp.int32)
            embed = nn.Embed(self.num_actions, self.action_embedding_size, dtype=self.dtype, name="action_embed")
            parts += [embed(action), obs[..., 0, 0, -1:].astype(self.dtype)]
        x = jnp.concatenate(parts, axis=-1)
        carry = jnp.where(reset[..., None], jnp.zeros_like(carry), carry)
        cell = nn.GRUCell(self.gru_size, dtype=self.dtype, param_dtype=jnp.float32, name="gru")
        carry, y = cell(carry.astype(self.dtype), x)

        def head(out_features: int, scale: float, name: str) -> jax.Array:
            h = y
            for i, size in enumerate(self.head_sizes):
                layer = nn.Dense(
                    size, kernel_init=nn.initializers.orthogonal(2.0), dtype=self.dtype, name=f"{name}_{i}"
                )
                h = ACTIVATIONS[self.activation](layer(h))
            out = nn.Dense(
                out_features, kernel_init=nn.initializers.orthogonal(scale), dtype=self.dtype, name=f"{name}_out"
            )
            return out(h).astype(jnp.float32)

        logits = head(self.num_actions, 0.01, "actor")
        value = head(1, 1.0, "critic")
        return carry.astype(jnp.float32), logits, jnp.squeeze(value, -1)


class Policy(NamedTuple):
    """A network behind one interface, recurrent or not.

    `apply(params, carry, obs, reset) -> (carry, head, value)` takes one
    step for any batch shape; a feed-forward policy has an empty carry
    (`[..., 0]`) and ignores `reset`. `head` parameterises `distribution`
    (logits, or a Gaussian's means and log standard deviations).
    """

    init: Callable[[jax.Array, jax.Array], Any]  # (key, one observation) -> params
    initial_carry: Callable[[tuple[int, ...]], jax.Array]  # batch shape -> zeros [..., H]
    apply: Callable[..., tuple[jax.Array, jax.Array, jax.Array]]
    recurrent: bool
    distribution: Distribution = CATEGORICAL
    # Train seeds one after another (`Algorithm.map_seeds`): under a vmap
    # over seeds' parameters, native-layout convolutions (`conv_gradient:
    # conv`) become grouped ones, which XLA's CPU backend runs very slowly.
    map_seeds: bool = False


def make_policy(
    network: NetworkConfig, num_actions: int, observation_shape: tuple[int, ...], align: int = 1, discrete: bool = True
) -> Policy:
    """The policy for the spec's `network:` section (`kind: mlp | gru | grid
    | grid_gru`) over `num_actions` discrete actions, or (`discrete` False) a
    diagonal Gaussian over an action of `num_actions` dimensions; `align` > 1
    computes its dense layers that wide (`Dense`)."""
    ndim = len(observation_shape)
    # The grid encoder's convolutions differentiated in XLA's native layouts.
    native = network.kind in GRID_KINDS and network.conv_gradient == "conv"
    distribution = for_actions(discrete)
    continuous = distribution.continuous
    if continuous and network.kind not in ("mlp", "gru"):
        raise ValueError(f"a {network.kind} network has no continuous actions; use mlp or gru")
    if network.kind in ("mlp", "grid"):
        if network.kind == "mlp":
            net = ActorCritic(
                num_actions,
                tuple(network.hidden_sizes),
                network.activation,
                ndim,
                align,
                continuous,
                network.initialization,
            )
        else:
            net = GridActorCritic(
                num_actions,
                tuple(network.hidden_sizes),
                id_channels=network.id_channels,
                vocabulary=network.vocabulary,
                embedding_size=network.embedding_size,
                conv_channels=tuple(network.conv_channels),
                activation=network.activation,
                dtype=jnp.dtype(network.compute_dtype),
                native_gradients=native,
            )

        def apply(params, carry, obs, reset):
            del reset
            logits, value = net.apply(params, obs)
            return carry, logits, value

        return Policy(
            init=net.init,
            initial_carry=lambda batch_shape: jnp.zeros((*batch_shape, 0), jnp.float32),
            apply=apply,
            recurrent=False,
            distribution=distribution,
            map_seeds=native,
        )
    if network.kind in RECURRENT_KINDS:
        if network.kind == "gru":
            net = GRUActorCritic(
                num_actions, tuple(network.hidden_sizes), network.gru_size, network.activation, ndim, align, continuous
            )
        else:
            net = GridGRUActorCritic(
                num_actions,
                head_sizes=tuple(network.hidden_sizes),
                gru_size=network.gru_size,
                id_channels=network.id_channels,
                vocabulary=network.vocabulary,
                embedding_size=network.embedding_size,
                conv_channels=tuple(network.conv_channels),
                action_embedding_size=network.action_embedding_size,
                previous_action_reward=network.previous_action_reward,
                activation=network.activation,
                dtype=jnp.dtype(network.compute_dtype),
                native_gradients=native,
            )

        def initial_carry(batch_shape):
            return jnp.zeros((*batch_shape, network.gru_size), jnp.float32)

        return Policy(
            init=lambda key, obs: net.init(key, initial_carry(()), obs, jnp.ones((), bool)),
            initial_carry=initial_carry,
            apply=net.apply,
            recurrent=True,
            distribution=distribution,
            map_seeds=native,
        )
    raise ValueError(f"unknown network kind {network.kind!r}")


def unroll(policy: Policy, params: Any, carry: jax.Array, obs: jax.Array, reset: jax.Array):
    """The policy over a fragment: `carry [B, H]` at its start, `obs [T, B, ...]`,
    `reset [T, B]` -> `head [T, B, W]`, `value [T, B]`. A feed-forward policy
    takes the whole fragment in one batch; a recurrent one steps through time."""
    if not policy.recurrent:
        _, logits, value = policy.apply(params, carry, obs, reset)
        return logits, value

    def step(carry, inputs):
        carry, logits, value = policy.apply(params, carry, *inputs)
        return carry, (logits, value)

    _, (logits, value) = jax.lax.scan(step, carry, (obs, reset))
    return logits, value


# ------------------------------------------------------- AlphaZero networks
