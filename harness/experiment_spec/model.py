"""The spec model: the sections every spec shares (harness.experiment_spec.sections),
its claims (harness.experiment_spec.claims), and one model per registered algorithm,
whose `algorithm:` tag picks it (`spec_models`)."""

from __future__ import annotations

import functools
from typing import Any, Literal

from pydantic import Field, ValidationInfo, create_model, field_validator, model_serializer

import algorithms
from harness.experiment_spec.claims import Claim, ClaimName
from harness.experiment_spec.sections import (
    BudgetSpec,
    CheckpointSpec,
    DevicesSpec,
    EnvSpec,
    LoggingSpec,
    NetworkSpec,
    OptimizerSpec,
    ReproductionSpec,
    SeedRange,
    SweepRange,
    SweepValues,
    TrackingSpec,
    _Model,
    check_batch_fits,
    check_name,
)


def check_seeds(seeds: tuple[int, ...]) -> tuple[int, ...]:
    """A spec's seeds (or --seeds): at least one, distinct, in [0, 2**32)."""
    if not seeds:
        raise ValueError("at least one seed is needed")
    if len(set(seeds)) != len(seeds):
        raise ValueError("seeds must be distinct")
    if any(not 0 <= s < 2**32 for s in seeds):
        raise ValueError("seeds must be in [0, 2**32)")
    return seeds


class _SpecBase(_Model):
    name: str = Field(
        min_length=1,
        description="the experiment's name, of letters, digits, _, - and .; also its MLflow experiment by default",
    )
    env: EnvSpec = Field(description="the environment")
    seeds: tuple[int, ...] = Field(description="a list of seeds, or {count, base}; one independent run each")
    budget: BudgetSpec = Field(description="how long each seed trains")
    network: NetworkSpec = Field(default=NetworkSpec(), description="the policy/value network")
    optimizer: OptimizerSpec = Field(default=OptimizerSpec(), description="the optimizer and its schedule")
    logging: LoggingSpec = Field(default=LoggingSpec(), description="how often metrics reach the host")
    tracking: TrackingSpec = Field(default=TrackingSpec(), description="where runs are logged (MLflow)")
    devices: DevicesSpec = DevicesSpec()
    checkpoint: CheckpointSpec = CheckpointSpec()
    reproduction: ReproductionSpec = ReproductionSpec()
    # Dotted spec key -> its values (a list: a grid; a range: random draws),
    # trained as one program where they are numbers (harness.sweep).
    sweep: dict[str, SweepValues] | None = Field(
        default=None,
        description="spec keys to sweep: a list of values (a grid) or a range (random draws); numbers in one program",
    )
    # What the spec claims of its runs, by name (harness.judge.claims).
    claims: dict[ClaimName, Claim] = Field(
        default_factory=dict, description="what the spec claims of its runs, by name; checked on every run"
    )

    @field_validator("name")
    @classmethod
    def _check_name(cls, name: str) -> str:
        return check_name(name)

    @field_validator("seeds", mode="before")
    @classmethod
    def _expand_seeds(cls, value: Any) -> Any:
        if isinstance(value, dict):
            rng = SeedRange.model_validate(value)
            return tuple(range(rng.base, rng.base + rng.count))
        return value

    @field_validator("seeds")
    @classmethod
    def _check_seeds(cls, seeds: tuple[int, ...]) -> tuple[int, ...]:
        return check_seeds(seeds)

    @field_validator("reproduction")
    @classmethod
    def _a_batch_of_seeds_fits(cls, stated: ReproductionSpec, info: ValidationInfo) -> ReproductionSpec:
        if stated.batch is None and stated.max_seeds is not None:
            seeds = len(info.data.get("seeds", ()))
            check_batch_fits(stated.max_seeds, seeds, "max_seeds", f"the spec's {seeds} seeds")
        return stated

    @field_validator("sweep", mode="before")
    @classmethod
    def _sweep_shapes(cls, sweep: Any) -> Any:
        if isinstance(sweep, dict):
            for key, values in sweep.items():
                if not isinstance(values, (list, tuple, dict, SweepRange)):
                    raise ValueError(f"{key}: give a list of values, or a range {{low, high}} (got {values!r})")
        return sweep

    @field_validator("sweep")
    @classmethod
    def _check_sweep(cls, sweep: dict[str, Any] | None) -> dict[str, Any] | None:
        if sweep is not None and not sweep:
            raise ValueError("a sweep needs at least one key")
        for key, values in (sweep or {}).items():
            if isinstance(values, tuple) and not values:
                raise ValueError(f"{key}: an empty list of values")
        return sweep

    @model_serializer(mode="wrap")
    def _drop_no_sweep(self, handler: Any) -> dict[str, Any]:
        # Sweeps came after specs were published: a spec without one keeps its hash.
        data = handler(self)
        if self.sweep is None:
            data.pop("sweep", None)
        return data

    @property
    def experiment_name(self) -> str:
        return self.tracking.experiment or self.name

    def cross_checks(self) -> list[tuple[str, str]]:
        """Problems that involve more than one section: (dotted key, message)."""
        kinds = algorithms.registry[self.algorithm].network_kinds
        if self.network.kind not in kinds:
            takers = [name for name, other in algorithms.registry.items() if self.network.kind in other.network_kinds]
            return [
                (
                    "network.kind",
                    f"{self.network.kind} is a network for {' and '.join(takers)};"
                    f" {self.algorithm} takes {', '.join(kinds)}",
                )
            ]
        return []


@functools.cache
def _spec_model(name: str, registration: algorithms.base.Registration) -> type[_SpecBase]:
    """The spec model of one registered algorithm: the shared sections, its
    name as the `algorithm:` tag, its hyperparameters and its default network."""
    # An algorithm that measures its final parameters' strength takes a
    # `strength:` section (not in the hash: it judges what training made).
    strength = {} if registration.strength is None else {"strength": (registration.strength | None, None)}
    return create_model(
        f"{registration.config.__name__.removesuffix('Config')}Spec",
        __base__=_SpecBase,
        __module__=__name__,
        algorithm=(Literal[name], ...),
        hyperparameters=(registration.config, registration.config()),
        network=(NetworkSpec, NetworkSpec(kind=registration.default_network)),
        **strength,
    )


def spec_models() -> dict[str, type[_SpecBase]]:
    """One model per registered algorithm (`algorithms.registry`), by the
    name a spec's `algorithm:` gives: registering an algorithm is all it
    takes for specs to name it."""
    return {name: _spec_model(name, registration) for name, registration in sorted(algorithms.registry.items())}


# What a validated spec is: an instance of one of `spec_models()`.
Spec = _SpecBase
