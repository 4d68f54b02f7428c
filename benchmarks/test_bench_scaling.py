"""Where the device saturates: a benchmark spec measured at a ladder of
sizes (`harness scale`'s measurement, `harness.run.scaling`), one seed.

The entry's rate is the best size's steady env steps/s; its config holds
every size's rate, the share of the matmul ceiling and the program's
memory, and the saturation point (the smallest size within 10% of the
best). The plot goes to the bench directory (`scaling-<entry>.png`).
With --full only: the default suite's `filled[...]` entries run each
workload at its saturation point instead (benchmarks/test_bench_filled.py)."""

from __future__ import annotations

import statistics

import pytest
import yaml

from benchmarks.machinery import measure
from benchmarks.machinery.paths import BENCH_SPECS
from harness import build
from harness import experiment_spec as spec_module
from harness.run import scaling
from harness.run.ceiling import spread
from harness.sessions import scale as scale_session

LADDERS = [
    ("alphazero_tic_tac_toe-envs", "alphazero_tic_tac_toe.yaml", "envs", [16, 64, 256], 1, True),
    ("ppo_cartpole-envs-long", "ppo_cartpole.yaml", "envs", scaling.ladder(4, 4096), 2, True),
    ("ppo_minatar_breakout-envs", "ppo_minatar_breakout.yaml", "envs", scaling.ladder(4, 1024), 2, True),
    ("ppo_cartpole-seeds", "ppo_cartpole.yaml", "seeds", scaling.ladder(1, 64), 2, True),
]


@pytest.mark.parametrize(
    "spec_file,axis,sizes,chunk",
    [pytest.param(*row[1:5], id=row[0], marks=[pytest.mark.full_only] if row[5] else []) for row in LADDERS],
)
def test_scaling(entry, bench, spec_file, axis, sizes, chunk):
    data = yaml.safe_load((BENCH_SPECS / spec_file).read_text())
    data["seeds"] = [0]
    ceiling = bench.ceiling.matmul_gflops[0] if bench.ceiling else None

    def plan_for(size: int):
        return build.build(spec_module.parse(scaling.resized(data, axis, size), source=spec_file))

    found: list = []

    def climb():
        found[:] = list(
            scaling.climb(
                sizes,
                plan_for,
                lambda plan: scaling.measure(plan, chunk, 2, ceiling),
                (spec_module.SpecError, ValueError),
            )
        )

    entry.benchmark.pedantic(climb, rounds=1, iterations=1, warmup_rounds=0)
    points = [p for p in found if isinstance(p, scaling.SizePoint)]
    stop = next((p for p in found if isinstance(p, scaling.Stop)), None)
    saturated = scaling.saturation(points)
    best = max(points, key=lambda p: p.env_steps_per_second)
    scale_session.plot(points, axis, f"{entry.name} on {bench.device.device_kind}", scaling.marked(points),
                       bench.bench_dir / f"scaling-{entry.name}.png")  # fmt: skip
    rates = ", ".join(f"{p.size}: {p.env_steps_per_second:,.0f}" for p in points)
    entry.record(
        measure.Result(
            name=entry.name,
            kind="micro",
            config={
                "spec": spec_file,
                "axis": axis,
                "sizes": sizes,
                "chunk_iterations": chunk,
                "saturation": saturated.size,
                "best": best.size,
            },  # fmt: skip
            unit=measure.ENV_STEPS,
            rate=spread(best.rates),
            repeats=len(best.rates),
            compile_seconds=statistics.median(p.compile_seconds for p in points),
            iteration=f"{chunk} iteration(s) of 1 seed at the best size",
            gflops_per_second=best.env_steps_per_second * best.flops_per_env_step / 1e9,
            note=f"{scaling.describe_saturation(points, axis)}; env steps/s by size: {rates}"
            + (f"; stopped at {stop.size}: {stop.reason}" if stop else ""),
            extra={"points": [p._asdict() for p in points], "stopped": stop._asdict() if stop else None},
        )
    )
