"""MLflow tracking: one experiment per spec name, a parent run per invocation
and a child run per seed.

Per-iteration metrics go through `log_batch` in a niced child process
(`harness.record.metric_writer`), so the training loop never waits on the store.
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
"""

from __future__ import annotations

import json
import logging
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from harness.record import store
from harness.record.journal import Journal, add_pending
from harness.record.metric_writer import EXIT_OFFLINE, MAX_METRICS_PER_BATCH, WORKERS, workers_for

if TYPE_CHECKING:  # the writer process imports this module; keep it free of JAX
    from harness.types import ChunkMetrics

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
_MAX_PARAMS_PER_BATCH = 100


def resolve_uri(cli_uri: str | None, spec_uri: str | None) -> str:
    """--tracking-uri beats MLFLOW_TRACKING_URI beats the spec beats the default."""
    return cli_uri or os.environ.get("MLFLOW_TRACKING_URI") or spec_uri or DEFAULT_TRACKING_URI


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
            tracking.flush()               # every chunk reached the store
            tracking.log_summary(...); tracking.log_artifacts(...)
    """

    def __init__(self, uri: str, experiment: str, *, live_metrics: bool = True, expected_values: int | None = None):
        quiet_mlflow()
        self.uri = uri
        try:
            self.client = store.open_client(uri)
            self.experiment_id = store.get_or_create_experiment(self.client, uri, experiment)
        except Exception as error:  # noqa: BLE001  (MLflow raises many kinds)
            raise TrackingError(f"cannot use the MLflow tracking store {uri!r}: {first_line(error)}") from None
        self.parent_id: str | None = None
        # The runs that get per-iteration metrics, in column order: by seed,
        # or (a sweep) by column index, points x seeds.
        self.child_ids: dict[int, str] = {}
        self.point_ids: list[str] = []  # a sweep's runs of its points, between parent and seeds
        self._writer: subprocess.Popen | None = None  # harness.record.metric_writer, while runs are open
        self._outbox: queue.Queue = queue.Queue()
        self._feeder: threading.Thread | None = None
        self._feed_error: str | None = None
        # With live_metrics off, chunks wait in this process until flush():
        # on a CPU backend the store's work would compete with training for
        # the same cores.
        self.live_metrics = live_metrics
        # About how many per-iteration values the run will log: how many
        # processes write them (harness.record.metric_writer.workers_for).
        self.writer_workers = workers_for(expected_values) if expected_values is not None else WORKERS
        self._release = threading.Event()
        if live_metrics:
            self._release.set()
        self.journal: Journal | None = None
        # Why the store could not be reached (None: it could); what it did
        # not get is in the journal and its pending calls, for harness sync.
        self.offline: str | None = None

    # ------------------------------------------------------------ lifecycle

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
            run_id = self._create(f"{name}/seed={seed}", {**tags, "mlflow.parentRunId": parent_id, "seed": str(seed)})
            self.child_ids[len(self.child_ids) if by_column else seed] = run_id
            self._log_params(run_id, {**params, "seed": str(seed)})

    def start(self, run_name: str, params: dict[str, str], tags: dict[str, str], seeds: tuple[int, ...]) -> None:
        self.parent_id = self._create(run_name, tags)
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
        self.parent_id = self._create(run_name, tags)
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
        for entry in journal.pending():
            self._outbox.put(entry)

    def _start_writer(self) -> None:
        # A session of its own, so that Ctrl-C reaches only this process,
        # which then flushes the writer before ending the runs.
        # Its stderr goes to a file: a pipe nobody reads could fill and stall it.
        self._writer_log = tempfile.TemporaryFile("w+")
        argv = [sys.executable, "-m", "harness.record.metric_writer", self.uri]
        argv += [str(self.journal.directory) if self.journal is not None else "", str(self.writer_workers)]
        self._writer = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stderr=self._writer_log, text=True, start_new_session=True
        )
        # The runs go first, at once: the writer opens the store and starts
        # its workers while training goes on, whether or not metrics wait.
        self._writer.stdin.write(json.dumps({"runs": list(self.child_ids.values())}) + "\n")
        self._writer.stdin.flush()
        self._feeder = threading.Thread(target=self._feed, name="metric-feeder", daemon=True)
        self._feeder.start()

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

    def log_chunk(self, chunk: ChunkMetrics, env_steps_per_iteration: int) -> None:
        """Queue one chunk of per-iteration metrics (`[K, num_seeds]` each) for
        the seeds' runs; iteration i is logged at step i * env_steps_per_iteration,
        the env steps each seed has taken after it. Returns at once."""
        self._raise_writer_error()
        if self._writer is None:
            self._start_writer()
        metrics = {name: values.tolist() for name, values in chunk.metrics.items()}
        items = [("iterations", chunk.first_iteration, metrics)]
        if chunk.evaluation:
            # An evaluation is logged at the step of the iteration it followed.
            evaluation = {name: [values.tolist()] for name, values in chunk.evaluation.items()}
            items.append(("evaluation", chunk.last_iteration, evaluation))
        dtypes = {name: str(values.dtype) for name, values in {**chunk.metrics, **chunk.evaluation}.items()}
        for kind, first, values in items:
            if self.journal is not None:
                entry = self.journal.append(kind, first, env_steps_per_iteration, values, dtypes)
                self._outbox.put(entry)
            else:
                self._outbox.put({"first": first, "steps": env_steps_per_iteration, "metrics": values})

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
        """Log files (e.g. a plot) as artifacts of the parent run, or another."""
        run_id = self._run_id(run)
        for path in paths:
            store.retry_locked(self.client.log_artifact, run_id, str(path))

    def flush(self) -> None:
        """Wait until every queued metric is in the store."""
        writer, self._writer = self._writer, None
        if writer is None:
            return
        self._outbox.put(None)
        self._release.set()
        self._feeder.join()
        code = writer.wait()
        self._writer_log.seek(0)
        log = self._writer_log.read().strip()
        self._writer_log.close()
        if code == EXIT_OFFLINE and self.journal is not None:
            self.offline = log.splitlines()[-1].removeprefix("offline: ") if log else "the store could not be reached"
        elif code != 0 and self._feed_error is None:
            self._feed_error = log.splitlines()[-1] if log else f"exit code {code}"
        self._raise_writer_error()

    def _feed(self) -> None:
        """Move queued chunks into the writer's stdin. A thread of its own,
        because a write blocks whenever the writer lags behind."""
        assert self._writer is not None and self._writer.stdin is not None
        stdin = self._writer.stdin
        self._release.wait()
        while (item := self._outbox.get()) is not None:
            if self._feed_error is None:
                try:
                    stdin.write(json.dumps(item, allow_nan=True) + "\n")
                    stdin.flush()
                except OSError as error:  # the writer died; its stderr says why
                    self._feed_error = f"the metric writer stopped ({error})"
        try:
            stdin.close()
        except OSError:
            pass

    def _raise_writer_error(self) -> None:
        if self._feed_error is not None:
            raise TrackingError(f"logging metrics to {self.uri!r} failed: {self._feed_error}")


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:1000] if text else type(error).__name__


# ------------------------------------------------------- reading runs back


def quiet_mlflow() -> None:
    """MLflow and alembic narrate store creation at INFO, draw progress bars
    for downloads and, on a tracking server, print a link for every run that
    ends (one per seed); keep the console for the harness's own output, which
    names the parent run."""
    # MLflow sets its loggers' level when it is imported, from this variable.
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # A dead server is retried for urllib3's warnings' worth of seconds, not minutes.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    store.configure_http()
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")


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


def open_client(uri: str):
    """An MlflowClient for `uri`, or a TrackingError saying why not."""
    quiet_mlflow()
    try:
        return store.open_client(uri)
    except Exception as error:  # noqa: BLE001  (MLflow raises many kinds)
        raise TrackingError(f"cannot use the MLflow tracking store {uri!r}: {first_line(error)}") from None


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
    # A sweep's point run is the parent run of its spec (its own parent is the sweep's).
    if parent_id is None or ("sweep.point" in run.data.tags and "seed" not in run.data.tags):
        return run, None
    note = f"run {run_id} is the run of seed {run.data.tags.get('seed', '?')}; using its parent run {parent_id}"
    return get_parent_run(client, uri, parent_id)[0], note


def read_text_artifact(client, run_id: str, name: str) -> str | None:
    """The text of a top-level artifact of the run, or None if it has none by that name."""
    if name not in {entry.path for entry in client.list_artifacts(run_id)}:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        return Path(client.download_artifacts(run_id, name, tmp)).read_text()


# ----------------------------------------------------------------- syncing


def latest_finished_run(client, experiment_id: str, spec_hash: str):
    """The newest FINISHED parent run of the spec with `spec_hash`, or None."""
    runs = client.search_runs(
        [experiment_id],
        filter_string=f"tags.spec_hash = '{spec_hash}' and attributes.status = 'FINISHED'",
        order_by=["attributes.start_time DESC"],
    )
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    return parents[0] if parents else None


def ui_hints(uri: str, experiment_id: str, run_id: str) -> list[str]:
    """How to open run `run_id` in the MLflow UI, and its experiment's runs:
    links into a server's UI, or the `mlflow ui` command for a local store
    and the links it will serve."""
    if uri.startswith(("http://", "https://")):
        base, lines = uri.rstrip("/"), []
    else:
        base = "http://127.0.0.1:5000"
        lines = [f"MLflow: open the store with  mlflow ui --backend-store-uri {uri}"]
    return [
        *lines,
        f"  this run:        {base}/#/experiments/{experiment_id}/runs/{run_id}",
        f"  the spec's runs: {base}/#/experiments/{experiment_id}/runs",
    ]
