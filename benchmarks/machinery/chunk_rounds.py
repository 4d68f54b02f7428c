"""A training entry measured against a baseline (`--baseline REV`): rounds
of its chunk program.

`harness run` trains in chunks, each one call of the runner's compiled
chunk program. Against a baseline, a `spec[...]` or `filled[...]` entry is
that program at the entry's size: its state initialised and its chunk
compiled as the runner does it (`runner.init_state`, `runner.compile_chunk`),
one untimed call, then one call per round in lockstep with the baseline's
(benchmarks.machinery.lockstep). The evaluation between chunks is left out,
on both sides alike.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax

from benchmarks.machinery import counting, measure

# A round of each side: without a baseline for the entry, this many calls of its own.
ALONE_ROUNDS = 5


def measure_chunks(entry: Any, plan: Any, iterations: int, config: dict[str, Any]) -> measure.Result:
    """Entry `entry`'s rounds of `iterations` iterations of `plan`'s chunk
    program, as a `Result` (its rate: env steps per second, all seeds)."""
    from harness.run import runner

    algorithm = plan.algorithm
    seeds = plan.spec.seeds
    with measure.HostPeak() as memory:
        state, init_seconds = runner.init_state(algorithm, seeds, plan.mesh)
        programs = counting.keeping_traces()
        chunk, chunk_seconds = runner.compile_chunk(
            algorithm.step, iterations, state, plan.mesh, map_seeds=algorithm.map_seeds, programs=programs
        )
        count = counting.per_iteration(programs, iterations, algorithm.step, plan.layout, state)
        holder = {"state": state}

        def call():
            holder["state"], metrics = chunk(holder["state"])
            jax.block_until_ready((holder["state"], metrics))

        call()  # warm-up, as the runner's first chunk
        seconds = entry.timed_calls(call, ALONE_ROUNDS)
    per_call = iterations * plan.env_steps_per_iteration * len(seeds)
    result = measure.micro_result(
        entry.name,
        {**measure.plan_config(plan, len(seeds)), **config, "chunk_iterations": iterations, "rounds": "lockstep"},
        seconds,
        work_per_call=per_call,
        unit=measure.ENV_STEPS,
        iteration="one training iteration of one seed",
        compile_seconds=init_seconds + chunk_seconds,
        count=count._replace(**{f: getattr(count, f) * iterations for f in ("matmul", "other", "bytes")}),
        memory=memory,
        device=entry.bench.device,
    )
    return dataclasses.replace(
        result,
        kind="spec",
        flops_per_iteration=count.total / len(seeds),
        note=f"chunks of {iterations} iterations, {len(seeds)} seed(s)",
    )
