"""Measurements of the benchmark suite (`nox -s bench`): one `Result` per entry.

An entry is either a spec trained through the harness runner (`measure_spec`)
or a micro-benchmark of one jitted part, timed by pytest-benchmark and turned
into a `Result` by `micro_result`. Both follow the README's Benchmarks
section: compiles are timed apart, the device is waited for before the clock
is read, and the headline rate is the median over repeats, with its min and
max (`harness.run.ceiling.spread`).

FLOPs and bytes come from `harness.run.flops` (the jaxpr, with scan trip
counts), not from XLA's `compiled.cost_analysis()`: XLA counts the body of a
loop once, so a scan of 100 matmuls reports the FLOPs of one, and every
pipeline here is nested scans. XLA's figure is kept beside it
(`xla_flops_per_call`) where the compiled program is at hand.

Each entry's achieved rates are shown as fractions of the device ceiling
(`harness.run.ceiling.measure_ceiling`): a large matmul's GFLOP/s and a large
in-place array update's GB/s on the same device.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax

from benchmarks.machinery import counting
from harness.run import flops as flops_module
from harness.run.ceiling import spread
from harness.run.memory import HostPeak, device_peak_bytes

ENV_STEPS = "env steps/s"
SIMULATIONS = "simulations/s"
UPDATES = "updates/s"
VALUES = "metric values/s"  # per-iteration metric values through the harness to MLflow


# ------------------------------------------------------------------ result


@dataclasses.dataclass
class Result:
    """One benchmark entry's figures: a row of the table, an MLflow run, a
    record in the saved JSON. Rates are per second over all seeds."""

    name: str  # the entry, as pytest names it, e.g. "spec[ppo_cartpole-16seeds]"
    kind: str  # "spec" (a training run through the runner) or "micro"
    config: dict[str, Any]  # what was measured; its hash tells whether two runs are comparable
    unit: str  # of the headline rate: ENV_STEPS, SIMULATIONS or UPDATES
    rate: tuple[float, float, float]  # headline rate: median, min, max over the repeats
    repeats: int
    compile_seconds: float | None = None
    simulations_per_second: float | None = None  # median; searches x simulations
    updates_per_second: float | None = None  # median; gradient steps, all seeds
    iteration: str = ""  # what `flops_per_iteration` counts, e.g. "one training iteration of one seed"
    flops_per_iteration: float | None = None  # harness.run.flops (scan trip counts)
    gflops_per_second: float | None = None  # achieved, median
    gbytes_per_second: float | None = None  # achieved, median, from unfused bytes (an upper bound)
    xla_flops_per_call: float | None = None  # XLA's cost analysis, loop bodies once
    unbounded_loops: int = 0  # while loops counted once: FLOPs are then a lower bound
    peak_host_bytes: int | None = None
    peak_host_since_start: bool = False  # True: the process's peak, not the entry's
    peak_device_bytes: int | None = None  # GPU/TPU allocator peak, process-wide
    final_metric: str | None = None  # the learning metric, mean over seeds of the final 10%
    final_value: float | None = None
    note: str = ""  # shown where there is no learning metric (e.g. the harness's overhead)
    compute_dtype: str = "float32"  # what its matmuls compute in: its `% matmul` is of that dtype's ceiling
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def config_hash(self) -> str:
        return config_hash(self.config)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["rate"] = list(self.rate)
        data["config_hash"] = self.config_hash
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in fields}
        values["rate"] = tuple(values["rate"])
        return cls(**values)


def config_hash(config: dict[str, Any]) -> str:
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def micro_result(
    name: str,
    config: dict[str, Any],
    seconds: Sequence[float],
    *,
    work_per_call: float,
    unit: str,
    iteration: str,
    compile_seconds: float | None = None,
    count: flops_module.FlopCount | None = None,
    xla_flops_per_call: float | None = None,
    memory: HostPeak | None = None,
    device: Any = None,
    simulations_per_call: float | None = None,
    updates_per_call: float | None = None,
) -> Result:
    """A micro-benchmark's `Result` from the seconds of its timed calls:
    `work_per_call` units of `unit` per call; `count` the FLOPs of one call."""
    median_seconds = statistics.median(seconds)
    return Result(
        name=name,
        kind="micro",
        config=config,
        unit=unit,
        rate=spread([work_per_call / s for s in seconds]),
        repeats=len(seconds),
        compile_seconds=compile_seconds,
        simulations_per_second=simulations_per_call / median_seconds if simulations_per_call else None,
        updates_per_second=updates_per_call / median_seconds if updates_per_call else None,
        iteration=iteration,
        flops_per_iteration=count.total if count else None,
        gflops_per_second=count.total / median_seconds / 1e9 if count else None,
        gbytes_per_second=count.bytes / median_seconds / 1e9 if count else None,
        xla_flops_per_call=xla_flops_per_call,
        unbounded_loops=count.unbounded_loops if count else 0,
        peak_host_bytes=memory.bytes if memory else None,
        peak_host_since_start=memory.since_start if memory else False,
        peak_device_bytes=device_peak_bytes([device]) if device is not None else None,
    )


# ------------------------------------------------------------------- specs

# The learning metric shown for a spec, the first its run reports.
FINAL_METRICS = ("eval_random_win", "eval_return", "episode_return", "loss")


def chunk_lengths(num_iterations: int, interval: int) -> list[int]:
    """Iterations in each chunk `runner.run` executes (the same split)."""
    size = min(interval, num_iterations)
    full, remainder = divmod(num_iterations, size)
    return [size] * full + ([remainder] if remainder else [])


def measure_spec(
    name: str, plan: Any, *, evaluate: bool = True, device: Any = None, profile_dir: Path | None = None
) -> tuple[Result, Any]:
    """Train `plan` through `runner.run`, as `harness run` does (without
    MLflow), and measure it.

    The first chunk is a warm-up; each later chunk is one repeat, so a spec
    needs at least two chunks (`logging.interval` iterations each) and
    should have several. With `evaluate=False` the algorithm's evaluation
    (AlphaZero's games against fixed opponents) is left out, so the rates are
    those of training alone. The assessment after the last chunk (a spec's
    `strength:` games) is always left out: it measures what training made,
    not how fast, and its games would enter the entry's time unmeasured.
    With `profile_dir`, the runner traces its
    second chunk there (`harness run --profile`); that chunk is left out of
    the repeats when others remain, since tracing slows it.

    Returns the `Result` and the runner's `RunResult`.
    """
    import algorithms
    from harness.run import runner
    from harness.sessions import results

    algorithm = timed_algorithm(plan, evaluate)
    seeds = plan.spec.seeds
    lengths = chunk_lengths(plan.num_iterations, plan.spec.logging.interval)
    if len(lengths) < 2:
        raise ValueError(
            f"{plan.spec.name}: {plan.num_iterations} iterations in chunks of {plan.spec.logging.interval} "
            "make one chunk; a benchmark needs a warm-up chunk and at least one timed chunk"
        )
    programs = counting.keeping_traces()  # kept for this run alone: every program is compiled and timed
    with HostPeak() as memory:
        run = runner.run(
            algorithm,
            seeds,
            plan.num_iterations,
            plan.spec.logging.interval,
            mesh=plan.mesh,
            programs=programs,
            profile_dir=None if profile_dir is None else str(profile_dir),
        )

    hp = plan.spec.hyperparameters
    registration = algorithms.registry[plan.spec.algorithm]
    work = _Work.of(
        algorithm, plan, run.state, counting.per_iteration(programs, lengths[0], algorithm.step, plan.layout, run.state)
    )
    timed = timed_chunks(lengths, run.chunk_seconds, run.profiled_through)
    steps = [n * plan.env_steps_per_iteration * len(seeds) / s for n, s in timed]
    updates = [n * registration.updates_per_step(hp) * len(seeds) / s for n, s in timed]
    gflops = [(work.chunk(n, "matmul") + work.chunk(n, "other")) / s / 1e9 for n, s in timed]
    gbytes = [work.chunk(n, "bytes") / s / 1e9 for n, s in timed]
    finals = results.summary(results.per_seed_final(plan, run))
    final_metric = next((m for m in FINAL_METRICS if m in finals), None)
    result = Result(
        name=name,
        kind="spec",
        config={
            **plan_config(plan, len(seeds)),
            "evaluate": bool(evaluate and plan.algorithm.evaluate is not None),
            "iterations": plan.num_iterations,
            "chunk_iterations": lengths[0],
            "env_steps_per_iteration": plan.env_steps_per_iteration,
        },
        unit=ENV_STEPS,
        rate=spread(steps),
        repeats=len(timed),
        compile_seconds=run.compile_seconds,
        simulations_per_second=(
            statistics.median(steps) * hp.num_simulations if plan.spec.algorithm == "alphazero" else None
        ),
        updates_per_second=statistics.median(updates),
        iteration="one training iteration of one seed",
        flops_per_iteration=work.step.total / len(seeds),
        gflops_per_second=statistics.median(gflops),
        gbytes_per_second=statistics.median(gbytes),
        unbounded_loops=work.step.unbounded_loops + (work.evaluation.unbounded_loops if work.evaluation else 0),
        peak_host_bytes=memory.bytes,
        peak_host_since_start=memory.since_start,
        peak_device_bytes=device_peak_bytes([device or jax.devices()[0]]),
        final_metric=final_metric,
        final_value=finals[final_metric] if final_metric else None,
        compute_dtype=getattr(plan.spec.network, "compute_dtype", "float32"),
        extra={
            "chunk_seconds": run.chunk_seconds,
            "finals": finals,
            **({"profile": str(profile_dir)} if run.profiled_through is not None else {}),
        },
    )
    return result, run


def timed_algorithm(plan: Any, evaluate: bool) -> Any:
    """What a spec entry trains: the plan's algorithm without its assessment,
    and without its evaluation unless `evaluate`."""
    return plan.algorithm._replace(assess=None) if evaluate else plan.algorithm.training_only()


def timed_chunks(lengths: list[int], seconds: list[float], profiled_through: int | None) -> list[tuple[int, float]]:
    """The repeats, (iterations, seconds) of each chunk after the first (the
    runner's steady state), without the traced chunk when others remain."""
    timed = list(zip(lengths, seconds, strict=True))[1:]
    if profiled_through is not None and len(timed) > 1:
        traced = list(itertools.accumulate(lengths)).index(profiled_through)
        timed.pop(traced - 1)
    return timed


class _Work(NamedTuple):
    """The work XLA counts in one training step and one evaluation, over seeds."""

    step: Any  # harness.run.flops' counts
    evaluation: Any  # the same, or None without an evaluation

    @classmethod
    def of(cls, algorithm: Any, plan: Any, state: Any, step: Any) -> _Work:
        """With `step`, the count of one iteration (benchmarks.machinery.counting),
        and the evaluation's, traced apart."""
        evaluation = None
        if algorithm.evaluate is not None:
            evaluation = flops_module.count_flops(flops_module.over_seeds(algorithm.evaluate, plan.layout), state)
        return cls(step, evaluation)

    def chunk(self, iterations: int, field: str) -> float:
        """A chunk's `field` (matmul, other or bytes): its steps' and one evaluation's."""
        total = iterations * getattr(self.step, field)
        return total + (getattr(self.evaluation, field) if self.evaluation is not None else 0)


def plan_config(plan: Any, seeds: int) -> dict[str, Any]:
    """What every entry that trains a spec records of it in its `config`:
    the spec, its hash, the seeds and the devices."""
    return {
        "spec_name": plan.spec.name,
        "spec_hash": plan.spec_hash,
        "seeds": seeds,
        "devices": plan.layout.describe() if plan.layout is not None else "one device",
    }
