"""`harness reproduce`: run a spec again and judge the run against its
reference (harness.judge.reproduce has the rules). The reference is a
published results.json (`results/`, the one made on this device class when
there are several) or a finished run logged in MLflow, whose own spec is
then the one run again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from harness import build
from harness import experiment_spec as spec
from harness.console import err_console, out_console, print_table
from harness.judge import (
    adaptive_report,
    claims,
    claims_table,
    differences,
    publish,
    references,
    reproduce,
    verdict_report,
)
from harness.plan import Plan
from harness.record.command_run import command_run
from harness.record.schema import Results
from harness.run import provenance
from harness.sessions import adaptive, results
from harness.sessions.run import Logged, print_claims, train_and_log
from harness.sessions.run_options import RunOptions
from harness.stats.verdict import shown


class Reference(NamedTuple):
    """What a reproduction runs and is judged against."""

    plan: Plan  # the spec to run again
    source: str  # where its spec came from: a path, or the run's spec.yaml
    record: Results  # the reference's results.json
    label: str  # the reference's name in the verdict: its path, or `run <id>`
    uri: str  # the MLflow store the reproduction is logged to
    iterations: Path | None = None  # its iterations.parquet, for an exact verdict at every iteration


class Reproduced(NamedTuple):
    logged: Logged
    verdict: reproduce.Verdict


def of_logged_run(uri: str, run_id: str, make_plan: Callable[[spec.Spec, str, dict], Plan]) -> Reference:
    """The finished run `run_id` (or its parent) in the store at `uri` as the
    reference: its logged spec, planned by `make_plan(spec, source,
    key_lines)`, is run again and judged against its results.json."""
    run_id, note, text, logged_results = publish.logged_run(uri, run_id)
    if note:
        err_console.print(note)
    source = f"spec.yaml of run {run_id}"
    plan = make_plan(spec.parse_text(text, source), source, spec.key_lines(text))
    label = f"run {run_id}"
    record = references.parse_reference(
        logged_results, f"results.json of {label}", plan.spec_hash, spec.canonical(plan.spec)
    )
    record.mlflow_run_id = record.mlflow_run_id or run_id
    return Reference(plan, source, record, label, uri)


def of_spec(plan: Plan, spec_path: str, reference: str | None, uri: str) -> Reference:
    """`plan` (made from the spec file `spec_path`) judged against the
    results.json at `reference`, or (None) the spec's published reference
    for this device class."""
    path = Path(reference) if reference else references.reference_path(spec_path)
    if not reference:
        here = provenance.fingerprint(plan.layout, shards=plan.spec.devices.shards)
        if choice := references.choose(path, here):
            path = choice.path
            err_console.print(f"reference: {path}: {choice.why}", soft_wrap=True)
    record = references.load_reference(path, spec_path, plan.spec_hash, spec.canonical(plan.spec))
    return Reference(plan, spec_path, record, str(path), uri, differences.beside(path))


def run_and_judge(reference: Reference, options: RunOptions, seeds: list[int] | None = None) -> Reproduced | None:
    """Run `reference.plan` again (on `seeds` instead of its own, if given),
    tagged with what it reproduces, then judge it: the verdict is printed
    and logged on its parent run (tags verdict.*, verdict.json, verdict.md).
    None in a process of a multi-process job other than process 0."""
    plan = reference.plan
    if seeds:
        # The claims are not part of what is rebuilt: on other seeds they are judged all the same.
        plan = build.with_seeds(plan, seeds, reference.source)
        plan = plan._replace(spec=plan.spec.model_copy(update={"claims": reference.plan.spec.claims}))
    tags = {
        "reproduces": reference.label,
        "reproduces.spec_hash": reference.record.spec_hash,
        "mlflow.runName": f"reproduce · {len(plan.spec.seeds)} seeds",
    }
    if reference.record.mlflow_run_id:
        tags["reproduces.run_id"] = reference.record.mlflow_run_id
    logged = train_and_log(plan, reference.uri, dataclasses.replace(options, tags=tags))
    if logged is None:  # not process 0 of a multi-process job: it judges
        return None
    results.print_summary(plan, logged.record, logged.uri, logged.experiment_id, logged.parent_id)
    print_claims(logged.record)
    verdict = reproduce.judge(reference.record, logged.record, reference.label, _every_iteration(reference, logged))
    print_table(verdict_report.table(verdict))
    for reason in verdict.not_exact_because:
        out_console.print(f"  not judged bit for bit: {reason}")
    if verdict.not_judged:
        out_console.print(f"  not judged statistically: {verdict.not_judged}", soft_wrap=True)
    out_console.print(f"rule ({verdict.mode}): {reproduce.MODE_RULES[verdict.mode]}", soft_wrap=True)
    out_console.print(f"speed: {verdict.speed.describe()}", soft_wrap=True)
    verdict_report.log_verdict(logged.client, logged.parent_id, verdict)
    out_console.print(
        f"verdict: {shown(verdict.outcome)}, logged to run {logged.parent_id} (tags verdict.*, verdict.json, verdict.md)"
    )
    return Reproduced(logged, verdict)


def _every_iteration(reference: Reference, logged: Logged) -> tuple[dict, dict] | None:
    """The reference's and the reproduction's iterations files, when the
    reference was published with one."""
    ours = differences.load(reference.iterations)
    run = differences.load(logged.iterations)
    return None if ours is None or run is None else (ours, run)


def override_values(sets: list[str], where: str) -> dict:
    """`--set KEY=VALUE` of a reproduction: one value a key, never the
    seeds (an adaptive reproduction runs fresh seeds of its own)."""
    values = {}
    for key, given in spec.parse_sets(sets, where).items():
        if key.split(".")[0] == "seeds":
            raise spec.SpecError(
                where,
                [(key, "an adaptive reproduction runs fresh seeds of its own: --batch and --max-seeds size them")],
            )
        if len(given) != 1:
            raise spec.SpecError(where, [(key, f"one value to judge, not {len(given)} (a sweep is harness sweep)")])
        values[key] = given[0]
    return values


def run_adaptive(
    reference: Reference, options: RunOptions, batch: int, cap: int, sets: list[str], results_out: Path | None = None
) -> adaptive_report.Adaptive:
    """`reference.plan` (changed by `sets`, if any) on fresh seeds, a batch
    at a time, until its tests decide: the claims table and the verdict
    printed, the verdict logged on the reproduction's one run, its batches
    nested under it."""
    tags = {"reproduces": reference.label, "reproduces.spec_hash": reference.record.spec_hash}
    values = override_values(sets, f"{reference.source} (--set)")
    every = adaptive.fresh_seeds(list(options.faithful), reference.record, cap)
    built, differences_ = adaptive.prepare(reference.plan, values, every[:batch], reference.source)
    if sets:
        listed = "; ".join(f"{key}: {old} -> {new}" for key, (old, new) in differences_.items())
        out_console.print(
            f"judging a changed spec against {reference.label}: {listed or 'no key differs'}", soft_wrap=True
        )
        tags["reproduces.changed"] = listed or "nothing"
    adaptive.tests_of(built, reference.source)
    tags["harness.kind"] = "reproduce"
    with command_run(reference.uri, built.spec.experiment_name, "reproduce · running", tags, options.parent_run) as (
        client,
        run_id,
    ):
        batches = dataclasses.replace(options, parent_run=run_id)
        result = adaptive.run(built, reference.source, reference.uri, batches, every, batch, tags, results_out)
        print_table(claims_table.table(list(result.outcomes.items()), f"{built.spec.name}: claims, adaptive"))
        alpha = claims.reproduction_alpha(built.spec.claims)
        said = (
            f"verdict: {result.verdict.upper()} after {len(result.seeds)} fresh seeds ({result.seeds[0]}-"
            f"{result.seeds[-1]}, batches of {batch}, cap {cap}; α {alpha:.2g} for the reproduction;"
            f" {result.compiles} programs compiled)"
        )
        short = "; ".join(f"{key} {old}→{new}" for key, (old, new) in differences_.items())
        adaptive_report.log_verdict(client, run_id, result, said, short)
    out_console.print(
        said.replace(result.verdict.upper(), shown(result.verdict), 1)
        + f", logged to run {run_id} (tags adaptive.*, claim.*; its batches nested under it)",
        soft_wrap=True,
    )
    return result
