"""The metric writer: a child process that turns chunks of per-iteration
metrics into MLflow `log_batch` calls.

Why a process: MLflow's SQL store spends about 0.2 ms of Python per metric
value on this project's reference CPU, nearly all of it in SQLAlchemy's ORM
(one `SqlMetric` object per value, its flush, and the latest-metric
bookkeeping); the batch calls, transactions and commits are a few percent
of it. A thread doing that would hold the GIL in the training loop's way
and, on a CPU backend, compete with XLA for the cores. A separate, niced
process takes only the CPU that training leaves over, and its own GIL.

Since the cost is per value and Python-bound, the writer spreads it over
`WORKERS` processes (one MLflow client each): every entry is split into
jobs by seed column and, with fewer columns than workers, by metric name,
and the jobs of many entries are in flight at once. SQLite takes one writer
at a time, and MLflow holds it while it flushes a batch's rows, so workers
beyond the cores only queue (see WORKERS). Each process freezes what it
imported out of the cycle collector's scans (`_tune_gc`) and ends without
Python's teardown.

Usage: `python -m harness.record.metric_writer URI [RUN_DIR [WORKERS]]`. Protocol, one JSON
document per line on stdin: first `{"runs": [run_id, ...]}` (one per seed
column), then the journal's entries (`harness.record.journal`): `{"seq": n, "first":
i, "steps": s, "metrics": {name: [[value per seed] per iteration]}}` (a
sweep's entries name their own columns' runs: `"runs": [...]`). After
each entry (and every entry before it) reaches the store, its `seq` is
recorded in RUN_DIR's uploaded.json. "database is locked" is retried. When
the store cannot be reached, the writer stops trying, reads its input to
the end (so training is never held up) and exits with code 3: the entries
are in the journal, for `harness sync`. Exit code 0 means every metric was
written; otherwise the error is on stderr.
"""

from __future__ import annotations

import collections
import gc
import json
import logging
import math
import multiprocessing
import os
import queue
import signal
import sys
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path

from harness.exit_codes import EXIT_INCOMPLETE
from harness.record.windows import coalesce, steps_of

MAX_METRICS_PER_BATCH = 1000
# Writer processes at most: one per core, up to 4 (SQLite takes one writer
# at a time, and MLflow builds most of a batch's rows while holding it, so
# more processes than cores only queue for the lock: on 2 cores, 62,464
# values took 2.9-3.3 s with 2 workers and 4.5 s with 4). More than the
# runs' columns only when a job can be split by metric name. Overridable
# (HARNESS_METRIC_WRITERS) for a store that takes concurrent writers badly.
WORKERS = int(os.environ.get("HARNESS_METRIC_WRITERS", str(min(4, os.cpu_count() or 1))))
VALUES_PER_WORKER = 10_000  # a smaller run is written by the writer alone


def workers_for(values: int) -> int:
    """How many worker processes to write about `values` metric values
    with: 1 (the writer itself, no pool) for a small run."""
    return max(1, min(WORKERS, values // VALUES_PER_WORKER))


def entry_metrics(entry: dict, column: int, timestamp: int, skip: set | None = None) -> list:
    """The MLflow metrics of one seed column of an entry: row k at step
    `at[k]` (a window's, harness.record.windows), else iteration i at step
    i * steps. `skip` holds (name, step) pairs already stored. Each name's
    points come newest first: MLflow then updates its latest value once per
    name and batch instead of once per point."""
    from mlflow.entities import Metric

    at = steps_of(entry)
    return [
        Metric(name, float(values[k][column]), timestamp, at[k])
        for name, values in entry["metrics"].items()
        for k in reversed(range(len(values)))
        if skip is None or (name, at[k]) not in skip
    ]


def log_metrics(client, run_id: str, metrics: list) -> None:
    from harness.record.store import retry_locked

    for start in range(0, len(metrics), MAX_METRICS_PER_BATCH):
        retry_locked(client.log_batch, run_id, metrics=metrics[start : start + MAX_METRICS_PER_BATCH])


def upload_entry(client, run_ids: list[str], entry: dict, skip: dict[str, set] | None = None) -> None:
    timestamp = int(time.time() * 1000)
    for column, run_id in enumerate(run_ids):
        log_metrics(client, run_id, entry_metrics(entry, column, timestamp, skip.get(run_id) if skip else None))


def upload_entries(client, run_ids: list[str], entries: list[dict], run_dir: Path, skip=None) -> None:
    """Write `entries` with `client` in order (a sweep's entry names its
    columns' runs), recording each entry's `seq` in `run_dir` once it is in
    the store; `skip` as for `upload_entry`. Raises the store's error."""
    from harness.record.journal import mark_uploaded

    for entry in entries:
        upload_entry(client, entry.get("runs", run_ids), entry, skip)
        if run_dir is not None and entry.get("seq") is not None:
            mark_uploaded(run_dir, entry["seq"])


def offline_reason(error: BaseException) -> str:
    """Why the store could not be used, in one line."""
    return f"{type(error).__name__}: {error}".splitlines()[0][:500]


def write_here(client, run_ids: list[str], entries: list[dict], run_dir: Path | None) -> str | None:
    """Write `entries` (the protocol's, after the runs) with `client`, in
    this process, as the writer alone would; each entry's `seq` is recorded
    in `run_dir` once it is in the store. Returns why the store could not be
    reached (the first failure; nothing after it is tried), None when every
    entry reached it. For a small run that waits until training ends anyway
    (`harness.record.metric_feed`): a writer process would cost more to
    start than the writing itself."""
    collecting = gc.isenabled()
    gc.disable()  # as in `_tune_gc`: the ORM's objects are freed by reference counting
    try:
        upload_entries(client, run_ids, coalesce(entries), run_dir)
    except Exception as error:  # noqa: BLE001  (the store is gone, or refuses)
        return offline_reason(error)
    finally:
        if collecting:
            gc.enable()
    return None


def split_entry(entry: dict, run_ids: list[str], workers: int) -> list[tuple[str, int, dict]]:
    """The jobs of one entry, (run id, column, entry with some of the
    names), at least `workers` of them where the names allow."""
    names = list(entry["metrics"])
    groups = min(len(names), max(1, math.ceil(workers / len(run_ids))))
    jobs = []
    for column, run_id in enumerate(run_ids):
        for g in range(groups):
            part = {name: entry["metrics"][name] for name in names[g::groups]}
            jobs.append((run_id, column, {**entry, "metrics": part}))
    return jobs


def _batches_of_lines(stream, most: int = 256):
    """The lines of `stream` in batches: each line and whatever others have
    already arrived behind it (at most `most`); a thread reads the stream."""
    lines: queue.Queue = queue.Queue()

    def read() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, name="stdin", daemon=True).start()
    while (line := lines.get()) is not None:
        batch = [line]
        while len(batch) < most:
            try:
                more = lines.get_nowait()
            except queue.Empty:
                break
            if more is None:
                yield batch
                return
            batch.append(more)
        yield batch


# ------------------------------------------------------------ worker processes

_client = None


def _open_worker(uri: str) -> None:
    global _client
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _quiet()
    from harness.record.store import open_client

    _client = open_client(uri)
    _tune_gc()


def _upload_job(run_id: str, column: int, entry: dict, timestamp: int) -> None:
    log_metrics(_client, run_id, entry_metrics(entry, column, timestamp))


def _tune_gc() -> None:
    """Python's cycle collector off the hot path: every value becomes an ORM
    object, and with the default thresholds the collector runs every 700
    allocations over everything MLflow imported. Objects that exist now are
    frozen out of its scans and it runs less often; the ORM's objects are
    freed by reference counting when their batch is committed. Measured here:
    85 -> 60 us per value in `log_batch`."""
    gc.freeze()
    gc.set_threshold(50_000, 50, 100)


def _quiet() -> None:
    for name in ("mlflow", "alembic", "urllib3"):
        logging.getLogger(name).setLevel(logging.ERROR)


class Uploader:
    """Entries to the store through a pool of worker processes; `done()`
    gives the seq of each entry that reached the store with all before it.

    The workers are forked at once, before this process opens the store
    (MLflow caches one store and its connections per URI, which a fork must
    not share) and while it has no other thread: they start with MLflow
    imported, each opening its own client."""

    def __init__(self, uri: str, run_ids: list[str], workers: int):
        from mlflow.tracking import MlflowClient  # noqa: F401  (imported once, before the fork)

        from harness.record.store import open_client

        self.run_ids = run_ids
        self.workers = max(1, min(workers, len(run_ids) * 8))
        self.in_flight: collections.deque[tuple[int | None, list[Future]]] = collections.deque()
        self.pool = None
        if self.workers > 1:
            context = multiprocessing.get_context("fork")
            self.pool = ProcessPoolExecutor(self.workers, mp_context=context, initializer=_open_worker, initargs=(uri,))
            self.pool.submit(int).result()  # with fork, every worker starts at the first submit
        self.client = open_client(uri)  # an unusable store is reported here, before the first entry

    def submit(self, entry: dict) -> None:
        run_ids = entry.get("runs", self.run_ids)  # a sweep's entry names its columns' runs
        if self.pool is None:  # one process: the writer writes
            upload_entry(self.client, run_ids, entry)
            self.in_flight.append((entry.get("seq"), []))  # done already
            return
        timestamp = int(time.time() * 1000)
        futures = [
            self.pool.submit(_upload_job, run_id, column, part, timestamp)
            for run_id, column, part in split_entry(entry, run_ids, self.workers)
        ]
        self.in_flight.append((entry.get("seq"), futures))

    def done(self, wait: bool = False) -> list[int | None]:
        """Entries finished, in order (waiting for all with `wait`); raises
        the first job's error."""
        finished = []
        while self.in_flight and (wait or all(f.done() for f in self.in_flight[0][1])):
            seq, futures = self.in_flight.popleft()
            for future in futures:
                future.result()
            finished.append(seq)
        return finished

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)


def main(uri: str, run_dir: str | None = None, workers: str | None = None) -> int:
    # The parent handles Ctrl-C; this process finishes what it was sent.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        os.nice(19)  # inherited by the workers
    except OSError:
        pass
    _quiet()

    from mlflow.tracking import MlflowClient  # noqa: F401  (before the collector is tuned)

    from harness.record.journal import mark_uploaded

    _tune_gc()

    run_ids: list[str] = json.loads(sys.stdin.readline())["runs"]
    offline: str | None = None
    uploader = None
    try:
        uploader = Uploader(uri, run_ids, int(workers) if workers else WORKERS)
    except Exception as error:  # noqa: BLE001
        offline = offline_reason(error)

    def settle(wait: bool = False) -> str | None:
        try:
            for seq in uploader.done(wait):
                if run_dir and seq is not None:
                    mark_uploaded(Path(run_dir), seq)
        except Exception as error:  # noqa: BLE001  (the store is gone, or refuses)
            return offline_reason(error)
        return None

    for lines in _batches_of_lines(sys.stdin):
        if offline is not None:
            continue  # kept in the journal; read on so that the parent never blocks
        try:
            for entry in coalesce([json.loads(line) for line in lines]):
                uploader.submit(entry)
        except Exception as error:  # noqa: BLE001  (the writer's own upload: the store is gone)
            offline = offline_reason(error)
            continue
        offline = settle()
    if offline is None and uploader is not None:
        offline = settle(wait=True)
    if uploader is not None:
        uploader.close()
    if offline is not None:
        print(f"offline: {offline}", file=sys.stderr)
        return EXIT_INCOMPLETE
    return 0


if __name__ == "__main__":
    from harness.record.metric_writer import main as main_  # the workers unpickle jobs from this module

    try:
        code = main_(*sys.argv[1:4])
    except Exception as error:  # noqa: BLE001  (reported to the parent on stderr)
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        code = 1
    # Every entry is committed and the workers have ended: skip Python's
    # teardown of MLflow and SQLAlchemy (about 0.65 s here, which the run
    # would wait for after training).
    sys.stderr.flush()
    os._exit(code)
