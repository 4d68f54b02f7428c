"""The run session: train a plan and record it. What `harness run` and
`harness reproduce` both do, and what the tests call to train and log.

MLflow: a parent run (the resolved spec as params and `spec.yaml`, the
summary metrics, `results.json`, each chunk's host-side times, the spec's
claims judged on the run as tags `claim.<name>` and metrics
`claim_<name>_value`) and under it a run per seed with the per-iteration
metrics. The run directory (harness.record.rundir) holds the metric journal
and the checkpoints, so `--resume` continues the run from its latest good
checkpoint.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any, NamedTuple

import yaml

import harness
from harness import experiment_spec as spec
from harness.console import err_console, out_console, print_table
from harness.judge import claims, claims_table
from harness.plan import Plan
from harness.record import iterations, journal, rundir, runs, tracking
from harness.record.schema import Results
from harness.run import checkpoint, cluster, determinism, profiling, provenance, runner, tracing
from harness.sessions.run_options import RunOptions, system_metrics
from harness.sessions.training import Program, TrainingSession
from harness.stats import verdict


def run_tags(plan: Plan, fingerprint: dict[str, str], versions: dict[str, str], git: dict[str, str]) -> dict[str, str]:
    return {
        "spec_hash": plan.spec_hash,
        "spec_name": plan.spec.name,
        "algorithm": plan.spec.algorithm,
        "harness.version": harness.__version__,
        **plan.env_info.as_tags(),
        **tracking.provenance_tags(fingerprint, versions, git),
        **plan.strength_tags,
    }


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
    # Its iterations.parquet in the run directory (also an artifact of the run).
    iterations: Path | None = None


def train_and_log(plan: Plan, uri: str, options: RunOptions | None = None) -> Logged | None:
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
    (process 0 reads the checkpoint and sends it to all), and return None.
    `options` default: `RunOptions()`."""
    options = options or RunOptions()
    if not cluster.is_main_process():
        _follow(plan, options)
        return None
    try:
        return _train_and_log_main(plan, uri, options)
    except BaseException as error:
        # The other processes of a job wait for process 0 to start training;
        # if it cannot, they stop too (with its message) instead of waiting.
        cluster.announce_start(error=f"{type(error).__name__}: {error}")
        raise


class RunSession(TrainingSession):
    """A plain run's session: a parent run with a child run per seed."""

    def __init__(self, plan: Plan, uri: str, options: RunOptions):
        self.plan = plan
        super().__init__(
            uri, plan.spec.name, plan.spec.experiment_name, options, runs=plan.num_iterations * len(plan.spec.seeds)
        )
        self.fingerprint = provenance.fingerprint(plan.layout, shards=plan.spec.devices.shards)

    def check_resumable(self, directory: rundir.RunDirectory) -> None:
        """Refuse to resume a sweep, or a run of another spec."""
        info = directory.info
        if info.get("kind") == "sweep":
            raise rundir.CheckpointError(
                f"run {directory.run_id} is a sweep; resume it with harness sweep SPEC --resume"
            )
        plan = self.plan
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

    def start_runs(self) -> rundir.RunDirectory:
        plan = self.plan
        tags = {**run_tags(plan, self.fingerprint, self.versions, self.git), **self.options.tags}
        # The command and what it ran, first, so that the runs table shows it (the spec hash is a tag).
        self.run_name = tags.pop("mlflow.runName", None) or f"run · {len(plan.spec.seeds)} seeds"
        self.tracker.start(
            run_name=self.run_name, params=spec.flatten(spec.canonical(plan.spec)), tags=tags, seeds=plan.spec.seeds
        )
        return self.new_directory(plan.spec, plan.spec_hash)

    def ended(self, status: str) -> None:
        """Where an unfinished run's last checkpoint is, and how to resume it."""
        if self.checkpointer is None:
            return
        directory = self.directory
        steps = rundir.saved_iterations(directory.state_dir)
        if status == "FINISHED" or not steps and status != "KILLED":
            return
        where = f"the last checkpoint is at iteration {steps[-1]} ({directory.state_dir})" if steps else "no checkpoint"
        if steps:
            err_console.print(
                f"{self.plan.spec.name}: {where}; continue with: harness run SPEC --resume {directory.run_id}",
                soft_wrap=True,
            )
        else:
            err_console.print(f"{self.plan.spec.name}: {where} was written", soft_wrap=True)

    def offline_advice(self) -> str:
        return (
            f"training went on and its metrics are kept in {self.directory.path / journal.JOURNAL_FILE}."
            f" Upload them with: harness sync {self.directory.run_id}"
            + (f" --checkpoint-dir {self.root}" if self.options.checkpoint_dir else "")
        )


def _train_and_log_main(plan: Plan, uri: str, options: RunOptions) -> Logged:
    """`train_and_log` in process 0 (or the only process)."""
    called_at = time.perf_counter()
    session = RunSession(plan, uri, options)
    if note := determinism.run_note(session.fingerprint):
        err_console.print(f"{plan.spec.name}: {note}", soft_wrap=True)
    started = time.perf_counter()
    with session.recording():
        program = Program(
            plan.spec.name,
            plan,
            plan.spec.seeds,
            f"{len(plan.spec.seeds)} seeds" + (f" on devices {plan.layout.describe()}" if plan.layout else ""),
            session.directory.state_dir,
            started=options.started_at or called_at,
            profile_dir=session.directory.path / profiling.PROFILE_DIR if options.profile else None,
        )
        trained = session.train(program, resuming=bool(options.resume), monitored=True)
        wall = trained.stopped - started
        record = session.make_results(plan, trained.result, trained, wall)
        try:
            faithful = claims.faithful(options.faithful, plan.spec.claims, exclude=plan.spec.seeds)
            record = claims.with_claims(record, plan.spec.claims, faithful)
        except claims.ClaimError as error:  # a trained run is recorded all the same
            err_console.print(f"{plan.spec.name}: the claims cannot be judged on this run: {error}", soft_wrap=True)
        profiling.log_host_times(session.tracker, trained.result.chunk_times, plan.env_steps_per_iteration)
        if program.profile_dir is not None:
            profiling.report(session.tracker, program.profile_dir, trained.result.profiled_through)
        wall_time = {f"time_{part}_seconds": seconds for part, seconds in trained.wall_time.model_dump().items()}
        judged = record.claims or {}
        summary = {"wall_seconds": wall, **wall_time, **claims.metrics(judged)}
        # The run's verdict on its claims; an adaptive reproduction's batch gets its verdict from the
        # reproduction (harness.sessions.adaptive), on the reproduction's run above the batches.
        said = {} if "adaptive.batch" in options.tags else runs.verdict_tags(verdict.of_claims(judged))
        if said:
            said["mlflow.runName"] = f"{session.run_name} · {verdict.shown(said['verdict'], 'plain')}"
        session.log_results(record, trained.result, None, plan.spec.seeds, summary, claims.tags(judged) | said)
    tracker = session.tracker
    return Logged(
        record,
        session.directory.run_id,
        uri,
        tracker.client,
        tracker.experiment_id,
        tracker.offline,
        session.directory.path / iterations.FILE,
    )


def check_claims(plan: Plan, source: str, lines: dict[str, int] | None = None) -> None:
    """Refuse, as a spec error before anything runs, a claim on a metric the
    plan's algorithm does not produce: its metric names are found by tracing
    (not running) its init, step and evaluation as the plan's layout runs
    them (harness.run.tracing), as a sweep's --metric is."""
    if not plan.spec.claims:
        return
    names = tracing.metric_names(plan.algorithm, plan.layout)
    if problems := claims.unknown_metrics(plan.spec.claims, names):
        raise spec.SpecError(source, problems, lines)


def print_claims(record: Results) -> None:
    """The claims judged on a run (`harness run` and `reproduce` print them
    after the summary), and where each outside figure comes from."""
    if not record.claims:
        return
    print_table(claims_table.table(list(record.claims.items()), f"{record.spec_name}: claims"))
    for line in claims_table.sources(record.claims):
        out_console.print(line, soft_wrap=True)


def _follow(plan: Plan, options: RunOptions) -> None:
    """`train_and_log` in the other processes of a job: train their shards
    once process 0 says so, taking part in its checkpoints and resume."""
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
