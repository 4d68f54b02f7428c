"""Making the record of a finished run (`results.json`, the typed
`harness.record.schema.Results`) from what the runner returned, and the
end-of-run table."""

from __future__ import annotations

import math

import numpy as np

from harness.console import fitting_table, megabytes, out_console, print_table
from harness.experiment_spec import canonical
from harness.plan import Plan
from harness.record.schema import Curves, Results, Speed, WallTime
from harness.record.tracking import ui_hints
from harness.run import memory, provenance
from harness.types import RunResult

FINAL_FRACTION = 0.1  # "final" metrics average the last 10% of iterations
CURVE_POINTS = 20  # curves are kept at this many evenly spaced iterations


def final_window(num_iterations: int) -> int:
    return max(1, math.ceil(num_iterations * FINAL_FRACTION))


def curve_indices(num_iterations: int) -> list[int]:
    points = min(CURVE_POINTS, num_iterations)
    return sorted({math.ceil(num_iterations * (i + 1) / points) - 1 for i in range(points)})


def final_evaluations(num_iterations: int, evaluation_iterations: tuple[int, ...]) -> int:
    """How many of the last evaluations fall in the final window (at least one)."""
    start = num_iterations - final_window(num_iterations)
    return max(1, sum(1 for i in evaluation_iterations if i > start))


def per_seed_final(plan: Plan, result: RunResult) -> dict[int, dict[str, float]]:
    window = final_window(plan.num_iterations)
    evaluations = final_evaluations(plan.num_iterations, result.evaluation_iterations)
    return {
        seed: {
            **{name: float(values[-window:, i].mean()) for name, values in result.metrics.items()},
            **{name: float(values[-evaluations:, i].mean()) for name, values in result.evaluation.items()},
            **{name: float(values[i]) for name, values in result.assessment.items()},
        }
        for i, seed in enumerate(plan.spec.seeds)
    }


def _curves(values_by_name: dict[str, np.ndarray], rows: list[int], env_steps: list[int], seeds) -> Curves:
    return Curves(
        env_steps=env_steps,
        metrics={
            name: {str(seed): [float(values[i, s]) for i in rows] for s, seed in enumerate(seeds)}
            for name, values in values_by_name.items()
        },
    )


def summary(finals: dict[int, dict[str, float]]) -> dict[str, float]:
    names = next(iter(finals.values())).keys()
    return {name: float(np.mean([f[name] for f in finals.values()])) for name in names}


def wall_time(
    result: RunResult, *, started: float, training_started: float, closing: float, closed: float, flushed: float
) -> WallTime:
    """Where a run's wall time went, from the session's clock readings
    (time.perf_counter()): the command's start, training's start, the end of
    training (the checkpointer closing, then closed) and the metrics flushed."""
    first_chunk = result.chunk_seconds[0] if result.chunk_seconds else 0.0
    return WallTime(
        startup=training_started - started,
        compile=result.compile_seconds,
        first_chunk=first_chunk,
        steady=sum(result.chunk_seconds) - first_chunk,
        evaluation=result.evaluation_seconds,
        checkpoint=result.checkpoint_seconds + closed - closing,
        metric_writing=flushed - closed,
        total=flushed - started,
        assessment=result.assessment_seconds,
    )


def make_results(
    plan: Plan,
    result: RunResult,
    wall_seconds: float,
    metrics_flush_seconds: float,
    git: dict[str, str] | None = None,
    *,
    wall_time: WallTime | None = None,
    compile_cache: str | None = None,
) -> Results:
    """The record of a finished run. `git` is the checkout's state when the
    run started (the code that ran); read now when not given. `wall_time`
    and `compile_cache` come from the session (harness.sessions.training)."""
    finals = per_seed_final(plan, result)
    peak = memory.peak()  # this process's devices: a job's other processes keep their own
    index = curve_indices(plan.num_iterations)
    evaluation_curves = None
    if result.evaluation:
        # Evaluations follow whole chunks; kept at up to CURVE_POINTS of them.
        rows = curve_indices(len(result.evaluation_iterations))
        iterations = [result.evaluation_iterations[r] for r in rows]
        evaluation_curves = _curves(
            result.evaluation, rows, [i * plan.env_steps_per_iteration for i in iterations], plan.spec.seeds
        )
    return Results(
        spec_name=plan.spec.name,
        spec_hash=plan.spec_hash,
        spec=canonical(plan.spec),
        env=plan.env_info._asdict(),
        seeds=list(plan.spec.seeds),
        iterations=plan.num_iterations,
        env_steps_per_seed=plan.env_steps,
        final_fraction=FINAL_FRACTION,
        final=summary(finals),
        per_seed_final={str(seed): values for seed, values in finals.items()},
        curves=_curves(result.metrics, index, [(i + 1) * plan.env_steps_per_iteration for i in index], plan.spec.seeds),
        evaluation_curves=evaluation_curves,
        speed=Speed(
            sps=result.sps,
            sps_per_seed=result.sps / len(plan.spec.seeds),
            sps_per_device=result.sps / (plan.layout.count if plan.layout else 1),
            compile_seconds=result.compile_seconds,
            wall_seconds=wall_seconds,
            metrics_flush_seconds=metrics_flush_seconds,
            chunk_seconds_median=float(np.median(result.chunk_seconds)),
            compile_cache=compile_cache,
            wall_time=wall_time,
            peak_memory_bytes=peak.bytes,
            peak_memory=peak.where,
        ),
        fingerprint=provenance.fingerprint(plan.layout, shards=plan.spec.devices.shards),
        versions=provenance.versions(),
        git=git if git is not None else provenance.git_state(),
    )


# What the end-of-run table shows, when the run has it.
SHOWN = (
    "episode_return",
    "episode_length",
    "loss",
    "entropy",
    "draw_rate",
    "eval_return",
    "eval_greedy_return",
    "eval_optimality_gap",
    "eval_random_win",
    "eval_random_loss",
    "eval_greedy_loss",
    "elo",
)


def final_table(plan: Plan, record: Results):
    """The end-of-run table: final metrics per seed and their mean, seeds
    as rows, or as columns where the metrics' names would not fit."""
    names = [n for n in SHOWN if n in record.final]
    seeds = list(record.per_seed_final)
    cells = [[f"{record.per_seed_final[s][n]:.3f}" for n in names] for s in seeds]
    cells.append([f"{record.final[n]:.3f}" for n in names])
    title = f"{plan.spec.name}: final metrics (last {FINAL_FRACTION:.0%} of iterations)"
    return fitting_table(title, "seed", [*seeds, "mean"], names, cells, bold_last_row=True)


def peak_line(speed: Speed) -> str:
    """ ", peak memory N MB (device|host)", or "" for a record without it."""
    if speed.peak_memory_bytes is None:
        return ""
    return f", peak memory {megabytes(speed.peak_memory_bytes)} MB ({speed.peak_memory})"


def print_summary(plan: Plan, record: Results, uri: str, experiment_id: str, parent_id: str) -> None:
    """What `harness run` and `harness reproduce` end with: the final table,
    the speed, and how to open the run in the MLflow UI."""
    print_table(final_table(plan, record))
    speed = record.speed
    out_console.print(
        f"{speed.sps:,.0f} env steps/s steady state ({len(plan.spec.seeds)} seeds), "
        f"compile {speed.compile_seconds:.1f} s, wall {speed.wall_seconds:.1f} s, "
        f"metrics written to MLflow in {speed.metrics_flush_seconds:.1f} s after training"
        f"{peak_line(speed)}",
        soft_wrap=True,
    )
    if speed.wall_time is not None:
        out_console.print(speed.wall_time.line(speed.compile_cache), soft_wrap=True)
    for line in ui_hints(uri, experiment_id, parent_id):
        out_console.print(line, soft_wrap=True)
