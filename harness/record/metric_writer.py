"""The metric writer: a child process that turns chunks of per-iteration
metrics into MLflow `log_batch` calls.

Why a process: MLflow's store spends about 0.1 ms of Python per metric value;
a thread doing that holds the GIL in the training loop's way, and on a CPU
backend it competes with XLA for the cores. A separate, niced process takes
only the CPU that training leaves over, and its own GIL.

Usage: `python -m harness.record.metric_writer URI [RUN_DIR]`. Protocol, one JSON
document per line on stdin: first `{"runs": [run_id, ...]}` (one per seed
column), then the journal's entries (`harness.record.journal`): `{"seq": n, "first":
i, "steps": s, "metrics": {name: [[value per seed] per iteration]}}`. After
each entry reaches the store, its `seq` is recorded in RUN_DIR's
uploaded.json. "database is locked" is retried. When the store cannot be
reached, the writer stops trying, reads its input to the end (so training is
never held up) and exits with code 3: the entries are in the journal, for
`harness sync`. Exit code 0 means every metric was written; otherwise the
error is on stderr.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
from pathlib import Path

MAX_METRICS_PER_BATCH = 1000
EXIT_OFFLINE = 3


def entry_metrics(entry: dict, column: int, timestamp: int, skip: set | None = None) -> list:
    """The MLflow metrics of one seed column of a journal entry; iteration
    i is at step i * steps. `skip` holds (name, step) pairs already stored."""
    from mlflow.entities import Metric

    first, steps = entry["first"], entry["steps"]
    return [
        Metric(name, float(row[column]), timestamp, (first + k) * steps)
        for name, rows in entry["metrics"].items()
        for k, row in enumerate(rows)
        if skip is None or (name, (first + k) * steps) not in skip
    ]


def upload_entry(client, run_ids: list[str], entry: dict, skip: dict[str, set] | None = None) -> None:
    from harness.record.store import retry_locked

    timestamp = int(time.time() * 1000)
    for column, run_id in enumerate(run_ids):
        entries = entry_metrics(entry, column, timestamp, skip.get(run_id) if skip else None)
        for start in range(0, len(entries), MAX_METRICS_PER_BATCH):
            retry_locked(client.log_batch, run_id, metrics=entries[start : start + MAX_METRICS_PER_BATCH])


def main(uri: str, run_dir: str | None = None) -> int:
    # The parent handles Ctrl-C; this process finishes what it was sent.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        os.nice(19)
    except OSError:
        pass
    for name in ("mlflow", "alembic", "urllib3"):
        logging.getLogger(name).setLevel(logging.ERROR)

    from harness.record.journal import mark_uploaded
    from harness.record.store import open_client

    run_ids: list[str] = json.loads(sys.stdin.readline())["runs"]
    offline: str | None = None
    try:
        client = open_client(uri)
    except Exception as error:  # noqa: BLE001
        offline = f"{type(error).__name__}: {error}"
    for line in sys.stdin:
        if offline is not None:
            continue  # kept in the journal; read on so that the parent never blocks
        entry = json.loads(line)
        try:
            upload_entry(client, run_ids, entry)
        except Exception as error:  # noqa: BLE001  (the store is gone, or refuses)
            offline = f"{type(error).__name__}: {error}"
            continue
        if run_dir is not None and "seq" in entry:
            mark_uploaded(Path(run_dir), entry["seq"])
    if offline is not None:
        print(f"offline: {offline.splitlines()[0][:500]}", file=sys.stderr)
        return EXIT_OFFLINE
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(*sys.argv[1:3]))
    except Exception as error:  # noqa: BLE001  (reported to the parent on stderr)
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)
