"""System metrics on a run: MLflow's own monitor (CPU, memory, disk and
network through psutil; NVIDIA GPUs' utilisation, memory and power through
the NVIDIA management library, `pynvml`, when it is installed and finds a
GPU), logged as `system/...` metrics of the parent run every `interval`
seconds while it trains. No JAX here: the caller says which platform runs.
"""

from __future__ import annotations

import logging

DEFAULT_INTERVAL = 10.0  # seconds between samples (MLflow's default)


def _has_gpu_library() -> bool:
    try:
        import pynvml  # noqa: F401
    except ImportError:
        return False
    return True


def cannot_measure(platform: str) -> str | None:
    """What the monitor cannot record on `platform`, said once; None: all."""
    if platform == "gpu" and not _has_gpu_library():
        return "system metrics: no GPU figures (the NVIDIA management library, pip nvidia-ml-py, is not installed)"
    if platform == "tpu":
        return "system metrics: CPU, memory, disk and network only (MLflow's monitor does not read TPUs)"
    return None


class SystemMetrics:
    """MLflow's system-metrics monitor on `run_id` while the block runs;
    `interval` None: off. `resume`: continue the run's earlier steps.
    `node_id` (a process of a multi-process job) prefixes the metrics:
    `system/process_1/cpu_utilization_percentage`."""

    def __init__(
        self, uri: str, run_id: str, interval: float | None, *, resume: bool = False, node_id: str | None = None
    ):
        self.monitor = None
        if interval is None:
            return
        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

        # Its narration (started, GPU skipped, stopping) is not the harness's output.
        logging.getLogger("mlflow.system_metrics").setLevel(logging.WARNING)
        self.monitor = SystemMetricsMonitor(
            run_id, sampling_interval=interval, resume_logging=resume, node_id=node_id, tracking_uri=uri
        )

    def __enter__(self) -> SystemMetrics:
        if self.monitor is not None:
            self.monitor.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.monitor is not None:
            self.monitor.finish()
