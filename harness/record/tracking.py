"""MLflow tracking: one experiment per spec name, a parent run per invocation
and a child run per seed.

Per-iteration metrics go through `log_batch` in a niced child process
(`harness.record.metric_writer`, fed by `harness.record.metric_feed`), so the
training loop never waits on the store; a small run whose metrics wait until
training ends (on a CPU) writes them itself, then.
With a journal attached (`harness run` always attaches one), every chunk is
first appended to it on local disk; when the store goes away mid-run, the
writer and the end-of-run calls stop trying, training goes on, and what did
not reach the store is left for `harness sync` (`offline` says why). Every
run this module starts ends FINISHED, FAILED or KILLED: `Tracking` is a
context manager that sets the final status on every way out, exceptions,
Ctrl-C and SIGTERM included (on a dead server, the status waits in the
journal's pending calls too).

Many processes may share one store: SQLite's "database is locked" is
retried and a fresh store is created under a file lock (`harness.record.store`).

The store's address and client, and `TrackingError`, are in
`harness.record.client`; a run's provenance tags, tags and text artifacts
written to it and runs read back, in `harness.record.runs`. Both are
re-exported here, so that `tracking.X` names everything a command needs.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from harness.record import store
from harness.record.client import (
    DEFAULT_TRACKING_URI,
    TrackingError,
    first_line,
    open_client,
    quiet_mlflow,
    resolve_uri,
    ui_hints,
    unusable,
)
from harness.record.journal import Journal, add_pending
from harness.record.metric_feed import MetricFeed
from harness.record.metric_writer import MAX_METRICS_PER_BATCH, WORKERS, workers_for
from harness.record.runs import (
    get_parent_run,
    latest_finished_run,
    log_texts,
    provenance_tags,
    read_text_artifact,
    set_tags,
)
from harness.record.windows import Windows

if TYPE_CHECKING:  # the writer process imports this module; keep it free of JAX
    from harness.types import ChunkMetrics

__all__ = [
    "DEFAULT_TRACKING_URI",
    "Tracking",
    "TrackingError",
    "first_line",
    "get_parent_run",
    "latest_finished_run",
    "log_texts",
    "open_client",
    "provenance_tags",
    "quiet_mlflow",
    "read_text_artifact",
    "resolve_uri",
    "set_tags",
    "ui_hints",
]

_MAX_PARAMS_PER_BATCH = 100


def _batches(items: list, size: int) -> Iterable[list]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class Tracking:
    """The MLflow runs of one invocation.

    Usage:
        with Tracking(uri, experiment) as tracking:
            tracking.start(run_name, params, tags, seeds)
            tracking.log_chunk(...)        # any number of times, non-blocking
            tracking.flush()               # every chunk reached the store
            tracking.log_summary(...); tracking.log_artifacts(...)
    """

    def __init__(
        self,
        uri: str,
        experiment: str,
        *,
        live_metrics: bool = True,
        expected_values: int | None = None,
        under: str | None = None,
    ):
        """`under`: an existing run to log under, in its experiment instead
        of `experiment` (harness run --parent-run)."""
        self.uri = uri
        self.under = under
        self.client = open_client(uri)
        if under is None:
            try:
                self.experiment_id = store.get_or_create_experiment(self.client, uri, experiment)
            except Exception as error:  # noqa: BLE001  (MLflow raises many kinds)
                raise unusable(uri, error) from None
        if under is not None:
            self.experiment_id = self._experiment_of(under)
        self.parent_id: str | None = None
        self.run_name: str | None = None  # the parent run's name, as started
        # The runs that get per-iteration metrics, in column order: by seed,
        # or (a sweep) by column index, points x seeds.
        self.child_ids: dict[int, str] = {}
        self.point_ids: list[str] = []  # a sweep's runs of its points, between parent and seeds
        # With live_metrics off, chunks wait in this process until flush():
        # on a CPU backend the store's work would compete with training for
        # the same cores. How many per-iteration values the run will log,
        # about, says how many processes write them
        # (harness.record.metric_writer.workers_for).
        workers = workers_for(expected_values) if expected_values is not None else WORKERS
        self._metrics = MetricFeed(uri, live=live_metrics, workers=workers, client=self.client)
        self._windows = Windows()  # at most so many points per curve (harness.record.windows)
        self.journal: Journal | None = None
        # Why the store could not be reached (None: it could); what it did
        # not get is in the journal and its pending calls, for harness sync.
        self.offline: str | None = None

    # ------------------------------------------------------------ lifecycle

    def _experiment_of(self, run_id: str) -> str:
        from mlflow.exceptions import MlflowException

        try:
            return store.retry_locked(self.client.get_run, run_id).info.experiment_id
        except MlflowException as error:
            if error.error_code == "RESOURCE_DOES_NOT_EXIST":
                raise TrackingError(f"--parent-run {run_id}: no such run in {self.uri!r}") from None
            raise unusable(self.uri, error) from None
        except Exception as error:  # noqa: BLE001  (MLflow raises many kinds)
            raise unusable(self.uri, error) from None

    def _top_tags(self, tags: dict[str, str]) -> dict[str, str]:
        """The invocation's own run's tags: under `under` when there is one."""
        return {**tags, "mlflow.parentRunId": self.under} if self.under else tags

    def _create(self, name: str, tags: dict[str, str]) -> str:
        run = store.retry_locked(self.client.create_run, self.experiment_id, run_name=name, tags=tags)
        return run.info.run_id

    def _log_params(self, run_id: str, params: dict[str, str]) -> None:
        from mlflow.entities import Param

        for batch in _batches([Param(k, v) for k, v in params.items()], _MAX_PARAMS_PER_BATCH):
            store.retry_locked(self.client.log_batch, run_id, params=batch)

    def _start_seeds(
        self, name: str, params: dict[str, str], tags: dict[str, str], seeds, parent_id: str, *, by_column: bool
    ) -> None:
        """A run per seed under `parent_id`, in `child_ids` by seed, or (a
        sweep, whose points repeat the seeds) by column index."""
        for seed in seeds:
            # The seed first: the runs table cuts long names at their end.
            run_id = self._create(f"seed={seed} · {name}", {**tags, "mlflow.parentRunId": parent_id, "seed": str(seed)})
            self.child_ids[len(self.child_ids) if by_column else seed] = run_id
            self._log_params(run_id, {**params, "seed": str(seed)})

    def start(self, run_name: str, params: dict[str, str], tags: dict[str, str], seeds: tuple[int, ...]) -> None:
        self.run_name = run_name
        self.parent_id = self._create(run_name, self._top_tags(tags))
        self._log_params(self.parent_id, params)
        self._start_seeds(run_name, params, tags, seeds, self.parent_id, by_column=False)

    def start_sweep(
        self,
        run_name: str,
        params: dict[str, str],
        tags: dict[str, str],
        points: list[tuple[str, dict[str, str], dict[str, str]]],
        seeds: tuple[int, ...],
    ) -> None:
        """A sweep's runs: the sweep's own (the parent), one per point (name,
        params, tags) under it, and one per seed under each point; the
        columns of the per-iteration metrics are points x seeds."""
        self.run_name = run_name
        self.parent_id = self._create(run_name, self._top_tags(tags))
        self._log_params(self.parent_id, params)
        for name, point_params, point_tags in points:
            point_id = self._create(name, {**point_tags, "mlflow.parentRunId": self.parent_id})
            self.point_ids.append(point_id)
            self._log_params(point_id, point_params)
            self._start_seeds(name, point_params, point_tags, seeds, point_id, by_column=True)

    def reopen(
        self, parent_id: str, child_ids: dict[int, str], tags: dict[str, str], point_ids: list[str] = ()
    ) -> None:
        """Continue the runs of an earlier invocation (a resume): they are
        RUNNING again, with `tags` added, and end as this one ends."""
        from mlflow.entities import RunTag

        self.parent_id, self.child_ids, self.point_ids = parent_id, dict(child_ids), list(point_ids)
        for run_id in [parent_id, *self.point_ids, *child_ids.values()]:
            store.retry_locked(self.client.update_run, run_id, status="RUNNING")
            store.retry_locked(self.client.log_batch, run_id, tags=[RunTag(k, v) for k, v in tags.items()])

    def attach(self, journal: Journal) -> None:
        """Keep every chunk in `journal` (its directory is the run directory).
        Entries an earlier invocation journaled but did not upload are sent
        first. The metric writer starts here."""
        self.journal = journal
        # Started now, so that it is ready (MLflow imported, the store open)
        # by the time the first chunk comes.
        self._start_writer()
        self._windows.resume(journal.in_store())
        for entry in journal.pending():
            self._put(entry)

    def _start_writer(self) -> None:
        directory = self.journal.directory if self.journal is not None else None
        self._metrics.start(list(self.child_ids.values()), directory)

    def __enter__(self) -> Tracking:
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if self.parent_id is None:
            return False
        if exc_type is None:
            status, note = "FINISHED", None
        elif issubclass(exc_type, KeyboardInterrupt):
            name = getattr(exc, "args", None) and exc.args[0] if exc is not None else None
            status, note = "KILLED", f"interrupted ({name})" if name else "interrupted (Ctrl-C)"
        else:
            status, note = "FAILED", "".join(traceback.format_exception_only(exc_type, exc)).strip()
        self.close(status, note)
        return False

    def close(self, status: str, note: str | None = None) -> None:
        """Flush pending metrics and end every run with `status` (FAILED
        instead of FINISHED when the metrics could not be written)."""
        from mlflow.entities import RunTag

        flush_error = None
        try:
            self.flush()
        except TrackingError as error:
            flush_error = error
            if status == "FINISHED":
                status, note = "FAILED", str(error)
        if status == "KILLED" and self.run_name:
            # A run stopped before its verdict says so in the runs table.
            renamed = f"{self.run_name} · interrupted"
            self._call(
                "tags",
                self.parent_id,
                {"mlflow.runName": renamed},
                self.client.log_batch,
                self.parent_id,
                tags=[RunTag("mlflow.runName", renamed)],
            )
        for run_id in [*self.child_ids.values(), *self.point_ids, self.parent_id]:
            if note:
                self._call(
                    "tags",
                    run_id,
                    {"error": note[:5000]},
                    self.client.log_batch,
                    run_id,
                    tags=[RunTag("error", note[:5000])],
                )
            self._call("status", run_id, {"status": status}, self.client.set_terminated, run_id, status)
        self.parent_id = None
        if self.journal is not None:
            self.journal.close()
        if flush_error is not None and note == str(flush_error):
            raise flush_error

    def _call(self, kind: str, run_id: str, values: dict, fn, *args, **kwargs) -> None:
        """An MLflow call that, with a journal and a store that cannot be
        reached, is kept in the journal's pending calls for harness sync."""
        if self.journal is None:
            store.retry_locked(fn, *args, **kwargs)
            return
        if self.offline is None:
            try:
                store.retry_locked(fn, *args, **kwargs)
                return
            except Exception as error:  # noqa: BLE001  (the store is gone, or refuses)
                self.offline = first_line(error)
        add_pending(self.journal.directory, kind, run_id, values)

    # -------------------------------------------------------------- metrics

    def _put(self, entry: dict) -> None:
        for out in self._windows.add(entry):
            self._metrics.put(out)

    def log_chunk(self, chunk: ChunkMetrics, env_steps_per_iteration: int, window: int = 1, last: int = 0) -> None:
        """Queue one chunk of per-iteration metrics (`[K, num_seeds]` each) for
        the seeds' runs; iteration i is logged at step i * env_steps_per_iteration,
        the env steps each seed has taken after it. With `window` > 1, a
        point per `window` iterations of a run of `last` iterations
        (harness.record.windows). Returns at once."""
        self._metrics.raise_error()
        if not self._metrics.running:
            self._start_writer()
        items = [("iterations", chunk.first_iteration, dict(chunk.metrics))]
        if chunk.evaluation:
            # An evaluation is logged at the step of the iteration it followed.
            evaluation = {name: np.asarray(values)[None] for name, values in chunk.evaluation.items()}
            items.append(("evaluation", chunk.last_iteration, evaluation))
        windowed = {"window": window, "last": last} if window > 1 else {}
        for kind, first, values in items:
            extra = windowed if kind == "iterations" else {}
            if self.journal is not None:
                entry = self.journal.append(kind, first, env_steps_per_iteration, values, extra)
            else:
                entry = {"kind": kind, "first": first, "steps": env_steps_per_iteration, "metrics": values, **extra}
            self._put(entry)

    def _run_id(self, key: int | str | None) -> str:
        """None: the parent; an int: a seed's (a sweep's column's) run; a str: that run id."""
        if key is None:
            return self.parent_id
        return key if isinstance(key, str) else self.child_ids[key]

    def log_summary(self, run_metrics: dict[int | str | None, dict[str, float]]) -> None:
        """Single values per run: key None is the parent, an int a seed (a
        sweep's column), a str a run id (a sweep's point)."""
        from mlflow.entities import Metric

        timestamp = int(time.time() * 1000)
        for key, values in run_metrics.items():
            run_id = self._run_id(key)
            metrics = [Metric(k, float(v), timestamp, 0) for k, v in values.items()]
            for batch in _batches(metrics, MAX_METRICS_PER_BATCH):
                self._call(
                    "metrics", run_id, {m.key: m.value for m in batch}, self.client.log_batch, run_id, metrics=batch
                )

    def set_tags(self, tags: dict[str, str], run: int | str | None = None) -> None:
        """Tags on the parent run, or another (see log_summary's keys); kept
        for harness sync if the store is gone."""
        run_id = self._run_id(run)
        self._call("tags", run_id, tags, set_tags, self.client, run_id, tags)

    def log_artifacts(self, files: dict[str, str], seed: int | str | None = None) -> None:
        """Write each `name -> text` as an artifact of the parent run, or
        another (see log_summary's keys)."""
        run_id = self._run_id(seed)
        self._call("artifacts", run_id, files, log_texts, self.client, run_id, files)

    def log_files(self, paths: list[Path], run: int | str | None = None) -> None:
        """Log files (e.g. a plot) as artifacts of the parent run, or another;
        kept for harness sync if the store is gone (the files must stay)."""
        run_id = self._run_id(run)
        for path in paths:
            self._call("files", run_id, {Path(path).name: str(path)}, self.client.log_artifact, run_id, str(path))

    def flush(self) -> None:
        """Wait until every queued metric is in the store."""
        if not self._metrics.running:
            return
        for out in self._windows.flush():
            self._metrics.put(out)
        offline = self._metrics.finish(journaled=self.journal is not None)
        if offline is not None:
            self.offline = offline
        self._metrics.raise_error()
