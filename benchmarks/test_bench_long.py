"""Long benchmarks, run with `--full` only: the harness's overhead over a
bare loop, and AlphaZero at the size of the public pgx example.

The pgx AlphaZero example is quoted at about 300 frames/s on a 2-core CPU,
training included, for connect_four with 256 games in parallel, 64 moves per
iteration, 32 Gumbel simulations, a 2-block 32-channel ResNet and 4 updates
of 4096 per iteration: `alphazero_pgx_example` is that configuration.
"""

from __future__ import annotations

import statistics
import time

import jax
import pytest

from benchmarks.machinery import measure
from benchmarks.machinery.paths import PUBLISHED_SPECS
from harness import build
from harness import experiment_spec as spec_module
from harness.run import runner
from harness.run.ceiling import spread

pytestmark = pytest.mark.full_only


def _plan(name: str, num_seeds: int) -> build.Plan:
    loaded = spec_module.load(PUBLISHED_SPECS / f"{name}.yaml")
    return build.build(loaded.model_copy(update={"seeds": tuple(range(num_seeds))}))


@pytest.mark.parametrize(
    "name,live_metrics",
    [("reinforce_cartpole", False), ("reinforce_cartpole", True), ("ppo_cartpole", False)],
    ids=["reinforce", "reinforce-live-metrics", "ppo"],
)
def test_harness_overhead(entry, tmp_path, name, live_metrics):
    """The same compiled chunk of the published spec (8 seeds): a bare loop
    against `runner.run` with MLflow logging (SQLite) and the progress bar
    on, as `harness run` does it. On a CPU backend `harness run` writes
    per-iteration metrics after training; "live-metrics" streams them during
    training (`--live-metrics`). Rounds alternate which goes first, so that
    machine noise hits both alike; the ratio of medians is the overhead."""
    from harness.record import tracking
    from harness.run.progress import ProgressBar

    plan = _plan(name, 8)
    chunk = plan.spec.logging.interval
    num_chunks = 12
    iterations = num_chunks * chunk
    seeds = plan.spec.seeds
    state, _ = runner.init_state(plan.algorithm, seeds)
    compiled, _ = runner.compile_chunk(plan.algorithm.step, chunk, state, map_seeds=plan.algorithm.map_seeds)

    def bare() -> float:
        s = runner.init_state(plan.algorithm, seeds)[0]
        s, m = compiled(s)  # warm-up chunk, as the runner's first chunk is excluded
        jax.block_until_ready((s, m))
        start = time.perf_counter()
        for _ in range(num_chunks - 1):
            s, m = compiled(s)
        jax.block_until_ready((s, m))
        return (num_chunks - 1) * chunk * plan.env_steps_per_iteration * len(seeds) / (time.perf_counter() - start)

    def harness_run(round_index: int) -> float:
        tracker = tracking.Tracking(f"sqlite:///{tmp_path / 'overhead.db'}", "overhead", live_metrics=live_metrics)
        bar = ProgressBar("overhead", iterations, plan.env_steps_per_iteration, len(seeds))
        with tracker:
            tracker.start(f"round{round_index}", {}, {}, seeds)

            def sink(metrics):
                tracker.log_chunk(metrics, plan.env_steps_per_iteration)
                bar.update(metrics)

            with bar:
                result = runner.run(plan.algorithm, seeds, iterations, chunk, sink=sink)
        return result.sps

    bare_sps, harness_sps = [], []

    def one_round():
        if len(bare_sps) % 2:
            harness_sps.append(harness_run(len(harness_sps)))
            bare_sps.append(bare())
        else:
            bare_sps.append(bare())
            harness_sps.append(harness_run(len(harness_sps)))

    with measure.HostPeak() as memory:
        entry.benchmark.pedantic(one_round, rounds=4, iterations=1, warmup_rounds=0)
    overhead = 100 * (1 - statistics.median(harness_sps) / statistics.median(bare_sps))
    entry.record(
        measure.Result(
            name=entry.name,
            kind="micro",
            config={
                "spec_name": name,
                "spec_hash": plan.spec_hash,
                "seeds": 8,
                "chunks": num_chunks,
                "live": live_metrics,
            },
            unit=measure.ENV_STEPS,
            rate=spread(harness_sps),
            repeats=len(harness_sps),
            peak_host_bytes=memory.bytes,
            peak_host_since_start=memory.since_start,
            note=f"overhead {overhead:.1f}% (bare loop {statistics.median(bare_sps):,.0f} steps/s)",
            extra={"bare_sps": bare_sps, "harness_sps": harness_sps, "overhead_percent": overhead},
        )
    )


PGX_EXAMPLE = {
    "name": "bench_alphazero_pgx_example",
    "algorithm": "alphazero",
    "env": {"suite": "pgx", "id": "connect_four"},
    "seeds": [0],
    "budget": {"env_steps": 256 * 64},
    "network": {"kind": "resnet", "num_blocks": 2, "num_channels": 32},
    "hyperparameters": {
        "num_envs": 256,
        "collection_steps": 64,
        "num_simulations": 32,
        "capacity": 64,
        "warmup_iterations": 0,
        "train_steps": 4,
        "train_batch_size": 4096,
        "evaluation": {"games": 32, "pool_size": 4},
    },
    "logging": {"interval": 1},
}


@pytest.fixture(scope="module")
def pgx_example():
    plan = build.build(spec_module.parse(PGX_EXAMPLE))
    state, init_seconds = runner.init_state(plan.algorithm, plan.spec.seeds)
    chunk, chunk_seconds = runner.compile_chunk(plan.algorithm.step, 1, state)
    return {"plan": plan, "state": state, "chunk": chunk, "compile_seconds": init_seconds + chunk_seconds}


def test_alphazero_pgx_example(entry, pgx_example):
    """One iteration at the pgx example's size: self-play moves (frames)
    per second including training, simulations/s, updates/s."""
    plan, chunk = pgx_example["plan"], pgx_example["chunk"]
    hp = plan.spec.hyperparameters

    def call():
        pgx_example["state"], metrics = chunk(pgx_example["state"])
        jax.block_until_ready((pgx_example["state"], metrics))

    with measure.HostPeak() as memory:
        call()  # warm-up
        entry.benchmark.pedantic(call, rounds=3, iterations=1, warmup_rounds=0)
    frames = plan.env_steps_per_iteration
    result = measure.micro_result(
        entry.name,
        {"spec_hash": plan.spec_hash},
        list(entry.benchmark.stats.stats.data),
        work_per_call=frames,
        unit=measure.ENV_STEPS,
        iteration="one training iteration (256 games x 64 moves, 4 x 4096 updates)",
        compile_seconds=pgx_example["compile_seconds"],
        memory=memory,
        device=entry.bench.device,
        simulations_per_call=frames * hp.num_simulations,
        updates_per_call=hp.train_steps,
    )
    result.note = "pgx's example: ~300 frames/s on a 2-core CPU"
    entry.record(result)


def test_alphazero_evaluation(entry, pgx_example):
    """One evaluation at the pgx example's size: 32 games against each of a
    random player, a greedy player and 4 pool members."""
    plan = pgx_example["plan"]
    state = pgx_example["state"]
    start = time.perf_counter()
    evaluate = jax.jit(runner.over_seeds(plan.algorithm.evaluate, plan.algorithm.map_seeds)).lower(state).compile()
    compile_seconds = time.perf_counter() - start
    evaluation = plan.spec.hyperparameters.evaluation
    games = evaluation.games * (2 + evaluation.pool_size)

    def call():
        jax.block_until_ready(evaluate(state))

    with measure.HostPeak() as memory:
        call()
        entry.benchmark.pedantic(call, rounds=3, iterations=1)
    entry.record(
        measure.micro_result(
            entry.name,
            {"spec_hash": plan.spec_hash, "games": games},
            list(entry.benchmark.stats.stats.data),
            work_per_call=games,
            unit="games/s",
            iteration=f"one evaluation ({games} games)",
            compile_seconds=compile_seconds,
            memory=memory,
            device=entry.bench.device,
        )
    )
