"""One MLflow run's tags and artifacts, through a client: the provenance
tags every run carries, tags and text artifacts written to a run that
exists, and runs read back (a seed's parent, a text artifact, a spec's
newest finished run).

These are plain client calls, made by `harness.record.tracking.Tracking`
(which keeps them for `harness sync` when the store is gone), by `harness
sync` and by the commands that read records (compare, publish, reproduce).
No JAX here.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from harness.record.client import TrackingError


def provenance_tags(fingerprint: dict[str, str], versions: dict[str, str], git: dict[str, str]) -> dict[str, str]:
    """The tags every run carries about what made it: git state (also as
    MLflow's own source tag), package versions and the device fingerprint."""
    return {
        "git.commit": git["commit"],
        "git.dirty": git["dirty"],
        "mlflow.source.git.commit": git["commit"],
        **{f"version.{k}": v for k, v in versions.items()},
        **{f"device.{k}": v for k, v in fingerprint.items()},
    }


# ---------------------------------------------------------------- writing


def verdict_tags(verdict: str | None) -> dict[str, str]:
    """The MLflow tag every run that carries a verdict has: `verdict`, the
    word a filter matches (`tags.verdict = 'fail'`; harness.stats.verdict)."""
    return {} if verdict is None else {"verdict": verdict}


def log_verdict(
    client,
    run_id: str,
    word: str,
    name: str,
    description: str,
    tags: dict[str, str],
    texts: dict[str, str] | None = None,
) -> None:
    """A judged run's verdict, written as every command that judges writes
    it: the `verdict` tag (`verdict_tags`), the run's name in the runs table
    (`name`), its description, which the run page opens on (`description`,
    Markdown), the command's own tags and its text artifacts."""
    named = {"mlflow.runName": name, "mlflow.note.content": description}
    set_tags(client, run_id, {**tags, **verdict_tags(word), **named})
    if texts:
        log_texts(client, run_id, texts)


def log_texts(client, run_id: str, files: dict[str, str]) -> None:
    """Write each `name -> text` as an artifact of the run."""
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in files.items():
            path = Path(tmp) / name
            path.write_text(text)
            client.log_artifact(run_id, str(path))


def set_tags(client, run_id: str, tags: dict[str, str]) -> None:
    from mlflow.entities import RunTag

    client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()])


# ------------------------------------------------------- reading runs back


def get_parent_run(client, uri: str, run_id: str):
    """The run `run_id`, or its parent when it is a seed's child run, and a
    note saying so (None otherwise). Raises TrackingError naming the run if
    the store has no such run."""
    from mlflow.exceptions import MlflowException

    try:
        run = client.get_run(run_id)
    except MlflowException as error:
        if error.error_code == "RESOURCE_DOES_NOT_EXIST":
            raise TrackingError(f"no run {run_id!r} in the MLflow tracking store {uri!r}") from None
        raise TrackingError(f"cannot read run {run_id!r} from {uri!r}: {error}") from None
    parent_id = run.data.tags.get("mlflow.parentRunId")
    # Only a seed's run stands for its parent: a sweep's point run is the
    # parent run of its spec (its own parent is the sweep's), and a run
    # logged under another (harness run --parent-run) is its invocation's.
    if parent_id is None or "seed" not in run.data.tags:
        return run, None
    note = f"run {run_id} is the run of seed {run.data.tags.get('seed', '?')}; using its parent run {parent_id}"
    return get_parent_run(client, uri, parent_id)[0], note


def read_text_artifact(client, run_id: str, name: str) -> str | None:
    """The text of a top-level artifact of the run, or None if it has none by that name."""
    if name not in {entry.path for entry in client.list_artifacts(run_id)}:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        return Path(client.download_artifacts(run_id, name, tmp)).read_text()


def latest_finished_run(client, experiment_id: str, spec_hash: str):
    """The newest FINISHED parent run of the spec with `spec_hash`, or None."""
    runs = client.search_runs(
        [experiment_id],
        filter_string=f"tags.spec_hash = '{spec_hash}' and attributes.status = 'FINISHED'",
        order_by=["attributes.start_time DESC"],
    )
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    return parents[0] if parents else None
