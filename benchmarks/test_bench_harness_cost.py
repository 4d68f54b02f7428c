"""What the harness adds to a run, against the run's length: `harness run`
of the published `reinforce_cartpole` at 1x its budget (10x and 100x with
`--full`), as a user runs it (a fresh process and SQLite store, no compile
cache), once with MLflow's curves at their default of at most 320 points
(harness.record.windows) and once with every iteration (`--metric-points 0`).

The headline rate is env steps (all seeds) per second of the whole command.
The entry's note and extra figures break its wall time down: start-up,
compile, training, metric writing, and the harness's share, which is the
command's wall time less compiling and training, over the wall time.

`metric_writing[...]` measures the per-iteration metric path alone (journal,
windows, metric writer, store) at the spec's shape and 1x, 10x and 100x its
iterations, without training: what the harness adds per iteration, at a
length whose training would take 40 minutes here.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import pytest
import yaml

from benchmarks.machinery import measure
from benchmarks.machinery.children import child_env
from benchmarks.machinery.paths import PUBLISHED_SPECS

SPEC = "reinforce_cartpole"
CASES = [
    pytest.param(1, 320, id="x1-320points", marks=pytest.mark.full_only),
    pytest.param(1, 0, id="x1-every", marks=pytest.mark.full_only),
    pytest.param(10, 320, id="x10-320points", marks=pytest.mark.full_only),
    pytest.param(10, 0, id="x10-every", marks=pytest.mark.full_only),
    pytest.param(100, 320, id="x100-320points", marks=pytest.mark.full_only),
    pytest.param(100, 0, id="x100-every", marks=pytest.mark.full_only),
]


def harness_share(wall: dict, process: float) -> float:
    """The part of the command's wall time that is neither compiling nor training."""
    training = wall["first_chunk"] + wall["steady"] + wall["evaluation"]
    return max(0.0, process - wall["compile"] - training) / process


@pytest.mark.parametrize("times,points", CASES)
def test_harness_cost(entry, tmp_path, times, points):
    data = yaml.safe_load((PUBLISHED_SPECS / f"{SPEC}.yaml").read_text())
    data["name"] = f"{SPEC}_x{times}"
    data["budget"]["env_steps"] *= times
    spec = tmp_path / f"{data['name']}.yaml"
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "results.json"
    argv = [sys.executable, "-m", "harness", "run", str(spec), "--no-progress", "--no-compile-cache"]
    argv += ["--metric-points", str(points), "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"]
    argv += ["--results-out", str(out)]
    runs = {}

    def one_round():
        started = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env=child_env(), check=False)
        runs["seconds"] = time.perf_counter() - started
        assert proc.returncode == 0, proc.stderr[-2000:]

    entry.benchmark.pedantic(one_round, rounds=1, iterations=1, warmup_rounds=0)
    record = json.loads(out.read_text())
    process = runs["seconds"]
    wall = record["speed"]["wall_time"]
    share = harness_share(wall, process)
    training = wall["first_chunk"] + wall["steady"] + wall["evaluation"]
    env_steps = record["env_steps_per_seed"] * len(record["seeds"])
    curve = "every iteration" if points == 0 else f"<= {points} points"
    entry.record(
        measure.Result(
            name=entry.name,
            kind="micro",
            config={"spec_name": SPEC, "times_budget": times, "metric_points": points, "seeds": len(record["seeds"])},
            unit=measure.ENV_STEPS,
            rate=(env_steps / process,) * 3,
            repeats=1,
            compile_seconds=wall["compile"],
            note=(
                f"{times}x budget, {curve}: {process:.0f} s (start-up {wall['startup']:.1f}, compile"
                f" {wall['compile']:.1f}, training {training:.1f}, writing {wall['metric_writing']:.1f});"
                f" harness {share:.1%}"
            ),
            extra={
                "wall_time": {**wall, "process": process},
                "harness_share": share,
                "iterations": record["iterations"],
            },
        )
    )


WRITING_CASES = [
    pytest.param(1, 320, id="x1-320points", marks=pytest.mark.full_only),
    pytest.param(1, 0, id="x1-every", marks=pytest.mark.full_only),
    pytest.param(10, 320, id="x10-320points", marks=pytest.mark.full_only),
    pytest.param(10, 0, id="x10-every", marks=pytest.mark.full_only),
    pytest.param(100, 320, id="x100-320points", marks=pytest.mark.full_only),
]


@pytest.mark.parametrize("times,points", WRITING_CASES)
def test_metric_writing(entry, tmp_path, times, points):
    """The harness's per-iteration metric path alone, at `reinforce_cartpole`'s
    shape (8 seeds, its metrics, chunks of 61 iterations) and 1x, 10x and
    100x its 976 iterations, without the training: the journal, the windows,
    the metric writer and a real SQLite store, from the first chunk handed
    over to the last value stored. This is what `harness run` adds per
    iteration; at 100x the run itself would train for about 40 minutes on a
    2-core CPU. Every iteration at 100x (7M values) is left out: about 60 us
    a value."""
    from harness.record import journal, tracking, windows
    from harness.types import ChunkMetrics

    reference = json.loads((PUBLISHED_SPECS.parent / "results" / f"{SPEC}.json").read_text())
    names, seeds = list(reference["curves"]["metrics"]), len(reference["seeds"])
    interval, iterations = reference["spec"]["logging"]["interval"], reference["iterations"] * times
    steps = reference["env_steps_per_seed"] // reference["iterations"]
    rng = np.random.default_rng(0)
    chunk = {name: rng.standard_normal((interval, seeds)).astype(np.float32) for name in names}
    window = windows.window_for(iterations, points)
    measured = {}

    def one_round():
        run_dir = tmp_path / f"run{len(measured)}"
        run_dir.mkdir()
        tracker = tracking.Tracking(f"sqlite:///{run_dir / 'mlflow.db'}", "writing", live_metrics=True)
        tracker.start("writing", {}, {}, tuple(range(seeds)))
        tracker.attach(journal.Journal(run_dir))
        started = time.perf_counter()
        with tracker:
            for first in range(1, iterations + 1, interval):
                count = min(interval, iterations - first + 1)
                tracker.log_chunk(
                    ChunkMetrics(first, {n: v[:count] for n, v in chunk.items()}), steps, window, iterations
                )
            handed = time.perf_counter()
            tracker.flush()
        measured["seconds"], measured["handing"] = time.perf_counter() - started, handed - started

    entry.benchmark.pedantic(one_round, rounds=1, iterations=1, warmup_rounds=0)
    values = iterations * seeds * len(names)
    logged = min(iterations, points or iterations) * seeds * len(names) * (3 if window > 1 else 1)
    curve = "every iteration" if points == 0 else f"<= {points} points"
    entry.record(
        measure.Result(
            name=entry.name,
            kind="micro",
            config={"spec_name": SPEC, "times_budget": times, "metric_points": points, "seeds": seeds},
            unit=measure.VALUES,
            rate=(values / measured["seconds"],) * 3,
            repeats=1,
            note=(
                f"{times}x ({iterations:,} iterations), {curve}: {values:,} values, {logged:,} to MLflow, in"
                f" {measured['seconds']:.1f} s ({measured['handing']:.2f} s in the training process)"
            ),
            extra={**measured, "values": values, "logged_values": logged, "window": window},
        )
    )
