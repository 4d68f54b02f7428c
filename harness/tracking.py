"""MLflow tracking: one experiment per spec name, a parent run per invocation
and a child run per seed.

Metrics go through `log_batch` on a background thread, so the training loop
never waits on the store. Every run this module starts ends FINISHED, FAILED
or KILLED: `Tracking` is a context manager that sets the final status on
every way out, exceptions and Ctrl-C included.
"""

from __future__ import annotations

import logging
import os
import queue
import tempfile
import threading
import time
import traceback
from collections.abc import Iterable
from pathlib import Path

from harness.runner import ChunkMetrics

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
_MAX_METRICS_PER_BATCH = 1000
_MAX_PARAMS_PER_BATCH = 100
_MAX_TAGS_PER_BATCH = 100


def resolve_uri(cli_uri: str | None, spec_uri: str | None) -> str:
    """--tracking-uri beats MLFLOW_TRACKING_URI beats the spec beats the default."""
    return cli_uri or os.environ.get("MLFLOW_TRACKING_URI") or spec_uri or DEFAULT_TRACKING_URI


class TrackingError(RuntimeError):
    """The tracking store cannot be used; raised before anything is compiled."""


def _batches(items: list, size: int) -> Iterable[list]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class Tracking:
    """The MLflow runs of one invocation.

    Usage:
        with Tracking(uri, experiment) as tracking:
            tracking.start(run_name, params, tags, seeds)
            tracking.log_chunk(...)        # any number of times, non-blocking
            tracking.finish(summary, artifacts)
    """

    def __init__(self, uri: str, experiment: str):
        from mlflow.tracking import MlflowClient

        # MLflow and alembic narrate store creation at INFO; keep the console
        # for the harness's own output.
        for name in ("mlflow", "alembic"):
            logging.getLogger(name).setLevel(logging.WARNING)
        os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
        self.uri = uri
        try:
            self.client = MlflowClient(tracking_uri=uri)
            found = self.client.get_experiment_by_name(experiment)
            self.experiment_id = found.experiment_id if found else self.client.create_experiment(experiment)
        except Exception as error:  # noqa: BLE001  (MLflow raises many kinds)
            raise TrackingError(f"cannot use the MLflow tracking store {uri!r}: {error}") from None
        self.parent_id: str | None = None
        self.child_ids: dict[int, str] = {}
        self._queue: queue.Queue = queue.Queue()
        self._worker: threading.Thread | None = None
        self._worker_error: BaseException | None = None

    # ------------------------------------------------------------ lifecycle

    def start(self, run_name: str, params: dict[str, str], tags: dict[str, str], seeds: tuple[int, ...]) -> None:
        from mlflow.entities import Param

        self.parent_id = self.client.create_run(self.experiment_id, run_name=run_name, tags=tags).info.run_id
        for seed in seeds:
            child_tags = {**tags, "mlflow.parentRunId": self.parent_id, "seed": str(seed)}
            run = self.client.create_run(self.experiment_id, run_name=f"{run_name}/seed={seed}", tags=child_tags)
            self.child_ids[seed] = run.info.run_id
        param_list = [Param(k, v) for k, v in params.items()]
        for run_id, extra in [(self.parent_id, {}), *[(rid, {"seed": str(s)}) for s, rid in self.child_ids.items()]]:
            entries = param_list + [Param(k, v) for k, v in extra.items()]
            for batch in _batches(entries, _MAX_PARAMS_PER_BATCH):
                self.client.log_batch(run_id, params=batch)
        self._worker = threading.Thread(target=self._drain, name="mlflow-logger", daemon=True)
        self._worker.start()

    def __enter__(self) -> Tracking:
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if self.parent_id is None:
            return False
        if exc_type is None:
            status, note = "FINISHED", None
        elif issubclass(exc_type, KeyboardInterrupt):
            status, note = "KILLED", "interrupted (Ctrl-C)"
        else:
            status, note = "FAILED", "".join(traceback.format_exception_only(exc_type, exc)).strip()
        self.close(status, note)
        return False

    def close(self, status: str, note: str | None = None) -> None:
        """Flush pending metrics and end every run with `status`."""
        from mlflow.entities import RunTag

        try:
            self.flush()
        finally:
            run_ids = [*self.child_ids.values(), self.parent_id]
            for run_id in run_ids:
                if note:
                    self.client.log_batch(run_id, tags=[RunTag("error", note[:5000])])
                self.client.set_terminated(run_id, status)
            self.parent_id = None

    # -------------------------------------------------------------- metrics

    def log_chunk(self, chunk: ChunkMetrics, env_steps_per_iteration: int) -> None:
        """Queue one chunk of per-iteration metrics (`[K, num_seeds]` each) for
        the seeds' runs; iteration i is logged at step i * env_steps_per_iteration,
        the env steps each seed has taken after it."""
        self._raise_worker_error()
        self._queue.put((chunk, env_steps_per_iteration))

    def log_summary(self, run_metrics: dict[int | None, dict[str, float]]) -> None:
        """Single values per run: key None is the parent, an int a seed."""
        from mlflow.entities import Metric

        timestamp = int(time.time() * 1000)
        for seed, values in run_metrics.items():
            run_id = self.parent_id if seed is None else self.child_ids[seed]
            metrics = [Metric(k, float(v), timestamp, 0) for k, v in values.items()]
            for batch in _batches(metrics, _MAX_METRICS_PER_BATCH):
                self.client.log_batch(run_id, metrics=batch)

    def set_tags(self, tags: dict[str, str], seed: int | None = None) -> None:
        from mlflow.entities import RunTag

        run_id = self.parent_id if seed is None else self.child_ids[seed]
        for batch in _batches([RunTag(k, v) for k, v in tags.items()], _MAX_TAGS_PER_BATCH):
            self.client.log_batch(run_id, tags=batch)

    def log_artifacts(self, files: dict[str, str], seed: int | None = None) -> None:
        """Write each `name -> text` as an artifact of the parent (or a seed's) run."""
        run_id = self.parent_id if seed is None else self.child_ids[seed]
        with tempfile.TemporaryDirectory() as tmp:
            for name, text in files.items():
                path = Path(tmp) / name
                path.write_text(text)
                self.client.log_artifact(run_id, str(path))

    def flush(self) -> None:
        if self._worker is not None:
            self._queue.put(None)
            self._worker.join()
            self._worker = None
        self._raise_worker_error()

    def _raise_worker_error(self) -> None:
        if self._worker_error is not None:
            error, self._worker_error = self._worker_error, None
            raise TrackingError(f"logging to {self.uri!r} failed: {error}") from error

    def _drain(self) -> None:
        from mlflow.entities import Metric

        while True:
            item = self._queue.get()
            if item is None:
                return
            if self._worker_error is not None:
                continue
            chunk, steps_per_iteration = item
            first_iteration, metrics = chunk
            try:
                timestamp = int(time.time() * 1000)
                for column, seed in enumerate(self.child_ids):
                    entries = []
                    for name, values in metrics.items():
                        for k, value in enumerate(values[:, column]):
                            step = (first_iteration + k) * steps_per_iteration
                            entries.append(Metric(name, float(value), timestamp, step))
                    for batch in _batches(entries, _MAX_METRICS_PER_BATCH):
                        self.client.log_batch(self.child_ids[seed], metrics=batch)
            except Exception as error:  # noqa: BLE001  (surfaced on the main thread)
                self._worker_error = error
