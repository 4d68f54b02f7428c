"""The metric writer: a child process that turns chunks of per-iteration
metrics into MLflow `log_batch` calls.

Why a process: MLflow's store spends about 0.1 ms of Python per metric value;
a thread doing that holds the GIL in the training loop's way, and on a CPU
backend it competes with XLA for the cores. A separate, niced process takes
only the CPU that training leaves over, and its own GIL.

Protocol, one JSON document per line on stdin: first `{"runs": [run_id, ...]}`
(one per seed column), then `{"first": i, "steps": s, "metrics": {name:
[[value per seed] per iteration]}}` for each chunk. End of input ends the
process; exit code 0 means every metric was written, otherwise the error is
on stderr.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time

MAX_METRICS_PER_BATCH = 1000


def main(uri: str) -> int:
    # The parent handles Ctrl-C; this process finishes what it was sent.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        os.nice(19)
    except OSError:
        pass
    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)

    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    run_ids: list[str] = json.loads(sys.stdin.readline())["runs"]
    for line in sys.stdin:
        chunk = json.loads(line)
        first, steps = chunk["first"], chunk["steps"]
        timestamp = int(time.time() * 1000)
        for column, run_id in enumerate(run_ids):
            entries = [
                Metric(name, float(row[column]), timestamp, (first + k) * steps)
                for name, rows in chunk["metrics"].items()
                for k, row in enumerate(rows)
            ]
            for start in range(0, len(entries), MAX_METRICS_PER_BATCH):
                client.log_batch(run_id, metrics=entries[start : start + MAX_METRICS_PER_BATCH])
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1]))
    except Exception as error:  # noqa: BLE001  (reported to the parent on stderr)
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)
