"""Claims: what a published spec's `claims:` section states of its runs,
judged on a results record (harness.record.schema.Results).

A claim takes each seed's value of a metric over its iterations (the mean
over the final window, the last or first curve point, or the mean of the
curve's last fraction), brings the seeds' values to one number (mean, IQM,
median, min, max or the fraction of seeds past a value) and bounds it. The
run's value is that number, with a 95% percentile bootstrap interval over
seeds (seeds resampled with replacement, as harness.judge.stats does for the
IQM, from the same fixed random state, so the same record always gives the
same interval). A claim holds when its value is within the bound; an outside
figure (someone else's published number) is consistent with the run when it
lies inside the interval.

Pure: reads records and claims, writes nothing. The sessions print the
table and record the outcomes (results.json `claims`, MLflow tags
`claim.<name>` and metrics `claim_<name>_value` on the parent run).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from harness.console import out_console
from harness.judge import stats
from harness.record.schema import ClaimOutcome, Results
from harness.spec_sections import Claim

# Statistics over seeds, each along the last axis of `[..., seeds]`.
SEED_STATISTICS: dict[str, Callable[[np.ndarray, float | None], np.ndarray]] = {
    "mean": lambda x, _: x.mean(axis=-1),
    "iqm": lambda x, _: stats.iqm(x, axis=-1),
    "median": lambda x, _: np.median(x, axis=-1),
    "min": lambda x, _: x.min(axis=-1),
    "max": lambda x, _: x.max(axis=-1),
    "fraction_at_least": lambda x, v: (x >= v).mean(axis=-1),
    "fraction_above": lambda x, v: (x > v).mean(axis=-1),
}

CHECKS: dict[str, Callable[[float, float], bool]] = {
    "at_least": lambda value, bound: value >= bound,
    "at_most": lambda value, bound: value <= bound,
    "above": lambda value, bound: value > bound,
    "below": lambda value, bound: value < bound,
}
SIGNS = {"at_least": "≥", "at_most": "≤", "above": ">", "below": "<"}


class ClaimError(ValueError):
    """A claim that cannot be judged on a record (its metric is not there)."""


# ------------------------------------------------------------------ judging


def seed_values(record: Results, claim: Claim) -> np.ndarray:
    """Each seed's value of `claim.metric` over its iterations, `[seeds]` in
    the record's seed order (see IterationStatistic for what each means)."""
    statistic = claim.over_iterations
    if statistic.name == "final":
        values = record.finals(claim.metric)
        if values is None:
            raise ClaimError(f"{claim.metric!r} is not a final metric of this run: {', '.join(record.final)}")
        return values
    curves = record.curves_of(claim.metric)
    if claim.metric not in curves.metrics or not curves.env_steps:
        raise ClaimError(f"{claim.metric!r} has no curve in this run")
    points = np.array([curves.metrics[claim.metric][str(seed)] for seed in record.seeds], dtype=np.float64)
    if statistic.name == "first":
        return points[:, 0]
    if statistic.name == "last":
        return points[:, -1]
    # mean_last: the curve's points in the last fraction of the run's env steps (at least the last point).
    steps = np.array(curves.env_steps, dtype=np.float64)
    total = record.env_steps_per_seed or steps[-1]
    window = steps > (1 - statistic.value) * total
    window[-1] = True
    return points[:, window].mean(axis=1)


def bootstrap(
    values: np.ndarray,
    statistic: Callable[[np.ndarray], np.ndarray],
    *,
    reps: int = stats.REPS,
    confidence: float = stats.CONFIDENCE,
    random_state: int = stats.RANDOM_STATE,
) -> tuple[float, float]:
    """A percentile bootstrap interval of `statistic` over the seeds'
    `values` (`[seeds]`). The resamples are those of
    `stats.stratified_bootstrap_iqm` on one task: for the IQM the two agree."""
    seeds = len(values)
    rng = np.random.RandomState(random_state)
    resampled = values[rng.randint(0, seeds, size=(reps, seeds))]  # [reps, seeds]
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(statistic(resampled), [tail, 100 - tail])
    return float(low), float(high)


def judge(record: Results, claim: Claim) -> ClaimOutcome:
    """`claim` judged on the run `record`: its value, interval, whether it
    holds and, for an outside figure, whether the run is consistent with it."""
    values = seed_values(record, claim)
    seeds = claim.over_seeds

    def statistic(x: np.ndarray) -> np.ndarray:
        return SEED_STATISTICS[seeds.name](x, seeds.value)

    value = float(statistic(values))
    low, high = bootstrap(values, statistic)
    bound, limit = claim.bound
    figure = claim.outside
    return ClaimOutcome(
        claim=claim.model_dump(mode="json", exclude_none=True),
        value=value,
        low=low,
        high=high,
        seeds=len(values),
        holds=CHECKS[bound](value, limit),
        consistent=None if figure is None else low <= figure.value <= high,
    )


def evaluate(record: Results, claims: Mapping[str, Claim]) -> dict[str, ClaimOutcome]:
    """Every claim judged on `record`, by name; ClaimError (naming the
    claim's key) for one whose metric the run did not record."""
    outcomes = {}
    for name, claim in claims.items():
        try:
            outcomes[name] = judge(record, claim)
        except ClaimError as error:
            raise ClaimError(f"claims.{name}.metric: {error}") from None
    return outcomes


def with_claims(record: Results, claims: Mapping[str, Claim]) -> Results:
    """`record` with its `claims` judged (unchanged when there are none)."""
    if not claims:
        return record
    return record.model_copy(update={"claims": evaluate(record, claims)})


def stated(record: Results) -> dict[str, Claim]:
    """The claims a record was judged on, as the spec stated them."""
    return {name: Claim.model_validate(outcome.claim) for name, outcome in (record.claims or {}).items()}


def unknown_metrics(claims: Mapping[str, Claim], names: set[str]) -> list[tuple[str, str]]:
    """(dotted key, message) for each claim on a metric not in `names`."""
    return [
        (f"claims.{name}.metric", f"{claim.metric!r} is not a metric of this spec: {', '.join(sorted(names))}")
        for name, claim in claims.items()
        if claim.metric not in names
    ]


# ---------------------------------------------------------------- recording


def tags(outcomes: Mapping[str, ClaimOutcome]) -> dict[str, str]:
    """MLflow tags: `claim.<name>` holds or fails, and for an outside figure
    `claim.<name>.outside` consistent or inconsistent."""
    out = {}
    for name, outcome in outcomes.items():
        out[f"claim.{name}"] = "holds" if outcome.holds else "fails"
        if outcome.consistent is not None:
            out[f"claim.{name}.outside"] = "consistent" if outcome.consistent else "inconsistent"
    return out


def metrics(outcomes: Mapping[str, ClaimOutcome]) -> dict[str, float]:
    """MLflow metrics: each claim's value and its interval."""
    out = {}
    for name, outcome in outcomes.items():
        out |= {
            f"claim_{name}_value": outcome.value,
            f"claim_{name}_low": outcome.low,
            f"claim_{name}_high": outcome.high,
        }
    return out


# ----------------------------------------------------------------- printing

WIDTH = 80  # the table is kept to a terminal's width


def number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}"


def describe(claim: Claim) -> str:
    """The statistic in words, e.g. `mean of seeds, final` (the metric apart):
    over seeds, then over iterations."""
    seeds, iterations = claim.over_seeds, claim.over_iterations
    of_seeds = {
        "iqm": "IQM of seeds",
        "fraction_at_least": f"share of seeds ≥ {number(seeds.value or 0)}",
        "fraction_above": f"share of seeds > {number(seeds.value or 0)}",
    }.get(seeds.name, f"{seeds.name} of seeds")
    over = f"mean of last {iterations.value:.0%}" if iterations.name == "mean_last" else iterations.name
    return f"{of_seeds}, {over}"


def table(rows: Sequence[tuple[str, ClaimOutcome]], title: str = "claims"):
    """A rich table of claims judged on runs: each row a `(label, outcome)`,
    the label a claim's name (and, comparing runs, the run's); the interval
    is the 95% bootstrap interval over seeds. Kept within 80 columns: long
    names wrap rather than widen it."""
    from rich.markup import escape
    from rich.measure import Measurement
    from rich.table import Table

    outside = any(outcome.consistent is not None for _, outcome in rows)
    out = Table(title=title, title_justify="left", show_lines=True)
    out.add_column("claim")
    out.add_column("value [95% CI]", justify="right")
    out.add_column("bound", justify="right")
    if outside:
        out.add_column("outside figure", justify="right")
    for label, outcome in rows:
        claim = Claim.model_validate(outcome.claim)
        bound, limit = claim.bound
        cells = [
            f"[bold]{escape(label)}[/]\n{escape(claim.metric)}\n{describe(claim)}",
            f"{number(outcome.value)}\n{escape(f'[{number(outcome.low)}, {number(outcome.high)}]')}",
            f"{SIGNS[bound]} {number(limit)}\n{'holds' if outcome.holds else '[bold red]FAILS[/]'}",
        ]
        if outside:
            consistent = "consistent" if outcome.consistent else "[bold red]NOT consistent[/]"
            cells.append("-" if claim.outside is None else f"{number(claim.outside.value)}\n{consistent}")
        out.add_row(*cells)
    if Measurement.get(out_console, out_console.options.update_width(10_000), out).maximum > WIDTH:
        out.width = WIDTH
    return out


def sources(outcomes: Mapping[str, ClaimOutcome]) -> list[str]:
    """One line per outside figure: where it comes from."""
    lines = []
    for name, outcome in outcomes.items():
        figure = Claim.model_validate(outcome.claim).outside
        if figure is not None:
            where = ":".join(str(part) for part in (figure.file, figure.line) if part is not None)
            lines.append(f"  {name}: {number(figure.value)} from {figure.source}{f' {where}' if where else ''}")
    return lines
