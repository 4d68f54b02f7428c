"""The MLflow tracking store as the harness opens it: where it is
(`resolve_uri`), a client for it that keeps MLflow quiet (`open_client`,
`quiet_mlflow`), the error that says it cannot be used (`TrackingError`,
`first_line`), and how to look at a run in MLflow's UI (`ui_hints`).

The locks and retries that let many processes share one store are one level
down, in harness.record.store. No JAX here: the metric writer and
`harness sync` import this module.
"""

from __future__ import annotations

import logging
import os

from harness.record import store

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"


def resolve_uri(cli_uri: str | None, spec_uri: str | None) -> str:
    """--tracking-uri beats MLFLOW_TRACKING_URI beats the spec beats the default."""
    return cli_uri or os.environ.get("MLFLOW_TRACKING_URI") or spec_uri or DEFAULT_TRACKING_URI


class TrackingError(RuntimeError):
    """The tracking store cannot be used; raised before anything is compiled."""


def first_line(error: BaseException) -> str:
    """The first line of an error's message (at most 1000 characters), or
    its type's name when it has none: a reason that fits in one line of ours."""
    text = str(error).strip()
    return text.splitlines()[0][:1000] if text else type(error).__name__


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
    # MLflow's usage telemetry runs a thread beside the timed training, and when it gives up (no
    # internet) it deletes an environment variable while the main thread may be reading os.environ
    # (requests does, for proxies, on every call to a tracking server): a KeyError that ends a run.
    # A user who wants it sets MLFLOW_DISABLE_TELEMETRY=false.
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")


def unusable(uri: str, error: BaseException) -> TrackingError:
    """The error that says the store at `uri` cannot be used, and why."""
    return TrackingError(f"cannot use the MLflow tracking store {uri!r}: {first_line(error)}")


def open_client(uri: str):
    """An MlflowClient for `uri`, or a TrackingError saying why not."""
    quiet_mlflow()
    try:
        return store.open_client(uri)
    except Exception as error:  # noqa: BLE001  (MLflow raises many kinds)
        raise unusable(uri, error) from None


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
