"""What a sweep in one program gives (issue 20): N learning rates of the PPO
benchmark spec (1 seed each) trained in one program (`sweep[...]`), against
the same points run one after another, each a spec of its own with its own
compile.

A point run alone runs at the same speed whichever its learning rate, so
"one after another" is measured once per round on the first point's spec
(its compile and its steady env steps/s) and counted N times; rounds
alternate the order. The rate is the one program's steady env steps/s (all
points); the note gives the point's own rate, both compiles, and the time
to train all N points either way."""

from __future__ import annotations

import statistics

import numpy as np
import pytest
from conftest import BENCH_SPECS

from harness import build
from harness import spec as spec_module
from harness import sweep as sweeps
from harness.bench import measure
from harness.run import runner

ROUNDS = 3


def _spec() -> spec_module.Spec:
    loaded = spec_module.load(BENCH_SPECS / "ppo_cartpole.yaml")
    data = spec_module.canonical(loaded)
    data["seeds"] = [0]
    return spec_module.parse(data)


@pytest.mark.parametrize(
    "points",
    # 64 points take about 80 s here: --full, to keep the default suite under 10 minutes.
    [1, 8, pytest.param(64, marks=pytest.mark.full_only)],
    ids=lambda n: f"ppo_cartpole-{n}point{'s' if n > 1 else ''}",
)
def test_sweep(entry, points):
    base = _spec()
    rates = [float(r) for r in np.geomspace(1e-4, 1e-2, points)] if points > 1 else [base.optimizer.learning_rate]
    sweep = sweeps.make_sweep(base, "ppo_cartpole.yaml", sets={"optimizer.learning_rate": tuple(rates)})
    (group,) = sweep.groups
    single = build.build(sweep.points[0].spec)
    figures: dict[str, list[float]] = {"sps": [], "compile": [], "single_sps": [], "single_compile": []}

    def one_program():
        plan = group.plan
        result = runner.run(
            plan.algorithm, group.run_seeds, plan.num_iterations, plan.spec.logging.interval, numbers=group.numbers
        )
        figures["sps"].append(result.sps)
        figures["compile"].append(result.compile_seconds)

    def one_point():
        result = runner.run(single.algorithm, single.spec.seeds, single.num_iterations, single.spec.logging.interval)
        figures["single_sps"].append(result.sps)
        figures["single_compile"].append(result.compile_seconds)

    def one_round():
        order = (one_program, one_point) if len(figures["sps"]) % 2 == 0 else (one_point, one_program)
        for run in order:
            run()

    entry.benchmark.pedantic(one_round, rounds=ROUNDS, iterations=1, warmup_rounds=0)
    median = {name: statistics.median(values) for name, values in figures.items()}
    steps = single.env_steps  # per point
    together = median["compile"] + points * steps / median["sps"]
    in_turn = points * (median["single_compile"] + steps / median["single_sps"])
    entry.record(
        measure.Result(
            name=entry.name,
            kind="micro",
            config={"spec_hash": group.plan.spec_hash, "points": points, "seeds": 1, "env_steps": steps},
            unit=measure.ENV_STEPS,
            rate=measure.spread(figures["sps"]),
            repeats=ROUNDS,
            compile_seconds=median["compile"],
            note=f"{points} point(s) in one program: {median['sps']:,.0f} steps/s, compile {median['compile']:.1f} s;"
            f" one after another: {median['single_sps']:,.0f} steps/s, {points} compile(s) of"
            f" {median['single_compile']:.1f} s; all {points} trained in {together:.1f} s against {in_turn:.1f} s"
            f" ({in_turn / together:.1f}x)",
            extra={name: values for name, values in figures.items()},
        )
    )
