"""A spec's `claims:` (harness.experiment_spec): what a run of it must show, each a
statement judged on its point estimate or, with `delta`, a sequential test
with stated errors (harness.judge.claims, harness.stats.sequential)."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BeforeValidator, Field, model_serializer, model_validator

from harness.experiment_spec.sections import _Model


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
        default=0.8,
        gt=0,
        lt=1,
        description="the test's chance of catching a delta regression (a FAIL), in (0, 1): a run regressed by delta "
        "passes at most 1 - power of the time; how often it FAILS is measured (harness validate --errors)",
    )
    range: tuple[Number, Number] | None = Field(
        default=None,
        description="[low, high]: the bounds of a per-seed value, which a test of a mean needs (values are "
        "clipped to them)",
    )
    compare: Literal["pairs", "ranks"] | None = Field(
        default=None,
        description="how a test against the reference holds a run's seeds against the faithful seeds: `pairs` "
        "(the default) bets on each run seed's difference from one faithful seed; `ranks` on its rank among all "
        "of them (fewer seeds decide where single seeds vary widely; a mean only)",
    )
    outside: OutsideFigure | None = Field(
        default=None, description="a published figure from elsewhere to hold the run against"
    )

    @model_validator(mode="after")
    def _one_bound(self) -> Claim:
        given = [name for name in BOUNDS if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one bound of {', '.join(BOUNDS)} (got {', '.join(given) or 'none'})")
        if self.compare is not None and (self.bound[1] != REFERENCE or self.over_seeds.name != "mean"):
            raise ValueError(
                f"compare: {self.compare} holds a run's seeds against faithful seeds; it needs a mean over seeds "
                "and a bound of `reference`"
            )
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
