"""Claims: what a published spec's `claims:` section states of its runs,
judged on a results record (harness.record.schema.Results).

A claim takes each seed's value of a metric over its iterations (the mean
over the final window, the last or first curve point, or the mean of the
curve's last fraction), brings the seeds' values to one number (mean, IQM,
median, min, max or the fraction of seeds past a value) and bounds it. The
run's value is that number, with a 95% percentile bootstrap interval over
seeds (seeds resampled with replacement, as harness.stats.intervals does for the
IQM, from the same fixed random state, so the same record always gives the
same interval). An outside figure (someone else's published number) is
consistent with the run when it lies inside the interval.

A claim with `delta` is a test (harness.judge.levels makes it from the
faithful seeds, harness.stats.sequential runs it): PASS, FAIL or
INCONCLUSIVE, its level learned from faithful runs' seeds (never the run's
own) or stated. A claim without `delta` is a statement: it holds when its
value is within the bound.

Pure: reads records and claims, writes nothing. The sessions print the
table (harness.judge.claims_table) and record the outcomes (results.json
`claims` and `claims_hash`, MLflow tags `claim.<name>` and metrics
`claim_<name>_value` on the parent run).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from harness.experiment_spec.claims import REFERENCE, Claim
from harness.judge import levels
from harness.judge.levels import Faithful
from harness.record.schema import ClaimOutcome, Results
from harness.stats import intervals, ranks, sequential, verdict

# Statistics over seeds, each along the last axis of `[..., seeds]`.
SEED_STATISTICS: dict[str, Callable[[np.ndarray, float | None], np.ndarray]] = {
    "mean": lambda x, _: x.mean(axis=-1),
    "iqm": lambda x, _: intervals.iqm(x, axis=-1),
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
    reps: int = intervals.REPS,
    confidence: float = intervals.CONFIDENCE,
    random_state: int = intervals.RANDOM_STATE,
) -> tuple[float, float]:
    """A percentile bootstrap interval of `statistic` over the seeds'
    `values` (`[seeds]`). The resamples are those of
    `intervals.stratified_bootstrap_iqm` on one task: for the IQM the two agree."""
    seeds = len(values)
    rng = np.random.RandomState(random_state)
    resampled = values[rng.randint(0, seeds, size=(reps, seeds))]  # [reps, seeds]
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(statistic(resampled), [tail, 100 - tail])
    return float(low), float(high)


def judge(record: Results, claim: Claim, faithful: Faithful | None = None, tests: int = 1) -> ClaimOutcome:
    """`claim` judged on the run `record`: its value, interval, whether it
    holds and, for an outside figure, whether the run is consistent with it.
    A test (a claim with `delta`, one of `tests` test claims of its spec) is
    run over the record's seeds at once, its level the claim's number or
    learned from `faithful` seeds."""
    return judge_values(claim, seed_values(record, claim), record.seeds, faithful, tests=tests)


def judge_values(
    claim: Claim,
    values: np.ndarray,
    seeds: Sequence[int],
    faithful: Faithful | None = None,
    batch: int | None = None,
    tests: int = 1,
) -> ClaimOutcome:
    """`judge` on per-seed values `[seeds]` (of one run, or of a
    reproduction's batches in the order they ran) of the run seeds `seeds`
    (which break a test by ranks' ties), a test looked at after
    every `batch` of them (default: all at once; the evidence is valid at
    any look), the claim one of `tests` test claims sharing the spec's alpha."""
    over = claim.over_seeds

    def statistic(x: np.ndarray) -> np.ndarray:
        return SEED_STATISTICS[over.name](x, over.value)

    value = float(statistic(values))
    low, high = bootstrap(values, statistic)
    bound, limit = claim.bound
    figure = claim.outside
    outcome = {
        "claim": claim.model_dump(mode="json", exclude_none=True),
        "value": value,
        "low": low,
        "high": high,
        "seeds": len(values),
        "consistent": None if figure is None else low <= figure.value <= high,
    }
    if not claim.is_test:
        return ClaimOutcome(**outcome, holds=CHECKS[bound](value, limit))
    return ClaimOutcome(**outcome, **run_test(claim, values, seeds, faithful, batch or len(values), tests))


def run_test(
    claim: Claim, values: np.ndarray, seeds: Sequence[int], faithful: Faithful | None, batch: int, tests: int
) -> dict:
    """A test claim's verdict fields (ClaimOutcome's) on per-seed `values`
    of the run seeds `seeds`."""
    reference = faithful is not None and claim.bound[1] == REFERENCE
    test = levels.test_of(claim, None if faithful is None else faithful.values, tests)
    if test is None:
        pool = None if faithful is None else levels.unit(claim, faithful.values)
        return {"holds": False, "rules": verdict.RULES, "note": levels.untested(claim, pool)}
    decision = sequential.decide(test, levels.unit(claim, values), batch, ranks.tie_breaks(seeds))
    return {
        "holds": bool(decision.verdict == sequential.PASS),
        "verdict": str(decision.verdict),
        "rules": verdict.RULES,
        "alpha": test.alpha,
        "level": levels.to_units(claim, float(test.level)),
        "fails_at": levels.to_units(claim, float(test.level) - test.delta),
        "faithful_seeds": len(faithful.values) if reference else 0,
        "against_faithful": float(decision.against_faithful),
        "against_regressed": float(decision.against_regressed),
        "seeds_used": int(decision.seeds),
    }


def evaluate(
    record: Results, claims: Mapping[str, Claim], faithful: Mapping[str, Faithful] | None = None
) -> dict[str, ClaimOutcome]:
    """Every claim judged on `record`, by name (tests with their `faithful`
    seeds, by claim name); ClaimError (naming the claim's key) for one
    whose metric the run did not record."""
    outcomes, tests = {}, test_count(claims)
    for name, claim in claims.items():
        try:
            outcomes[name] = judge(record, claim, (faithful or {}).get(name), tests)
        except ClaimError as error:
            raise ClaimError(f"claims.{name}.metric: {error}") from None
    return outcomes


def judge_pooled(
    records: Sequence[Results], claims: Mapping[str, Claim], faithful: Mapping[str, Faithful], batch: int
) -> dict[str, ClaimOutcome]:
    """Every claim judged on the seeds of `records` together (each seed
    once, in seed order) as one reproduction looked at after every `batch`
    of them: how a spec's unseen-seed runs, made in batches of any size,
    are judged (`batch`: the spec's reproduction batch; the evidence does
    not depend on how many looks the seeds found). A claim on a metric that
    records made before it existed lack is judged on the seeds that have it,
    and left out where none has."""
    outcomes, tests = {}, test_count(claims)
    for name, claim in claims.items():
        values: dict[int, float] = {}
        for record in records:
            try:
                kept = zip(record.seeds, seed_values(record, claim), strict=True)
            except ClaimError:
                continue
            values |= {seed: float(value) for seed, value in kept if seed not in values}
        if values:
            order = sorted(values)
            outcomes[name] = judge_values(
                claim, np.array([values[seed] for seed in order]), order, faithful.get(name), batch, tests
            )
    return outcomes


def with_claims(
    record: Results, claims: Mapping[str, Claim], faithful: Mapping[str, Faithful] | None = None
) -> Results:
    """`record` with its `claims` judged (unchanged when there are none)."""
    if not claims:
        return record
    return record.model_copy(update={"claims": evaluate(record, claims, faithful), "claims_hash": claims_hash(claims)})


def faithful(
    records: Sequence[tuple[str, Results]], claims: Mapping[str, Claim], exclude: Sequence[int] = ()
) -> dict[str, Faithful]:
    """Each test's faithful seeds, pooled from `records` (label, record;
    harness.judge.references.faithful_records), without the seeds in
    `exclude`: a run is never held to a level learned from itself. A
    `reference` level is learned from them; a stated one sizes its bets by
    their spread."""
    out = {}
    for name, claim in claims.items():
        if not claim.is_test:
            continue
        per_record = []
        for label, record in records:
            try:
                values = seed_values(record, claim)
            except ClaimError:
                continue
            kept = {seed: float(v) for seed, v in zip(record.seeds, values, strict=True) if seed not in set(exclude)}
            per_record.append((label, kept))
        out[name] = levels.pool(per_record)
    return out


def claims_hash(claims: Mapping[str, Claim]) -> str:
    """sha256 of the claims as stated: a verdict names the claims it judged,
    and a claim changed after its reference was made shows."""
    stated = {name: claim.model_dump(mode="json", exclude_none=True) for name, claim in claims.items()}
    return hashlib.sha256(json.dumps(stated, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def test_count(claims: Mapping[str, Claim]) -> int:
    """How many of a spec's claims are tests: each is judged at its alpha over this many."""
    return sum(claim.is_test for claim in claims.values())


def reproduction_alpha(claims: Mapping[str, Claim]) -> float | None:
    """The chance that a spec's test claims together fail a faithful
    reproduction, at most: each is tested at its alpha over their number,
    so the mean of their alphas (None without a test)."""
    alphas = [float(claim.alpha) for claim in claims.values() if claim.is_test]
    return sum(alphas) / len(alphas) if alphas else None


def failed(outcomes: Mapping[str, ClaimOutcome]) -> list[str]:
    """The claims whose test FAILED."""
    return [name for name, outcome in outcomes.items() if outcome.verdict == sequential.FAIL]


def broken(outcome: ClaimOutcome) -> bool:
    """A statement that does not hold, or a test that FAILED (an undecided test is neither)."""
    return outcome.verdict == sequential.FAIL if outcome.claim.get("delta") is not None else not outcome.holds


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
        if outcome.claim.get("delta") is not None:
            out[f"claim.{name}"] = verdict.claim_word(outcome)
            claim = Claim.model_validate(outcome.claim)
            out[f"claim.{name}.alpha"] = str(claim.alpha)
            out[f"claim.{name}.power"] = str(claim.power)
            out[f"claim.{name}.delta"] = str(claim.delta)
            out[f"claim.{name}.rules"] = outcome.rules or "1"
            if outcome.seeds_used is not None:
                out[f"claim.{name}.seeds_used"] = str(outcome.seeds_used)
        else:
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
        if outcome.level is not None:
            out[f"claim_{name}_level"] = outcome.level
            out[f"claim_{name}_against_faithful"] = outcome.against_faithful
            out[f"claim_{name}_against_regressed"] = outcome.against_regressed
    return out
