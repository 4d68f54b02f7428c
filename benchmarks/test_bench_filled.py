"""Device-filling entries, `filled[<spec>]`: each workload of the benchmark
specs (benchmarks/specs/) as published (experiments/<spec>.yaml: its
network, hyperparameters and seeds), at the envs per seed where its
throughput stops growing on this machine (`benchmarks.machinery.filling`):
what the device can do with it. Training alone (no evaluation), a warm-up
chunk and timed chunks of about 2 s each.

The `spec[...]` and `iteration[...]` entries beside them keep the small
fixed configurations: the rate, and the latency, at a small size.
"""

from __future__ import annotations

import pytest

from benchmarks.machinery import chunk_rounds, filling, measure
from benchmarks.machinery.paths import BENCH_SPECS, PUBLISHED_SPECS
from harness.run.ceiling import spread

WORKLOADS = sorted(p.stem for p in BENCH_SPECS.glob("*.yaml"))


@pytest.mark.parametrize("stem", WORKLOADS)
def test_filled(entry, bench, stem):
    from harness.run import scaling

    fill = bench.fill(stem)
    plan = filling.plan_at(PUBLISHED_SPECS / f"{stem}.yaml", fill.size)
    if bench.lockstep is not None:  # against a baseline: rounds of its chunk program at that size
        entry.record(chunk_rounds.measure_chunks(entry, plan, _chunk(plan, fill), {"num_envs": fill.size}))
        return
    point = fill.point
    ceiling = bench.ceiling.matmul_gflops[0] if bench.ceiling else None
    memory = measure.HostPeak()
    if point is None:

        def run():
            with memory:
                out["point"] = scaling.measure(plan, _chunk(plan, fill), scaling.TIMED_CHUNKS, ceiling)

        out: dict = {}
        entry.benchmark.pedantic(run, rounds=1, iterations=1)
        point = out["point"]._replace(size=fill.size)
    else:  # measured by this session's probe
        entry.benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    seeds = len(plan.spec.seeds)
    per_iteration = point.flops_per_env_step * plan.env_steps_per_iteration if point.flops_per_env_step else None
    gflops = point.flops_per_env_step * point.env_steps_per_second / 1e9 if point.flops_per_env_step else None
    entry.record(
        measure.Result(
            name=entry.name,
            kind="spec",
            config={
                **measure.plan_config(plan, seeds),
                "num_envs": fill.size,
                "evaluate": False,
                "chunk_iterations": point.chunk_iterations,
                "env_steps_per_iteration": plan.env_steps_per_iteration,
            },
            unit=measure.ENV_STEPS,
            rate=spread(list(point.rates)),
            repeats=len(point.rates),
            compile_seconds=point.compile_seconds,
            iteration="one training iteration of one seed",
            flops_per_iteration=per_iteration,
            gflops_per_second=gflops,
            peak_host_bytes=memory.bytes,
            peak_host_since_start=memory.since_start,
            peak_device_bytes=point.device_peak_bytes,
            note=f"{fill.size} envs x {seeds} seeds, {_source(fill)}",
            extra={
                "fill": {"size": fill.size, "source": fill.source, "saturated": fill.saturated, "ladder": fill.ladder},
                "fraction_of_ceiling": point.fraction_of_ceiling,
                "program_bytes": point.program_bytes,
            },
        )
    )


def _chunk(plan, fill: filling.Fill) -> int:
    """Iterations per chunk: about 2 s at the record's rate at this size."""
    from harness.run import scaling

    rate = next((p["env_steps_per_second"] for p in fill.ladder if p["size"] == fill.size), None)
    return scaling.iterations_at(plan, rate)


def _source(fill: filling.Fill) -> str:
    """Where the size comes from, in a few words for the table."""
    where = "probe" if fill.source == "probe" else "record"
    return where if fill.saturated else f"{where}: still growing"
