"""Training and recording a sweep (harness.sweep): its programs in turn, one
set of MLflow runs, one run directory.

MLflow: a parent run for the sweep (tag `harness.kind = sweep`; its spec
with the sweep section as params and `spec.yaml`; the summary), under it a
run per point, recorded as `harness run` records a spec (that point's
resolved spec as params and `spec.yaml`, its `spec_hash`, `results.json`,
`final_*` and speed metrics), and under each point a run per seed with the
per-iteration metrics. The run directory (harness.record.rundir) is the
sweep's: one journal (each entry names its group and its columns' runs),
one checkpoint folder per program (`state/group-<g>/`), and each finished
point's record (`points/<index>.json`), so `--resume` continues the program
that was interrupted and skips the finished ones.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import jax

from harness import spec
from harness.console import err_console, out_console, print_table
from harness.judge import sweep_summary
from harness.record import journal, rundir, tracking
from harness.record.schema import Results
from harness.record.schema import parse as parse_results
from harness.run import checkpoint, compile_cache, provenance, results
from harness.run.cluster import DistributedError
from harness.run.progress import ProgressBar
from harness.run.session import RunOptions, chunk_sink, resumer, run_tags, system_metrics, train_plan
from harness.sweep import Group, Sweep

POINTS_DIR = "points"


class SweepLogged(NamedTuple):
    records: dict[int, Results]  # each point's results.json, by point index
    summary: list[sweep_summary.Row]  # best first
    metric: str  # what the points are ranked by
    parent_id: str
    point_ids: list[str]
    uri: str
    experiment_id: str
    offline: str | None


def _check_resumable(directory: rundir.RunDirectory, sweep: Sweep, uri: str) -> None:
    info = directory.info
    if info.get("kind") != "sweep":
        raise rundir.CheckpointError(f"run {directory.run_id} is not a sweep; resume it with harness run SPEC --resume")
    if info.get("sweep_hash") != sweep.sweep_hash:
        raise rundir.CheckpointError(
            f"run {directory.run_id} swept other points (sweep hash {str(info.get('sweep_hash'))[:12]}, this sweep's"
            f" is {sweep.sweep_hash[:12]}): give the same spec, --set, --samples and --sample-seed to resume it"
        )
    rundir.check_store_and_status(directory, uri)


def _sweep_tags(sweep: Sweep, versions: dict[str, str], git: dict[str, str]) -> dict[str, str]:
    return {
        "harness.kind": "sweep",
        "spec_name": sweep.spec.name,
        "spec_hash": spec.spec_hash(sweep.spec),
        "algorithm": sweep.spec.algorithm,
        "sweep.hash": sweep.sweep_hash,
        "sweep.keys": ",".join(sweep.keys),
        "sweep.mode": sweep.mode,
        "sweep.points": str(len(sweep.points)),
        "sweep.programs": str(len(sweep.groups)),
        "sweep.exact_points": str(sweep.exact_points).lower(),
        **tracking.provenance_tags(provenance.fingerprint(sweep.groups[0].plan.layout), versions, git),
    }


def run_sweep(sweep: Sweep, uri: str, options: RunOptions | None = None, metric: str | None = None) -> SweepLogged:
    """Train every point of `sweep` for every seed, program by program, and
    record it (see the module doc); `metric` ranks the points (default:
    `sweep_summary.ranked_metric`). `options` as for `harness run`
    (`resume`: True or the sweep's run id)."""
    options = options or RunOptions()
    if jax.process_count() > 1:
        raise DistributedError("a sweep runs in one process; spread its runs over that process's devices instead")
    live = options.live_metrics or jax.default_backend() != "cpu"
    root = Path(options.checkpoint_dir) if options.checkpoint_dir else rundir.default_root(uri)
    directory = None
    if options.resume:
        run_id = options.resume if isinstance(options.resume, str) else None
        directory = rundir.find_run(root, run_id, sweep.spec.name)
        _check_resumable(directory, sweep, uri)
    expected = sum(g.plan.num_iterations * len(g.run_seeds) * 8 for g in sweep.groups)
    tracker = tracking.Tracking(uri, sweep.spec.experiment_name, live_metrics=live, expected_values=expected)
    versions, git = provenance.versions(), provenance.git_state()
    status = "FAILED"
    records: dict[int, Results] = {}
    try:
        with tracker:
            if directory is None:
                directory = _start(sweep, tracker, root, uri, versions, git, options)
            else:
                info = directory.info
                children = {int(k): v for k, v in info["child_run_ids"].items()}
                tracker.reopen(info["parent_run_id"], children, {"resumed": "true"}, info["point_run_ids"])
                directory.update(status="RUNNING")
            journal_ = journal.Journal(directory.path)
            tracker.attach(journal_)
            done = set(directory.info.get("groups_done", []))
            resuming = bool(options.resume)
            with system_metrics(uri, tracker.parent_id, options, resume=resuming):
                for g, group in enumerate(sweep.groups):
                    if g in done:
                        for point in group.points:
                            path = directory.path / POINTS_DIR / f"{point.index}.json"
                            records[point.index] = parse_results(path.read_text(), str(path))
                        continue
                    started_at = options.started_at if not records else None
                    trained = _train_group(
                        sweep, g, group, tracker, journal_, directory, options, resuming, started_at, git
                    )
                    records.update(trained)
                    resuming = False
                    done.add(g)
                    directory.update(groups_done=sorted(done))
            journal_.scope = None
            logged = _summarise(sweep, records, tracker, metric, uri)
            status = "FINISHED"
    except KeyboardInterrupt:
        status = "KILLED"
        raise
    finally:
        if directory is not None:
            directory.update(status=status)
            if status != "FINISHED":
                err_console.print(
                    f"{sweep.spec.name}: continue the sweep with: harness sweep SPEC --resume {directory.run_id}"
                    " (with the same --set/--samples)",
                    soft_wrap=True,
                )
        if tracker.offline is not None and directory is not None:
            err_console.print(
                f"[bold yellow]warning:[/] the MLflow store {uri} could not be reached ({tracker.offline});"
                f" upload the rest with: harness sync {directory.run_id}",
                soft_wrap=True,
            )
    return logged._replace(offline=tracker.offline)


def batch_of(sweep: Sweep, group: Group) -> str | None:
    """The fingerprint's `batch` of a program's points: how many runs were
    vmapped together where that is more than a point's own run batches (its
    seeds), which rounds differently in the last bits; None otherwise."""
    if sweep.exact_points or len(group.points) == 1:
        return None
    return f"{len(group.run_seeds)} runs vmapped ({len(group.points)} points x {len(sweep.spec.seeds)} seeds)"


def _start(sweep, tracker, root, uri, versions, git, options) -> rundir.RunDirectory:
    """The sweep's MLflow runs and run directory."""
    group_of = {point.index: group for group in sweep.groups for point in group.points}
    points = []
    for point in sweep.points:
        group = group_of[point.index]
        fingerprint = provenance.fingerprint(group.plan.layout, shards=group.plan.spec.devices.shards)
        if (batch := batch_of(sweep, group)) is not None:
            fingerprint["batch"] = batch
        plan = group.plan._replace(spec=point.spec, spec_hash=spec.spec_hash(point.spec))
        tags = {
            **run_tags(plan, fingerprint, versions, git),
            "sweep.point": str(point.index),
            "sweep.values": point.label(),
            **options.tags,
        }
        points.append((f"{point.spec.name}@{plan.spec_hash[:8]}", spec.flatten(spec.canonical(point.spec)), tags))
    tracker.start_sweep(
        f"{sweep.spec.name}@sweep-{sweep.sweep_hash[:8]}",
        params=spec.flatten(spec.canonical(sweep.spec)),
        tags={**_sweep_tags(sweep, versions, git), **options.tags},
        points=points,
        seeds=sweep.spec.seeds,
    )
    directory = rundir.RunDirectory.create(
        root,
        parent_id=tracker.parent_id,
        child_ids=tracker.child_ids,
        experiment_id=tracker.experiment_id,
        uri=uri,
        spec_name=sweep.spec.name,
        spec_hash=spec.spec_hash(sweep.spec),
        spec_yaml=spec.to_yaml(sweep.spec),
    )
    directory.update(kind="sweep", sweep_hash=sweep.sweep_hash, point_run_ids=tracker.point_ids, groups_done=[])
    tracker.log_artifacts({"spec.yaml": spec.to_yaml(sweep.spec)})
    for point, point_id in zip(sweep.points, tracker.point_ids, strict=True):
        tracker.log_artifacts({"spec.yaml": spec.to_yaml(point.spec)}, point_id)
    return directory


def _train_group(
    sweep: Sweep,
    g: int,
    group: Group,
    tracker: tracking.Tracking,
    journal_: journal.Journal,
    directory: rundir.RunDirectory,
    options: RunOptions,
    resuming: bool,
    started_at: float | None,
    git: dict[str, str],
) -> dict[int, Results]:
    """Train one program (a group's points x seeds) and record its points."""
    began = time.perf_counter()
    plan = group.plan
    seeds = len(sweep.spec.seeds)
    columns = [point.index * seeds + s for point in group.points for s in range(seeds)]
    journal_.scope = {"group": g, "runs": [tracker.child_ids[c] for c in columns]}
    name = f"{sweep.spec.name} [{g + 1}/{len(sweep.groups)}]" if len(sweep.groups) > 1 else sweep.spec.name
    bar = ProgressBar(
        name,
        plan.num_iterations,
        plan.env_steps_per_iteration,
        len(columns),
        console=err_console,
        enabled=options.progress,
    )

    sink = chunk_sink(tracker, bar, plan.env_steps_per_iteration, journal_.logged_through(), options)
    cache_before = compile_cache.usage()
    verdict = ["off"]

    def compiled(seconds: float) -> None:
        verdict[0] = (compile_cache.usage() - cache_before).verdict
        bar.compiled(seconds)
        if not options.progress:
            err_console.print(
                f"{name}: compiled in {seconds:.1f} s, training {plan.num_iterations} iterations"
                f" x {len(group.points)} points x {seeds} seeds"
            )

    ckpt = checkpoint.Checkpointer(
        directory.state_dir / f"group-{g}",
        every=sweep.spec.checkpoint.every,
        keep=sweep.spec.checkpoint.keep,
        spec_hash=plan.spec_hash,
    )
    start = resumer(plan, directory, ckpt, journal_, tracker, bar) if resuming else None
    training_started = time.perf_counter()
    result, closing, closed = train_plan(
        plan,
        group.run_seeds,
        bar,
        ckpt,
        options,
        sink=sink,
        on_compiled=compiled,
        start=start,
        numbers=group.numbers,
        block=group.block,
    )
    tracker.flush()
    flushed = time.perf_counter()
    wall_time = results.wall_time(
        result,
        started=started_at or began,
        training_started=training_started,
        closing=closing,
        closed=closed,
        flushed=flushed,
    )
    batch = batch_of(sweep, group)
    records = {}
    for i, point in enumerate(group.points):
        point_id = tracker.point_ids[point.index]
        part = slice(i * seeds, (i + 1) * seeds)
        point_result = result._replace(
            metrics={k: v[:, part] for k, v in result.metrics.items()},
            evaluation={k: v[:, part] for k, v in result.evaluation.items()},
            steady_env_steps=result.steady_env_steps // len(group.points),
        )
        point_plan = plan._replace(spec=point.spec, spec_hash=spec.spec_hash(point.spec))
        record = results.make_results(
            point_plan,
            point_result,
            closed - training_started,
            flushed - closed,
            git,
            wall_time=wall_time,
            compile_cache=verdict[0],
        )
        record.mlflow_run_id = point_id
        if batch is not None:
            record.fingerprint = {**record.fingerprint, "batch": batch}
        speed = {
            "sps": record.speed.sps,
            "sps_per_device": record.speed.sps_per_device,
            "compile_seconds": result.compile_seconds,
            "program_sps": result.sps,
        }
        tracker.log_summary(
            {
                point_id: {**{f"final_{k}": v for k, v in record.final.items()}, **speed},
                **{
                    columns[i * seeds + s]: {f"final_{k}": v for k, v in record.per_seed_final[str(seed)].items()}
                    for s, seed in enumerate(sweep.spec.seeds)
                },
            }
        )
        tracker.set_tags({"compile_cache": verdict[0], "sweep.program": str(g)}, point_id)
        tracker.log_artifacts({"results.json": record.to_json()}, point_id)
        path = directory.path / POINTS_DIR / f"{point.index}.json"
        path.parent.mkdir(exist_ok=True)
        journal.write_json(path, record.model_dump(mode="json", exclude_none=True), indent=2)
        records[point.index] = record
    return records


def _summarise(
    sweep: Sweep, records: dict[int, Results], tracker: tracking.Tracking, metric: str | None, uri: str
) -> SweepLogged:
    """The summary table and plot, on the sweep's run and the terminal."""
    metric = sweep_summary.ranked_metric(records, metric)
    run_ids = dict(enumerate(tracker.point_ids))
    values = {point.index: point.values for point in sweep.points}
    summary = sweep_summary.rows(records, values, metric, run_ids)
    title = f"{sweep.spec.name}: {len(sweep.points)} points x {len(sweep.spec.seeds)} seeds, final {metric}"
    print_table(sweep_summary.table(summary, sweep.keys, metric, title))
    best = summary[0]
    tracker.log_summary(
        {
            None: {
                f"best_final_{metric}": best.estimate.point,
                "points": len(sweep.points),
                "programs": len(sweep.groups),
            }
        }
    )
    tracker.set_tags(
        {"sweep.best_point": str(best.point), "sweep.best_run_id": best.run_id or "", "sweep.metric": metric}
    )
    tracker.log_artifacts(
        {
            "summary.md": sweep_summary.to_markdown(summary, sweep.keys, metric),
            "summary.json": sweep_summary.to_json(summary, sweep.keys, metric),
        }
    )
    with tempfile.TemporaryDirectory() as tmp:
        png = Path(tmp) / "sweep.png"
        sweep_summary.plot(summary, sweep.keys, metric, png, title)
        if tracker.offline is None:
            tracker.log_files([png])
    out_console.print(
        f"best: point {best.point} ({', '.join(f'{k}={v}' for k, v in best.values.items())})", soft_wrap=True
    )
    for line in tracking.ui_hints(uri, tracker.experiment_id, tracker.parent_id):
        out_console.print(line, soft_wrap=True)
    return SweepLogged(
        records, summary, metric, tracker.parent_id, list(tracker.point_ids), uri, tracker.experiment_id, None
    )


def check_metric(sweep: Sweep, metric: str, source: str) -> None:
    """Refuse a --metric the sweep's programs do not produce (found by
    tracing their first program's step and evaluation, not running them)."""
    algorithm = sweep.groups[0].plan.algorithm
    numbers = sweep.groups[0].numbers
    key = jax.random.key(0)
    if numbers is None:
        state = jax.eval_shape(algorithm.init, key)
    else:
        state = jax.eval_shape(algorithm.init, key, {k: v[0] for k, v in numbers.items()})
    names = set(jax.eval_shape(algorithm.step, state)[1])
    if algorithm.evaluate is not None:
        names |= set(jax.eval_shape(algorithm.evaluate, state)[1])
    if metric not in names:
        raise spec.SpecError(
            source, [("--metric", f"{metric!r} is not a metric of this sweep: {', '.join(sorted(names))}")]
        )


def describe(sweep: Sweep) -> list[str]:
    """What `harness validate` prints about a sweep: its points and programs."""
    batching = "points one after another (exact)" if sweep.exact_points else "points and seeds vmapped together"
    lines = [
        f"# sweep ({sweep.mode}): {len(sweep.points)} points x {len(sweep.spec.seeds)} seeds"
        f" in {len(sweep.groups)} program(s), {batching}"
    ]
    for g, group in enumerate(sweep.groups):
        carried = ", ".join(group.numeric) or "none"
        lines.append(
            f"#   program {g}: {len(group.points)} points, {len(group.run_seeds)} runs; numbers in the state: {carried}"
        )
        for point in group.points:
            lines.append(f"#     point {point.index}: {point.label()}  (spec_hash {spec.spec_hash(point.spec)[:12]})")
    return lines
