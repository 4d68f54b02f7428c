"""What checkpoints cost (harness.run.checkpoint), for the PPO and AlphaZero
benchmark specs:

- `checkpoint_cost[...]`: one checkpoint of the spec's whole training state
  (all its seeds): the blocking part (the host copy and handing it to orbax,
  which the training loop waits for) and the total (until the files are
  committed). The headline rate is checkpoints/s of the total.
- `checkpoint_overhead[...]`: steady-state env steps/s of `runner.run` with a
  checkpoint every 10 iterations against none, the same chunks in both;
  rounds alternate which goes first, so machine noise hits both alike. The
  note gives the slowdown of the medians (the aim: under 5%).
"""

from __future__ import annotations

import statistics
import time

import pytest

from benchmarks.machinery import measure
from benchmarks.machinery.paths import BENCH_SPECS
from harness import build
from harness import experiment_spec as spec_module
from harness.run import checkpoint, runner
from harness.run.ceiling import spread

# spec file, seeds, iterations per chunk, chunks, rounds per arm
CASES = {
    "ppo_cartpole": ("ppo_cartpole.yaml", 16, 10, 12, 3),
    "alphazero_tic_tac_toe": ("alphazero_tic_tac_toe.yaml", 1, 5, 9, 3),
}


def _plan(name: str, chunk: int | None = None, chunks: int | None = None) -> build.Plan:
    file, seeds, default_chunk, default_chunks, _ = CASES[name]
    chunk, chunks = chunk or default_chunk, chunks or default_chunks
    loaded = spec_module.load(BENCH_SPECS / file)
    plan = build.build(loaded)
    return build.build(
        loaded.model_copy(
            update={
                "seeds": tuple(range(seeds)),
                "logging": loaded.logging.model_copy(update={"interval": chunk}),
                "budget": loaded.budget.model_copy(update={"env_steps": chunk * chunks * plan.env_steps_per_iteration}),
            }
        )
    )


def _state_bytes(state) -> int:
    return sum(leaf.nbytes for leaf in checkpoint.snapshot(state).leaves.values())


@pytest.mark.parametrize("name", list(CASES))
def test_checkpoint_cost(entry, tmp_path, name):
    plan = _plan(name)
    algorithm = plan.algorithm.training_only()
    state, _ = runner.init_state(algorithm, plan.spec.seeds)
    blocking, total = [], []
    with (
        measure.HostPeak() as memory,
        checkpoint.opened(tmp_path / "state", every=1, keep=2, spec_hash=plan.spec_hash) as ckpt,
    ):
        ckpt.save(ckpt.snapshot(state), 1, final=True)  # the first save sets orbax up

        def one_save():
            iteration = len(total) + 2
            start = time.perf_counter()
            ckpt.save(ckpt.snapshot(state), iteration)
            returned = time.perf_counter()
            ckpt.wait()
            blocking.append(returned - start)
            total.append(time.perf_counter() - start)

        entry.benchmark.pedantic(one_save, rounds=7, iterations=1, warmup_rounds=0)
    size = _state_bytes(state)
    entry.record(
        measure.Result(
            name=entry.name,
            kind="micro",
            config={"spec_hash": plan.spec_hash, "seeds": len(plan.spec.seeds), "state_bytes": size},
            unit="checkpoints/s",
            rate=spread([1 / s for s in total]),
            repeats=len(total),
            peak_host_bytes=memory.bytes,
            peak_host_since_start=memory.since_start,
            note=f"blocking {1e3 * statistics.median(blocking):.1f} ms, total {1e3 * statistics.median(total):.1f} ms"
            f" ({size / 2**20:.2f} MB, {len(plan.spec.seeds)} seeds)",
            extra={"blocking_seconds": blocking, "total_seconds": total, "state_bytes": size},
        )
    )


@pytest.mark.full_only  # two minutes a case on a 2-core CPU
@pytest.mark.parametrize("name", list(CASES))
def test_checkpoint_overhead(entry, tmp_path, name):
    plan = _plan(name)
    algorithm = plan.algorithm.training_only()
    seeds, chunk = plan.spec.seeds, plan.spec.logging.interval
    rounds = CASES[name][4]
    without, with_checkpoints, blocking = [], [], []

    def train(every: int | None, round_index: int) -> float:
        if not every:
            return runner.run(algorithm, seeds, plan.num_iterations, chunk).sps
        with checkpoint.opened(tmp_path / f"round{round_index}", every=every, keep=2, spec_hash=plan.spec_hash) as ckpt:
            result = runner.run(algorithm, seeds, plan.num_iterations, chunk, checkpointer=ckpt)
        blocking.extend(t.blocking_seconds for t in ckpt.timings)
        return result.sps

    def one_round():
        index = len(without)
        if index % 2:
            with_checkpoints.append(train(10, index))
            without.append(train(None, index))
        else:
            without.append(train(None, index))
            with_checkpoints.append(train(10, index))

    with measure.HostPeak() as memory:
        entry.benchmark.pedantic(one_round, rounds=rounds, iterations=1, warmup_rounds=0)
    slowdown = 100 * (1 - statistics.median(with_checkpoints) / statistics.median(without))
    entry.record(
        measure.Result(
            name=entry.name,
            kind="micro",
            config={
                "spec_hash": plan.spec_hash,
                "seeds": len(seeds),
                "chunk_iterations": chunk,
                "iterations": plan.num_iterations,
                "checkpoint_every": 10,
            },
            unit=measure.ENV_STEPS,
            rate=spread(with_checkpoints),
            repeats=len(with_checkpoints),
            peak_host_bytes=memory.bytes,
            peak_host_since_start=memory.since_start,
            note=f"checkpoint every 10 it: {slowdown:+.1f}% slower than none"
            f" ({statistics.median(without):,.0f} steps/s); blocking {1e3 * statistics.median(blocking):.1f} ms",
            extra={
                "sps_without": without,
                "sps_with": with_checkpoints,
                "slowdown_percent": slowdown,
                "blocking_seconds": blocking,
            },
        )
    )
