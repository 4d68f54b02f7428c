"""`harness validate`: check a spec and print it resolved, with its hash;
`--errors` and `--freeze`. Its arguments (`arguments`, added to the parser
the command table makes for it) and its handler (`handle`)."""

from __future__ import annotations

import argparse
import sys

from harness import experiment_spec as spec
from harness.cli.arguments import seed_batches_options, sweep_options
from harness.cli.options import load_plan, load_sweep, seed_batches
from harness.judge import claims_table
from harness.sessions import errors_report, freeze
from harness.sessions import sweep as sweep_session


def arguments(p: argparse.ArgumentParser) -> None:
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


def handle(args: argparse.Namespace) -> int:
    sweep = load_sweep(args)
    if sweep is not None:
        sys.stdout.write(spec.to_yaml(sweep.spec))
        sys.stdout.write(f"# spec_hash: {spec.spec_hash(sweep.spec)}\n")
        sys.stdout.write("\n".join(sweep_session.describe(sweep)) + "\n")
        return 0
    plan = load_plan(args.spec)
    if args.freeze:
        freeze.command(plan.spec, args.spec)
        return 0
    if args.errors:
        errors_report.command(plan.spec, args.spec, *seed_batches(args, plan.spec), args.errors_out)
        return 0
    sys.stdout.write(spec.to_yaml(plan.spec))
    sys.stdout.write(f"# spec_hash: {plan.spec_hash}\n")
    sys.stdout.write(claims_table.validate_lines(plan.spec.claims))
    sys.stdout.write(
        f"# {plan.num_iterations} iterations x {plan.env_steps_per_iteration} env steps"
        f" = {plan.env_steps} env steps per seed, {len(plan.spec.seeds)} seeds\n"
    )
    return 0
