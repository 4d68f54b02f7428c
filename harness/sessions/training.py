"""One training session: the MLflow runs and run directory of one
invocation, the training of its programs and the recording of their
results. A plain run (harness.sessions.run) and a sweep
(harness.sessions.sweep) are both a `TrainingSession`; they differ only in
how they open their MLflow runs (`start_runs`) and how a program's result is
split into records.

For each program the session shows a progress bar, notes the compilation
cache's verdict when compiling is done, checkpoints it (resuming from its
newest good checkpoint when asked), trains it through the runner with every
chunk logged through the run directory's journal, waits for the metrics to
reach the store and breaks its wall time down (`Trained`). Each record is
then made (results.json) and logged with its summary metrics (`log_results`).

Every run ends FINISHED, FAILED or KILLED, and the run directory says the
same; an unfinished or offline one says how to go on (`recording`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

import jax
import numpy as np

from harness import experiment_spec as spec
from harness.console import err_console
from harness.plan import Plan
from harness.record import iterations, journal, rundir, tracking, windows
from harness.record.schema import Results, WallTime
from harness.record.system_metrics import SystemMetrics
from harness.run import checkpoint, cluster, compile_cache, interrupts, provenance, runner
from harness.run.progress import ProgressBar
from harness.sessions import results
from harness.sessions.resume import restart_from_main, resumer
from harness.sessions.run_options import RunOptions, system_metrics
from harness.types import ChunkMetrics, RunResult

# About how many metrics an iteration logs per run (the algorithms log 6 to
# 12), for sizing the metric writer (harness.record.metric_writer).
METRICS_PER_ITERATION = 8


class Program(NamedTuple):
    """One compiled program to train: a plain run's plan, or a sweep's
    group of points (its runs points x seeds, point-major)."""

    name: str  # on its progress bar and in its messages
    plan: Plan  # a sweep's: its first point's, the numeric keys swept
    seeds: tuple[int, ...]  # each run's seed, in the state's run order
    runs: str  # what its runs are, said once it is compiled when no bar shows: "2 seeds", "4 points x 2 seeds"
    state_dir: Path  # its checkpoints
    started: float  # where its wall-time breakdown starts (time.perf_counter())
    numbers: dict[str, np.ndarray] | None = None  # a sweep's numbers in the state, `[runs]` per name
    block: int | None = None  # runs per block, one block after another (runner.over_seeds)
    profile_dir: Path | None = None  # trace a steady-state chunk here (harness.run.profiling)


class Trained(NamedTuple):
    """A program trained, its metrics in the store."""

    result: RunResult
    wall_time: WallTime
    compile_cache: str  # the compilation cache's verdict on its programs (harness.run.compile_cache)
    # Clock readings (time.perf_counter()): training began; the checkpointer
    # closed (training's end); the system-metrics monitor stopped; every
    # metric reached the store.
    training_started: float
    closed: float
    stopped: float
    flushed: float


def chunk_sink(
    tracker: tracking.Tracking, bar: ProgressBar, plan: Plan, logged_through: int, options: RunOptions
) -> Callable[[ChunkMetrics], None]:
    """The runner's sink: each chunk to MLflow (through the journal; at most
    `options.metric_points` points per curve), the progress bar and
    `options.on_chunk`. A resumed run recomputes the chunks after its
    checkpoint; those up to `logged_through`, which the interrupted run
    logged already (bit-identical), are not logged twice."""
    window = windows.window_for(plan.num_iterations, options.metric_points)

    def sink(chunk: ChunkMetrics) -> None:
        if chunk.last_iteration > logged_through:
            tracker.log_chunk(chunk, plan.env_steps_per_iteration, window, plan.num_iterations)
        bar.update(chunk)
        if options.on_chunk is not None:
            options.on_chunk(chunk)

    return sink


class TrainingSession:
    """The MLflow runs and run directory of one invocation of spec `name`,
    and the training and recording of its programs. `options.resume` (True:
    the newest unfinished run of the spec; or a run id) picks the run
    directory to continue, checked by `check_resumable` before anything
    else; `runs` are the programs' iterations x runs, summed (to size the
    metric writer).

    A subclass says how a new invocation's runs are opened (`start_runs`),
    which earlier run it may continue (`check_resumable`), and what it says
    when it ends (`ended`, `offline_advice`)."""

    def __init__(self, uri: str, name: str, experiment: str, options: RunOptions, *, runs: int):
        self.uri = uri
        self.options = options
        self.root = Path(options.checkpoint_dir) if options.checkpoint_dir else rundir.default_root(uri)
        self.directory: rundir.RunDirectory | None = None
        if options.resume:
            run_id = options.resume if isinstance(options.resume, str) else None
            self.directory = rundir.find_run(self.root, run_id, name)
            self.check_resumable(self.directory)
            rundir.check_store_and_status(self.directory, uri)
        # On a CPU backend the store's work competes with training for the
        # same cores, so per-iteration metrics are written when training ends.
        live = options.live_metrics or jax.default_backend() != "cpu"
        # Before anything is compiled: an unusable store is reported at once.
        self.tracker = tracking.Tracking(
            uri,
            experiment,
            live_metrics=live,
            expected_values=runs * METRICS_PER_ITERATION,
            under=options.parent_run,
        )
        self.versions, self.git = provenance.versions(), provenance.git_state()
        self.journal: journal.Journal | None = None
        self.checkpointer: checkpoint.Checkpointer | None = None  # the last program's

    # ------------------------------------------------------- what differs

    def check_resumable(self, directory: rundir.RunDirectory) -> None:
        """Refuse to continue `directory` when it is another kind of run or
        of another spec (its store and status are checked after)."""
        raise NotImplementedError

    def start_runs(self) -> rundir.RunDirectory:
        """A new invocation's MLflow runs and its run directory (`new_directory`)."""
        raise NotImplementedError

    def ended(self, status: str) -> None:
        """What to say when the runs ended with `status` (how to go on)."""

    def offline_advice(self) -> str:
        """What to do about a store that could not be reached."""
        raise NotImplementedError

    # ----------------------------------------------------------- the runs

    @contextlib.contextmanager
    def recording(self) -> Iterator[TrainingSession]:
        """The runs open (new, or the resumed run's reopened) with the
        journal attached, for the block to train and record in. On the way
        out every run ends FINISHED (the block finished), FAILED or KILLED
        (Ctrl-C, SIGTERM), the run directory says so, and `ended` and a
        store out of reach say how to go on."""
        status = "FAILED"
        try:
            with self.tracker:
                with interrupts.held():  # a run the store made but the tracker missed would stay RUNNING
                    if self.directory is None:
                        self.directory = self.start_runs()
                    else:
                        info = self.directory.info
                        children = {int(k): v for k, v in info["child_run_ids"].items()}
                        points = info.get("point_run_ids", ())
                        self.tracker.reopen(info["parent_run_id"], children, {"resumed": "true"}, points)
                        self.directory.update(status="RUNNING")
                self.journal = journal.Journal(self.directory.path)
                self.tracker.attach(self.journal)
                yield self
                status = "FINISHED"
        except KeyboardInterrupt:
            status = "KILLED"
            raise
        finally:
            if self.directory is not None:
                self.directory.update(status=status)
                self.ended(status)
                if self.tracker.offline is not None:
                    err_console.print(
                        f"[bold yellow]warning:[/] the MLflow store {self.uri} could not be reached"
                        f" ({self.tracker.offline}); {self.offline_advice()}",
                        soft_wrap=True,
                    )

    def new_directory(self, made_from: spec.Spec, spec_hash: str, **fields) -> rundir.RunDirectory:
        """The run directory of the runs just started, from spec `made_from`
        (with `fields` added to its run.json), and the spec logged first on
        the parent run, so that even a failed run shows what ran."""
        directory = rundir.RunDirectory.create(
            self.root,
            parent_id=self.tracker.parent_id,
            child_ids=self.tracker.child_ids,
            experiment_id=self.tracker.experiment_id,
            uri=self.uri,
            spec_name=made_from.name,
            spec_hash=spec_hash,
            spec_yaml=spec.to_yaml(made_from),
        )
        if fields:
            directory.update(**fields)
        self.tracker.log_artifacts({"spec.yaml": spec.to_yaml(made_from)})
        return directory

    def monitor(self) -> SystemMetrics:
        """MLflow's system-metrics monitor on the parent run, as the options ask."""
        return system_metrics(self.uri, self.tracker.parent_id, self.options, resume=bool(self.options.resume))

    # ----------------------------------------------------------- training

    def train(self, program: Program, *, resuming: bool, monitored: bool = False) -> Trained:
        """Train `program`, its chunks logged, until every metric is in the
        store. `resuming`: from its newest good checkpoint; `monitored`:
        under the system-metrics monitor (else the caller's, around more).
        A NaN/Inf raises out of here: the chunks before it stay logged and
        no checkpoint is written from the chunk that had it on."""
        plan = program.plan
        bar = ProgressBar(
            program.name,
            plan.num_iterations,
            plan.env_steps_per_iteration,
            len(program.seeds),
            console=err_console,
            enabled=self.options.progress,
        )
        sink = chunk_sink(self.tracker, bar, plan, self.journal.logged_through(), self.options)
        self.checkpointer = ckpt = checkpoint.Checkpointer(
            program.state_dir,
            every=plan.spec.checkpoint.every,
            keep=plan.spec.checkpoint.keep,
            spec_hash=plan.spec_hash,
        )
        start = None
        if resuming:
            start = resumer(plan.spec.name, self.directory, ckpt, self.journal, self.tracker, bar)
        elif jax.process_count() > 1:  # the other processes wait to hear whether to resume
            start = restart_from_main
        cluster.announce_start(run={"uri": self.uri, "run_id": self.tracker.parent_id})
        training_started = time.perf_counter()
        cache_before = compile_cache.usage()
        cache_verdict = "off"

        def compiled(seconds: float) -> None:
            nonlocal cache_verdict
            cache_verdict = (compile_cache.usage() - cache_before).verdict
            bar.compiled(seconds)
            if not self.options.progress:
                err_console.print(
                    f"{program.name}: compiled in {seconds:.1f} s, training {plan.num_iterations} iterations"
                    f" x {program.runs}"
                )

        with self.monitor() if monitored else contextlib.nullcontext():
            try:
                with bar:
                    result = runner.run(
                        plan.algorithm,
                        program.seeds,
                        plan.num_iterations,
                        plan.spec.logging.interval,
                        sink=sink,
                        on_compiled=compiled,
                        start=start,
                        checkpointer=ckpt,
                        mesh=plan.mesh,
                        programs=self.options.programs,
                        numbers=program.numbers,
                        block=program.block,
                        profile_dir=None if program.profile_dir is None else str(program.profile_dir),
                    )
            finally:
                # The checkpointer is closed (its writes waited for) on every way out.
                closing = time.perf_counter()
                ckpt.close()
                closed = time.perf_counter()
        stopped = time.perf_counter()
        self.tracker.flush()
        flushed = time.perf_counter()
        wall_time = results.wall_time(
            result,
            started=program.started,
            training_started=training_started,
            closing=closing,
            closed=closed,
            flushed=flushed,
        )
        return Trained(result, wall_time, cache_verdict, training_started, closed, stopped, flushed)

    # ---------------------------------------------------------- recording

    def make_results(self, plan: Plan, result: RunResult, trained: Trained, wall_seconds: float) -> Results:
        """The record (results.json) of `plan`'s runs in `trained`, whose
        part of the program's result is `result`."""
        return results.make_results(
            plan,
            result,
            wall_seconds,
            trained.flushed - trained.closed,
            self.git,
            wall_time=trained.wall_time,
            compile_cache=trained.compile_cache,
        )

    def log_results(
        self,
        record: Results,
        result: RunResult,
        run: str | None,
        seed_runs: Sequence[int],
        speed: dict[str, float],
        tags: dict[str, str] | None = None,
    ) -> None:
        """Log `record` on `run` (None: the parent; see Tracking.log_summary's
        keys): its final metrics and speed (with `speed` added), each seed's
        final metrics on its run (`seed_runs`, in the record's seed order),
        the compilation cache's verdict (with `tags` added), results.json and
        every iteration of `result` (its runs' part of the program's) in
        iterations.parquet, written to the run directory first."""
        speed = {
            "sps": record.speed.sps,
            "sps_per_device": record.speed.sps_per_device,
            "compile_seconds": record.speed.compile_seconds,
            **({"peak_memory_mb": record.speed.peak_memory_bytes / 2**20} if record.speed.peak_memory_bytes else {}),
            **speed,
        }
        finals = list(record.per_seed_final.values())
        self.tracker.log_summary(
            {
                run: {**_final(record.final), **speed},
                **{key: _final(values) for key, values in zip(seed_runs, finals, strict=True)},
            }
        )
        self.tracker.set_tags({"compile_cache": record.speed.compile_cache, **(tags or {})}, run)
        self.tracker.log_artifacts({"results.json": record.to_json()}, run)
        folder = self.directory.path / ("" if run is None else f"runs/{run}")
        folder.mkdir(parents=True, exist_ok=True)
        steps = record.env_steps_per_seed // record.iterations
        path = iterations.write(
            folder / iterations.FILE,
            result.metrics,
            record.seeds,
            steps,
            result.evaluation,
            result.evaluation_iterations,
        )
        self.tracker.log_files([path], run)


def _final(values: dict[str, float]) -> dict[str, float]:
    return {f"final_{name}": value for name, value in values.items()}
