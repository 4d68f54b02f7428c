"""The command line's parser: every command's arguments (the commands
themselves are in harness.cli)."""

from __future__ import annotations

import argparse

from harness import sweep as sweeps
from harness.judge import references
from harness.record import system_metrics, windows
from harness.run import compile_cache, scaling

DESCRIPTION = (
    "Train, benchmark and reproduce reinforcement-learning specs: runs logged to MLflow, "
    "verdicts against the published references. `harness COMMAND -h` for each command."
)


def _add_store_options(p: argparse.ArgumentParser, *, checkpoints: bool = False, progress: bool = False) -> None:
    p.add_argument("--tracking-uri", help="MLflow tracking URI (default: MLFLOW_TRACKING_URI, or sqlite:///mlflow.db)")
    if checkpoints:
        p.add_argument(
            "--checkpoint-dir",
            help="where run directories (checkpoints, metric journal) go (default: checkpoints/ beside the store)",
        )
    if progress:
        p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _add_system_metrics_options(p: argparse.ArgumentParser) -> None:
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


def _add_device_options(p: argparse.ArgumentParser) -> None:
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


def _add_sweep_options(p: argparse.ArgumentParser, *, described: bool = True) -> None:
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


def _add_training_options(p: argparse.ArgumentParser) -> None:
    """Where and how a training command runs: devices, the compilation
    cache, system metrics, and how its per-iteration metrics reach MLflow."""
    _add_device_options(p)
    compile_cache.add_arguments(p)
    _add_system_metrics_options(p)
    p.add_argument(
        "--live-metrics",
        action="store_true",
        help="stream per-iteration metrics to MLflow during training even on a CPU backend "
        "(default there: written when training ends, so the store does not slow training)",
    )
    _add_metric_points(p)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="harness", description=DESCRIPTION)
    sub = p.add_subparsers(dest="command", required=True)
    for command in (_validate, _run, _sweep, _sync, _publish, _reproduce, _compare, _scale, _drift):
        command(sub)
    return p


def _validate(sub) -> None:
    """`harness validate`."""
    v = sub.add_parser("validate", help="check a spec and print it resolved, with its hash (and a sweep's points)")
    v.add_argument("spec")
    _add_sweep_options(v, described=False)
    v.add_argument(
        "--errors",
        action="store_true",
        help="simulate reproductions from the spec's faithful seeds (reference and unseen runs) and print each "
        "claim's measured false-failure rate and power against its stated alpha and power",
    )
    v.add_argument("--errors-out", metavar="PATH", help="with --errors, also write the measured errors as JSON")
    v.add_argument(
        "--freeze",
        action="store_true",
        help="freeze the spec's claims (results/frozen/<spec>.json): the faithful seeds now designed them, and "
        "every faithful seed recorded after confirms them (--errors measures the confirming seeds alone)",
    )
    _add_seed_batches(v)


def _add_seed_batches(p: argparse.ArgumentParser) -> None:
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


def _run(sub) -> None:
    """`harness run`."""
    r = sub.add_parser("run", help="train a spec over all its seeds and log it to MLflow")
    r.add_argument("spec")
    _add_store_options(r, checkpoints=True, progress=True)
    r.add_argument("--results-out", help="also write results.json to this path")
    r.add_argument(
        "--parent-run",
        metavar="RUN_ID",
        help="log this run under the MLflow run RUN_ID, in its experiment (as harness drift groups its runs)",
    )
    r.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        metavar="SEED",
        help="train these seeds instead of the spec's (e.g. seeds a reference did not use, to check its claims"
        " on them); the run's spec then has another hash",
    )
    r.add_argument(
        "--profile",
        action="store_true",
        help="trace one steady-state chunk with JAX's profiler into the run directory and log it to MLflow",
    )
    _add_training_options(r)
    r.add_argument(
        "--resume",
        nargs="?",
        const=True,
        metavar="RUN_ID",
        help="continue the newest unfinished run of this spec (or run RUN_ID) from its latest good checkpoint,"
        " in the same MLflow runs",
    )
    r.set_defaults(metric=None)


def _sweep(sub) -> None:
    """`harness sweep`."""
    sw = sub.add_parser(
        "sweep",
        help="train a grid or random draws of hyperparameters, numeric ones in one program, and rank them",
        description="Train every point of the spec's sweep: section (and --set): a grid of its lists, or "
        "--samples N random draws from its lists and ranges. Points that differ only in numbers (learning rate, "
        "discount, loss coefficients, ...) train in one program, vmapped with the seeds; the others one program "
        "per structure, in turn. MLflow gets a sweep run, a run per point (its own spec and hash) and a run per "
        "seed under each; the sweep run gets the summary (summary.md, summary.json, sweep.png).",
    )
    sw.add_argument("spec")
    _add_sweep_options(sw)
    sw.add_argument("--metric", help="the final metric to rank points by (default: eval_return or episode_return)")
    _add_store_options(sw, checkpoints=True, progress=True)
    _add_training_options(sw)
    sw.add_argument(
        "--resume", nargs="?", const=True, metavar="RUN_ID", help="continue the newest unfinished sweep of this spec"
    )


def _sync(sub) -> None:
    """`harness sync`."""
    sy = sub.add_parser(
        "sync",
        help="upload the metrics and end-of-run records that an unreachable MLflow store did not get",
        description="Upload, from run directories, the journaled metrics past what reached the store and the "
        "end-of-run calls (summary metrics, artifacts, tags, statuses) it refused. Without RUN_IDs: every run "
        "directory under the checkpoint root that has something to upload. --tracking-uri uploads to another "
        "store than the one each run was logged to.",
    )
    sy.add_argument("run_ids", nargs="*", metavar="RUN_ID")
    _add_store_options(sy, checkpoints=True)


def _publish(sub) -> None:
    """`harness publish`."""
    pub = sub.add_parser("publish", help="write results/<spec>.json from a finished MLflow run of the spec")
    pub.add_argument("spec")
    pub.add_argument("--run-id", help="the parent run to publish (default: the latest finished run of the spec)")
    _add_store_options(pub)
    pub.add_argument(
        "--out",
        help="where to write (default: results/<spec file stem>.json, or results/<stem>@<device class>.json when that holds another device class's reference)",
    )
    pub.add_argument(
        "--random-baseline",
        action="store_true",
        help="also record the return of a uniformly random policy on the spec's env and seeds",
    )


def _reproduce(sub) -> None:
    """`harness reproduce`."""
    rep = sub.add_parser(
        "reproduce",
        help="run a published spec (or a logged run's spec) again and judge it against its reference",
        description="Run SPEC again and judge it against its reference results/<spec>.json, or re-run the spec "
        "logged with --run-id and judge it against that run. Exact (bit-identical curves) when device "
        "fingerprint, numerics versions and seeds match the reference; statistical otherwise: the spec's "
        "claims' tests (PASS, FAIL or INCONCLUSIVE, at the alpha, power and delta the spec states) gate it, "
        "each metric's IQM interval shown beside the reference's. Each claim's test is judged either way. Speed is reported, never "
        "judged. Exit code 0 when every gating metric and claim passes, 1 when one fails, 4 when undecided "
        "(a claim INCONCLUSIVE, or a statistical verdict with one seed on a side).",
    )
    rep.add_argument("spec", nargs="?", help="a spec file with a reference in results/")
    rep.add_argument("--run-id", help="re-run the spec logged with this MLflow run and judge against it")
    rep.add_argument(
        "--reference",
        help="the reference results JSON (default: the one in results/ of this device class, else the closest)",
    )
    rep.add_argument("--seeds", type=int, nargs="+", metavar="SEED", help="run these seeds instead of the spec's")
    rep.add_argument(
        "--adaptive",
        action="store_true",
        help="run fresh seeds (never the faithful records'), a batch at a time, until every claim's test "
        "decides (PASS or FAIL) or --max-seeds is reached (INCONCLUSIVE)",
    )
    _add_seed_batches(rep)
    rep.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="judge the spec changed at KEY (dotted, repeatable) against the original's reference: does the "
        "change still reproduce the published result? The verdict names every difference",
    )
    rep.add_argument(
        "--results-out",
        metavar="DIR",
        help="with --adaptive, write each batch's results.json to DIR as <spec>@seeds-FIRST-LAST.json (as nox -s "
        "unseen keeps them in results/unseen/, where they join the faithful seeds)",
    )
    _add_store_options(rep, progress=True)
    _add_training_options(rep)


def _compare(sub) -> None:
    """`harness compare`."""
    cmp = sub.add_parser(
        "compare",
        help="a table and a curve plot across finished runs, logged to MLflow",
        description="Compare finished runs (all of an experiment's, or the given run ids): a table of device, "
        "versions, env steps/s, compile seconds, peak memory and final metrics (IQM, 95% CI) and a PNG of the loss and "
        "return curves (mean over seeds, shaded 95% CI). The comparison is logged as a run named 'compare' in "
        "the experiment of the first run (tag harness.kind=compare); the compared runs are not changed.",
    )
    cmp.add_argument("run_ids", nargs="*", metavar="RUN_ID", help="parent runs to compare")
    cmp.add_argument("--experiment", help="compare every finished run of this MLflow experiment")
    _add_store_options(cmp)
    cmp.add_argument(
        "--allow-different-specs", action="store_true", help="compare runs whose spec hashes differ (lists the keys)"
    )
    cmp.add_argument("--out", default="compare.png", help="where to write the plot (default: compare.png)")


def _scale(sub) -> None:
    """`harness scale`."""
    sc = sub.add_parser(
        "scale",
        help="throughput against batch size: where a device saturates for a spec",
        description="Train the spec at a ladder of sizes (powers of two) of one number, each seed's envs or the "
        "seeds side by side, and measure at each: steady-state env steps/s, the share of the device's matmul "
        "ceiling, compile seconds and the memory the compiled program needs. Stops at the first size the spec "
        "refuses or that does not compile or run, once the throughput has stopped growing (by default), or before "
        "a size that would pass --max-seconds. Prints the saturation point ("
        f"{scaling.SATURATION}) and draws throughput and % of the ceiling against size. Logged to MLflow: a "
        "parent run (tag harness.kind=scale) with the plot, and a child run per size.",
    )
    sc.add_argument("spec")
    sc.add_argument("--axis", choices=["envs", "seeds"], default="envs", help="what grows (default: envs)")
    sc.add_argument("--sizes", help="comma-separated sizes (default: powers of two from --start to --stop)")
    sc.add_argument("--start", type=int, help="smallest size (default: 16 envs, 1 seed)")
    sc.add_argument(
        "--stop",
        type=int,
        help="largest size (default: 4096 envs, 256 seeds; without --stop or --sizes the ladder ends once the"
        " throughput has stopped growing: two sizes in a row below the best so far)",
    )
    sc.add_argument(
        "--chunk-iterations",
        type=int,
        help="iterations per timed chunk (default: chunks of about 2 s at the last size's rate, at most the"
        " spec's logging interval)",
    )
    sc.add_argument(
        "--max-seconds",
        type=float,
        help="bound the whole command: no size is started that would end after this many seconds",
    )
    sc.add_argument(
        "--timed-chunks",
        type=int,
        default=scaling.TIMED_CHUNKS,
        help=f"timed chunks after the warm-up (default {scaling.TIMED_CHUNKS})",
    )
    sc.add_argument("--no-ceiling", action="store_true", help="skip measuring the device's matmul ceiling")
    sc.add_argument(
        "--out", default="scale.png", help="where to write the plot (default: scale.png; its table beside it, .json)"
    )
    _add_store_options(sc)


def _drift(sub) -> None:
    """`harness drift`."""
    dr = sub.add_parser(
        "drift",
        help="what another set of package versions (a JAX upgrade) changes: bits, verdict, speed, compile, memory",
        description="Train each spec in two Python environments on this machine (e.g. two JAX versions, each "
        "installed with its constraints file), one process per run, in rounds that alternate the order, and "
        "report for each spec: bits identical or not, the newer side's statistical verdict against the older's "
        "run, and the newer-over-older ratios of steady-state env steps/s, compile seconds and peak memory. "
        "Runs use --deterministic and no compilation cache. Written to --out (JSON, and Markdown beside it) and "
        "logged to MLflow (experiment 'drift'). Exit 1 when a verdict fails.",
    )
    dr.add_argument(
        "specs", nargs="*", metavar="SPEC", help=f"spec files (default: every spec in {references.PUBLISHED}/)"
    )
    dr.add_argument(
        "--bench",
        action="store_true",
        help="also the bench's spec entries (benchmarks/specs/*.yaml), after the specs",
    )
    dr.add_argument("--older", required=True, metavar="PYTHON", help="the older environment's Python")
    dr.add_argument("--newer", required=True, metavar="PYTHON", help="the newer environment's Python")
    dr.add_argument("--rounds", type=int, default=2, help="runs of each spec on each side (default 2)")
    dr.add_argument(
        "--iterations",
        type=int,
        help="cut each spec to this many iterations (its claims dropped): speed, compile and bits in minutes",
    )
    dr.add_argument(
        "--max-seconds",
        type=float,
        help="stop a run that takes longer (as Ctrl-C would) and report the spec as not finished on that side",
    )
    dr.add_argument("--out", default="drift.json", help="where the report goes (default: drift.json; .md beside)")
    _add_store_options(dr)


def _add_metric_points(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metric-points",
        type=int,
        default=windows.DEFAULT_POINTS,
        metavar="N",
        help="at most N points per per-iteration curve in MLflow, each a window's mean with its min and max"
        f" (window_min/, window_max/); 0: every iteration (default {windows.DEFAULT_POINTS}, what MLflow's UI"
        " draws; results and verdicts use every iteration either way)",
    )
