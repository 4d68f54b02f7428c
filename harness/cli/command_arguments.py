"""Each command's own arguments, added to the parser the command table
(harness.cli.table) makes for it."""

from __future__ import annotations

import argparse

from harness.cli.arguments import (
    seed_batches_options,
    store_options,
    sweep_options,
    training_options,
)
from harness.judge import references
from harness.run import scaling


def validate(p: argparse.ArgumentParser) -> None:
    """`harness validate`."""
    p.add_argument("spec")
    sweep_options(p, described=False)
    p.add_argument(
        "--errors",
        action="store_true",
        help="simulate reproductions from the spec's faithful seeds (reference and unseen runs) and print each "
        "claim's measured false-failure rate and power against its stated alpha and power",
    )
    p.add_argument("--errors-out", metavar="PATH", help="with --errors, also write the measured errors as JSON")
    p.add_argument(
        "--freeze",
        action="store_true",
        help="freeze the spec's claims (results/frozen/<spec>.json): the faithful seeds now designed them, and "
        "every faithful seed recorded after confirms them (--errors measures the confirming seeds alone)",
    )
    seed_batches_options(p)


def run(p: argparse.ArgumentParser) -> None:
    """`harness run`."""
    p.add_argument("spec")
    store_options(p, checkpoints=True, progress=True)
    p.add_argument("--results-out", help="also write results.json to this path")
    p.add_argument(
        "--parent-run",
        metavar="RUN_ID",
        help="log this run under the MLflow run RUN_ID, in its experiment (as harness drift groups its runs)",
    )
    p.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        metavar="SEED",
        help="train these seeds instead of the spec's (e.g. seeds a reference did not use, to check its claims"
        " on them); the run's spec then has another hash",
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="trace one steady-state chunk with JAX's profiler into the run directory and log it to MLflow",
    )
    training_options(p)
    p.add_argument(
        "--resume",
        nargs="?",
        const=True,
        metavar="RUN_ID",
        help="continue the newest unfinished run of this spec (or run RUN_ID) from its latest good checkpoint,"
        " in the same MLflow runs",
    )
    p.set_defaults(metric=None)


def sweep(p: argparse.ArgumentParser) -> None:
    """`harness sweep`."""
    p.add_argument("spec")
    sweep_options(p)
    p.add_argument("--metric", help="the final metric to rank points by (default: eval_return or episode_return)")
    store_options(p, checkpoints=True, progress=True)
    training_options(p)
    p.add_argument(
        "--resume", nargs="?", const=True, metavar="RUN_ID", help="continue the newest unfinished sweep of this spec"
    )


def sync(p: argparse.ArgumentParser) -> None:
    """`harness sync`."""
    p.add_argument("run_ids", nargs="*", metavar="RUN_ID")
    store_options(p, checkpoints=True)


def ladder(p: argparse.ArgumentParser) -> None:
    """`harness ladder`."""
    p.add_argument("spec", help="a spec whose strength.anchors names the anchors")
    p.add_argument(
        "--games", type=int, default=256, help="games each pair of anchors plays, half with each colour (default 256)"
    )
    p.add_argument("--seed", type=int, default=0, help="the tournament's key (default 0)")
    p.add_argument("--out", help="where to write (default: results/ladders/<suite>-<id>.json beside the references)")


def publish(p: argparse.ArgumentParser) -> None:
    """`harness publish`."""
    p.add_argument("spec")
    p.add_argument("--run-id", help="the parent run to publish (default: the latest finished run of the spec)")
    store_options(p)
    p.add_argument(
        "--out",
        help="where to write (default: results/<spec file stem>.json, or results/<stem>@<device class>.json when that holds another device class's reference)",
    )
    p.add_argument(
        "--random-baseline",
        action="store_true",
        help="also record the return of a uniformly random policy on the spec's env and seeds",
    )


def reproduce(p: argparse.ArgumentParser) -> None:
    """`harness reproduce`."""
    p.add_argument("spec", nargs="?", help="a spec file with a reference in results/")
    p.add_argument("--run-id", help="re-run the spec logged with this MLflow run and judge against it")
    p.add_argument(
        "--reference",
        help="the reference results JSON (default: the one in results/ of this device class, else the closest)",
    )
    p.add_argument("--seeds", type=int, nargs="+", metavar="SEED", help="run these seeds instead of the spec's")
    p.add_argument(
        "--adaptive",
        action="store_true",
        help="run fresh seeds (never the faithful records'), a batch at a time, until every claim's test "
        "decides (PASS or FAIL) or --max-seeds is reached (INCONCLUSIVE)",
    )
    seed_batches_options(p)
    p.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="judge the spec changed at KEY (dotted, repeatable) against the original's reference: does the "
        "change still reproduce the published result? The verdict names every difference",
    )
    p.add_argument(
        "--results-out",
        metavar="DIR",
        help="with --adaptive, write each batch's results.json to DIR as <spec>@seeds-FIRST-LAST.json (as nox -s "
        "unseen keeps them in results/unseen/, where they join the faithful seeds)",
    )
    store_options(p, progress=True)
    training_options(p)


def compare(p: argparse.ArgumentParser) -> None:
    """`harness compare`."""
    p.add_argument("run_ids", nargs="*", metavar="RUN_ID", help="parent runs to compare")
    p.add_argument("--experiment", help="compare every finished run of this MLflow experiment")
    store_options(p)
    p.add_argument(
        "--allow-different-specs", action="store_true", help="compare runs whose spec hashes differ (lists the keys)"
    )
    p.add_argument("--out", default="compare.png", help="where to write the plot (default: compare.png)")


def scale(p: argparse.ArgumentParser) -> None:
    """`harness scale`."""
    p.add_argument("spec")
    p.add_argument("--axis", choices=["envs", "seeds"], default="envs", help="what grows (default: envs)")
    p.add_argument("--sizes", help="comma-separated sizes (default: powers of two from --start to --stop)")
    p.add_argument("--start", type=int, help="smallest size (default: 16 envs, 1 seed)")
    p.add_argument(
        "--stop",
        type=int,
        help="largest size (default: 4096 envs, 256 seeds; without --stop or --sizes the ladder ends once the"
        " throughput has stopped growing: two sizes in a row below the best so far)",
    )
    p.add_argument(
        "--chunk-iterations",
        type=int,
        help="iterations per timed chunk (default: chunks of about 2 s at the last size's rate, at most the"
        " spec's logging interval)",
    )
    p.add_argument(
        "--max-seconds",
        type=float,
        help="bound the whole command: no size is started that would end after this many seconds",
    )
    p.add_argument(
        "--timed-chunks",
        type=int,
        default=scaling.TIMED_CHUNKS,
        help=f"timed chunks after the warm-up (default {scaling.TIMED_CHUNKS})",
    )
    p.add_argument("--no-ceiling", action="store_true", help="skip measuring the device's matmul ceiling")
    p.add_argument(
        "--out", default="scale.png", help="where to write the plot (default: scale.png; its table beside it, .json)"
    )
    store_options(p)


def drift(p: argparse.ArgumentParser) -> None:
    """`harness drift`."""
    p.add_argument(
        "specs", nargs="*", metavar="SPEC", help=f"spec files (default: every spec in {references.PUBLISHED}/)"
    )
    p.add_argument(
        "--bench",
        action="store_true",
        help="also the bench's spec entries (benchmarks/specs/*.yaml), after the specs",
    )
    p.add_argument("--older", required=True, metavar="PYTHON", help="the older environment's Python")
    p.add_argument("--newer", required=True, metavar="PYTHON", help="the newer environment's Python")
    p.add_argument(
        "--rounds",
        type=int,
        default=12,
        help="runs of each spec on each side at most: they stop once the speed tests decide (default 12, at least 2)",
    )
    p.add_argument(
        "--slower-by",
        type=float,
        default=0.10,
        metavar="X",
        help="the slowdown (growth, for compile time and memory) the speed tests ask about, a share (default 0.1)",
    )
    p.add_argument(
        "--iterations",
        type=int,
        help="cut each spec to this many iterations (its claims dropped): speed, compile and bits in minutes",
    )
    p.add_argument(
        "--max-seconds",
        type=float,
        help="stop a run that takes longer (as Ctrl-C would) and report the spec as not finished on that side",
    )
    p.add_argument("--out", default="drift.json", help="where the report goes (default: drift.json; .md beside)")
    store_options(p)
