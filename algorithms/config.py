"""Typed hyperparameters: each algorithm declares its configuration as a
frozen model that refuses unknown keys, with the types, defaults, bounds and
descriptions that a spec's `hyperparameters:` section is validated against.

The harness builds its spec models from these (through `algorithms.registry`),
so a field here is a spec key: renaming one, reordering a default's value or
changing what the canonical form leaves out changes the spec hash of every
published spec that uses it.
"""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_serializer, model_validator


class Config(BaseModel):
    """An algorithm's hyperparameters: frozen, no unknown keys."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def with_numbers(self, numbers: dict[str, Any]) -> Self:
        """A copy with `numbers` (field name -> value) set, unvalidated: the
        values may be tracers, a sweep's numbers inside its traced program
        (algorithms.sweep). Only the registration's `numeric` fields, which
        enter the computation as arithmetic, may be set this way."""
        return self.model_copy(update=numbers)


class RolloutEvaluationConfig(Config):
    """Evaluation rollouts of PPO and REINFORCE (algorithms.evaluation)."""

    episodes: int = Field(default=16, gt=0, description="whole episodes after every logging interval")
    policy: Literal["greedy", "sample"] = Field(default="greedy", description="the most likely action, or sampled")
    max_steps: int = Field(default=10_000, gt=0, description="steps an episode is played for at most")


class OnPolicyConfig(Config):
    """What the on-policy algorithms (algorithms.rollout) share."""

    evaluation: RolloutEvaluationConfig | None = Field(default=None, description="evaluation rollouts; null: none")
    normalize_observations: bool = Field(
        default=False, description="running mean and variance of observations; the policy sees them standardised"
    )
    normalize_rewards: bool = Field(
        default=False, description="rewards divided by a running std of discounted returns, for learning only"
    )
    shuffle: Literal["permutation", "feistel"] = Field(
        default="permutation",
        description="how minibatches are drawn: jax.random.permutation (uniform; sorts), or a keyed"
        " Feistel bijection of the indices (no sort; faster on CPU; algorithms.shuffle)",
    )

    @model_serializer(mode="wrap")
    def _drop_later_defaults(self, handler: Any) -> dict[str, Any]:
        # Evaluation, normalisation and shuffle came after specs were
        # published: a spec that leaves them at their defaults keeps its hash.
        data = handler(self)
        later = (
            ("evaluation", None),
            ("normalize_observations", False),
            ("normalize_rewards", False),
            ("shuffle", "permutation"),
        )
        for key, off in later:
            if getattr(self, key) == off:
                data.pop(key, None)
        return data


# The grid agents (algorithms.networks: GridActorCritic, GridGRUActorCritic).
GRID_KINDS = ("grid", "grid_gru")


class NetworkConfig(Config):
    """The policy or policy-value network (algorithms.networks, algorithms.alphazero.networks):
    its kind and the sizes each kind reads; a spec's `network:` section."""

    kind: Literal["mlp", "gru", "grid", "grid_gru", "resnet", "item_set"] = Field(
        default="mlp", description="the network's family; each algorithm accepts some (its first is its default)"
    )
    hidden_sizes: tuple[int, ...] = Field(
        default=(64, 64), description="MLP layers (gru: the embedding; grid, grid_gru: each head's layers)"
    )
    activation: Literal["tanh", "relu"] = Field(default="tanh", description="the hidden layers' nonlinearity")
    gru_size: int = Field(default=128, gt=0, description="GRU memory size (kind: gru)")
    num_blocks: int = Field(default=2, gt=0, description="residual blocks (kind: resnet, alphazero)")
    num_channels: int = Field(default=32, gt=0, description="channels of every conv layer (kind: resnet)")
    conv_gradient: Literal["matmul", "conv"] | None = Field(
        default=None,
        description="how training differentiates the convolutions: as native-layout convolutions (conv, faster"
        " on CPU) or, unset, as the published references were made: resnet's as matmuls over neighbourhoods"
        " (also written matmul), grid and grid_gru's by JAX's own rules",
    )
    normalization: Literal["layer", "batch"] = Field(
        default="layer",
        description="the normalisation before each activation (kind: resnet): per position over the channels"
        " (layer, the published references'), or per channel over the batch (batch: batch statistics in training,"
        " their running averages in search, as the AlphaZero paper's and pgx's networks)",
    )
    # kind: grid_gru (the xland-minigrid baseline's agent; see algorithms.networks.GridGRUActorCritic)
    # and kind: grid (its encoder without memory, e.g. for MinAtar; GridActorCritic)
    id_channels: int = Field(default=3, ge=0, description="leading channels of ids, each embedded (grid_gru)")
    vocabulary: int = Field(default=16, gt=0, description="ids per embedded channel (grid_gru)")
    embedding_size: int = Field(default=16, gt=0, description="features per embedded id (grid_gru)")
    conv_channels: tuple[int, ...] = Field(default=(16, 32, 64), description="2x2 conv layers (grid_gru)")
    action_embedding_size: int = Field(default=16, gt=0, description="previous action's embedding (grid_gru)")
    previous_action_reward: bool = Field(
        default=False, description="read the previous action and reward (wrapper observe_previous_action_reward)"
    )
    compute_dtype: Literal["float32", "bfloat16"] = Field(default="float32", description="grid and grid_gru's compute")
    pooling_layers: int = Field(default=2, ge=0, description="blocks pooling over all items (item_set)")
    initialization: Literal["orthogonal", "lecun"] = Field(
        default="orthogonal",
        description="kind mlp's dense layers: orthogonal kernels and zero biases, or flax's default"
        " lecun-normal kernels and biases uniform in [0, 0.05) (gymnax-blines' MLPs)",
    )

    @field_validator("hidden_sizes")
    @classmethod
    def _positive(cls, sizes: tuple[int, ...]) -> tuple[int, ...]:
        if not sizes or any(s <= 0 for s in sizes):
            raise ValueError("hidden_sizes must be a non-empty list of positive integers")
        return sizes

    @model_validator(mode="after")
    def _initialization_of_mlps(self) -> NetworkConfig:
        if self.initialization != "orthogonal" and self.kind != "mlp":
            raise ValueError(f"initialization: {self.initialization} is for kind mlp, not {self.kind}")
        if self.normalization != "layer" and self.kind != "resnet":
            raise ValueError(f"normalization: {self.normalization} is for kind resnet, not {self.kind}")
        if self.conv_gradient == "matmul" and self.kind in GRID_KINDS:
            raise ValueError(f"conv_gradient: matmul is for kind resnet; {self.kind} takes conv")
        return self

    @model_serializer(mode="wrap")
    def _drop_resnet_keys(self, handler: Any) -> dict[str, Any]:
        # The resnet and grid keys came after specs with other networks were
        # published; leaving them out of other kinds keeps those hashes.
        data = handler(self)
        kept = set(_KIND_KEYS.get(self.kind, ()))
        for keys in _KIND_KEYS.values():
            for key in set(keys) - kept:
                data.pop(key, None)
        # conv_gradient came after resnet and grid specs were published:
        # unset, or resnet's matmul, it is left out, so that their hashes stay.
        if data.get("conv_gradient") in ("matmul", None):
            data.pop("conv_gradient", None)
        # So did normalization.
        if data.get("normalization") == "layer":
            del data["normalization"]
        # So did initialization: at its default it is left out too.
        if data.get("initialization") == "orthogonal":
            del data["initialization"]
        return data


_KIND_KEYS = {
    "resnet": ("num_blocks", "num_channels", "conv_gradient", "normalization"),
    "grid_gru": (
        "id_channels",
        "vocabulary",
        "embedding_size",
        "conv_channels",
        "action_embedding_size",
        "previous_action_reward",
        "compute_dtype",
        "conv_gradient",
    ),
    "grid": ("id_channels", "vocabulary", "embedding_size", "conv_channels", "compute_dtype", "conv_gradient"),
    "item_set": ("pooling_layers",),
}
