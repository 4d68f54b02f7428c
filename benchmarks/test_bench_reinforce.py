"""REINFORCE on CartPole: steady-state env steps/s for 1 and 16 seeds, compile
seconds, XLA's FLOP count, and the harness's overhead over a bare loop.

Timing follows BENCHMARKING.md: ahead-of-time compile timed apart, one
untimed warm-up call, `block_until_ready` before reading the clock, medians
over rounds.
"""

from __future__ import annotations

import statistics
import time

import jax
import pytest
from conftest import REINFORCE_SPEC

from harness import build, runner
from harness import spec as S

CHUNK = 50  # iterations per compiled call, as in the published spec


def _plan(num_seeds: int) -> build.Plan:
    loaded = S.load(REINFORCE_SPEC)
    return build.build(loaded.model_copy(update={"seeds": tuple(range(num_seeds))}))


def _compiled(plan: build.Plan):
    state, init_compile = runner.init_state(plan.algorithm, plan.spec.seeds)
    start = time.perf_counter()
    lowered = runner.make_chunk(plan.algorithm.step, CHUNK).lower(state)
    compiled = lowered.compile()
    compile_seconds = init_compile + time.perf_counter() - start
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return state, compiled, compile_seconds, float(cost.get("flops", float("nan")))


@pytest.mark.parametrize("num_seeds", [1, 16])
def test_reinforce_chunk_sps(benchmark, num_seeds):
    plan = _plan(num_seeds)
    state, compiled, compile_seconds, flops = _compiled(plan)
    holder = {"state": state}

    def call():
        holder["state"], metrics = compiled(holder["state"])
        jax.block_until_ready((holder["state"], metrics))

    call()  # warm-up
    benchmark.pedantic(call, rounds=15, iterations=1, warmup_rounds=1)
    steps = CHUNK * plan.env_steps_per_iteration * num_seeds
    median = benchmark.stats.stats.median
    benchmark.extra_info.update(
        env_steps_per_call=steps,
        sps_median=steps / median,
        sps_min=steps / benchmark.stats.stats.max,
        sps_max=steps / benchmark.stats.stats.min,
        compile_seconds=compile_seconds,
        flops_per_call=flops,
        gflops_per_second=flops / median / 1e9,
        device=jax.devices()[0].device_kind,
    )


def test_reinforce_harness_overhead(benchmark, tmp_path):
    """The same compiled chunk: a bare loop against `runner.run` with MLflow
    logging (SQLite) and the progress bar on. Runs alternate so that machine
    noise hits both alike; the ratio of medians is the overhead."""
    from harness import tracking
    from harness.progress import ProgressBar

    plan = _plan(8)
    num_chunks = 12
    iterations = num_chunks * CHUNK
    state, compiled, _, _ = _compiled(plan)

    def bare() -> float:
        s = runner.init_state(plan.algorithm, plan.spec.seeds)[0]
        s, m = compiled(s)  # warm-up chunk, as the runner's first chunk is excluded
        jax.block_until_ready((s, m))
        start = time.perf_counter()
        for _ in range(num_chunks - 1):
            s, m = compiled(s)
        jax.block_until_ready((s, m))
        return (
            (num_chunks - 1)
            * CHUNK
            * plan.env_steps_per_iteration
            * len(plan.spec.seeds)
            / (time.perf_counter() - start)
        )

    def harness_run(round_index: int) -> float:
        tracker = tracking.Tracking(f"sqlite:///{tmp_path / 'overhead.db'}", "overhead")
        bar = ProgressBar("overhead", iterations, plan.env_steps_per_iteration, len(plan.spec.seeds))
        with tracker:
            tracker.start(f"round{round_index}", {}, {}, plan.spec.seeds)

            def sink(chunk):
                tracker.log_chunk(chunk, plan.env_steps_per_iteration)
                bar.update(chunk)

            with bar:
                result = runner.run(plan.algorithm, plan.spec.seeds, iterations, CHUNK, sink=sink)
        return result.sps

    bare_sps, harness_sps = [], []

    def one_round():
        bare_sps.append(bare())
        harness_sps.append(harness_run(len(harness_sps)))

    benchmark.pedantic(one_round, rounds=5, iterations=1, warmup_rounds=0)
    bare_median, harness_median = statistics.median(bare_sps), statistics.median(harness_sps)
    benchmark.extra_info.update(
        bare_sps_median=bare_median,
        harness_sps_median=harness_median,
        overhead_percent=100 * (1 - harness_median / bare_median),
        bare_sps=bare_sps,
        harness_sps=harness_sps,
    )
    print(
        f"\nbare {bare_median:,.0f} steps/s, harness {harness_median:,.0f} steps/s, "
        f"overhead {100 * (1 - harness_median / bare_median):.1f}%"
    )


def test_reinforce_spec_end_to_end(benchmark, bench_dir):
    """The published spec through `harness run`, logged to .bench/mlflow.db."""
    from harness import cli

    uri = f"sqlite:///{bench_dir / 'mlflow.db'}"
    out = bench_dir / "reinforce_cartpole.results.json"

    def run():
        assert (
            cli.main(["run", str(REINFORCE_SPEC), "--tracking-uri", uri, "--no-progress", "--results-out", str(out)])
            == 0
        )

    benchmark.pedantic(run, rounds=1, iterations=1)
    import json

    record = json.loads(out.read_text())
    benchmark.extra_info.update(
        sps=record["speed"]["sps"],
        compile_seconds=record["speed"]["compile_seconds"],
        final_episode_return=record["final"]["episode_return"],
    )
