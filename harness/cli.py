"""`harness run | validate | publish | reproduce | compare | sync`.

User errors (a bad spec, an unusable tracking store, a checkpoint that cannot
be resumed) print one message and exit 2 without a traceback; nothing is
logged to MLflow for a spec that does not validate. A run that fails (a NaN,
a crash) exits 1; Ctrl-C exits 130 and SIGTERM 143, after a final
checkpoint.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from rich.console import Console

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

EXIT_USER_ERROR = 2
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130  # SIGINT; SIGTERM exits 143

err_console = Console(stderr=True, highlight=False)
out_console = Console(highlight=False)


def _load_plan(path: str, args: argparse.Namespace | None = None):
    """Validate and build the spec at `path`, with the command line's
    device options (if `args` has them) in place of its `devices:` section."""
    from harness import build, spec

    loaded = _with_devices(spec.load(path), args)
    return build.build(loaded, str(path), spec.key_lines(Path(path).read_text()))


def _with_devices(loaded, args: argparse.Namespace | None):
    """The spec with --devices/--seed-axis/--data-axis applied (not part of the hash)."""
    given = {
        key: getattr(args, key, None)
        for key in ("count", "seed_axis", "data_axis")
        if getattr(args, key, None) is not None
    }
    if not given:
        return loaded
    if "count" in given and given["count"] != "all":
        try:
            given["count"] = int(given["count"])
        except ValueError:
            raise _SpecOptionError(f"--devices takes a number or all, not {given['count']!r}") from None
    from pydantic import ValidationError

    try:
        devices = loaded.devices.model_validate({**loaded.devices.model_dump(), **given})
    except ValidationError as error:
        problem = error.errors()[0]
        option = {"count": "--devices", "seed_axis": "--seed-axis", "data_axis": "--data-axis"}[str(problem["loc"][0])]
        raise _SpecOptionError(f"{option}: {problem['msg'].removeprefix('Value error, ')}") from None
    return loaded.model_copy(update={"devices": devices})


class _SpecOptionError(ValueError):
    """A bad command-line option (reported like a spec error)."""


def _add_device_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("devices", "where the spec runs (instead of its devices: section; not in the spec hash)")
    g.add_argument("--devices", dest="count", metavar="N|all", help="how many devices (default: the spec's, 1)")
    g.add_argument("--seed-axis", type=int, help="devices along the seed axis (seeds split over them)")
    g.add_argument("--data-axis", type=int, help="devices along the data axis (each seed's env batch split)")
    g.add_argument("--coordinator", metavar="HOST:PORT", help="join a multi-process job (process 0's address)")
    g.add_argument("--num-processes", type=int, help="processes in the job")
    g.add_argument("--process-id", type=int, help="this process's index in the job")
    g.add_argument(
        "--cluster", action="store_true", help="join a multi-process job found by JAX's cluster detection (SLURM, ...)"
    )


def _print_table(table) -> None:
    """Print a rich table; into a pipe or a file (where rich assumes 80
    columns) at its natural width rather than squeezed."""
    from rich.measure import Measurement

    if out_console.is_terminal:
        out_console.print(table)
        return
    width = Measurement.get(out_console, out_console.options.update_width(400), table).maximum
    Console(file=out_console.file, highlight=False, width=max(width, out_console.width)).print(table)


def _user_error(message: str) -> int:
    err_console.print(f"[bold red]error:[/] {message}", soft_wrap=True)
    return EXIT_USER_ERROR


# ------------------------------------------------------------------ validate


def cmd_validate(args: argparse.Namespace) -> int:
    from harness import spec

    plan = _load_plan(args.spec)
    sys.stdout.write(spec.to_yaml(plan.spec))
    sys.stdout.write(f"# spec_hash: {plan.spec_hash}\n")
    sys.stdout.write(
        f"# {plan.num_iterations} iterations x {plan.env_steps_per_iteration} env steps"
        f" = {plan.env_steps} env steps per seed, {len(plan.spec.seeds)} seeds\n"
    )
    return 0


# ----------------------------------------------------------------------- run


def _tags(plan, fingerprint: dict[str, str], versions: dict[str, str], git: dict[str, str]) -> dict[str, str]:
    import harness

    return {
        "spec_hash": plan.spec_hash,
        "spec_name": plan.spec.name,
        "algorithm": plan.spec.algorithm,
        "harness.version": harness.__version__,
        "git.commit": git["commit"],
        "git.dirty": git["dirty"],
        "mlflow.source.git.commit": git["commit"],
        **plan.env_info.as_tags(),
        **{f"version.{k}": v for k, v in versions.items()},
        **{f"device.{k}": v for k, v in fingerprint.items()},
    }


class Logged(NamedTuple):
    """A finished, logged training run."""

    record: dict  # its results.json
    parent_id: str  # the MLflow parent run
    uri: str
    client: MlflowClient


def train_and_log(
    plan,
    uri: str,
    *,
    progress: bool,
    live_metrics: bool,
    tags: dict[str, str] | None = None,
    checkpoint_dir: str | Path | None = None,
    resume: str | bool = False,
    on_chunk: Callable[[Any], None] | None = None,
) -> Logged | None:
    """Train every seed of `plan` and log it to MLflow at `uri`: a parent run
    (with `tags` added to the usual ones), a child run per seed, summary
    metrics and the spec.yaml and results.json artifacts. What `harness run`
    and `harness reproduce` both do.

    Every invocation has a run directory under `checkpoint_dir` (default:
    `checkpoints/` beside the store; harness.checkpoint) holding the metric
    journal and the spec's checkpoints. `resume` (True: the newest unfinished
    run of this spec; or a run id) continues that run's MLflow runs from its
    latest good checkpoint instead of starting new ones. `on_chunk` is called
    with each chunk's metrics after they are logged.

    In a multi-process job only process 0 logs and writes the run directory;
    the others train their shards, take part in every checkpoint (the state
    is gathered from all processes; process 0 writes it) and in a resume
    (process 0 reads the checkpoint and sends it to all), and return None."""

    from harness import checkpoint, devices, runner

    if not devices.is_main_process():
        follower = checkpoint.Follower(plan.spec.checkpoint.every)

        def follow(template):
            state, iteration = checkpoint.restore(template)
            follower.continue_after(iteration)
            return state, iteration, ()

        devices.wait_for_start()
        runner.run(
            plan.algorithm,
            plan.spec.seeds,
            plan.num_iterations,
            plan.spec.logging.interval,
            start=follow,
            checkpointer=follower,
            mesh=plan.mesh,
        )
        return None
    try:
        return _train_and_log_main(plan, uri, progress, live_metrics, tags, checkpoint_dir, resume, on_chunk)
    except BaseException as error:
        # The other processes of a job wait for process 0 to start training;
        # if it cannot, they stop too (with its message) instead of waiting.
        devices.announce_start(error=f"{type(error).__name__}: {error}")
        raise


def _train_and_log_main(plan, uri, progress, live_metrics, tags, checkpoint_dir, resume, on_chunk) -> Logged:
    """`train_and_log` in process 0 (or the only process)."""
    import jax

    from harness import checkpoint, devices, journal, provenance, results, runner, spec, tracking
    from harness.progress import ProgressBar

    multi_process = jax.process_count() > 1
    # On a CPU backend the store's work competes with training for the same
    # cores, so per-iteration metrics are written when training ends.
    live = live_metrics or jax.default_backend() != "cpu"
    root = Path(checkpoint_dir) if checkpoint_dir else checkpoint.default_root(uri)
    directory = None
    if resume:
        directory = checkpoint.find_run(root, resume if isinstance(resume, str) else None, plan.spec.name)
        _check_resumable(directory, plan, uri)
    # Before anything is compiled: an unusable store is reported at once.
    tracker = tracking.Tracking(uri, plan.spec.experiment_name, live_metrics=live)
    fingerprint = {**provenance.fingerprint(), **devices.fingerprint(plan.layout)}
    versions, git = provenance.versions(), provenance.git_state()
    seeds = plan.spec.seeds
    bar = ProgressBar(
        plan.spec.name,
        plan.num_iterations,
        plan.env_steps_per_iteration,
        len(seeds),
        console=err_console,
        enabled=progress,
    )
    logged_through = [0]

    def sink(chunk: runner.ChunkMetrics) -> None:
        # A resumed run recomputes the chunks after its checkpoint; those the
        # interrupted run logged already (bit-identical) are not logged twice.
        if chunk.last_iteration > logged_through[0]:
            tracker.log_chunk(chunk, plan.env_steps_per_iteration)
        bar.update(chunk)
        if on_chunk is not None:
            on_chunk(chunk)

    def compiled(seconds: float) -> None:
        bar.compiled(seconds)
        if not progress:
            err_console.print(
                f"{plan.spec.name}: compiled in {seconds:.1f} s, training {plan.num_iterations} iterations"
                f" x {len(seeds)} seeds"
            )

    started = time.perf_counter()
    status = "FAILED"
    ckpt = None
    try:
        with tracker:
            if directory is None:
                tracker.start(
                    run_name=f"{plan.spec.name}@{plan.spec_hash[:8]}",
                    params=spec.flatten(spec.canonical(plan.spec)),
                    tags={**_tags(plan, fingerprint, versions, git), **(tags or {})},
                    seeds=seeds,
                )
                directory = checkpoint.RunDirectory.create(
                    root,
                    parent_id=tracker.parent_id,
                    child_ids=tracker.child_ids,
                    experiment_id=tracker.experiment_id,
                    uri=uri,
                    spec_name=plan.spec.name,
                    spec_hash=plan.spec_hash,
                    spec_yaml=spec.to_yaml(plan.spec),
                )
                # The resolved spec goes in first, so even a failed run shows what ran.
                tracker.log_artifacts({"spec.yaml": spec.to_yaml(plan.spec)})
            else:
                info = directory.info
                tracker.reopen(
                    info["parent_run_id"], {int(k): v for k, v in info["child_run_ids"].items()}, {"resumed": "true"}
                )
                directory.update(status="RUNNING")
            journal_ = journal.Journal(directory.path)
            tracker.attach(journal_)
            logged_through[0] = journal_.logged_through()
            ckpt = checkpoint.Checkpointer(
                directory.state_dir,
                every=plan.spec.checkpoint.every,
                keep=plan.spec.checkpoint.keep,
                spec_hash=plan.spec_hash,
            )
            start = None
            if resume:
                start = _resumer(plan, directory, ckpt, journal_, tracker, bar)
            elif multi_process:  # the other processes wait to hear whether to resume
                start = lambda template: (*checkpoint.restore(template), ())  # noqa: E731
            devices.announce_start()
            # A NaN/Inf raises out of here: the chunks before it stay logged and
            # the runs end FAILED with the message; no checkpoint is written
            # from the chunk that had it on.
            try:
                with bar:
                    result = runner.run(
                        plan.algorithm,
                        seeds,
                        plan.num_iterations,
                        plan.spec.logging.interval,
                        sink=sink,
                        on_compiled=compiled,
                        start=start,
                        checkpointer=ckpt,
                        mesh=plan.mesh,
                    )
            finally:
                ckpt.close()
            wall = time.perf_counter() - started
            flush_started = time.perf_counter()
            tracker.flush()
            record = results.make_results(plan, result, wall, time.perf_counter() - flush_started, git)
            finals = {int(seed): values for seed, values in record["per_seed_final"].items()}
            speed = {
                "sps": result.sps,
                "sps_per_device": record["speed"]["sps_per_device"],
                "compile_seconds": result.compile_seconds,
                "wall_seconds": wall,
            }
            tracker.log_summary(
                {
                    None: {**{f"final_{k}": v for k, v in record["final"].items()}, **speed},
                    **{seed: {f"final_{k}": v for k, v in values.items()} for seed, values in finals.items()},
                }
            )
            tracker.log_artifacts({"results.json": results.to_json(record)})
            parent_id = directory.run_id
            status = "FINISHED"
    except KeyboardInterrupt:
        status = "KILLED"
        raise
    finally:
        if directory is not None:
            directory.update(status=status)
            _report_checkpoints(plan, directory, ckpt, status)
        if tracker.offline is not None and directory is not None:
            err_console.print(
                f"[bold yellow]warning:[/] the MLflow store {uri} could not be reached ({tracker.offline});"
                f" training went on and its metrics are kept in {directory.path / journal.JOURNAL_FILE}."
                f" Upload them with: harness sync {directory.run_id}"
                + (f" --checkpoint-dir {root}" if checkpoint_dir else ""),
                soft_wrap=True,
            )
    return Logged(record, parent_id, uri, tracker.client)


def _check_resumable(directory, plan, uri: str) -> None:
    """Refuse to resume a run of another spec, or of another store."""
    from harness import checkpoint, reproduce, spec

    info = directory.info
    if info.get("spec_hash") != plan.spec_hash:
        try:
            old = spec.canonical(spec.parse(__import__("yaml").safe_load(directory.spec_yaml)))
            listed = "; ".join(
                f"{key}: {' -> '.join(values)}"
                for key, values in reproduce.spec_differences([old, spec.canonical(plan.spec)]).items()
            )
        except Exception:  # noqa: BLE001  (the old spec may not even parse any more)
            listed = ""
        raise checkpoint.CheckpointError(
            f"run {directory.run_id} was made from another spec (spec_hash {str(info.get('spec_hash'))[:12]},"
            f" {plan.spec.name}'s is now {plan.spec_hash[:12]}): {listed or 'the hashes differ'}."
            " Its checkpoints cannot be restored under this spec; run it without --resume for a new run"
        )
    if info.get("tracking_uri") != uri:
        raise checkpoint.CheckpointError(
            f"run {directory.run_id} is logged to {info.get('tracking_uri')!r}, not {uri!r};"
            f" pass --tracking-uri {info.get('tracking_uri')}"
        )
    if info.get("status") == "FINISHED":
        raise checkpoint.CheckpointError(f"run {directory.run_id} finished; nothing to resume")


def _resumer(plan, directory, ckpt, journal_, tracker, bar):
    """The runner's `start`: restore the newest good checkpoint into the
    freshly initialised state (in a multi-process job: and send it to the
    other processes), tag the runs, and give the journaled metrics before
    it."""
    from datetime import UTC, datetime

    from harness import checkpoint, runner, tracking

    def start(template):
        chunks = []

        def read():
            notes: list[str] = []
            found = ckpt.read_latest(template, notes)
            for note in notes:
                err_console.print(f"[bold yellow]warning:[/] {note}", soft_wrap=True)
            iteration = found[1] if found else 0
            chunks.extend(journal_.chunks(iteration))
            covered = chunks[-1][1] if chunks else None
            if iteration and (covered is None or chunks[-1][0] + len(next(iter(covered.values()))) - 1 != iteration):
                raise checkpoint.CheckpointError(
                    f"the journal of run {directory.run_id} lacks the metrics up to iteration {iteration}"
                )
            return found

        state, iteration = checkpoint.restore(template, read)
        history = [runner.ChunkMetrics(first, metrics, evaluation) for first, metrics, evaluation in chunks]
        info = directory.info
        resumes = [*info.get("resumes", []), {"iteration": iteration, "at": datetime.now(UTC).isoformat()}]
        directory.update(resumes=resumes)
        count = len(resumes)
        tags = {"resumed": str(count), f"resumed.{count}": f"from iteration {iteration}"}
        for run_id in [tracker.parent_id, *tracker.child_ids.values()]:
            tracking.set_tags(tracker.client, run_id, tags)
        where = f"the checkpoint at iteration {iteration}" if iteration else "the start (no checkpoint was written)"
        err_console.print(f"{plan.spec.name}: resuming run {directory.run_id} from {where}")
        bar.skip(iteration)
        return state, iteration, history

    return start


def _report_checkpoints(plan, directory, ckpt, status: str) -> None:
    from harness import checkpoint

    if ckpt is None:
        return
    steps = checkpoint.saved_iterations(directory.state_dir)
    if status == "FINISHED" or not steps and status != "KILLED":
        return
    where = f"the last checkpoint is at iteration {steps[-1]} ({directory.state_dir})" if steps else "no checkpoint"
    if steps:
        err_console.print(
            f"{plan.spec.name}: {where}; continue with: harness run SPEC --resume {directory.run_id}", soft_wrap=True
        )
    else:
        err_console.print(f"{plan.spec.name}: {where} was written", soft_wrap=True)


def cmd_run(args: argparse.Namespace) -> int:
    from harness import results, tracking

    plan = _load_plan(args.spec, args)
    uri = tracking.resolve_uri(args.tracking_uri, plan.spec.tracking.uri)
    logged = train_and_log(
        plan,
        uri,
        progress=not args.no_progress,
        live_metrics=args.live_metrics,
        checkpoint_dir=args.checkpoint_dir,
        resume=args.resume or False,
    )
    if logged is None:  # not process 0 of a multi-process job: it logs
        return 0
    _print_summary(plan, logged.record, uri, logged.parent_id)
    if args.results_out:
        Path(args.results_out).write_text(results.to_json(logged.record))
        out_console.print(f"results written to {args.results_out}")
    return 0


def cmd_sync(args: argparse.Namespace) -> int:
    """Upload what run directories hold that their MLflow runs do not."""
    from harness import checkpoint, tracking

    if args.run_ids:
        root = Path(args.checkpoint_dir) if args.checkpoint_dir else None
        directories = []
        for run_id in args.run_ids:
            if root is None:
                uri = tracking.resolve_uri(args.tracking_uri, None)
                root_here = checkpoint.default_root(uri)
            else:
                root_here = root
            directories.append(checkpoint.find_run(root_here, run_id, ""))
    else:
        uri = tracking.resolve_uri(args.tracking_uri, None)
        root = Path(args.checkpoint_dir) if args.checkpoint_dir else checkpoint.default_root(uri)
        directories = [d for d in checkpoint.run_directories(root) if tracking.needs_sync(d.path)]
        if not directories:
            out_console.print(f"nothing to sync under {root}")
            return 0
    for directory in directories:
        report = tracking.sync_run(directory.path, args.tracking_uri)
        out_console.print(
            f"run {report.run_id}: {report.entries} journal entries and {report.calls} end-of-run calls"
            f" uploaded to {report.uri}"
        )
    return 0


def _print_summary(plan, record, uri: str, parent_id: str) -> None:
    from rich.table import Table

    table = Table(title=f"{plan.spec.name} ({plan.spec_hash[:12]})", show_header=True)
    table.add_column("seed", justify="right")
    shown = (
        "episode_return",
        "episode_length",
        "loss",
        "entropy",
        "draw_rate",
        "eval_return",
        "eval_greedy_return",
        "eval_random_win",
        "eval_random_loss",
        "eval_greedy_loss",
        "elo",
    )
    names = [n for n in shown if n in record["final"]]
    for name in names:
        table.add_column(f"final {name}", justify="right")
    for seed, values in record["per_seed_final"].items():
        table.add_row(seed, *[f"{values[n]:.3f}" for n in names])
    table.add_row("mean", *[f"{record['final'][n]:.3f}" for n in names], style="bold")
    out_console.print(table)
    speed = record["speed"]
    out_console.print(
        f"{speed['sps']:,.0f} env steps/s steady state ({len(plan.spec.seeds)} seeds), "
        f"compile {speed['compile_seconds']:.1f} s, wall {speed['wall_seconds']:.1f} s, "
        f"metrics written to MLflow in {speed['metrics_flush_seconds']:.1f} s after training"
    )
    out_console.print(f"MLflow: {uri}  parent run {parent_id}")


# ------------------------------------------------------------------- publish


def cmd_publish(args: argparse.Namespace) -> int:
    """Copy results.json of a finished run of SPEC into results/."""
    import json
    import tempfile

    from harness import reproduce, tracking

    plan = _load_plan(args.spec)
    uri = tracking.resolve_uri(args.tracking_uri, plan.spec.tracking.uri)
    tracker = tracking.Tracking(uri, plan.spec.experiment_name)
    client = tracker.client
    if args.run_id:
        try:
            run = client.get_run(args.run_id)
        except Exception:  # noqa: BLE001
            return _user_error(f"no run {args.run_id!r} in {uri}")
    else:
        runs = client.search_runs(
            [tracker.experiment_id],
            filter_string=f"tags.spec_hash = '{plan.spec_hash}' and attributes.status = 'FINISHED'",
            order_by=["attributes.start_time DESC"],
        )
        runs = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
        if not runs:
            return _user_error(f"no finished run of {args.spec} (spec_hash {plan.spec_hash[:12]}) in {uri}")
        run = runs[0]
    if run.data.tags.get("spec_hash") != plan.spec_hash:
        return _user_error(f"run {run.info.run_id} was made from another spec (spec_hash differs)")
    with tempfile.TemporaryDirectory() as tmp:
        local = client.download_artifacts(run.info.run_id, "results.json", tmp)
        record = json.loads(Path(local).read_text())
    record["mlflow_run_id"] = run.info.run_id
    if args.random_baseline:
        from harness.baselines import random_policy_summary

        record["baselines"] = {"random_policy": random_policy_summary(plan.env, plan.spec.seeds)}
        out_console.print(f"random policy: mean return {record['baselines']['random_policy']['mean_return']:.2f}")
    out = Path(args.out) if args.out else reproduce.reference_path(args.spec)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n")
    out_console.print(f"published run {run.info.run_id} to {out}")
    return 0


# ----------------------------------------------------------------- reproduce


def _plan_from_text(text: str, source: str, args: argparse.Namespace | None = None):
    """Validate and build a spec given as YAML text (e.g. a run's spec.yaml)."""
    import yaml

    from harness import build, spec

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise spec.SpecError(source, [("", f"invalid YAML: {error}")]) from None
    return build.build(_with_devices(spec.parse(data, source, text), args), source, spec.key_lines(text))


def _with_seeds(plan, seeds: list[int], source: str):
    from harness import build, spec

    data = spec.canonical(plan.spec)
    data["seeds"] = list(seeds)
    data["devices"] = plan.spec.devices.model_dump()
    return build.build(spec.parse(data, f"{source} (--seeds)"), source)


def cmd_reproduce(args: argparse.Namespace) -> int:
    """Run a spec again and judge it against its reference (see harness.reproduce)."""
    from harness import reproduce, spec, tracking

    if (args.spec is None) == (args.run_id is None):
        return _user_error("give either a SPEC file or --run-id RUN_ID")
    if args.run_id:
        if args.reference:
            return _user_error("--reference goes with a SPEC; with --run-id the run itself is the reference")
        uri = tracking.resolve_uri(args.tracking_uri, None)
        client = tracking.open_client(uri)
        run, note = tracking.get_parent_run(client, uri, args.run_id)
        run_id = run.info.run_id
        if note:
            err_console.print(note)
        text = tracking.read_text_artifact(client, run_id, "spec.yaml")
        if text is None:
            return _user_error(f"run {run_id} in {uri} has no logged spec (spec.yaml): it was not made by harness run")
        source = f"spec.yaml of run {run_id}"
        plan = _plan_from_text(text, source, args)
        logged_results = tracking.read_text_artifact(client, run_id, "results.json")
        if logged_results is None:
            return _user_error(
                f"run {run_id} ({run.info.status}) has no results.json: only a finished run can be a reference"
            )
        label = f"run {run_id}"
        reference = reproduce.parse_reference(
            logged_results, f"results.json of {label}", plan.spec_hash, spec.canonical(plan.spec)
        )
        reference.setdefault("mlflow_run_id", run_id)
    else:
        plan = _load_plan(args.spec, args)
        source = args.spec
        path = Path(args.reference) if args.reference else reproduce.reference_path(args.spec)
        reference = reproduce.load_reference(path, args.spec, plan.spec_hash, spec.canonical(plan.spec))
        uri = tracking.resolve_uri(args.tracking_uri, plan.spec.tracking.uri)
        label = str(path)
    if args.seeds:
        plan = _with_seeds(plan, args.seeds, source)
    tags = {"reproduces": label, "reproduces.spec_hash": reference["spec_hash"]}
    if reference.get("mlflow_run_id"):
        tags["reproduces.run_id"] = reference["mlflow_run_id"]
    logged = train_and_log(plan, uri, progress=not args.no_progress, live_metrics=False, tags=tags)
    if logged is None:  # not process 0 of a multi-process job: it judges
        return 0
    _print_summary(plan, logged.record, uri, logged.parent_id)
    verdict = reproduce.judge(reference, logged.record, label)
    _print_table(reproduce.table(verdict))
    for reason in verdict.not_exact_because:
        out_console.print(f"  not judged bit for bit: {reason}")
    out_console.print(f"rule ({verdict.mode}): {reproduce.RULES[verdict.mode]}", soft_wrap=True)
    out_console.print(f"speed: {verdict.speed.describe()}", soft_wrap=True)
    reproduce.log_verdict(logged.client, logged.parent_id, verdict)
    word = "[bold green]PASS[/]" if verdict.passed else "[bold red]FAIL[/]"
    out_console.print(f"verdict: {word}, logged to run {logged.parent_id} (tags verdict.*, verdict.json, verdict.md)")
    return 0 if verdict.passed else EXIT_FAILED


# ------------------------------------------------------------------- compare


def cmd_compare(args: argparse.Namespace) -> int:
    """A table and a plot across finished runs (see harness.compare)."""
    from harness import compare, reproduce, tracking

    if bool(args.experiment) == bool(args.run_ids):
        return _user_error("give either --experiment NAME or run ids")
    uri = tracking.resolve_uri(args.tracking_uri, None)
    client = tracking.open_client(uri)
    runs, notes = compare.fetch(client, uri, experiment=args.experiment, run_ids=args.run_ids)
    for note in notes:
        err_console.print(note)
    hashes = {r.record["spec_hash"] for r in runs}
    spec_diff = reproduce.spec_differences([r.record["spec"] for r in runs])
    listed = "\n".join(f"  {key}: {' / '.join(values)}" for key, values in spec_diff.items())
    if len(hashes) > 1:
        if not args.allow_different_specs:
            return _user_error(
                f"the runs were made from {len(hashes)} different specs (spec_hash "
                f"{', '.join(sorted(h[:12] for h in hashes))}); the keys that differ, in run order:\n{listed}\n"
                "pass --allow-different-specs to compare them anyway"
            )
        out_console.print(f"comparing runs of {len(hashes)} different specs; the keys that differ:\n{listed}")
    names = sorted({r.record["spec_name"] for r in runs})
    title = (
        f"{', '.join(names)} ({next(iter(hashes))[:12]})"
        if len(hashes) == 1
        else f"{', '.join(names)} (different specs)"
    )
    summaries = compare.rows(runs)
    _print_table(compare.table(summaries, f"compare: {title}"))
    provenance_diff = compare.provenance_differences(runs)
    for key, values in provenance_diff.items():
        out_console.print(f"  differs: {key}: {' / '.join(values)}", soft_wrap=True)
    out = Path(args.out)
    compare.plot(runs, out, title)
    files = {
        "compare.md": compare.to_markdown(
            summaries, {"Spec keys that differ": spec_diff, "Devices and versions that differ": provenance_diff}
        ),
        "compare.json": json.dumps(
            {"runs": summaries, "spec_differences": spec_diff, "provenance_differences": provenance_diff}, indent=2
        )
        + "\n",
    }
    run_id = compare.log(client, runs, files, out)
    out_console.print(f"plot written to {out}; comparison logged to MLflow run {run_id} ({uri})")
    return 0


# ---------------------------------------------------------------------- main


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="harness", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    v = sub.add_parser("validate", help="check a spec and print it resolved, with its hash")
    v.add_argument("spec")
    v.set_defaults(func=cmd_validate)

    r = sub.add_parser("run", help="train a spec over all its seeds and log it to MLflow")
    r.add_argument("spec")
    r.add_argument("--tracking-uri", help="MLflow tracking URI (default: MLFLOW_TRACKING_URI, or sqlite:///mlflow.db)")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    r.add_argument("--results-out", help="also write results.json to this path")
    _add_device_options(r)
    r.add_argument(
        "--live-metrics",
        action="store_true",
        help="stream per-iteration metrics to MLflow during training even on a CPU backend "
        "(default there: written when training ends, so the store does not slow training)",
    )
    r.add_argument(
        "--resume",
        nargs="?",
        const=True,
        metavar="RUN_ID",
        help="continue the newest unfinished run of this spec (or run RUN_ID) from its latest good checkpoint,"
        " in the same MLflow runs",
    )
    r.add_argument(
        "--checkpoint-dir",
        help="where run directories (checkpoints, metric journal) go (default: checkpoints/ beside the MLflow store)",
    )
    r.set_defaults(func=cmd_run)

    sy = sub.add_parser(
        "sync",
        help="upload the metrics and end-of-run records that an unreachable MLflow store did not get",
        description="Upload, from run directories, the journaled metrics past what reached the store and the "
        "end-of-run calls (summary metrics, artifacts, tags, statuses) it refused. Without RUN_IDs: every run "
        "directory under the checkpoint root that has something to upload.",
    )
    sy.add_argument("run_ids", nargs="*", metavar="RUN_ID")
    sy.add_argument("--tracking-uri", help="upload here instead of the store the run was logged to")
    sy.add_argument("--checkpoint-dir", help="the checkpoint root (default: checkpoints/ beside the MLflow store)")
    sy.set_defaults(func=cmd_sync)

    pub = sub.add_parser("publish", help="write results/<spec>.json from a finished MLflow run of the spec")
    pub.add_argument("spec")
    pub.add_argument("--run-id", help="the parent run to publish (default: the latest finished run of the spec)")
    pub.add_argument("--tracking-uri")
    pub.add_argument("--out", help="where to write (default: results/<spec file stem>.json)")
    pub.add_argument(
        "--random-baseline",
        action="store_true",
        help="also record the return of a uniformly random policy on the spec's env and seeds",
    )
    pub.set_defaults(func=cmd_publish)

    rep = sub.add_parser(
        "reproduce",
        help="run a published spec (or a logged run's spec) again and judge it against its reference",
        description="Run SPEC again and judge it against its reference results/<spec>.json, or re-run the spec "
        "logged with --run-id and judge it against that run. Exact (bit-identical curves) when device "
        "fingerprint, numerics versions and seeds match the reference; statistical (IQM over seeds, "
        "stratified-bootstrap 95% CI, pass when the intervals overlap) otherwise. Speed is reported, never "
        "judged. Exit code 0 when every gating metric passes, 1 when one fails.",
    )
    rep.add_argument("spec", nargs="?", help="a spec file with a reference in results/")
    rep.add_argument("--run-id", help="re-run the spec logged with this MLflow run and judge against it")
    rep.add_argument("--reference", help="the reference results JSON (default: results/<spec file stem>.json)")
    rep.add_argument("--seeds", type=int, nargs="+", metavar="SEED", help="run these seeds instead of the spec's")
    rep.add_argument("--tracking-uri", help="MLflow tracking URI: where --run-id is read and the reproduction logged")
    rep.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_device_options(rep)
    rep.set_defaults(func=cmd_reproduce)

    cmp = sub.add_parser(
        "compare",
        help="a table and a curve plot across finished runs, logged to MLflow",
        description="Compare finished runs (all of an experiment's, or the given run ids): a table of device, "
        "versions, env steps/s, compile seconds and final metrics (IQM, 95% CI) and a PNG of the loss and "
        "return curves (mean over seeds, shaded 95% CI). The comparison is logged as a run named 'compare' in "
        "the experiment of the first run (tag harness.kind=compare); the compared runs are not changed.",
    )
    cmp.add_argument("run_ids", nargs="*", metavar="RUN_ID", help="parent runs to compare")
    cmp.add_argument("--experiment", help="compare every finished run of this MLflow experiment")
    cmp.add_argument(
        "--tracking-uri", help="MLflow tracking URI (default: MLFLOW_TRACKING_URI, or sqlite:///mlflow.db)"
    )
    cmp.add_argument(
        "--allow-different-specs", action="store_true", help="compare runs whose spec hashes differ (lists the keys)"
    )
    cmp.add_argument("--out", default="compare.png", help="where to write the plot (default: compare.png)")
    cmp.set_defaults(func=cmd_compare)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from harness.checkpoint import CheckpointError
    from harness.compare import CompareError
    from harness.devices import DistributedError
    from harness.reproduce import ReproduceError
    from harness.runner import Interrupted, NonFiniteMetricError
    from harness.spec import SpecError
    from harness.tracking import TrackingError

    def terminated(signum, frame):
        raise Interrupted(signum)

    # SIGTERM (e.g. a scheduler's preemption) ends runs as Ctrl-C does; during
    # training the runner acts on it between chunks, with a final checkpoint.
    previous = (
        signal.signal(signal.SIGTERM, terminated) if threading.current_thread() is threading.main_thread() else None
    )
    try:
        if hasattr(args, "coordinator"):
            from harness import devices

            devices.initialize(args.coordinator, args.num_processes, args.process_id, auto=args.cluster)
        return args.func(args)
    except (
        SpecError,
        TrackingError,
        ReproduceError,
        CompareError,
        CheckpointError,
        DistributedError,
        _SpecOptionError,
    ) as error:
        return _user_error(str(error))
    except NonFiniteMetricError as error:
        where = getattr(args, "spec", None) or f"run {getattr(args, 'run_id', '')}"
        err_console.print(f"[bold red]error:[/] {where}: {error}", soft_wrap=True)
        return EXIT_FAILED
    except KeyboardInterrupt as error:
        code = error.exit_code if isinstance(error, Interrupted) else EXIT_INTERRUPTED
        name = error.args[0] if isinstance(error, Interrupted) else "Ctrl-C"
        err_console.print(f"[bold yellow]interrupted[/] ({name}): MLflow runs marked KILLED")
        return code
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
