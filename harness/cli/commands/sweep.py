"""`harness sweep`: train a sweep's points, numeric ones in one program, and
rank them. Its arguments (`arguments`, added to the parser the command table
makes for it) and its handler (`handle`)."""

from __future__ import annotations

import argparse

from harness.cli.arguments import store_options, sweep_options, training_options
from harness.cli.exits import EXIT_INCOMPLETE, user_error
from harness.cli.options import load_sweep, run_options
from harness.record import tracking
from harness.sessions import sweep as sweep_session


def arguments(p: argparse.ArgumentParser) -> None:
    """`harness sweep`."""
    p.add_argument("spec")
    sweep_options(p)
    p.add_argument("--metric", help="the final metric to rank points by (default: eval_return or episode_return)")
    store_options(p, checkpoints=True, progress=True)
    training_options(p)
    p.add_argument(
        "--resume", nargs="?", const=True, metavar="RUN_ID", help="continue the newest unfinished sweep of this spec"
    )


def handle(args: argparse.Namespace) -> int:
    """Train every point of a sweep (harness.sweep), program by program."""
    sweep = load_sweep(args)
    if sweep is None:
        return user_error(f"{args.spec}: no sweep: add a sweep: section or --set KEY=V1,V2")
    if getattr(args, "profile", False):
        return user_error(
            f"{args.spec}: --profile traces a run of one spec; this one is a sweep (trace a point's spec)"
        )
    if args.metric is not None:
        sweep_session.check_metric(sweep, args.metric, args.spec)
    uri = tracking.resolve_uri(args.tracking_uri, sweep.spec.tracking.uri)
    logged = sweep_session.run_sweep(sweep, uri, run_options(args, resume=args.resume or False), metric=args.metric)
    return EXIT_INCOMPLETE if logged.offline else 0
