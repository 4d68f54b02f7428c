"""The sections of a spec (harness.spec): env, seeds, budget, network,
optimizer, logging, tracking, devices, checkpoint, and each algorithm's
hyperparameters, as frozen pydantic models that refuse unknown keys."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_serializer, model_validator


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MaskObservation(_Model):
    """Zero the observation entries at `indices` (of the flattened
    observation): e.g. CartPole's velocities, to make memory necessary."""

    name: Literal["mask_observation"]
    indices: tuple[int, ...] = Field(min_length=1)


class ObserveLegalActions(_Model):
    """Append the legal-action mask (1 legal, 0 not) to a flat observation:
    e.g. jumanji Knapsack's items that still fit, which the observation
    itself leaves to be worked out from weights and the budget."""

    name: Literal["observe_legal_actions"]


class ObservePreviousActionReward(_Model):
    """Append the previous action and reward to the observation, on every
    tile of a grid (`[..., C] -> [..., C + 2]`), for `network: {kind:
    grid_gru, previous_action_reward: true}`."""

    name: Literal["observe_previous_action_reward"]


Wrapper = Annotated[MaskObservation | ObserveLegalActions | ObservePreviousActionReward, Field(discriminator="name")]


class EnvSpec(_Model):
    suite: Literal["gymnax", "jumanji", "pgx", "xminigrid", "brax"]
    id: str
    kwargs: dict[str, Any] = Field(default_factory=dict)
    wrappers: tuple[Wrapper, ...] = ()


class SeedRange(_Model):
    count: int = Field(gt=0)
    base: int = Field(default=0, ge=0)


class BudgetSpec(_Model):
    env_steps: int = Field(gt=0, description="environment steps per seed")


class NetworkSpec(_Model):
    kind: Literal["mlp", "gru", "grid", "grid_gru", "resnet", "item_set"] = "mlp"
    hidden_sizes: tuple[int, ...] = Field(
        default=(64, 64), description="MLP layers (gru: the embedding; grid, grid_gru: each head's layers)"
    )
    activation: Literal["tanh", "relu"] = "tanh"
    gru_size: int = Field(default=128, gt=0, description="GRU memory size (kind: gru)")
    num_blocks: int = Field(default=2, gt=0, description="residual blocks (kind: resnet, alphazero)")
    num_channels: int = Field(default=32, gt=0, description="channels of every conv layer (kind: resnet)")
    conv_gradient: Literal["matmul", "conv"] = Field(
        default="matmul",
        description="how training differentiates the 3x3 convolutions (kind: resnet): as matmuls over"
        " neighbourhoods (the published references') or as native-layout convolutions (faster on CPU)",
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

    @field_validator("hidden_sizes")
    @classmethod
    def _positive(cls, sizes: tuple[int, ...]) -> tuple[int, ...]:
        if not sizes or any(s <= 0 for s in sizes):
            raise ValueError("hidden_sizes must be a non-empty list of positive integers")
        return sizes

    @model_serializer(mode="wrap")
    def _drop_resnet_keys(self, handler: Any) -> dict[str, Any]:
        # The resnet and grid keys came after specs with other networks were
        # published; leaving them out of other kinds keeps those hashes.
        data = handler(self)
        kept = set(_KIND_KEYS.get(self.kind, ()))
        for keys in _KIND_KEYS.values():
            for key in set(keys) - kept:
                data.pop(key, None)
        # conv_gradient came after resnet specs were published: at its
        # default it is left out, so that their hashes stay.
        if data.get("conv_gradient") == "matmul":
            del data["conv_gradient"]
        return data


_KIND_KEYS = {
    "resnet": ("num_blocks", "num_channels", "conv_gradient"),
    "grid_gru": (
        "id_channels",
        "vocabulary",
        "embedding_size",
        "conv_channels",
        "action_embedding_size",
        "previous_action_reward",
        "compute_dtype",
    ),
    "grid": ("id_channels", "vocabulary", "embedding_size", "conv_channels", "compute_dtype"),
    "item_set": ("pooling_layers",),
}


class OptimizerSpec(_Model):
    name: Literal["adam", "sgd"] = "adam"
    learning_rate: float = Field(default=3e-4, gt=0)
    anneal_lr: bool = Field(default=False, description="anneal linearly to 0 over the run")
    max_grad_norm: float | None = Field(default=None, gt=0, description="global-norm clipping")
    adam_eps: float = Field(default=1e-8, gt=0)
    momentum: float = Field(default=0.0, ge=0, lt=1)


class LoggingSpec(_Model):
    interval: int = Field(
        default=10,
        gt=0,
        description="iterations per jitted chunk: the host syncs, logs every "
        "iteration's metrics and updates the progress bar once per chunk",
    )


class TrackingSpec(_Model):
    experiment: str | None = Field(default=None, description="MLflow experiment; the spec name if unset")
    uri: str | None = Field(default=None, description="MLflow tracking URI; sqlite:///mlflow.db if unset")


class DevicesSpec(_Model):
    """Where a spec runs, not what it computes: left out of the spec hash.
    The devices form a mesh `seed_axis x data_axis`: seeds are spread over
    `seed`, each seed's env batch over `data`. By default the curves are the
    same computation on any layout but not the same bits (each device adds
    its part first); `shards` asks for an exact layout, whose bits do not
    depend on the data axis (recorded as `device.shards`)."""

    count: int | Literal["all"] = Field(default=1, description="devices to use: a number, or all (every process's)")
    seed_axis: int | None = Field(default=None, gt=0, description="devices along the seed axis (default: 1)")
    data_axis: int | None = Field(default=None, gt=0, description="devices along the data axis (default: the rest)")
    shards: int | None = Field(
        default=None,
        gt=0,
        description="exact layout (PPO): each seed's envs and minibatches split into this many logical shards,"
        " at least two per data device, added in one fixed order: the same bits on the plain program and on"
        " any data_axis that allows it; null: each device adds its own part first",
    )
    host_devices: int | Literal["cores"] | None = Field(
        default=None,
        description="on a CPU: split the host into this many devices (cores: one per core), set before JAX starts;"
        " with count left at 1 the seeds spread over them, each device on a core of its own (harness.run.host_devices)",
    )
    deterministic: bool = Field(
        default=False,
        description="XLA's deterministic ops (GPU: no autotuning, no atomic reductions), set before JAX starts"
        " and recorded in device.xla_flags; CPU and TPU runs are deterministic without it",
    )

    @field_validator("count")
    @classmethod
    def _positive_count(cls, count: int | str) -> int | str:
        if isinstance(count, int) and count < 1:
            raise ValueError("count must be at least 1, or all")
        return count

    @field_validator("host_devices")
    @classmethod
    def _positive_host_devices(cls, count: int | str | None) -> int | str | None:
        if isinstance(count, int) and count < 1:
            raise ValueError("host_devices must be at least 1, or cores")
        return count


class CheckpointSpec(_Model):
    """When to checkpoint the training state (harness.run.checkpoint). Not part
    of the spec hash: how often a run is saved does not change its results."""

    every: int | None = Field(
        default=None,
        ge=0,
        description="iterations between checkpoints, taken at the first chunk end past each multiple;"
        " null or 0: none, except the final one on Ctrl-C/SIGTERM",
    )
    keep: int = Field(default=3, gt=0, description="the newest checkpoints kept; older ones are deleted")


class SweepRange(_Model):
    """A range a sweep draws values from (`harness sweep --samples N`)."""

    low: float
    high: float
    log: bool = Field(default=False, description="log-uniform (low > 0): for learning rates and the like")

    @model_validator(mode="after")
    def _ordered(self) -> SweepRange:
        if self.high < self.low:
            raise ValueError(f"high ({self.high}) is below low ({self.low})")
        if self.log and self.low <= 0:
            raise ValueError("a log-uniform range needs low > 0")
        return self


SweepValues = tuple[Any, ...] | SweepRange


class RolloutEvaluationSpec(_Model):
    """Evaluation rollouts of PPO and REINFORCE (algorithms.evaluation)."""

    episodes: int = Field(default=16, gt=0, description="whole episodes after every logging interval")
    policy: Literal["greedy", "sample"] = Field(default="greedy", description="the most likely action, or sampled")
    max_steps: int = Field(default=10_000, gt=0, description="steps an episode is played for at most")


class _OnPolicyHyperparameters(_Model):
    evaluation: RolloutEvaluationSpec | None = Field(default=None, description="evaluation rollouts; null: none")
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


class ReinforceHyperparameters(_OnPolicyHyperparameters):
    num_envs: int = Field(default=16, gt=0, description="B: envs stepped in parallel per seed")
    num_steps: int = Field(default=32, gt=0, description="T: steps per rollout fragment")
    gamma: float = Field(default=0.99, ge=0, le=1)
    baseline: bool = Field(default=True, description="learn a value baseline and bootstrap fragments with it")
    value_coef: float = Field(default=0.5, ge=0)
    entropy_coef: float = Field(default=0.01, ge=0)
    c_rho: float | None = Field(default=None, gt=0, description="clip of the importance weights; null: no clip")
    update_epochs: int = Field(default=1, gt=0, description="passes over each fragment")
    num_minibatches: int = Field(default=1, gt=0, description="minibatches per pass, split over envs")
    normalize_advantages: bool = False


class PPOHyperparameters(_OnPolicyHyperparameters):
    num_envs: int = Field(default=4, gt=0)
    num_steps: int = Field(default=128, gt=0, description="steps per env per rollout")
    gamma: float = Field(default=0.99, ge=0, le=1)
    gae_lambda: float = Field(default=0.95, ge=0, le=1)
    clip_eps: float = Field(default=0.2, gt=0)
    clip_value: bool = Field(default=True, description="clip the value loss around the old values")
    value_coef: float = Field(default=0.5, ge=0)
    entropy_coef: float = Field(default=0.01, ge=0)
    update_epochs: int = Field(default=4, gt=0)
    num_minibatches: int = Field(default=4, gt=0)
    normalize_advantages: bool = True
    reward_scale: float = Field(default=1.0, gt=0, description="rewards are multiplied by this for learning only")


class RankedRewardSpec(_Model):
    quantile: float = Field(default=0.75, gt=0, lt=1, description="of recent returns, the +1/-1 threshold")
    memory: int = Field(default=100, gt=0, description="recent episode returns remembered per game row")


class EvaluationSpec(_Model):
    games: int = Field(default=32, gt=0, description="games against each opponent, every logging interval")
    pool_size: int = Field(default=4, gt=0, description="earlier parameters kept for Elo and best-earlier games")


class AlphaZeroHyperparameters(_Model):
    num_envs: int = Field(default=64, gt=0, description="games played in parallel per seed")
    collection_steps: int = Field(default=16, gt=0, description="moves of every game per iteration")
    search: Literal["gumbel", "puct"] = Field(default="gumbel", description="mctx Gumbel MuZero, or PUCT")
    num_simulations: int = Field(default=32, gt=0)
    max_depth: int | None = Field(default=None, gt=0, description="search depth limit; null: num_simulations")
    max_num_considered_actions: int = Field(default=16, gt=0, description="gumbel: actions sampled at the root")
    gumbel_scale: float = Field(default=1.0, ge=0, description="gumbel: noise scale in self-play")
    dirichlet_alpha: float = Field(default=0.3, gt=0, description="puct: root noise concentration")
    dirichlet_fraction: float = Field(default=0.25, ge=0, le=1, description="puct: root noise weight in self-play")
    pb_c_init: float = Field(default=1.25, gt=0, description="puct: exploration constant")
    temperature: float = Field(default=1.0, ge=0, description="puct: self-play moves ~ visits^(1/temperature)")
    capacity: int = Field(default=64, gt=0, description="replay buffer moves per game row")
    warmup_iterations: int = Field(default=1, ge=0, description="iterations of self-play before training starts")
    train_steps: int = Field(default=8, gt=0, description="minibatch updates per iteration")
    train_batch_size: int = Field(default=256, gt=0)
    value_coef: float = Field(default=1.0, ge=0)
    l2_coef: float = Field(default=1e-4, ge=0)
    ranked_reward: RankedRewardSpec = RankedRewardSpec()
    evaluation: EvaluationSpec = EvaluationSpec()
