"""`harness scale`: a spec's throughput over a ladder of sizes. Its arguments
(`arguments`, added to the parser the command table makes for it) and its
handler (`handle`)."""

from __future__ import annotations

import argparse

from harness import experiment_spec as spec
from harness.cli.arguments import store_options
from harness.cli.options import OptionError, plot_path
from harness.record import tracking
from harness.run import scaling
from harness.sessions import scale as scale_session


def arguments(p: argparse.ArgumentParser) -> None:
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


def handle(args: argparse.Namespace) -> int:
    defaults = {"envs": (16, 4096), "seeds": (1, 256)}[args.axis]
    if args.sizes:
        try:
            sizes = [int(s) for s in args.sizes.split(",")]
        except ValueError:
            raise OptionError(f"--sizes {args.sizes}: comma-separated whole numbers") from None
    else:
        sizes = scaling.ladder(args.start or defaults[0], args.stop or defaults[1])
    if not sizes or min(sizes) < 1 or args.timed_chunks < 1 or (args.chunk_iterations or 1) < 1:
        raise OptionError("--sizes, --start/--stop, --timed-chunks and --chunk-iterations must be at least 1")
    if args.max_seconds is not None and not args.max_seconds > 0:
        raise OptionError(f"--max-seconds must be positive, not {args.max_seconds}")
    loaded = spec.load(args.spec)
    uri = tracking.resolve_uri(args.tracking_uri, loaded.tracking.uri)
    options = scale_session.ScaleOptions(
        axis=args.axis,
        sizes=sizes,
        chunk_iterations=args.chunk_iterations,
        timed_chunks=args.timed_chunks,
        uri=uri,
        out=plot_path(args.out),
        measure_ceiling=not args.no_ceiling,
        until_flat=not (args.sizes or args.stop),
        max_seconds=args.max_seconds,
    )
    return scale_session.scale(args.spec, options)
