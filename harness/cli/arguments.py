"""Option groups several commands share (the store, devices, a sweep's
points, training, seed batches, metric points), each added to a parser
the same way wherever a command takes it."""

from __future__ import annotations

import argparse

from harness import sweep as sweeps
from harness.record import system_metrics, windows
from harness.run import compile_cache

DESCRIPTION = (
    "Train, benchmark and reproduce reinforcement-learning specs: runs logged to MLflow, "
    "verdicts against the published references. `harness COMMAND -h` for each command."
)


def store_options(p: argparse.ArgumentParser, *, checkpoints: bool = False, progress: bool = False) -> None:
    p.add_argument("--tracking-uri", help="MLflow tracking URI (default: MLFLOW_TRACKING_URI, or sqlite:///mlflow.db)")
    if checkpoints:
        p.add_argument(
            "--checkpoint-dir",
            help="where run directories (checkpoints, metric journal) go (default: checkpoints/ beside the store)",
        )
    if progress:
        p.add_argument("--no-progress", action="store_true", help="no progress bar")


def system_metrics_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-system-metrics",
        action="store_true",
        help="do not log MLflow's system metrics (CPU, memory, NVIDIA GPU utilisation, memory and power) on the run",
    )
    p.add_argument(
        "--system-metrics-interval",
        type=float,
        default=system_metrics.DEFAULT_INTERVAL,
        metavar="SECONDS",
        help=f"seconds between system-metrics samples (default {system_metrics.DEFAULT_INTERVAL:g})",
    )


def device_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("devices", "where the spec runs (instead of its devices: section; not in the spec hash)")
    g.add_argument("--devices", dest="count", metavar="N|all", help="how many devices (default: the spec's, 1)")
    g.add_argument("--seed-axis", type=int, help="devices along the seed axis (seeds split over them)")
    g.add_argument("--data-axis", type=int, help="devices along the data axis (each seed's env batch split)")
    g.add_argument(
        "--host-devices",
        dest="host_devices",
        metavar="N|cores",
        help="on a CPU: split the host into N devices (cores: one per core); seeds spread over them",
    )
    g.add_argument(
        "--deterministic",
        action="store_true",
        default=None,
        help="XLA's deterministic ops (set before JAX starts; GPU: run-to-run identical bits, at a cost)",
    )
    g.add_argument("--coordinator", metavar="HOST:PORT", help="join a multi-process job (process 0's address)")
    g.add_argument("--num-processes", type=int, help="processes in the job")
    g.add_argument("--process-id", type=int, help="this process's index in the job")
    g.add_argument(
        "--cluster", action="store_true", help="join a multi-process job found by JAX's cluster detection (SLURM, ...)"
    )


def sweep_options(p: argparse.ArgumentParser, *, described: bool = True) -> None:
    """The options that make a sweep's points (`described`: their whole
    help, else a pointer to harness sweep's)."""

    def h(text: str) -> str:
        return text if described else "as for harness sweep"

    p.add_argument(
        "--set", action="append", metavar="KEY=V1,V2,...", help=h("sweep KEY over these values (repeatable)")
    )
    p.add_argument("--samples", type=int, metavar="N", help=h("N random points instead of the grid"))
    p.add_argument("--sample-seed", type=int, default=0, help=h("seed of the random points (default 0)"))
    p.add_argument("--max-points", type=int, default=sweeps.MAX_POINTS, help=h("refuse more points than this (1024)"))
    p.add_argument(
        "--exact-points",
        action="store_true",
        help=h(
            "train each program's points one after another, each point's seeds batched as in its own run:"
            " every point's curves bit-identical to its spec's own run (one compile; no batching across points)"
        ),
    )


def training_options(p: argparse.ArgumentParser) -> None:
    """Where and how a training command runs: devices, the compilation
    cache, system metrics, and how its per-iteration metrics reach MLflow."""
    device_options(p)
    compile_cache.add_arguments(p)
    system_metrics_options(p)
    p.add_argument(
        "--live-metrics",
        action="store_true",
        help="stream per-iteration metrics to MLflow during training even on a CPU backend "
        "(default there: written when training ends, so the store does not slow training)",
    )
    metric_points_options(p)


def seed_batches_options(p: argparse.ArgumentParser) -> None:
    """How an adaptive reproduction adds seeds (and --errors simulates it)."""
    p.add_argument(
        "--batch",
        type=int,
        metavar="N",
        help="fresh seeds added at a time (default: the spec's reproduction.batch, else its seed count)",
    )
    p.add_argument(
        "--max-seeds",
        type=int,
        metavar="N",
        help="stop INCONCLUSIVE after this many seeds (default: the spec's reproduction.max_seeds, else 4 batches)",
    )


def metric_points_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metric-points",
        type=int,
        default=windows.DEFAULT_POINTS,
        metavar="N",
        help="at most N points per per-iteration curve in MLflow, each a window's mean with its min and max"
        f" (window_min/, window_max/); 0: every iteration (default {windows.DEFAULT_POINTS}, what MLflow's UI"
        " draws; results and verdicts use every iteration either way)",
    )
