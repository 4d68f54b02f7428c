"""`harness drift`: what another set of package versions changes in a spec's
runs. Its arguments (`arguments`, added to the parser the command table
makes for it) and its handler (`handle`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness import experiment_spec as spec
from harness.cli.arguments import store_options
from harness.cli.options import OptionError
from harness.judge import references
from harness.record import tracking
from harness.sessions import drift as drift_session


def arguments(p: argparse.ArgumentParser) -> None:
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


def handle(args: argparse.Namespace) -> int:
    """Two environments' runs of the specs side by side (harness.sessions.drift)."""
    if args.rounds < 1 or (args.iterations is not None and args.iterations < 4):
        raise OptionError("--rounds must be at least 1 and --iterations at least 4 (a warm-up chunk and timed ones)")
    if args.max_seconds is not None and not args.max_seconds > 0:
        raise OptionError(f"--max-seconds must be positive, not {args.max_seconds}")
    if not 0 < args.slower_by < 10:
        raise OptionError(f"--slower-by must be a share above 0 (0.1 is 10%), not {args.slower_by}")
    specs = [Path(p) for p in args.specs] or references.published_specs()
    if args.bench:
        specs += sorted(Path("benchmarks", "specs").glob("*.yaml"))
    if not specs:
        raise OptionError(f"no specs given, and no {references.PUBLISHED}/ folder here to take them from")
    for path in specs:
        spec.load(path)  # every spec checked before anything runs
    options = drift_session.DriftOptions(
        older=args.older,
        newer=args.newer,
        specs=specs,
        rounds=args.rounds,
        iterations=args.iterations,
        uri=tracking.resolve_uri(args.tracking_uri, None),
        out=Path(args.out),
        max_seconds=args.max_seconds,
        slower_by=args.slower_by,
    )
    return drift_session.drift_command(options)
