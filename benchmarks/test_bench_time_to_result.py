"""Time to result, run with `--full` only: `harness run` of a published
spec end to end, as a user runs it (a fresh process, a fresh SQLite store),
once with an empty compilation cache and once with the cache it left.

The headline rate is env steps (all seeds) per second of the whole command;
the record's wall-time breakdown (start-up, compile, training, evaluation,
checkpoints, metric writing) of both runs is in the entry's extra figures
and its note.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from benchmarks.machinery import measure
from benchmarks.machinery.children import child_env
from benchmarks.machinery.paths import PUBLISHED_SPECS

pytestmark = pytest.mark.full_only


def _harness_run(spec, tmp_path, cache, label: str) -> tuple[dict, float]:
    out = tmp_path / f"{label}.json"
    argv = [sys.executable, "-m", "harness", "run", str(spec), "--no-progress", "--compile-cache", str(cache)]
    argv += ["--tracking-uri", f"sqlite:///{tmp_path / f'{label}.db'}", "--results-out", str(out)]
    started = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env=child_env(), check=False)
    seconds = time.perf_counter() - started
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(out.read_text()), seconds


@pytest.mark.parametrize("name", ["reinforce_cartpole", "ppo_cartpole"])
def test_time_to_result(entry, tmp_path, name):
    spec = PUBLISHED_SPECS / f"{name}.yaml"
    cache = tmp_path / "compile-cache"
    runs = {}

    def one_round():
        for label in ("cold", "warm"):
            runs[label] = _harness_run(spec, tmp_path, cache, label)

    entry.benchmark.pedantic(one_round, rounds=1, iterations=1, warmup_rounds=0)
    record = runs["warm"][0]
    env_steps = record["env_steps_per_seed"] * len(record["seeds"])
    rates = [env_steps / seconds for _, seconds in runs.values()]
    breakdown = {label: {**r["speed"]["wall_time"], "process": s} for label, (r, s) in runs.items()}

    def described(label: str) -> str:
        w = breakdown[label]
        return (
            f"{label} {w['process']:.0f} s (start-up {w['startup']:.1f}, compile {w['compile']:.1f},"
            f" training {w['first_chunk'] + w['steady']:.1f}, writing {w['metric_writing']:.1f})"
        )

    entry.record(
        measure.Result(
            name=entry.name,
            kind="micro",
            config={"spec_name": name, "spec_hash": record["spec_hash"], "seeds": len(record["seeds"])},
            unit=measure.ENV_STEPS,
            rate=(rates[1], min(rates), max(rates)),
            repeats=1,
            compile_seconds=breakdown["cold"]["compile"],
            note=f"{described('cold')}; {described('warm')}",
            extra={
                "wall_time": breakdown,
                "compile_cache": {k: r["speed"]["compile_cache"] for k, (r, _) in runs.items()},
            },
        )
    )
