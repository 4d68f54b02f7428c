"""The `harness` command: `cmd_<name>` for each command of the parser
(harness.cli_parser, which lists them and their options).

User errors (a bad spec, an unusable tracking store, a checkpoint that cannot
be resumed) print one message and exit 2 without a traceback; nothing is
logged to MLflow for a spec that does not validate. A run that fails (a NaN,
a crash) exits 1; Ctrl-C exits 130 and SIGTERM 143 at any moment, after a
final checkpoint, or after the records are written whole when training had
finished (harness.run.interrupts). A run that finished while its MLflow
store could not be reached exits 3: its record is in the run directory, for
`harness sync`.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import harness
from harness import spec
from harness.cli_options import OptionError, load_plan, load_sweep, plan_of, plot_path, run_options, seed_batches
from harness.cli_parser import parser
from harness.console import err_console, out_console, print_table
from harness.judge import claims_table, compare, publish, references, verdict
from harness.judge.compare import CompareError
from harness.judge.references import ReproduceError
from harness.record import rundir, sync, tracking
from harness.record.rundir import CheckpointError
from harness.record.tracking import TrackingError
from harness.run import cluster, compile_cache, determinism, host_devices, interrupts, scaling
from harness.run.cluster import DistributedError
from harness.run.interrupts import Interrupted
from harness.run.runner import NonFiniteMetricError
from harness.sessions import drift as drift_session
from harness.sessions import errors_report, freeze, reproduce, results
from harness.sessions import run as run_session
from harness.sessions import scale as scale_session
from harness.sessions import sweep as sweep_session
from harness.spec import SpecError

EXIT_USER_ERROR = 2
EXIT_FAILED = verdict.EXIT_FAILED
EXIT_INTERRUPTED = 130  # SIGINT; SIGTERM exits 143
EXIT_INCOMPLETE = 3  # trained to the end; the MLflow record waits for harness sync
EXIT_NOT_JUDGED = verdict.EXIT_NOT_JUDGED


def _user_error(message: str) -> int:
    err_console.print(f"[bold red]error:[/] {message}", soft_wrap=True)
    return EXIT_USER_ERROR


# ------------------------------------------------------------------ commands


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
        return _user_error(f"{args.spec}: no sweep: add a sweep: section or --set KEY=V1,V2")
    if getattr(args, "profile", False):
        return _user_error(
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
        return _user_error(f"--results-out {args.results_out}: is a folder; harness run writes one results.json file")
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
    return verdict.exit_code(verdict.of_claims(logged.record.claims)) or (EXIT_INCOMPLETE if logged.offline else 0)


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


def cmd_reproduce(args: argparse.Namespace) -> int:
    """Run a spec again and judge it against its reference (see harness.sessions.reproduce)."""
    if (args.spec is None) == (args.run_id is None):
        return _user_error("give either a SPEC file or --run-id RUN_ID")
    if args.adaptive or args.set:
        return _reproduce_adaptive(args)
    if args.run_id:
        if args.reference:
            return _user_error("--reference goes with a SPEC; with --run-id the run itself is the reference")
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
    code = verdict.exit_code(reproduced.verdict.outcome)
    return code or (EXIT_INCOMPLETE if reproduced.logged.offline else 0)


def _reproduce_adaptive(args: argparse.Namespace) -> int:
    """`harness reproduce SPEC --adaptive [--set KEY=VALUE ...]`."""
    if not args.adaptive:
        return _user_error("--set judges a changed spec by its claims' tests on fresh seeds: add --adaptive")
    if args.run_id or args.seeds:
        return _user_error("--adaptive runs fresh seeds of a SPEC file: leave out --run-id and --seeds")
    if cluster.joined:
        return _user_error("--adaptive decides between batches in one process: run it without a multi-process job")
    if args.results_out and args.set:
        return _user_error("--results-out keeps faithful runs of the spec; a run changed by --set is not one")
    if args.results_out and Path(args.results_out).exists() and not Path(args.results_out).is_dir():
        return _user_error(
            f"--results-out {args.results_out}: is a file; an adaptive reproduction writes a results.json a batch"
            " into a folder (<spec>@seeds-<first>-<last>.json)"
        )
    plan = load_plan(args.spec, args)
    batch, cap = seed_batches(args, plan.spec)
    uri = tracking.resolve_uri(args.tracking_uri, plan.spec.tracking.uri)
    reference = reproduce.of_spec(plan, args.spec, args.reference, uri)
    options = run_options(args, faithful=references.faithful_of(args.spec, plan.spec))
    out = Path(args.results_out) if args.results_out else None
    return verdict.exit_code(reproduce.run_adaptive(reference, options, batch, cap, args.set or [], out).verdict)


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


def cmd_compare(args: argparse.Namespace) -> int:
    """A table and a plot across finished runs (see harness.judge.compare)."""
    if bool(args.experiment) == bool(args.run_ids):
        return _user_error("give either --experiment NAME or run ids")
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
    print_table(compare.table(comparison.summaries, f"compare: {comparison.title}"))
    if claim_rows := claims_table.rows_by_run(comparison.claims):
        print_table(claims_table.table(claim_rows, f"claims: {comparison.title}"))
    for key, values in comparison.provenance_differences.items():
        out_console.print(f"  differs: {key}: {' / '.join(values)}", soft_wrap=True)
    run_id = compare.record(client, runs, comparison, out)
    out_console.print(f"plot written to {out}; comparison logged to MLflow run {run_id} ({uri})")
    return 0


def cmd_drift(args: argparse.Namespace) -> int:
    """Two environments' runs of the specs side by side (harness.sessions.drift)."""
    if args.rounds < 1 or (args.iterations is not None and args.iterations < 4):
        raise OptionError("--rounds must be at least 1 and --iterations at least 4 (a warm-up chunk and timed ones)")
    if args.max_seconds is not None and not args.max_seconds > 0:
        raise OptionError(f"--max-seconds must be positive, not {args.max_seconds}")
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
    )
    return drift_session.drift_command(options)


# ---------------------------------------------------------------------- main


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    (action,) = (a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


COMMANDS = {name: globals()[f"cmd_{name}"] for name in _subcommands()}  # the parser's commands, each a cmd_<name>

USER_ERRORS = (
    SpecError,
    TrackingError,
    ReproduceError,
    CompareError,
    CheckpointError,
    DistributedError,
    determinism.DeterminismError,
    host_devices.HostDevicesError,
    OptionError,
    drift_session.DriftError,
)


_commands_run = 0


def main(argv: Sequence[str] | None = None) -> int:
    global _commands_run
    args = parser().parse_args(argv)
    # The command's start: the harness's import for the first command of a
    # process (`harness run` imports it just before), else now.
    args.started_at = harness.STARTED if _commands_run == 0 else time.perf_counter()
    _commands_run += 1

    # SIGTERM (e.g. a scheduler's preemption) ends runs as Ctrl-C does; during
    # training the runner acts on either between chunks, with a final
    # checkpoint; once a program's training is over, its records are written
    # whole first (harness.run.interrupts).
    try:
        with interrupts.stop_signals():
            compile_cache.configure_from(args)
            if hasattr(args, "coordinator"):
                cluster.initialize(args.coordinator, args.num_processes, args.process_id, auto=args.cluster)
            code = COMMANDS[args.command](args)
            if signum := interrupts.noted():
                return _finished_anyway(signum, code)
            return code
    except USER_ERRORS as error:
        return _user_error(str(error))
    except NonFiniteMetricError as error:
        where = getattr(args, "spec", None) or f"run {getattr(args, 'run_id', '')}"
        err_console.print(f"[bold red]error:[/] {where}: {error}", soft_wrap=True)
        return EXIT_FAILED
    except KeyboardInterrupt as error:
        signum = error.signum if isinstance(error, Interrupted) else signal.SIGINT
        said = interrupts.said(signum, "before its work finished: MLflow runs it had started are marked KILLED")
        err_console.print(_highlighted(said), soft_wrap=True)
        if error.__cause__ is not None:  # another failure ended it after the signal came (interrupts.carrying)
            err_console.print(f"[bold red]error:[/] it also failed: {error.__cause__}", soft_wrap=True)
        return interrupts.exit_code(signum)
    finally:
        sys.stdout.flush()


def _finished_anyway(signum: int, code: int) -> int:
    """The exit of a command whose work finished after a stop signal came
    (during its last chunk, or while it wrote its records): 128 + the
    signal, so that `harness run A && harness run B` stops, and what it left."""
    state = {
        0: "its runs are complete and recorded",
        EXIT_INCOMPLETE: "its runs are complete; their record waits for harness sync",
    }.get(code, f"it would have exited {code}")
    err_console.print(_highlighted(interrupts.said(signum, f"after its work had finished: {state}")), soft_wrap=True)
    return interrupts.exit_code(signum)


def _highlighted(said: str) -> str:
    """An `interrupts.said` line with its first word in the warning colour."""
    return said.replace("interrupted", "[bold yellow]interrupted[/]", 1)


def console() -> None:
    """The `harness` command: `main()`, then the process ends at once.

    Python's own exit tears down every module and object JAX, XLA and MLflow
    made, about 1.3 s on the reference CPU after the last line was printed,
    with nothing left to write by then: the runs are ended, checkpoints and
    the compilation cache written, the metric writer gone. A process of a
    multi-process job exits normally, so that JAX leaves the job cleanly."""
    code = main()
    if cluster.joined:
        sys.exit(code)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    console()
