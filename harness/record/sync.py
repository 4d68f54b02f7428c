"""`harness sync`: upload what a run directory holds that its MLflow runs
do not (the store was unreachable while the run trained or ended)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import NamedTuple

from harness.record import store
from harness.record.journal import PENDING_FILE, Journal, read_pending
from harness.record.metric_writer import upload_entries
from harness.record.tracking import TrackingError, first_line, log_texts, open_client
from harness.record.windows import Windows


class SyncReport(NamedTuple):
    run_id: str
    uri: str
    entries: int  # journal entries uploaded
    calls: int  # end-of-run calls delivered (summary, artifacts, tags, statuses)


def sync_run(directory: Path, uri: str | None = None) -> SyncReport:
    """Upload what a run directory's journal holds that its MLflow runs do
    not: journal entries past uploaded.json (points the store already has, at
    the same metric and step, are not written twice), then the end-of-run
    calls kept in pending.json. Raises TrackingError when the store cannot
    be reached; what was uploaded stays recorded, so it can be run again."""
    from mlflow.entities import Metric, RunTag

    info = json.loads((Path(directory) / "run.json").read_text())
    uri = uri or info["tracking_uri"]
    client = open_client(uri)
    journal = Journal(Path(directory))
    run_ids = list(info["child_run_ids"].values())
    pending = journal.pending()
    windows = Windows()  # the points harness run would have logged
    windows.resume(journal.in_store())
    entries = [out for entry in pending for out in windows.add(entry)] + windows.flush()
    try:
        if pending:
            names = {name for entry in entries for name in entry["metrics"]}
            stored = {
                run_id: {
                    (name, m.step)
                    for name in names
                    for m in store.retry_locked(client.get_metric_history, run_id, name)
                }
                for run_id in run_ids
            }
            upload_entries(client, run_ids, entries, journal.directory, stored)
        calls = read_pending(directory)
        delivered = 0
        timestamp = int(time.time() * 1000)
        for run_id, values in calls.get("metrics", {}).items():
            metrics = [Metric(k, float(v), timestamp, 0) for k, v in values.items()]
            store.retry_locked(client.log_batch, run_id, metrics=metrics)
            delivered += 1
        for run_id, files in calls.get("artifacts", {}).items():
            log_texts(client, run_id, files)
            delivered += 1
        for run_id, files in calls.get("files", {}).items():
            for path in files.values():
                store.retry_locked(client.log_artifact, run_id, path)
            delivered += 1
        for run_id, tags in calls.get("tags", {}).items():
            store.retry_locked(client.log_batch, run_id, tags=[RunTag(k, v) for k, v in tags.items()])
            delivered += 1
        for run_id, status in calls.get("status", {}).items():
            store.retry_locked(client.set_terminated, run_id, status["status"])
            delivered += 1
    except Exception as error:  # noqa: BLE001  (the store is gone, or refuses)
        raise TrackingError(f"syncing run {Path(directory).name} to {uri!r} failed: {first_line(error)}") from None
    (Path(directory) / PENDING_FILE).unlink(missing_ok=True)
    return SyncReport(Path(directory).name, uri, len(pending), delivered)


def needs_sync(directory: Path) -> bool:
    return bool(Journal(Path(directory)).pending()) or (Path(directory) / PENDING_FILE).exists()
