"""Throughput against batch size: one spec measured at a ladder of sizes.

A size is the spec with one number changed (`AXES`): each seed's envs, or
how many seeds train side by side. At each size the runner trains a
warm-up chunk and a few timed chunks; a point holds the steady-state env
steps/s, the share of the device's matmul ceiling that the counted FLOPs
reach, the compile seconds and the memory the compiled programs need. The
ladder stops at the first size that does not fit (the spec refuses it) or
does not compile or run (out of memory).
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import jax

from harness.run import flops, memory, runner
from harness.run.programs import Programs

AXES = {
    "envs": "hyperparameters.num_envs: each seed's parallel envs",
    "seeds": "seeds: independent runs vmapped side by side",
}


class SizePoint(NamedTuple):
    size: int
    env_steps_per_second: float  # median over the timed chunks, all seeds
    rates: tuple[float, ...]  # each timed chunk's env steps/s
    compile_seconds: float
    flops_per_env_step: float | None  # counted from the step's jaxpr
    fraction_of_ceiling: float | None  # of the device's float32 matmul rate
    program_bytes: int | None  # the compiled programs' largest need (XLA's memory analysis)
    device_peak_bytes: int | None  # the device allocator's peak so far (GPU/TPU)
    chunk_iterations: int = 0  # iterations per chunk at this size
    seconds: float = 0.0  # the size's whole time: plan, compile, warm-up and timed chunks


class Stop(NamedTuple):
    size: int
    reason: str  # why the ladder ended here, in words
    kind: str = "failed"  # one of STOP_KINDS: what a later ladder may do about it


# Why a ladder ends before its last size. Only a time stop while the
# throughput still grew leaves a ladder to go on from (the bench's probe).
STOP_KINDS = {
    "flat": "the throughput stopped growing",
    "time": "the next size would pass the time allowed",
    "refused": "the spec refuses the size",
    "failed": "the size does not compile or run (out of memory)",
}
# A size takes up to this much longer than the one before (the time stop's margin).
TIME_MARGIN = 1.25


def stop_after(
    points: list[SizePoint],
    following: int | None,
    *,
    until_flat: bool,
    elapsed: float,
    limit: float | None,
    limit_name: str,
    grows: float = 1.0,
) -> Stop | None:
    """Why the ladder ends before size `following`, after `points` and
    `elapsed` seconds, or None (it goes on; no size follows: it is over):
    the throughput stopped growing (`until_flat`), or the next size, taking
    `grows` times the last one's seconds with a margin, would pass `limit`
    seconds (`limit_name` says whose: `--max-seconds 150`)."""
    if following is None or not points:
        return None
    if until_flat and flat(points):
        return Stop(following, f"the throughput stopped growing ({FLAT_SIZES} sizes in a row below the best)", "flat")
    if limit is not None:
        expected = elapsed + points[-1].seconds * grows * TIME_MARGIN
        if expected > limit:
            return Stop(following, f"{limit_name}: it would end at about {expected:.0f} s", "time")
    return None


def recorded_stop(document: dict[str, Any]) -> Stop | None:
    """A scale record's stop (a record from before stops had kinds: kind unknown)."""
    stopped = document.get("stopped")
    if not stopped:
        return None
    return Stop(stopped["size"], stopped.get("reason", ""), stopped.get("kind", "unknown"))


def ladder(start: int, stop: int) -> list[int]:
    """Powers of two from `start` to `stop`, both included when powers."""
    sizes, size = [], 1
    while size <= stop:
        if size >= start:
            sizes.append(size)
        size *= 2
    return sizes


def resized(data: dict[str, Any], axis: str, size: int) -> dict[str, Any]:
    """The spec's data with the `axis` number set to `size`."""
    if axis not in AXES:
        raise ValueError(f"axis {axis!r}: one of {', '.join(AXES)}")
    out = copy.deepcopy(data)
    if axis == "envs":
        hyperparameters = out.setdefault("hyperparameters", {})
        before = hyperparameters.get("num_envs")
        hyperparameters["num_envs"] = size
        # The same number of iterations: the budget grows with the envs.
        budget = out.get("budget", {})
        if before and isinstance(budget.get("env_steps"), int) and size > before:
            budget["env_steps"] = budget["env_steps"] * size // before
    else:
        out["seeds"] = list(range(size))
    out.pop("sweep", None)
    return out


def _program_bytes(programs: Programs) -> int | None:
    sizes = []
    for compiled in programs.compiled():
        try:
            m = compiled.memory_analysis()
        except (AttributeError, NotImplementedError, jax.errors.JaxRuntimeError):
            m = None
        if m is not None:
            sizes.append(
                m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes - m.alias_size_in_bytes
            )
    return max(sizes) if sizes else None


def timed_algorithm(plan: Any) -> Any:
    """What a size's measurement trains: the plan's algorithm without its
    evaluation and assessment (benchmarks/planned.json holds the bench to it)."""
    return plan.algorithm.training_only()


def measure(plan: Any, chunk_iterations: int, timed_chunks: int, ceiling_gflops: float | None) -> SizePoint:
    """Train `plan` for a warm-up chunk and `timed_chunks` chunks of
    `chunk_iterations` iterations each (evaluation and assessment left out)
    and measure."""
    algorithm = timed_algorithm(plan)
    seeds = plan.spec.seeds
    programs = Programs(keep_traces=True)
    run = runner.run(
        algorithm, seeds, chunk_iterations * (1 + timed_chunks), chunk_iterations, mesh=plan.mesh, programs=programs
    )
    env_steps = chunk_iterations * plan.env_steps_per_iteration * len(seeds)
    rates = tuple(env_steps / s for s in run.chunk_seconds[1:])
    sps = statistics.median(rates)
    count = flops.per_iteration(programs.chunk_traces[chunk_iterations], chunk_iterations)
    per_step = count.total / (plan.env_steps_per_iteration * len(seeds))
    return SizePoint(
        size=0,
        env_steps_per_second=sps,
        rates=rates,
        compile_seconds=run.compile_seconds,
        flops_per_env_step=per_step,
        fraction_of_ceiling=per_step * sps / (ceiling_gflops * 1e9) if ceiling_gflops else None,
        program_bytes=_program_bytes(programs),
        device_peak_bytes=memory.device_peak_bytes(),
        chunk_iterations=chunk_iterations,
    )


# Chunks of about this many seconds at each size: the work per iteration
# grows with the size, so a fixed chunk would make the ladder's last sizes
# take most of its time.
CHUNK_SECONDS = 2.0
# The first size's chunks, before any rate is known (at most the spec's interval).
FIRST_CHUNK_ITERATIONS = 4
# The ladder ends once this many sizes in a row are below the best before them.
FLAT_SIZES = 2
# The saturation size: the smallest within this share of the best throughput.
WITHIN = 0.1
SATURATION = f"the smallest size within {WITHIN:.0%} of the best throughput"
# Timed chunks after the warm-up chunk at each size (`harness scale --timed-chunks`).
TIMED_CHUNKS = 2


def chunk_iterations(plan: Any, previous: SizePoint | None) -> int:
    """Iterations per chunk for `plan`'s size: about CHUNK_SECONDS at the
    previous size's rate (the rate grows with the size until it saturates,
    so the chunk comes out no longer), at most the spec's logging interval."""
    return iterations_at(plan, None if previous is None else previous.env_steps_per_second)


def iterations_at(plan: Any, env_steps_per_second: float | None) -> int:
    """Iterations per chunk for `plan`: about CHUNK_SECONDS at that rate (all
    seeds), or FIRST_CHUNK_ITERATIONS without one; at most the spec's
    logging interval."""
    interval = plan.spec.logging.interval
    if env_steps_per_second is None:
        return max(1, min(interval, FIRST_CHUNK_ITERATIONS))
    per_iteration = plan.env_steps_per_iteration * len(plan.spec.seeds)
    return max(1, min(interval, int(CHUNK_SECONDS * env_steps_per_second / per_iteration)))


def flat(points: list[SizePoint], run: int = FLAT_SIZES) -> bool:
    """Whether the throughput has stopped growing: the last `run` sizes all
    below the best size before them."""
    if len(points) <= run:
        return False
    best = max(p.env_steps_per_second for p in points[:-run])
    return all(p.env_steps_per_second < best for p in points[-run:])


def saturation(points: list[SizePoint], within: float = WITHIN) -> SizePoint | None:
    """The smallest size within `within` of the best throughput."""
    if not points:
        return None
    best = max(p.env_steps_per_second for p in points)
    return next(p for p in points if p.env_steps_per_second >= (1 - within) * best)


def still_growing(points: list[SizePoint]) -> bool:
    """Whether the saturation size is the largest measured: the throughput
    still grows there, and a longer ladder would find the point."""
    return len(points) > 1 and saturation(points) is points[-1]


def marked(points: list[SizePoint]) -> SizePoint | None:
    """The saturation point to mark in a table or plot: none while the
    throughput still grows at the largest size."""
    return None if still_growing(points) else saturation(points)


def describe_saturation(points: list[SizePoint], axis: str) -> str:
    """Where the throughput levels off, or that it still grows at the
    ladder's largest size (a longer ladder would find the point)."""
    point = saturation(points)
    if point is None:
        return "no size ran"
    if still_growing(points):
        return f"still growing at {axis}={point.size}, the largest size measured: no saturation within the ladder"
    return f"saturates at {axis}={point.size} ({SATURATION})"


def record(axis: str, sizes: list[int], points: list[SizePoint], stop: Stop | None, **more: Any) -> dict[str, Any]:
    """The scale record (`harness scale`'s JSON, and the bench probe's in
    `results/scale/`): the ladder, its points, why it ended and the
    saturation size; `more` keys beside them (who made it)."""
    saturated = saturation(points)
    return {
        "axis": axis,
        "sizes": list(sizes),
        "points": [{k: (list(v) if isinstance(v, tuple) else v) for k, v in p._asdict().items()} for p in points],
        "stopped": stop._asdict() if stop else None,
        "saturation": saturated.size if saturated else None,
        **more,
    }


_UNRECORDED = {"rates": (), "compile_seconds": 0.0, "flops_per_env_step": None, "fraction_of_ceiling": None,
               "program_bytes": None, "device_peak_bytes": None}  # fmt: skip


def recorded_points(document: dict[str, Any]) -> list[SizePoint]:
    """A scale record's points (a field a record lacks: empty)."""
    points = []
    for p in document.get("points") or []:
        values = {**_UNRECORDED, **{k: v for k, v in p.items() if k in SizePoint._fields}}
        points.append(SizePoint(**{**values, "rates": tuple(values["rates"])}))
    return points


def climb(
    sizes: list[int],
    plan_for: Callable[[int], Any],
    measure_one: Callable[[Any], SizePoint],
    user_errors: tuple[type[BaseException], ...],
) -> Iterator[SizePoint | Stop]:
    """Each size's point in order, then a `Stop` at the first size whose
    plan is refused (`user_errors`: the spec does not allow it) or whose
    program fails to compile or run (out of memory)."""
    for size in sizes:
        started = time.perf_counter()
        try:
            plan = plan_for(size)
        except user_errors as error:
            yield Stop(size, f"does not fit the spec: {error}", "refused")
            return
        try:
            point = measure_one(plan)
        except (jax.errors.JaxRuntimeError, MemoryError) as error:
            yield Stop(size, f"does not compile or run: {str(error).splitlines()[0][:200]}", "failed")
            return
        yield point._replace(size=size, seconds=time.perf_counter() - started)
