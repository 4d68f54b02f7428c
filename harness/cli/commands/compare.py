"""`harness compare`: finished runs side by side, a table and a plot. Its
arguments (`arguments`, added to the parser the command table makes for it)
and its handler (`handle`)."""

from __future__ import annotations

import argparse

from harness.cli.arguments import store_options
from harness.cli.exits import user_error
from harness.cli.options import plot_path
from harness.console import err_console, out_console, print_table
from harness.judge import claims_table, compare, compare_report
from harness.record import tracking


def arguments(p: argparse.ArgumentParser) -> None:
    """`harness compare`."""
    p.add_argument("run_ids", nargs="*", metavar="RUN_ID", help="parent runs to compare")
    p.add_argument("--experiment", help="compare every finished run of this MLflow experiment")
    store_options(p)
    p.add_argument(
        "--allow-different-specs", action="store_true", help="compare runs whose spec hashes differ (lists the keys)"
    )
    p.add_argument("--out", default="compare.png", help="where to write the plot (default: compare.png)")


def handle(args: argparse.Namespace) -> int:
    """A table and a plot across finished runs (see harness.judge.compare)."""
    if bool(args.experiment) == bool(args.run_ids):
        return user_error("give either --experiment NAME or run ids")
    out = plot_path(args.out)
    uri = tracking.resolve_uri(args.tracking_uri, None)
    client = tracking.open_client(uri)
    runs, notes = compare.fetch(client, uri, experiment=args.experiment, run_ids=args.run_ids)
    for note in notes:
        err_console.print(note)
    comparison = compare.compare(runs, allow_different_specs=args.allow_different_specs)
    if comparison.different_specs > 1:
        out_console.print(
            f"comparing runs of {comparison.different_specs} different specs; the keys that differ:\n"
            + compare.listed(comparison.spec_differences)
        )
    print_table(compare_report.table(comparison.summaries, f"compare: {comparison.title}"))
    if claim_rows := claims_table.rows_by_run(comparison.claims):
        print_table(claims_table.table(claim_rows, f"claims: {comparison.title}"))
    for key, values in comparison.provenance_differences.items():
        out_console.print(f"  differs: {key}: {' / '.join(values)}", soft_wrap=True)
    run_id = compare_report.record(client, uri, runs, comparison, out)
    out_console.print(f"plot written to {out}; comparison logged to MLflow run {run_id} ({uri})")
    return 0
