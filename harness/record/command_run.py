"""One MLflow run for a command whose work is several runs of its own (an
adaptive reproduction's batches, a drift report's sides): the user meets
it as one run in the runs table, the others nested under it, and it ends
FINISHED, FAILED or KILLED on every way out, its name saying
`· interrupted` when it was stopped before its verdict."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from harness.record import runs, store
from harness.record.client import open_client


@contextlib.contextmanager
def command_run(
    uri: str, experiment: str, name: str, tags: dict[str, str], under: str | None = None
) -> Iterator[tuple[object, str]]:
    """`(client, run id)` of a new run named `name` in `experiment` (or, with
    `under`, nested under that run, in its experiment)."""
    client = open_client(uri)
    if under is not None:
        experiment_id = store.retry_locked(client.get_run, under).info.experiment_id
        tags = {**tags, "mlflow.parentRunId": under}
    else:
        experiment_id = store.get_or_create_experiment(client, uri, experiment)
    run_id = store.retry_locked(client.create_run, experiment_id, run_name=name, tags=tags).info.run_id
    status = "FAILED"
    try:
        yield client, run_id
        status = "FINISHED"
    except KeyboardInterrupt:
        status = "KILLED"
        named = store.retry_locked(client.get_run, run_id).data.tags.get("mlflow.runName", name)
        runs.set_tags(client, run_id, {"mlflow.runName": f"{named} · interrupted"})
        raise
    finally:
        store.retry_locked(client.set_terminated, run_id, status=status)
