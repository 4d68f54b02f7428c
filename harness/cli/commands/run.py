"""`harness run`: train a spec over all its seeds and log it to MLflow. Its
arguments (`arguments`, added to the parser the command table makes for it)
and its handler (`handle`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness import exit_codes
from harness import experiment_spec as spec
from harness.cli.arguments import store_options, training_options
from harness.cli.commands import sweep
from harness.cli.exits import EXIT_INCOMPLETE, user_error
from harness.cli.options import load_plan, run_options
from harness.console import out_console
from harness.judge import references
from harness.record import tracking
from harness.sessions import results
from harness.sessions import run as run_session
from harness.stats import verdict


def arguments(p: argparse.ArgumentParser) -> None:
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


def handle(args: argparse.Namespace) -> int:
    if spec.load(args.spec).sweep is not None:
        return sweep.handle(args)
    plan = load_plan(args.spec, args)
    if args.results_out and Path(args.results_out).is_dir():
        return user_error(f"--results-out {args.results_out}: is a folder; harness run writes one results.json file")
    uri = tracking.resolve_uri(args.tracking_uri, plan.spec.tracking.uri)
    faithful = references.faithful_of(args.spec, plan.spec)
    options = run_options(args, resume=args.resume or False, faithful=faithful)
    logged = run_session.train_and_log(plan, uri, options)
    if logged is None:  # not process 0 of a multi-process job: it logs
        return 0
    results.print_summary(plan, logged.record, logged.uri, logged.experiment_id, logged.parent_id)
    run_session.print_claims(logged.record)
    if args.results_out:
        Path(args.results_out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.results_out).write_text(logged.record.to_json())
        out_console.print(f"results written to {args.results_out}")
    return exit_codes.of_verdict(verdict.of_claims(logged.record.claims)) or (EXIT_INCOMPLETE if logged.offline else 0)
