"""The sections of a spec (harness.spec) that every algorithm shares: env,
seeds, budget, network, optimizer, logging, tracking, devices, checkpoint,
sweep ranges and claims, as frozen pydantic models that refuse unknown keys. Each
algorithm's `hyperparameters:` section is its own typed config, declared in
`algorithms/` beside its factory (`Registration.config`)."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_serializer,
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


# ------------------------------------------------------------------- claims


def _statistic(value: Any, plain: tuple[str, ...], valued: dict[str, str], what: str) -> tuple[str, float | None]:
    """A statistic written as a name (`mean`) or a one-key mapping of a name
    to its number (`{fraction_at_least: 475}`), as `(name, number or None)`;
    anything else is refused with what may be written instead."""
    choices = ", ".join(plain) + "".join(f", {{{name}: {kind}}}" for name, kind in valued.items())
    if isinstance(value, str) and value in plain:
        return value, None
    if isinstance(value, dict) and len(value) == 1:
        ((name, number),) = value.items()
        if name in valued and isinstance(number, (int, float)) and not isinstance(number, bool):
            if not math.isfinite(number):
                raise ValueError(f"{name} takes a finite number, not {number}")
            return name, float(number)
    raise ValueError(f"not a statistic over {what}: {value!r}; one of {choices}")


def _as_written(value: Any) -> Any:
    """The model's own form `{name, value}` (a spec written out by to_yaml
    is read back as written; a dump is `{name: value}`) as a spec writes it."""
    if isinstance(value, dict) and "name" in value and set(value) <= {"name", "value"}:
        return value["name"] if value.get("value") is None else {value["name"]: value["value"]}
    return value


class _Statistic(_Model):
    """A statistic's name and, for those that take one, its number. Written
    (and read) in a spec as the name alone or `{name: number}`."""

    name: str
    value: float | None = None

    @model_serializer(mode="plain")
    def _as_written(self) -> str | dict[str, float]:
        return self.name if self.value is None else {self.name: self.value}


class IterationStatistic(_Statistic):
    """Each seed's value of a metric over its iterations (harness.judge.claims):
    `final` the mean over the last `final_fraction` (10%) of iterations, as
    results.json's per_seed_final (for an evaluation metric: of the
    evaluations in that window); `last` and `first` the last and first point
    of the recorded curve (20 evenly spaced points: the first is the first
    iteration or evaluation only where there are at most 20);
    `{mean_last: f}` the mean of the curve's points in the last fraction f
    of env steps."""

    PLAIN: ClassVar[tuple[str, ...]] = ("final", "last", "first")
    VALUED: ClassVar[dict[str, str]] = {"mean_last": "fraction"}

    @model_validator(mode="before")
    @classmethod
    def _written(cls, value: Any) -> Any:
        value = _as_written(value)
        name, number = _statistic(value, cls.PLAIN, cls.VALUED, "iterations")
        if name == "mean_last" and not 0 < number <= 1:
            raise ValueError(f"mean_last takes a fraction of the run in (0, 1], not {number}")
        return {"name": name, "value": number}


class SeedStatistic(_Statistic):
    """The seeds' values brought to one number: `mean`, `iqm` (interquartile
    mean), `median`, `min`, `max`, or the fraction of seeds whose value is
    `{fraction_at_least: v}` (>= v) or `{fraction_above: v}` (> v)."""

    PLAIN: ClassVar[tuple[str, ...]] = ("mean", "iqm", "median", "min", "max")
    VALUED: ClassVar[dict[str, str]] = {"fraction_at_least": "value", "fraction_above": "value"}

    @model_validator(mode="before")
    @classmethod
    def _written(cls, value: Any) -> Any:
        value = _as_written(value)
        name, number = _statistic(value, cls.PLAIN, cls.VALUED, "seeds")
        return {"name": name, "value": number}


# A bound that must be a finite number: a string such as "400" is refused,
# not read, and so are .nan and .inf (no run could be held against them).
Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]

BOUNDS = {"at_least": ">=", "at_most": "<=", "above": ">", "below": "<"}


class OutsideFigure(_Model):
    """A figure someone else published for the same claim: the run is
    consistent with it when it lies in the 95% bootstrap interval of the
    claim's statistic."""

    value: Number = Field(description="the figure, in the claim metric's units")
    source: str = Field(min_length=1, description="the repository or paper")
    file: str | None = Field(default=None, description="the file in the repository that holds the figure")
    line: int | None = Field(default=None, gt=0, description="its line in that file")
    configuration: str = Field(min_length=1, description="what was run to get it, in the source's words")


# A bound that names the reference instead of a number: the level a faithful
# run reaches, derived from the reference's seeds (harness.judge.levels).
REFERENCE = "reference"


def _level_bound(value: Any) -> float | str:
    """A bound that is a finite number or `reference`, refused in one message."""
    if value == REFERENCE:
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"Input should be a valid number or '{REFERENCE}'")
    if not math.isfinite(value):
        raise ValueError(f"Input should be a finite number (got {value})")
    return float(value)


LevelBound = Annotated[Any, BeforeValidator(_level_bound)]
# Statistics over seeds a claim's test can gate on: a mean of per-seed values,
# or a share of seeds (each seed a success or not). A min, max or median over
# seeds fails more often the more seeds a run has, or has no sequential test.
GATING_STATISTICS = ("mean", "fraction_at_least", "fraction_above")


class Claim(_Model):
    """What a published spec claims of its runs (harness.judge.claims): a
    statistic over seeds of a statistic over iterations of a metric, and one
    bound on it (at_least/at_most: >= / <=; above/below: > / <).

    With `delta`, the claim is a test with stated errors: a faithful run
    reaches the bound (a number, or `reference`: the level the reference's
    seeds reach), a run worse by `delta` or more is a regression; the test
    fails a faithful run with probability at most `alpha` and catches a
    `delta` regression with probability `power` (measured by `harness
    validate --errors`). Without `delta` the claim is a statement, judged on
    the point estimate and never a gate."""

    metric: str = Field(min_length=1, description="a metric the run records, e.g. episode_return")
    over_iterations: IterationStatistic = IterationStatistic(name="final")
    over_seeds: SeedStatistic = SeedStatistic(name="mean")
    at_least: LevelBound | None = Field(
        default=None, description="holds when the statistic is >= this (one bound); `reference`: the reference's level"
    )
    at_most: LevelBound | None = Field(
        default=None, description="holds when the statistic is <= this (one bound); `reference`: the reference's level"
    )
    above: LevelBound | None = Field(
        default=None, description="holds when the statistic is > this (one bound); `reference`: the reference's level"
    )
    below: LevelBound | None = Field(
        default=None, description="holds when the statistic is < this (one bound); `reference`: the reference's level"
    )
    delta: Number | None = Field(
        default=None,
        gt=0,
        description="the smallest regression that matters, in the statistic's units (a share of seeds for a "
        "fraction); makes the claim a test",
    )
    alpha: Number = Field(
        default=0.01, gt=0, le=0.5, description="the test's chance of failing a faithful run, in (0, 0.5]"
    )
    power: Number = Field(
        default=0.8, gt=0, lt=1, description="the test's chance of catching a delta regression, in (0, 1)"
    )
    range: tuple[Number, Number] | None = Field(
        default=None,
        description="[low, high]: the bounds of a per-seed value, which a test of a mean needs (values are "
        "clipped to them)",
    )
    outside: OutsideFigure | None = Field(
        default=None, description="a published figure from elsewhere to hold the run against"
    )

    @model_validator(mode="after")
    def _one_bound(self) -> Claim:
        given = [name for name in BOUNDS if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one bound of {', '.join(BOUNDS)} (got {', '.join(given) or 'none'})")
        if self.delta is None:
            if self.bound[1] == REFERENCE:
                raise ValueError(f"{given[0]}: reference needs delta, the regression the test is to catch")
            if self.range is not None:
                raise ValueError("range: only a test (a claim with delta) uses a range")
            return self
        if self.over_seeds.name not in GATING_STATISTICS:
            raise ValueError(
                f"over_seeds: {self.over_seeds.name} cannot gate a test (its failure rate grows with the seeds, or "
                f"it has no sequential test); use one of {', '.join(GATING_STATISTICS)}"
            )
        if self.over_seeds.name == "mean":
            if self.range is None:
                raise ValueError("range: a test of a mean needs the per-seed value's bounds, [low, high]")
            low, high = self.range
            if not low < high:
                raise ValueError(f"range: [{low}, {high}] is empty; give [low, high] with low < high")
            if self.delta >= high - low:
                raise ValueError(f"delta: {self.delta} is not smaller than the range [{low}, {high}]")
        else:
            if self.range is not None:
                raise ValueError("range: a share of seeds is already in [0, 1]; leave range out")
            if self.delta >= 1:
                raise ValueError(f"delta: {self.delta} is a share of seeds, below 1")
        return self

    @property
    def bound(self) -> tuple[str, float | str]:
        """(`at_least` | `at_most` | `above` | `below`, its value or `reference`)."""
        return next((name, value) for name in BOUNDS if (value := getattr(self, name)) is not None)

    @property
    def higher_is_better(self) -> bool:
        return self.bound[0] in ("at_least", "above")

    @property
    def is_test(self) -> bool:
        return self.delta is not None


# A claim's name becomes an MLflow tag (`claim.<name>`) and metric
# (`claim_<name>_value`): lower-case letters, digits and underscores.
_CLAIM_NAME = re.compile(r"[a-z][a-z0-9_]*")


def _claim_name(name: str) -> str:
    if not _CLAIM_NAME.fullmatch(name):
        raise ValueError(f"claim name {name!r}: use lower-case letters, digits and underscores")
    return name


ClaimName = Annotated[str, AfterValidator(_claim_name)]
