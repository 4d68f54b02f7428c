"""Robust use of an MLflow store by many processes at once.

- `retry_locked`: SQLite lets one writer in at a time; under load the others
  get "database is locked" after its busy timeout. Such calls are retried
  (with growing, jittered pauses, up to `LOCKED_PATIENCE` seconds); every
  `log_batch` is one transaction, so a retried call writes once.
- `store_lock`: two processes opening a fresh SQLite store at once both run
  MLflow's schema migrations and one fails ("duplicate column name"); and two
  creating the same experiment race. An inter-process lock (`fcntl`, on a
  file beside the database) serialises the first open and the experiment
  lookup-or-create. A creator outside the harness (`mlflow ui`, a user's
  own client) does not take that lock; MLflow's migrations are not safe
  against it and fail in many ways ("table ... already exists", "no such
  constraint", ...). An open waits while another client's tables are
  being made (MLflow would make the missing ones itself and fail the other
  client), and an open that fails while the schema is changing under it is
  tried again once it has settled (`CREATING_PATIENCE`, from the lock).
- `configure_http`: MLflow's client retries a dead server for about four
  minutes per call by default; the harness asks for a few seconds, so an
  unreachable `--tracking-uri` is reported at once and a server that goes
  away mid-run is noticed quickly (the user's own settings win).

No JAX here: the metric writer imports this module.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

LOCKED_PATIENCE = 300.0  # seconds a call keeps retrying "database is locked"
CREATING_PATIENCE = 60.0  # seconds an open waits for another process's store creation
SETTLE_SECONDS = 0.5  # how long a failed open watches for a creation still going on
STALLED_SECONDS = 5.0  # a store's tables unchanged this long while some are missing: their maker is gone
_LOCKED = ("database is locked", "database table is locked", "database schema is locked")


def is_locked_error(error: BaseException) -> bool:
    text = str(error).lower()
    return any(fragment in text for fragment in _LOCKED)


def retry_locked(fn: Callable[..., T], *args, **kwargs) -> T:
    """`fn(*args, **kwargs)`, retried while SQLite says the database is locked."""
    deadline = time.monotonic() + LOCKED_PATIENCE
    pause = 0.05
    while True:
        try:
            return fn(*args, **kwargs)
        except Exception as error:  # noqa: BLE001  (SQLAlchemy's and MLflow's wrappers of the same error)
            if not is_locked_error(error) or time.monotonic() > deadline:
                raise
        time.sleep(pause * (0.5 + random.random()))
        pause = min(pause * 2, 2.0)


def sqlite_path(uri: str) -> Path | None:
    """The database file of a `sqlite:///` URI, else None."""
    if not uri.startswith("sqlite:"):
        return None
    path = uri.split(":///", 1)[1].split("?", 1)[0] if ":///" in uri else ""
    return Path(path) if path and path != ":memory:" else None


@contextlib.contextmanager
def store_lock(uri: str) -> Iterator[None]:
    """Held around a process's first use of a SQLite store (creation and
    schema migration) and around experiment creation; a no-op for other
    stores. The lock file is `<database>.lock`."""
    path = sqlite_path(uri)
    if path is None or not path.parent.is_dir():
        yield
        return
    with open(path.with_name(path.name + ".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def configure_http() -> None:
    """A few seconds of retries against an unreachable server, not minutes."""
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")


def open_client(uri: str):
    """An MlflowClient whose store is created (or migrated) under the lock,
    waiting out a creation by a process that does not take it."""
    configure_http()
    path = sqlite_path(uri)
    with store_lock(uri):
        deadline = time.monotonic() + CREATING_PATIENCE  # from the lock: time queued behind a harness is not counted
        if path is not None:
            _wait_for_tables(path, deadline)
        while True:
            try:
                return _first_open(uri)
            except Exception:  # noqa: BLE001  (MLflow's migrations fail in many ways)
                if path is None or time.monotonic() > deadline:
                    raise
            # Only a failed open reads the schema: is someone else at work on it?
            before = _schema_mark(path)
            time.sleep(SETTLE_SECONDS)
            if _schema_mark(path) == before:  # nobody is: once more, and its error is the real one
                return _first_open(uri)


def _first_open(uri: str):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    retry_locked(client.search_experiments, max_results=1)
    return client


def _wait_for_tables(path: Path, deadline: float) -> None:
    """Wait while another client makes the SQLite store's tables (some of
    MLflow's exist, not all): opened now, MLflow would make the missing ones
    itself and the other client's next one would fail. Until they all exist,
    the schema stops changing for STALLED_SECONDS (a creator that died), or
    the deadline."""
    last, changed = _schema_mark(path), time.monotonic()
    while _tables_missing(last) and time.monotonic() < min(deadline, changed + STALLED_SECONDS):
        time.sleep(SETTLE_SECONDS / 10)
        mark = _schema_mark(path)
        if mark != last:
            last, changed = mark, time.monotonic()


def _tables_missing(mark: tuple | None) -> bool:
    """Whether a store whose schema is `mark` (`_schema_mark`) has some of
    MLflow's tables and not all (none: a new store, which the open makes
    under the harness's lock)."""
    if mark is None:
        return False
    tables = {name for kind, name, _ in mark[0] if kind == "table" and not name.startswith(("alembic_", "sqlite_"))}
    if not tables:
        return False
    from mlflow.store.db import utils  # its tables, as MLflow's open checks them (imported by the open anyway)

    return not set(utils.Base.metadata.tables) <= tables


def _schema_mark(path: Path | None) -> tuple | None:
    """The SQLite database's schema as it is now (its tables' and indexes'
    definitions and its alembic revision), to see whether it is changing;
    None where there is no readable database."""
    if path is None or not path.is_file():
        return None
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)) as db:
            schema = tuple(db.execute("SELECT type, name, sql FROM sqlite_master ORDER BY type, name"))
            if not any(name == "alembic_version" for _, name, _ in schema):
                return schema, None
            return schema, tuple(db.execute("SELECT version_num FROM alembic_version"))
    except sqlite3.Error:
        return None


# MLflow 3's UI lands on an experiment's GenAI overview unless the experiment
# says it holds model-training runs; then it opens on the runs table.
EXPERIMENT_TAGS = {"mlflow.experimentKind": "custom_model_development"}


def get_or_create_experiment(client, uri: str, name: str) -> str:
    """The id of experiment `name`, created (as a model-training experiment)
    if it does not exist; safe against clients creating it concurrently."""
    with store_lock(uri):
        found = retry_locked(client.get_experiment_by_name, name)
        if found is not None:
            return found.experiment_id
        try:
            return retry_locked(client.create_experiment, name, tags=EXPERIMENT_TAGS)
        except Exception:  # noqa: BLE001  (another client of a server created it first)
            found = retry_locked(client.get_experiment_by_name, name)
            if found is None:
                raise
            return found.experiment_id
