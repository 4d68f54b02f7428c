"""References read from MLflow: `harness publish` (a finished run's
results.json into `results/`) and the logged run that `harness reproduce
--run-id` judges against."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import NamedTuple

from harness.experiment_spec import canonical
from harness.judge import claims, differences, references
from harness.judge.baselines import random_policy_summary
from harness.judge.references import ReproduceError
from harness.plan import Plan
from harness.record import iterations, tracking
from harness.record.schema import Results


def publishable(plan: Plan, uri: str, run_id: str | None, random_baseline: bool) -> Results:
    """The record to publish for `plan`: run `run_id`'s results.json, or the
    newest finished run's of the spec, with the spec's claims judged on it;
    with `random_baseline`, the return of a uniformly random policy on the
    spec's env and seeds too."""
    tracker = tracking.Tracking(uri, plan.spec.experiment_name)
    client = tracker.client
    if run_id:
        try:
            run = client.get_run(run_id)
        except Exception:  # noqa: BLE001
            raise ReproduceError(f"no run {run_id!r} in {uri}") from None
    else:
        run = tracking.latest_finished_run(client, tracker.experiment_id, plan.spec_hash)
        if run is None:
            raise ReproduceError(f"no finished run of {plan.spec.name} (spec_hash {plan.spec_hash[:12]}) in {uri}")
    if run.data.tags.get("spec_hash") != plan.spec_hash:
        raise ReproduceError(f"run {run.info.run_id} was made from another spec (spec_hash differs)")
    text = tracking.read_text_artifact(client, run.info.run_id, "results.json")
    if text is None:
        raise ReproduceError(f"run {run.info.run_id} has no results.json")
    source = f"results.json of run {run.info.run_id}"
    record = references.parse_reference(text, source, plan.spec_hash, canonical(plan.spec))
    # The claims the spec states now, judged on the run (claims are not part
    # of the spec hash: a claim restated since the run is what is published).
    record = claims.with_claims(record.model_copy(update={"claims": None}), plan.spec.claims)
    record.mlflow_run_id = run.info.run_id
    if random_baseline:
        record.baselines = {"random_policy": random_policy_summary(plan.env, plan.spec.seeds)}
    return record


class LoggedRun(NamedTuple):
    run_id: str  # the parent run
    note: str | None  # said when the given id was a seed's run
    spec_yaml: str  # its logged spec
    results_json: str  # its results.json


def logged_run(uri: str, run_id: str) -> LoggedRun:
    """The spec and results.json that run `run_id` (or its parent) logged."""
    client = tracking.open_client(uri)
    run, note = tracking.get_parent_run(client, uri, run_id)
    run_id = run.info.run_id
    if run.data.tags.get("harness.kind") == "sweep":
        raise ReproduceError(
            f"run {run_id} is a sweep: reproduce one of its points (harness reproduce --run-id POINT_RUN_ID;"
            " the sweep's summary.md lists them)"
        )
    spec_yaml = tracking.read_text_artifact(client, run_id, "spec.yaml")
    if spec_yaml is None:
        raise ReproduceError(f"run {run_id} in {uri} has no logged spec (spec.yaml): it was not made by harness run")
    results_json = tracking.read_text_artifact(client, run_id, "results.json")
    if results_json is None:
        raise ReproduceError(
            f"run {run_id} ({run.info.status}) has no results.json: only a finished run can be a reference"
        )
    return LoggedRun(run_id, note, spec_yaml, results_json)


def copy_iterations(uri: str, run_id: str, out: Path) -> Path | None:
    """The run's iterations.parquet beside the published record `out`
    (harness.judge.differences), replacing any earlier one; None (and
    none left there) when the run has none."""
    target = differences.beside(out)
    target.unlink(missing_ok=True)
    client = tracking.open_client(uri)
    if iterations.FILE not in {a.path for a in client.list_artifacts(run_id)}:
        return None
    with tempfile.TemporaryDirectory() as folder:
        shutil.copyfile(client.download_artifacts(run_id, iterations.FILE, folder), target)
    return target
