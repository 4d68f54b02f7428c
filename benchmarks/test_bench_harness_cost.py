"""What the harness adds to a run, against the run's length: `harness run`
of the published `reinforce_cartpole` at 1x its budget (10x and 100x with
`--full`), as a user runs it (a fresh process and SQLite store, no compile
cache), once with MLflow's curves at their default of at most 320 points
(harness.record.windows) and once with every iteration (`--metric-points 0`).

The headline rate is env steps (all seeds) per second of the whole command.
The entry's note and extra figures break its wall time down: start-up,
compile, training, metric writing, and the harness's share, which is the
command's wall time less compiling and training, over the wall time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import yaml

from benchmarks.machinery import measure
from benchmarks.machinery.paths import PUBLISHED_SPECS

SPEC = "reinforce_cartpole"
CASES = [
    pytest.param(1, 320, id="x1-320points"),
    pytest.param(1, 0, id="x1-every"),
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
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env=os.environ.copy(), check=False)
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
