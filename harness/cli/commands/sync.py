"""`harness sync`: upload what run directories hold that their MLflow runs do
not. Its arguments (`arguments`, added to the parser the command table makes
for it) and its handler (`handle`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.arguments import store_options
from harness.console import out_console
from harness.record import rundir, sync, tracking


def arguments(p: argparse.ArgumentParser) -> None:
    """`harness sync`."""
    p.add_argument("run_ids", nargs="*", metavar="RUN_ID")
    store_options(p, checkpoints=True)


def handle(args: argparse.Namespace) -> int:
    """Upload what run directories hold that their MLflow runs do not."""
    uri = tracking.resolve_uri(args.tracking_uri, None)
    root = Path(args.checkpoint_dir) if args.checkpoint_dir else rundir.default_root(uri)
    if args.run_ids:
        directories = [rundir.find_run(root, run_id, "") for run_id in args.run_ids]
    else:
        directories = [d for d in rundir.run_directories(root) if sync.needs_sync(d.path)]
        if not directories:
            out_console.print(f"nothing to sync under {root}")
            return 0
    for directory in directories:
        report = sync.sync_run(directory.path, args.tracking_uri)
        out_console.print(
            f"run {report.run_id}: {report.entries} journal entries and {report.calls} end-of-run calls"
            f" uploaded to {report.uri}"
        )
    return 0
