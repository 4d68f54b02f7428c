"""The run session: train a plan and record it. What `harness run` and
`harness reproduce` both do, and what the tests call to train and log.

It opens the MLflow runs (or reopens them, resuming), creates the run
directory with its metric journal, trains through the runner with
checkpoints and a progress bar, and ends with the summary metrics and the
results.json artifact; every run ends FINISHED, FAILED or KILLED.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

import jax
import yaml

import harness
from harness import spec
from harness.build import Plan
from harness.console import err_console
from harness.record import journal, rundir, tracking
from harness.record.schema import Results
from harness.record.system_metrics import SystemMetrics, cannot_measure
from harness.run import checkpoint, cluster, compile_cache, determinism, profiling, provenance, results, runner
from harness.run.programs import Programs
from harness.run.progress import ProgressBar


def run_tags(plan: Plan, fingerprint: dict[str, str], versions: dict[str, str], git: dict[str, str]) -> dict[str, str]:
    return {
        "spec_hash": plan.spec_hash,
        "spec_name": plan.spec.name,
        "algorithm": plan.spec.algorithm,
        "harness.version": harness.__version__,
        **plan.env_info.as_tags(),
        **tracking.provenance_tags(fingerprint, versions, git),
    }


@dataclass(frozen=True)
class RunOptions:
    """How `train_and_log` runs a plan (what the command line chose)."""

    progress: bool = True  # a progress bar on stderr
    # Stream per-iteration metrics during training even on a CPU backend
    # (default there: written when training ends; see harness.record.tracking).
    live_metrics: bool = False
    tags: Mapping[str, str] = field(default_factory=dict)  # added to the parent run's
    checkpoint_dir: Path | None = None  # the checkpoint root; None: beside the store
    resume: str | bool = False  # True: the newest unfinished run of the spec; or a run id
    on_chunk: Callable[[runner.ChunkMetrics], None] | None = None  # after each chunk is logged
    # When the command started (time.perf_counter()), for the start-up time
    # in the record; None: when train_and_log was called.
    started_at: float | None = None
    # Compiled programs to reuse and keep, for a caller that trains this
    # plan again in this process (harness.run.programs); None: compile all.
    programs: Programs | None = None
    # Seconds between MLflow's system-metrics samples on the parent run
    # (harness.record.system_metrics); None: none.
    system_metrics: float | None = None
    # Trace one steady-state chunk with JAX's profiler into the run
    # directory's profile/ and log it as the parent run's artifacts.
    profile: bool = False


class Logged(NamedTuple):
    """A finished, logged training run."""

    record: Results  # its results.json
    parent_id: str  # the MLflow parent run
    uri: str
    client: Any  # an MlflowClient on `uri`
    experiment_id: str
    # Why the store could not be reached, when some of the record is only in
    # the run directory (for harness sync); None when MLflow holds it all.
    offline: str | None = None


def train_and_log(plan: Plan, uri: str, options: RunOptions = RunOptions()) -> Logged | None:
    """Train every seed of `plan` and log it to MLflow at `uri`: a parent run
    (with `options.tags` added to the usual ones), a child run per seed, summary
    metrics and the spec.yaml and results.json artifacts. What `harness run`
    and `harness reproduce` both do.

    Every invocation has a run directory under `options.checkpoint_dir`
    (default: `checkpoints/` beside the store; harness.record.rundir) holding the metric
    journal and the spec's checkpoints. `options.resume` (True: the newest unfinished
    run of this spec; or a run id) continues that run's MLflow runs from its
    latest good checkpoint instead of starting new ones. `options.on_chunk` is called
    with each chunk's metrics after they are logged.

    In a multi-process job only process 0 logs and writes the run directory;
    the others train their shards, take part in every checkpoint (the state
    is gathered from all processes; process 0 writes it) and in a resume
    (process 0 reads the checkpoint and sends it to all), and return None."""

    if not cluster.is_main_process():
        follower = checkpoint.Follower(plan.spec.checkpoint.every)

        def follow(template):
            state, iteration = checkpoint.restore(template)
            follower.continue_after(iteration)
            return state, iteration, ()

        main_run = cluster.wait_for_start()
        monitor = (
            system_metrics(main_run["uri"], main_run["run_id"], options, resume=bool(options.resume))
            if "run_id" in main_run
            else contextlib.nullcontext()
        )
        with monitor:
            runner.run(
                plan.algorithm,
                plan.spec.seeds,
                plan.num_iterations,
                plan.spec.logging.interval,
                start=follow,
                checkpointer=follower,
                mesh=plan.mesh,
                programs=options.programs,
            )
        return None
    try:
        return _train_and_log_main(plan, uri, options)
    except BaseException as error:
        # The other processes of a job wait for process 0 to start training;
        # if it cannot, they stop too (with its message) instead of waiting.
        cluster.announce_start(error=f"{type(error).__name__}: {error}")
        raise


def _train_and_log_main(plan: Plan, uri: str, options: RunOptions) -> Logged:
    """`train_and_log` in process 0 (or the only process)."""
    called_at = time.perf_counter()
    multi_process = jax.process_count() > 1
    # On a CPU backend the store's work competes with training for the same
    # cores, so per-iteration metrics are written when training ends.
    live = options.live_metrics or jax.default_backend() != "cpu"
    root = Path(options.checkpoint_dir) if options.checkpoint_dir else rundir.default_root(uri)
    directory = None
    resume = options.resume
    if resume:
        directory = rundir.find_run(root, resume if isinstance(resume, str) else None, plan.spec.name)
        _check_resumable(directory, plan, uri)
    # Before anything is compiled: an unusable store is reported at once.
    # About 8 metrics an iteration (the algorithms log 6 to 12).
    expected_values = plan.num_iterations * len(plan.spec.seeds) * 8
    tracker = tracking.Tracking(uri, plan.spec.experiment_name, live_metrics=live, expected_values=expected_values)
    fingerprint = provenance.fingerprint(plan.layout, shards=plan.spec.devices.shards)
    versions, git = provenance.versions(), provenance.git_state()
    if note := determinism.run_note(fingerprint):
        err_console.print(f"{plan.spec.name}: {note}", soft_wrap=True)
    seeds = plan.spec.seeds
    bar = ProgressBar(
        plan.spec.name,
        plan.num_iterations,
        plan.env_steps_per_iteration,
        len(seeds),
        console=err_console,
        enabled=options.progress,
    )
    cache_before = compile_cache.usage()  # taken again just before training
    cache_verdict = "off"

    def compiled(seconds: float) -> None:
        nonlocal cache_verdict
        cache_verdict = (compile_cache.usage() - cache_before).verdict
        bar.compiled(seconds)
        if not options.progress:
            err_console.print(
                f"{plan.spec.name}: compiled in {seconds:.1f} s, training {plan.num_iterations} iterations"
                f" x {len(seeds)} seeds" + (f" on devices {plan.layout.describe()}" if plan.layout else "")
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
                    tags={**run_tags(plan, fingerprint, versions, git), **options.tags},
                    seeds=seeds,
                )
                directory = rundir.RunDirectory.create(
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
            sink = chunk_sink(tracker, bar, plan.env_steps_per_iteration, journal_.logged_through(), options)
            ckpt = checkpoint.Checkpointer(
                directory.state_dir,
                every=plan.spec.checkpoint.every,
                keep=plan.spec.checkpoint.keep,
                spec_hash=plan.spec_hash,
            )
            start = None
            if resume:
                start = resumer(plan, directory, ckpt, journal_, tracker, bar)
            elif multi_process:  # the other processes wait to hear whether to resume
                start = lambda template: (*checkpoint.restore(template), ())  # noqa: E731
            cluster.announce_start(run={"uri": uri, "run_id": tracker.parent_id})
            training_started = time.perf_counter()
            cache_before = compile_cache.usage()
            # A NaN/Inf raises out of here: the chunks before it stay logged and
            # the runs end FAILED with the message; no checkpoint is written
            # from the chunk that had it on.
            profile_dir = directory.path / profiling.PROFILE_DIR if options.profile else None
            with system_metrics(uri, tracker.parent_id, options, resume=bool(resume)):
                result, closing, closed = train_plan(
                    plan,
                    seeds,
                    bar,
                    ckpt,
                    options,
                    sink=sink,
                    on_compiled=compiled,
                    start=start,
                    profile_dir=None if profile_dir is None else str(profile_dir),
                )
            wall = time.perf_counter() - started
            tracker.flush()
            flushed = time.perf_counter()
            wall_time = results.wall_time(
                result,
                started=options.started_at or called_at,
                training_started=training_started,
                closing=closing,
                closed=closed,
                flushed=flushed,
            )
            record = results.make_results(
                plan, result, wall, flushed - closed, git, wall_time=wall_time, compile_cache=cache_verdict
            )
            speed = {
                "sps": result.sps,
                "sps_per_device": record.speed.sps_per_device,
                "compile_seconds": result.compile_seconds,
                "wall_seconds": wall,
                **{f"time_{part}_seconds": seconds for part, seconds in wall_time.model_dump().items()},
            }
            tracker.log_summary(
                {
                    None: {**{f"final_{k}": v for k, v in record.final.items()}, **speed},
                    **{
                        int(seed): {f"final_{k}": v for k, v in values.items()}
                        for seed, values in record.per_seed_final.items()
                    },
                }
            )
            tracker.set_tags({"compile_cache": cache_verdict})
            profiling.log_host_times(tracker, result.chunk_times, plan.env_steps_per_iteration)
            if profile_dir is not None:
                profiling.report(tracker, profile_dir, result.profiled_through)
            tracker.log_artifacts({"results.json": record.to_json()})
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
                + (f" --checkpoint-dir {root}" if options.checkpoint_dir else ""),
                soft_wrap=True,
            )
    return Logged(record, parent_id, uri, tracker.client, tracker.experiment_id, tracker.offline)


def _check_resumable(directory, plan, uri: str) -> None:
    """Refuse to resume a run of another spec, or of another store."""
    info = directory.info
    if info.get("kind") == "sweep":
        raise rundir.CheckpointError(f"run {directory.run_id} is a sweep; resume it with harness sweep SPEC --resume")
    if info.get("spec_hash") != plan.spec_hash:
        try:
            old = spec.canonical(spec.parse(yaml.safe_load(directory.spec_yaml)))
            listed = "; ".join(
                f"{key}: {' -> '.join(values)}"
                for key, values in spec.spec_differences([old, spec.canonical(plan.spec)]).items()
            )
        except Exception:  # noqa: BLE001  (the old spec may not even parse any more)
            listed = ""
        raise rundir.CheckpointError(
            f"run {directory.run_id} was made from another spec (spec_hash {str(info.get('spec_hash'))[:12]},"
            f" {plan.spec.name}'s is now {plan.spec_hash[:12]}): {listed or 'the hashes differ'}."
            " Its checkpoints cannot be restored under this spec; run it without --resume for a new run"
        )
    rundir.check_store_and_status(directory, uri)


def chunk_sink(
    tracker: tracking.Tracking, bar: ProgressBar, env_steps_per_iteration: int, logged_through: int, options: RunOptions
) -> Callable[[runner.ChunkMetrics], None]:
    """The runner's sink: each chunk to MLflow (through the journal), the
    progress bar and `options.on_chunk`. A resumed run recomputes the chunks
    after its checkpoint; those up to `logged_through`, which the
    interrupted run logged already (bit-identical), are not logged twice."""

    def sink(chunk: runner.ChunkMetrics) -> None:
        if chunk.last_iteration > logged_through:
            tracker.log_chunk(chunk, env_steps_per_iteration)
        bar.update(chunk)
        if options.on_chunk is not None:
            options.on_chunk(chunk)

    return sink


def system_metrics(uri: str, run_id: str, options: RunOptions, *, resume: bool) -> SystemMetrics:
    """MLflow's system-metrics monitor on `run_id` as `options` ask (saying
    once what it cannot record on this platform)."""
    if options.system_metrics is not None and (note := cannot_measure(jax.default_backend())):
        err_console.print(note, soft_wrap=True)
    return SystemMetrics(uri, run_id, options.system_metrics, resume=resume, node_id=cluster.node_id())


def train_plan(
    plan: Plan, seeds: tuple[int, ...], bar: ProgressBar, ckpt: Any, options: RunOptions, **run: Any
) -> tuple[runner.RunResult, float, float]:
    """`runner.run` of `plan` over `seeds` with the progress bar shown and the
    checkpointer closed (its writes waited for) on every way out; `run` are
    the runner's other arguments (sink, start, a sweep's numbers, ...).
    Returns the result and when the closing began and ended."""
    try:
        with bar:
            result = runner.run(
                plan.algorithm,
                seeds,
                plan.num_iterations,
                plan.spec.logging.interval,
                checkpointer=ckpt,
                mesh=plan.mesh,
                programs=options.programs,
                **run,
            )
    finally:
        closing = time.perf_counter()
        ckpt.close()
        closed = time.perf_counter()
    return result, closing, closed


def resumer(plan, directory, ckpt, journal_, tracker, bar):
    """The runner's `start`: restore the newest good checkpoint into the
    freshly initialised state (in a multi-process job: and send it to the
    other processes), tag the runs, and give the journaled metrics before
    it."""

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
                raise rundir.CheckpointError(
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
    """Where an unfinished run's last checkpoint is, and how to resume it."""
    if ckpt is None:
        return
    steps = rundir.saved_iterations(directory.state_dir)
    if status == "FINISHED" or not steps and status != "KILLED":
        return
    where = f"the last checkpoint is at iteration {steps[-1]} ({directory.state_dir})" if steps else "no checkpoint"
    if steps:
        err_console.print(
            f"{plan.spec.name}: {where}; continue with: harness run SPEC --resume {directory.run_id}", soft_wrap=True
        )
    else:
        err_console.print(f"{plan.spec.name}: {where} was written", soft_wrap=True)
