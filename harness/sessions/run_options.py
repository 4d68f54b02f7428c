"""How a session runs (what the command line chose), and the system-metrics
monitor it asks for."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import jax

from harness.console import err_console
from harness.record import windows
from harness.record.schema import Results
from harness.record.system_metrics import SystemMetrics, cannot_measure
from harness.run import cluster
from harness.run.programs import Programs
from harness.types import ChunkMetrics


@dataclass(frozen=True)
class RunOptions:
    """How `train_and_log` and `run_sweep` run (what the command line chose)."""

    progress: bool = True  # a progress bar on stderr
    # Stream per-iteration metrics during training even on a CPU backend
    # (default there: written when training ends; see harness.record.tracking).
    live_metrics: bool = False
    tags: Mapping[str, str] = field(default_factory=dict)  # added to the parent run's
    parent_run: str | None = None  # an MLflow run to log under, in its experiment (harness run --parent-run)
    checkpoint_dir: Path | None = None  # the checkpoint root; None: beside the store
    resume: str | bool = False  # True: the newest unfinished run of the spec; or a run id
    on_chunk: Callable[[ChunkMetrics], None] | None = None  # after each chunk is logged
    # When the command started (time.perf_counter()), for the start-up time
    # in the record; None: when train_and_log was called.
    started_at: float | None = None
    # Compiled programs to reuse and keep, for a caller that trains this
    # plan again in this process (harness.run.programs); None: compile all.
    programs: Programs | None = None
    # Seconds between MLflow's system-metrics samples on the parent run
    # (harness.record.system_metrics); None: none.
    system_metrics: float | None = None
    # Trace one steady-state chunk with JAX's profiler into the run
    # directory's profile/ and log it as the parent run's artifacts.
    profile: bool = False
    # At most this many points per per-iteration curve in MLflow, each a
    # window's mean with its min and max (harness.record.windows); 0: every
    # iteration.
    metric_points: int = windows.DEFAULT_POINTS
    # Records of faithful runs of the spec (label, results; harness.judge.references.faithful_records):
    # the seeds a claim whose level is the reference's learns that level from.
    faithful: Sequence[tuple[str, Results]] = ()


def system_metrics(uri: str, run_id: str, options: RunOptions, *, resume: bool) -> SystemMetrics:
    """MLflow's system-metrics monitor on `run_id` as `options` ask (saying
    once what it cannot record on this platform)."""
    if options.system_metrics is not None and (note := cannot_measure(jax.default_backend())):
        err_console.print(note, soft_wrap=True)
    return SystemMetrics(uri, run_id, options.system_metrics, resume=resume, node_id=cluster.node_id())
