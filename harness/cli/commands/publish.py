"""`harness publish`: keep a finished run as its spec's reference in results/.
Its arguments (`arguments`, added to the parser the command table makes for
it) and its handler (`handle`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.arguments import store_options
from harness.cli.options import load_plan
from harness.console import out_console
from harness.judge import publish, references
from harness.record import tracking


def arguments(p: argparse.ArgumentParser) -> None:
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


def handle(args: argparse.Namespace) -> int:
    """Copy results.json of a finished run of SPEC into results/."""
    plan = load_plan(args.spec)
    uri = tracking.resolve_uri(args.tracking_uri, plan.spec.tracking.uri)
    record = publish.publishable(plan, uri, args.run_id, args.random_baseline)
    if args.random_baseline:
        mean = record.baselines["random_policy"]["mean_return"]
        out_console.print("random policy: " + ("no episode ended" if mean is None else f"mean return {mean:.2f}"))
    out = (
        Path(args.out)
        if args.out
        else references.publish_path(references.reference_path(args.spec), record.fingerprint)
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(record.to_json())
    every = publish.copy_iterations(uri, record.mlflow_run_id, out)
    out_console.print(
        f"published run {record.mlflow_run_id} to {out} (device class {references.device_class(record.fingerprint)})"
        + (f", every iteration to {every}" if every else "")
    )
    return 0
