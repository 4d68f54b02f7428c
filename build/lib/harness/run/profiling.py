"""What a user looks at to see where a run's time went, beyond its
wall-time line: a JAX profiler trace of one steady-state chunk (`harness run
--profile`; `runner.run(profile_dir=...)` takes it), and each chunk's
host-side times (`harness.types.ChunkTimes`) as metrics of the parent run."""

from __future__ import annotations

import time
from pathlib import Path

from harness.console import err_console
from harness.record import store, tracking
from harness.record.metric_writer import log_metrics
from harness.types import ChunkTimes

PROFILE_DIR = "profile"
HOST_TIMES = ("wall", "device_wait", "evaluation", "logging", "checkpoint")


def log_host_times(tracker: tracking.Tracking, times: tuple[ChunkTimes, ...], env_steps_per_iteration: int) -> bool:
    """Each chunk's host-side times as metrics of the parent run
    (`host_<part>_seconds` at the step of the chunk's last iteration, in env
    steps per seed as the seeds' curves), so
    the harness's own overhead shows without a trace. Diagnostics, not
    results: with the store out of reach they are not kept for harness sync
    (returns False)."""
    from mlflow.entities import Metric

    if tracker.offline is not None or not times:
        return False
    timestamp = int(time.time() * 1000)
    metrics = [
        Metric(f"host_{part}_seconds", float(getattr(t, part)), timestamp, t.last_iteration * env_steps_per_iteration)
        for part in HOST_TIMES
        for t in times
    ]
    try:
        log_metrics(tracker.client, tracker.parent_id, metrics)
    except Exception:  # noqa: BLE001  (the store is gone, or refuses: the record does not depend on these)
        return False
    return True


def report(tracker: tracking.Tracking, profile_dir: Path, profiled_through: int | None) -> None:
    """Log the trace as the parent run's `profile/` artifacts and say how to
    open it (it stays in the run directory whether or not the store took it)."""
    if profiled_through is None:
        return
    logged = False
    if tracker.offline is None:
        try:
            store.retry_locked(tracker.client.log_artifacts, tracker.parent_id, str(profile_dir), PROFILE_DIR)
            logged = True
        except Exception:  # noqa: BLE001  (the files stay in the run directory, and the message says where)
            pass
    traces = sorted(profile_dir.rglob("*.trace.json.gz"))
    where = f" (and in the MLflow run's artifacts, {PROFILE_DIR}/)" if logged else ""
    err_console.print(
        f"profile: a JAX profiler trace of the chunk ending at iteration {profiled_through} is in"
        f" {profile_dir}{where}. Open it with `xprof --logdir {profile_dir}` (pip install xprof), or"
        " TensorBoard's profile plugin (tensorboard-plugin-profile), or load"
        f" {traces[0] if traces else 'its .trace.json.gz'} in https://ui.perfetto.dev",
        soft_wrap=True,
    )
