"""What a sweep in one program gives (issue 20): N learning rates of the PPO
benchmark spec (1 seed each) trained in one program (`sweep[...]`), against
the same points run one after another, each a spec of its own with its own
compile.

A point run alone runs at the same speed whichever its learning rate, so
"one after another" is measured once per round on the first point's spec
(its compile and its steady env steps/s) and counted N times; rounds
alternate the order. The rate is the one program's steady env steps/s (all
points); the note gives the point's own rate, both compiles, and the time
to train all N points either way, and the rate and compile of the same
program with `--exact-points` (points one after another, each with its own
run's bits)."""

from __future__ import annotations

import statistics

import numpy as np
import pytest

from benchmarks.machinery import measure
from benchmarks.machinery.paths import BENCH_SPECS
from harness import build
from harness import experiment_spec as spec_module
from harness import sweep as sweeps
from harness.run import runner
from harness.run.ceiling import spread

ROUNDS = 3


def _spec() -> spec_module.Spec:
    loaded = spec_module.load(BENCH_SPECS / "ppo_cartpole.yaml")
    data = spec_module.canonical(loaded)
    data["seeds"] = [0]
    return spec_module.parse(data)


@pytest.mark.parametrize(
    "points",
    # With --full only: the 8 points alone take a minute and a half on a
    # 2-core CPU, which the default suite's 10 minutes cannot hold.
    [pytest.param(n, marks=pytest.mark.full_only) for n in (1, 8, 64)],
    ids=lambda n: f"ppo_cartpole-{n}point{'s' if n > 1 else ''}",
)
def test_sweep(entry, points):
    base = _spec()
    rates = [float(r) for r in np.geomspace(1e-4, 1e-2, points)] if points > 1 else [base.optimizer.learning_rate]
    sets = {"optimizer.learning_rate": tuple(rates)}
    (group,) = sweeps.make_sweep(base, "ppo_cartpole.yaml", sets=sets).groups
    (exact,) = sweeps.make_sweep(base, "ppo_cartpole.yaml", sets=sets, exact_points=True).groups
    single = build.build(group.points[0].spec)
    figures: dict[str, list[float]] = {name: [] for name in ("sps", "compile", "single_sps", "single_compile")}
    if points > 1:
        figures |= {"exact_sps": [], "exact_compile": []}

    def train(group: sweeps.Group, prefix: str) -> None:
        plan = group.plan
        result = runner.run(
            plan.algorithm,
            group.run_seeds,
            plan.num_iterations,
            plan.spec.logging.interval,
            numbers=group.numbers,
            block=group.block,
        )
        figures[f"{prefix}sps"].append(result.sps)
        figures[f"{prefix}compile"].append(result.compile_seconds)

    def one_program():
        train(group, "")
        if points > 1:  # --exact-points: the points one after another in the one program
            train(exact, "exact_")

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
            rate=spread(figures["sps"]),
            repeats=ROUNDS,
            compile_seconds=median["compile"],
            note=f"{points} point(s) in one program: {median['sps']:,.0f} steps/s, compile {median['compile']:.1f} s;"
            f" one after another: {median['single_sps']:,.0f} steps/s, {points} compile(s) of"
            f" {median['single_compile']:.1f} s; all {points} trained in {together:.1f} s against {in_turn:.1f} s"
            f" ({in_turn / together:.1f}x)"
            + (
                f"; --exact-points: {median['exact_sps']:,.0f} steps/s, compile {median['exact_compile']:.1f} s"
                if points > 1
                else ""
            ),
            extra={name: values for name, values in figures.items()},
        )
    )
