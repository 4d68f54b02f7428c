"""The commands that validate, train and record specs: `validate`, `run`,
`sweep`, `sync`, `publish` and `scale` (harness.cli.table lists them)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness import exit_codes, spec
from harness.cli.exits import EXIT_INCOMPLETE, user_error
from harness.cli.options import OptionError, load_plan, load_sweep, plot_path, run_options, seed_batches
from harness.console import out_console
from harness.judge import claims_table, publish, references
from harness.record import rundir, sync, tracking
from harness.run import scaling
from harness.sessions import errors_report, freeze, results
from harness.sessions import run as run_session
from harness.sessions import scale as scale_session
from harness.sessions import sweep as sweep_session
from harness.stats import verdict


def cmd_validate(args: argparse.Namespace) -> int:
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


def cmd_sweep(args: argparse.Namespace) -> int:
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


def cmd_run(args: argparse.Namespace) -> int:
    if spec.load(args.spec).sweep is not None:
        return cmd_sweep(args)
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


def cmd_sync(args: argparse.Namespace) -> int:
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


def cmd_publish(args: argparse.Namespace) -> int:
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


def cmd_scale(args: argparse.Namespace) -> int:
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
