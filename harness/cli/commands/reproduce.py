"""`harness reproduce`: run a spec again and judge it against its reference
(plain and `--adaptive`). Its arguments (`arguments`, added to the parser
the command table makes for it) and its handler (`handle`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness import exit_codes
from harness.cli.arguments import seed_batches_options, store_options, training_options
from harness.cli.exits import EXIT_INCOMPLETE, user_error
from harness.cli.options import load_plan, plan_of, run_options, seed_batches
from harness.judge import references
from harness.record import tracking
from harness.run import cluster
from harness.sessions import reproduce


def arguments(p: argparse.ArgumentParser) -> None:
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


def handle(args: argparse.Namespace) -> int:
    """Run a spec again and judge it against its reference (see harness.sessions.reproduce)."""
    if (args.spec is None) == (args.run_id is None):
        return user_error("give either a SPEC file or --run-id RUN_ID")
    if args.adaptive or args.set:
        return _reproduce_adaptive(args)
    if args.run_id:
        if args.reference:
            return user_error("--reference goes with a SPEC; with --run-id the run itself is the reference")
        uri = tracking.resolve_uri(args.tracking_uri, None)
        reference = reproduce.of_logged_run(
            uri, args.run_id, lambda loaded, source, lines: plan_of(loaded, source, lines, args)
        )
    else:
        plan = load_plan(args.spec, args)
        uri = tracking.resolve_uri(args.tracking_uri, plan.spec.tracking.uri)
        reference = reproduce.of_spec(plan, args.spec, args.reference, uri)
    faithful = (
        references.faithful_of(args.spec, reference.plan.spec) if args.spec else [(reference.label, reference.record)]
    )
    reproduced = reproduce.run_and_judge(reference, run_options(args, faithful=faithful), args.seeds)
    if reproduced is None:  # not process 0 of a multi-process job: it judges
        return 0
    code = exit_codes.of_verdict(reproduced.verdict.outcome)
    return code or (EXIT_INCOMPLETE if reproduced.logged.offline else 0)


def _reproduce_adaptive(args: argparse.Namespace) -> int:
    """`harness reproduce SPEC --adaptive [--set KEY=VALUE ...]`."""
    if not args.adaptive:
        return user_error("--set judges a changed spec by its claims' tests on fresh seeds: add --adaptive")
    if args.run_id or args.seeds:
        return user_error("--adaptive runs fresh seeds of a SPEC file: leave out --run-id and --seeds")
    if cluster.joined:
        return user_error("--adaptive decides between batches in one process: run it without a multi-process job")
    if args.results_out and args.set:
        return user_error("--results-out keeps faithful runs of the spec; a run changed by --set is not one")
    if args.results_out and Path(args.results_out).exists() and not Path(args.results_out).is_dir():
        return user_error(
            f"--results-out {args.results_out}: is a file; an adaptive reproduction writes a results.json a batch"
            " into a folder (<spec>@seeds-<first>-<last>.json)"
        )
    plan = load_plan(args.spec, args)
    batch, cap = seed_batches(args, plan.spec)
    uri = tracking.resolve_uri(args.tracking_uri, plan.spec.tracking.uri)
    reference = reproduce.of_spec(plan, args.spec, args.reference, uri)
    options = run_options(args, faithful=references.faithful_of(args.spec, plan.spec))
    out = Path(args.results_out) if args.results_out else None
    return exit_codes.of_verdict(reproduce.run_adaptive(reference, options, batch, cap, args.set or [], out).verdict)
