"""Spec entries: a spec trained through `harness.run.runner`, as `harness run`
trains it (without MLflow), measured by `benchmarks.machinery.measure.measure_spec`.

By default, the small benchmark specs of benchmarks/specs/ at 1 seed and at
all their seeds vmapped (`spec[ppo_cartpole-16seeds]`); with `--full`, the
published specs of experiments/ at their own seeds and budgets
(`spec[ppo_cartpole]`); with `--spec PATH`, that file. Against a baseline
(`--baseline REV`), rounds of the spec's chunk program in lockstep with
REV's (benchmarks.machinery.chunk_rounds).
"""

from __future__ import annotations

from benchmarks.machinery import chunk_rounds, measure


def test_spec(entry, spec_entry):
    plan = spec_entry.plan()
    if entry.bench.lockstep is not None:  # against a baseline: rounds of its chunk program
        iterations = plan.spec.logging.interval
        entry.record(chunk_rounds.measure_chunks(entry, plan, iterations, {"iterations": plan.num_iterations}))
        return
    out = {}

    def run():
        out["result"], _ = measure.measure_spec(
            entry.name,
            plan,
            evaluate=spec_entry.evaluate,
            device=entry.bench.device,
            profile_dir=entry.bench.profile_dir(entry.name),
        )

    # One round: the whole training run; its chunks after the first are the
    # repeats the figures come from (pytest-benchmark's time is the run's
    # wall time, compiles included).
    entry.benchmark.pedantic(run, rounds=1, iterations=1)
    entry.record(out["result"])
