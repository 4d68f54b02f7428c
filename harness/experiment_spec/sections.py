"""The sections of a spec (harness.experiment_spec) that every algorithm shares: env,
seeds, budget, network, optimizer, logging, tracking, devices, checkpoint,
sweep ranges, as frozen pydantic models (the claims: harness.experiment_spec.claims) that refuse unknown keys. Each
algorithm's `hyperparameters:` section is its own typed config, declared in
`algorithms/` beside its factory (`Registration.config`)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from algorithms.config import NetworkConfig


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# A spec's name becomes an MLflow experiment, a file name and part of a URL.
_SAFE_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def check_name(name: str) -> str:
    """A spec's name: letters, digits, `_`, `-` and `.`, not dots alone."""
    if not _SAFE_NAME.fullmatch(name) or not name.strip("."):
        raise ValueError(
            f"{name!r}: use letters, digits, _, - and . only (it names an MLflow experiment, files and URLs)"
        )
    return name


class MaskObservation(_Model):
    """Zero the observation entries at `indices` (of the flattened
    observation): e.g. CartPole's velocities, to make memory necessary."""

    name: Literal["mask_observation"]
    indices: tuple[int, ...] = Field(min_length=1, description="the observation entries set to zero")


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


# The network is the algorithms' to describe (each declares the kinds it
# takes); the spec's section is that model.
NetworkSpec = NetworkConfig


class EnvSpec(_Model):
    suite: Literal["gymnax", "jumanji", "pgx", "xminigrid", "brax"] = Field(description="the env library")
    id: str = Field(description="the env's name in its library, e.g. CartPole-v1, tic_tac_toe")
    kwargs: dict[str, Any] = Field(
        default_factory=dict, description="keyword arguments for the library's env constructor, checked against it"
    )
    wrappers: tuple[Wrapper, ...] = Field(default=(), description="observation wrappers, applied in order")


class SeedRange(_Model):
    count: int = Field(gt=0, description="how many seeds")
    base: int = Field(default=0, ge=0, description="the first seed; the others follow it")


class BudgetSpec(_Model):
    env_steps: int = Field(gt=0, description="environment steps per seed")


class OptimizerSpec(_Model):
    name: Literal["adam", "sgd"] = Field(default="adam", description="the optax optimizer")
    learning_rate: float = Field(default=3e-4, gt=0, description="the step size (its start when annealed)")
    anneal_lr: bool = Field(default=False, description="anneal linearly to 0 over the run")
    max_grad_norm: float | None = Field(default=None, gt=0, description="global-norm clipping")
    adam_eps: float = Field(default=1e-8, gt=0, description="Adam's epsilon, added to the denominator")
    momentum: float = Field(default=0.0, ge=0, lt=1, description="SGD's momentum (sgd only)")


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


def check_batch_fits(cap: int, batch: int, cap_name: str, batch_said: str) -> None:
    """The one rule of a reproduction's seeding, wherever it is given (the
    spec's `reproduction` section, --max-seeds and --batch): its seed cap
    holds at least one batch. ValueError naming what was given."""
    if cap < batch:
        raise ValueError(f"{cap_name} ({cap}) is below one batch ({batch_said})")


class ReproductionSpec(_Model):
    """How a reproduction adds fresh seeds (`harness reproduce --adaptive`,
    `nox -s unseen`), as `harness validate --errors` simulates it: the
    claims' measured errors are those of this seeding. Not part of the spec
    hash: how many seeds a verdict may take changes no run's results."""

    batch: int | None = Field(
        default=None, gt=0, description="fresh seeds run at a time (one compiled program); null: the spec's seed count"
    )
    max_seeds: int | None = Field(
        default=None, gt=0, description="INCONCLUSIVE after this many seeds (whole batches); null: 4 batches"
    )

    @model_validator(mode="after")
    def _a_batch_fits(self) -> ReproductionSpec:
        if self.batch is not None and self.max_seeds is not None:
            check_batch_fits(self.max_seeds, self.batch, "max_seeds", str(self.batch))
        return self


class SweepRange(_Model):
    """A range a sweep draws values from (`harness sweep --samples N`)."""

    low: float = Field(description="the range's lower end")
    high: float = Field(description="the range's upper end (at least low)")
    log: bool = Field(default=False, description="log-uniform (low > 0): for learning rates and the like")

    @model_validator(mode="after")
    def _ordered(self) -> SweepRange:
        if self.high < self.low:
            raise ValueError(f"high ({self.high}) is below low ({self.low})")
        if self.log and self.low <= 0:
            raise ValueError("a log-uniform range needs low > 0")
        return self


SweepValues = tuple[Any, ...] | SweepRange
