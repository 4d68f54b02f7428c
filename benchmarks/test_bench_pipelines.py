"""The published CartPole specs (REINFORCE, PPO): steady-state env steps/s for
1 and 16 seeds, compile seconds, the harness's overhead over a bare loop, and
each spec end to end through `harness run`.

Timing follows BENCHMARKING.md: ahead-of-time compile timed apart, one
untimed warm-up call, `block_until_ready` before reading the clock, medians
over rounds.
"""

from __future__ import annotations

import statistics
import time

import jax
import pytest
from conftest import SPECS, report

from harness import build, runner
from harness import spec as S
from harness.flops import count_flops


def _plan(name: str, num_seeds: int) -> build.Plan:
    loaded = S.load(SPECS[name])
    return build.build(loaded.model_copy(update={"seeds": tuple(range(num_seeds))}))


def _compiled(plan: build.Plan):
    """The spec's own chunk (its logging interval), compiled ahead of time."""
    state, init_compile = runner.init_state(plan.algorithm, plan.spec.seeds)
    compiled, chunk_compile = runner.compile_chunk(plan.algorithm.step, plan.spec.logging.interval, state)
    return state, compiled, init_compile + chunk_compile


@pytest.mark.parametrize("num_seeds", [1, 16])
@pytest.mark.parametrize("name", list(SPECS))
def test_chunk_sps(benchmark, name, num_seeds):
    plan = _plan(name, num_seeds)
    state, compiled, compile_seconds = _compiled(plan)
    # FLOPs from the jaxpr with scan trip counts (XLA's cost analysis counts
    # each loop body once); matmuls counted exactly, the rest one per element.
    flops = count_flops(runner.make_chunk(plan.algorithm.step, plan.spec.logging.interval), state)
    holder = {"state": state}

    def call():
        holder["state"], metrics = compiled(holder["state"])
        jax.block_until_ready((holder["state"], metrics))

    call()  # warm-up
    benchmark.pedantic(call, rounds=15, iterations=1, warmup_rounds=1)
    steps = plan.spec.logging.interval * plan.env_steps_per_iteration * num_seeds
    median = benchmark.stats.stats.median
    benchmark.extra_info.update(
        env_steps_per_call=steps,
        sps_median=steps / median,
        sps_min=steps / benchmark.stats.stats.max,
        sps_max=steps / benchmark.stats.stats.min,
        compile_seconds=compile_seconds,
        flops_per_iteration=flops.total / plan.spec.logging.interval / num_seeds,
        matmul_flops_per_iteration=flops.matmul / plan.spec.logging.interval / num_seeds,
        gflops_per_second=flops.total / median / 1e9,
        matmul_gflops_per_second=flops.matmul / median / 1e9,
        device=jax.devices()[0].device_kind,
    )
    report(
        f"{name} chunk, {num_seeds} seed(s)",
        f"{steps / median:,.0f} steps/s (min {steps / benchmark.stats.stats.max:,.0f}, "
        f"max {steps / benchmark.stats.stats.min:,.0f}); compile {compile_seconds:.1f} s; "
        f"{flops.total / plan.spec.logging.interval / num_seeds / 1e6:.1f} MFLOP/iteration/seed, "
        f"{flops.total / median / 1e9:.2f} GFLOP/s ({flops.matmul / median / 1e9:.2f} in matmuls)",
    )


@pytest.mark.parametrize(
    "name,live_metrics",
    [("reinforce_cartpole", False), ("reinforce_cartpole", True), ("ppo_cartpole", False)],
    ids=["reinforce", "reinforce-live-metrics", "ppo"],
)
def test_harness_overhead(benchmark, tmp_path, name, live_metrics):
    """The same compiled chunk: a bare loop against `runner.run` with MLflow
    logging (SQLite) and the progress bar on, as `harness run` does it. On a
    CPU backend `harness run` writes per-iteration metrics after training
    ("default"); "live-metrics" measures streaming them during training
    (`--live-metrics`). Runs alternate so that machine noise hits both alike;
    the ratio of medians is the overhead."""
    from harness import tracking
    from harness.progress import ProgressBar

    plan = _plan(name, 8)
    chunk = plan.spec.logging.interval
    num_chunks = 12
    iterations = num_chunks * chunk
    state, compiled, _ = _compiled(plan)

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
            * chunk
            * plan.env_steps_per_iteration
            * len(plan.spec.seeds)
            / (time.perf_counter() - start)
        )

    def harness_run(round_index: int) -> float:
        tracker = tracking.Tracking(f"sqlite:///{tmp_path / 'overhead.db'}", "overhead", live_metrics=live_metrics)
        bar = ProgressBar("overhead", iterations, plan.env_steps_per_iteration, len(plan.spec.seeds))
        with tracker:
            tracker.start(f"round{round_index}", {}, {}, plan.spec.seeds)

            def sink(chunk):
                tracker.log_chunk(chunk, plan.env_steps_per_iteration)
                bar.update(chunk)

            with bar:
                result = runner.run(plan.algorithm, plan.spec.seeds, iterations, chunk, sink=sink)
        return result.sps

    bare_sps, harness_sps = [], []

    def one_round():
        # Alternate which goes first, so that drift in the machine's speed
        # does not always favour the same side.
        if len(bare_sps) % 2:
            harness_sps.append(harness_run(len(harness_sps)))
            bare_sps.append(bare())
        else:
            bare_sps.append(bare())
            harness_sps.append(harness_run(len(harness_sps)))

    benchmark.pedantic(one_round, rounds=4, iterations=1, warmup_rounds=0)
    bare_median, harness_median = statistics.median(bare_sps), statistics.median(harness_sps)
    benchmark.extra_info.update(
        bare_sps_median=bare_median,
        harness_sps_median=harness_median,
        overhead_percent=100 * (1 - harness_median / bare_median),
        bare_sps=bare_sps,
        harness_sps=harness_sps,
    )
    report(
        f"{name} harness overhead{' (live metrics)' if live_metrics else ''}",
        f"bare {bare_median:,.0f} steps/s, harness {harness_median:,.0f} steps/s: "
        f"{100 * (1 - harness_median / bare_median):.1f}% (8 seeds, medians of 4 rounds)",
    )


@pytest.mark.parametrize("name", list(SPECS))
def test_spec_end_to_end(benchmark, bench_dir, name):
    """The published spec through `harness run`, logged to .bench/mlflow.db."""
    from harness import cli

    uri = f"sqlite:///{bench_dir / 'mlflow.db'}"
    out = bench_dir / f"{name}.results.json"

    def run():
        argv = ["run", str(SPECS[name]), "--tracking-uri", uri, "--no-progress", "--results-out", str(out)]
        assert cli.main(argv) == 0

    benchmark.pedantic(run, rounds=1, iterations=1)
    import json

    record = json.loads(out.read_text())
    speed = record["speed"]
    benchmark.extra_info.update(
        sps=speed["sps"],
        compile_seconds=speed["compile_seconds"],
        metrics_flush_seconds=speed["metrics_flush_seconds"],
        final_episode_return=record["final"]["episode_return"],
    )
    report(
        f"{name}.yaml via harness run",
        f"{speed['sps']:,.0f} steps/s ({len(record['seeds'])} seeds); compile {speed['compile_seconds']:.1f} s; "
        f"final return {record['final']['episode_return']:.1f}; MLflow: {uri}",
    )
