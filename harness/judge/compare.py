"""Compare finished runs across devices and versions: a table and a plot of
their curves, from the results.json each run logged.

A comparison is recorded as an MLflow run of its own, named `compare`, in the
experiment of the first compared run and tagged `harness.kind = compare`: it
holds the plot (compare.png), the table (compare.md) and the numbers
(compare.json). The runs' claims are judged on each run (compare.json's
`claims`; tags `claim.<name>`, see claim_tags). The compared runs are read,
never changed: a colleague's runs on a shared server stay as they were.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from harness.experiment_spec import spec_differences
from harness.judge import claims
from harness.judge.machines import device_label
from harness.judge.reproduce import LEARNING_METRICS
from harness.record import runs, schema, tracking
from harness.record.schema import ClaimOutcome, Results
from harness.stats import intervals, verdict

# AlphaZero's two-player games plot the win rate against a random player.
PLOTTED_METRICS = ("episode_return", "eval_return", "eval_random_win", "loss")


class CompareError(Exception):
    """Runs that cannot be compared; reported without a traceback."""


class ComparedRun(NamedTuple):
    run_id: str
    run_name: str
    experiment_id: str
    tags: dict[str, str]
    record: Results  # the run's results.json


# -------------------------------------------------------------------- fetching


def _load(client, run) -> ComparedRun | None:
    text = tracking.read_text_artifact(client, run.info.run_id, "results.json")
    if text is None:
        return None
    try:
        record = schema.parse(text, f"results.json of run {run.info.run_id}")
    except ValueError as error:
        raise CompareError(str(error)) from None
    return ComparedRun(run.info.run_id, run.info.run_name or "", run.info.experiment_id, run.data.tags, record)


def _is_sweep(run) -> bool:
    return run.data.tags.get("harness.kind") == "sweep"


def fetch(client, uri: str, *, experiment: str | None = None, run_ids: list[str] | None = None):
    """The runs to compare and notes on what was skipped or substituted.

    With `experiment`: every finished harness parent run in it, and every
    point of its sweeps (comparisons and failed runs are skipped). With
    `run_ids`: exactly those runs (a seed's run stands for its parent, a
    sweep's for its points); each must have finished and logged results.json.
    """
    notes: list[str] = []
    runs: list[ComparedRun] = []
    if experiment is not None:
        found = client.get_experiment_by_name(experiment)
        if found is None:
            raise CompareError(f"no experiment {experiment!r} in {uri!r}")
        candidates = client.search_runs(
            [found.experiment_id],
            filter_string="attributes.status = 'FINISHED'",
            order_by=["attributes.start_time ASC"],
            max_results=1000,
        )
        for run in candidates:
            tags = run.data.tags
            # A sweep's point and a run logged under another (harness run
            # --parent-run) have parents too, and are runs of their specs.
            if "seed" in tags or "spec_hash" not in tags or _is_sweep(run):
                continue  # a seed's run, a sweep's own run, or not a training run (e.g. a comparison)
            loaded = _load(client, run)
            if loaded is None:
                notes.append(f"skipped run {run.info.run_id}: no results.json")
            else:
                runs.append(loaded)
        if not runs:
            raise CompareError(f"experiment {experiment!r} in {uri!r} has no finished harness runs to compare")
        return runs, notes
    for run_id in dict.fromkeys(run_ids or []):
        run, note = tracking.get_parent_run(client, uri, run_id)
        if note:
            notes.append(note)
        if _is_sweep(run):  # a sweep's run stands for its points
            points = client.search_runs(
                [run.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{run.info.run_id}'"
            )
            notes.append(f"run {run.info.run_id} is a sweep; comparing its {len(points)} points")
            runs.extend(p for p in map(lambda r: _load(client, r), points) if p is not None)
            continue
        if run.info.run_id in {r.run_id for r in runs}:
            continue
        loaded = _load(client, run) if run.info.status == "FINISHED" else None
        if loaded is None:
            raise CompareError(
                f"run {run.info.run_id} ({run.info.status}) has no results.json: only finished harness runs compare"
            )
        runs.append(loaded)
    return runs, notes


# ------------------------------------------------------------------ summaries


def learning_metrics(runs: list[ComparedRun]) -> list[str]:
    names = set.intersection(*(set(r.record.final) for r in runs))
    return [name for name in LEARNING_METRICS if name in names]


def final_estimate(run: ComparedRun, metric: str) -> intervals.Estimate:
    return intervals.stratified_bootstrap_iqm(run.record.finals(metric))


def provenance_differences(runs: list[ComparedRun]) -> dict[str, list[str]]:
    """Device and version keys whose values differ between the runs."""
    keyed = [
        {
            **{f"device.{k}": v for k, v in r.record.fingerprint.items()},
            **{f"version.{k}": v for k, v in r.record.versions.items()},
        }
        for r in runs
    ]
    keys = sorted(set().union(*keyed))
    return {k: [d.get(k, "-") for d in keyed] for k in keys if len({d.get(k, "-") for d in keyed}) > 1}


def rows(runs: list[ComparedRun]) -> list[dict[str, Any]]:
    """One summary per run: what the table shows and compare.json holds."""
    metrics = learning_metrics(runs)
    out = []
    for run in runs:
        record = run.record
        out.append(
            {
                "run_id": run.run_id,
                "run_name": run.run_name,
                "spec_hash": record.spec_hash,
                "device": device_label(record.fingerprint),
                "jax": record.versions.get("jax"),
                "jaxlib": record.versions.get("jaxlib"),
                "git": record.git["commit"][:8] + ("*" if record.git["dirty"] == "true" else ""),
                "seeds": len(record.seeds),
                "sps": record.speed.sps,
                "sps_per_seed": record.speed.sps_per_seed,
                "compile_seconds": record.speed.compile_seconds,
                "peak_memory": (record.speed.peak_memory_bytes, record.speed.peak_memory),
                "final": {m: final_estimate(run, m).as_dict() for m in metrics},
                "verdict": run.tags.get("verdict"),
            }
        )
    return out


def judged_claims(runs: list[ComparedRun]) -> dict[str, dict[str, ClaimOutcome]]:
    """Run id -> claim name -> outcome: every claim any run was judged on,
    judged on each run that records its metric. A test's stored outcome is
    reused only when today's rules judged it; else it is judged again
    (untested without the faithful seeds a reference level needs)."""
    stated: dict[str, Any] = {}
    for run in runs:
        for name, claim in claims.stated(run.record).items():
            stated.setdefault(name, claim)
    out: dict[str, dict[str, ClaimOutcome]] = {}
    tests = claims.test_count(stated)  # a test judged again shares the spec's alpha, as the run judged it
    for run in runs:
        for name, claim in stated.items():
            own = (run.record.claims or {}).get(name)
            same = own is not None and own.claim == claim.model_dump(mode="json", exclude_none=True)
            if same and (not claim.is_test or own.rules == verdict.RULES):
                out.setdefault(run.run_id, {})[name] = own  # a test as the run judged it, under today's rules
                continue
            try:
                out.setdefault(run.run_id, {})[name] = claims.judge(run.record, claim, tests=tests)
            except claims.ClaimError:
                continue  # a run of another spec, without the claim's metric
    return out


def claim_tags(comparison: Comparison) -> dict[str, str]:
    """`claim.<name>` over the runs judged on it: a test's verdict across them
    (harness.stats.verdict), a statement's `holds` when it holds on every run;
    and `verdict`, every test's verdict on every run brought to one word."""
    words: dict[str, list] = {}
    holds: dict[str, bool] = {}
    for outcomes in comparison.claims.values():
        for name, outcome in outcomes.items():
            words.setdefault(name, []).append(verdict.claim_word(outcome))
            holds[name] = holds.get(name, True) and outcome.holds
    return {
        f"claim.{name}": verdict.of_words(said) or ("holds" if holds[name] else "fails") for name, said in words.items()
    } | runs.verdict_tags(verdict.of_words([word for said in words.values() for word in said]))


class Comparison(NamedTuple):
    """What `harness compare` shows and logs about a set of runs."""

    title: str
    summaries: list[dict[str, Any]]  # a row per run (see `rows`)
    spec_differences: dict[str, list[str]]
    provenance_differences: dict[str, list[str]]
    different_specs: int  # how many spec hashes; 1 when all runs share one spec
    claims: dict[str, dict[str, ClaimOutcome]] = {}  # run id -> claim name -> outcome (judged_claims)


def compare(runs: list[ComparedRun], *, allow_different_specs: bool) -> Comparison:
    """Compare `runs`; runs of different specs only when allowed (else a
    CompareError listing the keys that differ, in run order)."""
    hashes = {r.record.spec_hash for r in runs}
    spec_diff = spec_differences([r.record.spec for r in runs])
    if len(hashes) > 1 and not allow_different_specs:
        raise CompareError(
            f"the runs were made from {len(hashes)} different specs (spec_hash "
            f"{', '.join(sorted(h[:12] for h in hashes))}); the keys that differ, in run order:\n"
            f"{listed(spec_diff)}\npass --allow-different-specs to compare them anyway"
        )
    names = ", ".join(sorted({r.record.spec_name for r in runs}))
    title = f"{names} ({next(iter(hashes))[:12]})" if len(hashes) == 1 else f"{names} (different specs)"
    return Comparison(title, rows(runs), spec_diff, provenance_differences(runs), len(hashes), judged_claims(runs))


def listed(differences: dict[str, list[str]]) -> str:
    return "\n".join(f"  {key}: {' / '.join(values)}" for key, values in differences.items())
