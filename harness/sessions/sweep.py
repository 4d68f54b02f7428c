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

from harness import experiment_spec as spec
from harness.console import err_console, out_console, print_table
from harness.judge import sweep_summary
from harness.record import journal, rundir, tracking
from harness.record.schema import Results
from harness.record.schema import parse as parse_results
from harness.run import provenance, tracing
from harness.run.cluster import DistributedError
from harness.sessions.run import run_tags
from harness.sessions.run_options import RunOptions
from harness.sessions.training import Program, TrainingSession
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
    session = SweepSession(sweep, uri, options)
    records: dict[int, Results] = {}
    with session.recording():
        done = set(session.directory.info.get("groups_done", []))
        resuming = bool(options.resume)
        with session.monitor():
            for g, group in enumerate(sweep.groups):
                if g in done:
                    for point in group.points:
                        path = session.directory.path / POINTS_DIR / f"{point.index}.json"
                        records[point.index] = parse_results(path.read_text(), str(path))
                    continue
                started_at = options.started_at if not records else None
                records.update(session.train_group(g, group, resuming, started_at))
                resuming = False
                done.add(g)
                session.directory.update(groups_done=sorted(done))
        session.journal.scope = None
        logged = _summarise(sweep, records, session.tracker, metric, uri)
    return logged._replace(offline=session.tracker.offline)


def batch_of(sweep: Sweep, group: Group) -> str | None:
    """The fingerprint's `batch` of a program's points: how many runs were
    vmapped together where that is more than a point's own run batches (its
    seeds), which rounds differently in the last bits; None otherwise."""
    if sweep.exact_points or len(group.points) == 1:
        return None
    return f"{len(group.run_seeds)} runs vmapped ({len(group.points)} points x {len(sweep.spec.seeds)} seeds)"


class SweepSession(TrainingSession):
    """A sweep's session: a parent run for the sweep, a run per point under
    it and a run per seed under each point; one program per group."""

    def __init__(self, sweep: Sweep, uri: str, options: RunOptions):
        self.sweep = sweep
        runs = sum(g.plan.num_iterations * len(g.run_seeds) for g in sweep.groups)
        super().__init__(uri, sweep.spec.name, sweep.spec.experiment_name, options, runs=runs)

    def check_resumable(self, directory: rundir.RunDirectory) -> None:
        """Refuse to resume a plain run, or a sweep of other points."""
        info = directory.info
        sweep = self.sweep
        if info.get("kind") != "sweep":
            raise rundir.CheckpointError(
                f"run {directory.run_id} is not a sweep; resume it with harness run SPEC --resume"
            )
        if info.get("sweep_hash") != sweep.sweep_hash:
            raise rundir.CheckpointError(
                f"run {directory.run_id} swept other points (sweep hash {str(info.get('sweep_hash'))[:12]}, this"
                f" sweep's is {sweep.sweep_hash[:12]}): give the same spec, --set, --samples and --sample-seed to"
                " resume it"
            )

    def start_runs(self) -> rundir.RunDirectory:
        """The sweep's MLflow runs and run directory."""
        sweep, options = self.sweep, self.options
        group_of = {point.index: group for group in sweep.groups for point in group.points}
        points = []
        for point in sweep.points:
            group = group_of[point.index]
            fingerprint = provenance.fingerprint(group.plan.layout, shards=group.plan.spec.devices.shards)
            if (batch := batch_of(sweep, group)) is not None:
                fingerprint["batch"] = batch
            plan = group.plan._replace(spec=point.spec, spec_hash=spec.spec_hash(point.spec))
            tags = {
                **run_tags(plan, fingerprint, self.versions, self.git),
                "sweep.point": str(point.index),
                "sweep.values": point.label(),
                **options.tags,
            }
            points.append(
                (f"point {point.index} · {point.label(short=True)}", spec.flatten(spec.canonical(point.spec)), tags)
            )
        self.tracker.start_sweep(
            f"sweep · {len(sweep.points)} points · {len(sweep.spec.seeds)} seeds",
            params=spec.flatten(spec.canonical(sweep.spec)),
            tags={**_sweep_tags(sweep, self.versions, self.git), **options.tags},
            points=points,
            seeds=sweep.spec.seeds,
        )
        directory = self.new_directory(
            sweep.spec,
            spec.spec_hash(sweep.spec),
            kind="sweep",
            sweep_hash=sweep.sweep_hash,
            point_run_ids=self.tracker.point_ids,
            groups_done=[],
        )
        for point, point_id in zip(sweep.points, self.tracker.point_ids, strict=True):
            self.tracker.log_artifacts({"spec.yaml": spec.to_yaml(point.spec)}, point_id)
        return directory

    def ended(self, status: str) -> None:
        if status != "FINISHED":
            err_console.print(
                f"{self.sweep.spec.name}: continue the sweep with: harness sweep SPEC --resume {self.directory.run_id}"
                " (with the same --set/--samples)",
                soft_wrap=True,
            )

    def offline_advice(self) -> str:
        return f"upload the rest with: harness sync {self.directory.run_id}"

    def train_group(self, g: int, group: Group, resuming: bool, started_at: float | None) -> dict[int, Results]:
        """Train one program (a group's points x seeds) and record its
        points, each as its own run would be (its share of the program's
        runs, steps and time), by point index."""
        began = time.perf_counter()
        sweep, tracker = self.sweep, self.tracker
        plan = group.plan
        seeds = len(sweep.spec.seeds)
        columns = [point.index * seeds + s for point in group.points for s in range(seeds)]
        self.journal.scope = {"group": g, "runs": [tracker.child_ids[c] for c in columns]}
        name = f"{sweep.spec.name} [{g + 1}/{len(sweep.groups)}]" if len(sweep.groups) > 1 else sweep.spec.name
        program = Program(
            name,
            plan,
            group.run_seeds,
            f"{len(group.points)} points x {seeds} seeds",
            self.directory.state_dir / f"group-{g}",
            started=started_at or began,
            numbers=group.numbers,
            block=group.block,
        )
        trained = self.train(program, resuming=resuming)
        result = trained.result
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
            record = self.make_results(point_plan, point_result, trained, trained.closed - trained.training_started)
            record.mlflow_run_id = point_id
            if batch is not None:
                record.fingerprint = {**record.fingerprint, "batch": batch}
            self.log_results(
                record, point_result, point_id, columns[part], {"program_sps": result.sps}, {"sweep.program": str(g)}
            )
            path = self.directory.path / POINTS_DIR / f"{point.index}.json"
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
    group = sweep.groups[0]
    names = tracing.metric_names(group.plan.algorithm, group.plan.layout, group.numbers)
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
