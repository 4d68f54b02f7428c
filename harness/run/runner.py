"""Runs an `Algorithm` over many seeds: `jit(scan(vmap(step)))` chunks.

The state carries a leading seed axis; each chunk runs `chunk_iterations`
iterations fully on the device and returns every iteration's metrics
(`[K, num_seeds]` per name). Compilation happens ahead of time and is timed
apart; steps per second count only steady-state chunks. The host's loop
over the chunks (harness.run.chunk_loop) dispatches chunk i+1 before it
reads chunk i's metrics, so logging and the progress bar overlap with the
device's work instead of stalling it.

Between chunks it also checkpoints (a `Checkpointer`, see
harness.run.checkpoint), acts on SIGINT/SIGTERM (a final checkpoint, then
`Interrupted`), and resumes from a restored state (`start`) in the same
chunks an uninterrupted run would have, so a resumed run is bit-identical.

On a device mesh (`harness.run.devices`) the same programs run under
`shard_map`, one shard of seeds and of each seed's env batch per device;
without one they are plain `jit` on the default device.
"""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import jax
import numpy as np

from algorithms.base import Algorithm
from harness.run import devices, interrupts, lowering
from harness.run.chunk_loop import Checkpointer, ChunkLoop, Compiled, NonFiniteMetricError  # noqa: F401  (raised by run)
from harness.run.interrupts import Interrupted  # noqa: F401  (raised by run)
from harness.run.programs import Programs, compile_once
from harness.types import ChunkMetrics, ChunkTimes, RunResult, Sink  # noqa: F401  (part of this module's interface)

if TYPE_CHECKING:
    from jax.sharding import Mesh

lowering.harness_threefry_on_cpu()


def over_seeds(fn: Callable, map_seeds: bool = False, block: int | None = None) -> Callable:
    """`fn` of one seed's state, over a seed-batched state: vmapped, or one
    seed after another (`Algorithm.map_seeds`). With `block`, the runs go in
    consecutive blocks of that many, one block after another (`lax.map`),
    each block batched as above: a sweep's points one after another, each
    point's seeds batched, as in the point's own run (the same bits)."""
    batched = (lambda state: jax.lax.map(fn, state)) if map_seeds else jax.vmap(fn)
    if block is None:
        return batched

    def blocks(state):
        split = jax.tree.map(lambda x: x.reshape(x.shape[0] // block, block, *x.shape[1:]), state)
        return jax.tree.map(lambda x: x.reshape(x.shape[0] * x.shape[1], *x.shape[2:]), jax.lax.map(batched, split))

    return blocks


def make_chunk(
    step: Callable, length: int, mesh: Mesh | None = None, map_seeds: bool = False, block: int | None = None
) -> Callable:
    """`length` iterations of `step` over the seeds, jitted, state donated;
    on a mesh, one shard per device (see `harness.run.devices.on_mesh`)."""
    seeds_step = over_seeds(step, map_seeds, block)

    def chunk(state):
        return jax.lax.scan(lambda carry, _: seeds_step(carry), state, None, length=length)

    return jax.jit(devices.on_mesh(chunk, mesh, metrics_axis=1), donate_argnums=0)


def compile_chunk(
    step: Callable,
    length: int,
    state: Any,
    mesh: Mesh | None = None,
    map_seeds: bool = False,
    programs: Programs | None = None,
    block: int | None = None,
    compiler_options: dict[str, Any] | None = None,
) -> tuple[Callable, float]:
    """The chunk program, compiled ahead of time (with XLA's
    `compiler_options` for this program alone, e.g. the bench's
    deterministic pair), and the seconds it took."""
    start = time.perf_counter()
    options = dict(compiler_options or {})

    def make():
        traced = make_chunk(step, length, mesh, map_seeds, block).trace(state)
        if programs is not None and programs.chunk_traces is not None:
            programs.chunk_traces[length] = traced.jaxpr
        return traced.lower().compile(compiler_options=options or None)

    compiled = compile_once(
        programs, ("chunk", step, length, mesh, map_seeds, block, tuple(sorted(options.items()))), state, make
    )
    return compiled, time.perf_counter() - start


def compile_evaluate(
    evaluate: Callable,
    state: Any,
    mesh: Mesh | None = None,
    map_seeds: bool = False,
    programs: Programs | None = None,
    block: int | None = None,
    *,
    donate: bool = True,
) -> tuple[Callable, float]:
    """The evaluation over the seeds, jitted, state donated (`donate`: an
    assessment after training keeps it)."""
    start = time.perf_counter()

    def make():
        fn = devices.on_mesh(over_seeds(evaluate, map_seeds, block), mesh, metrics_axis=0)
        return jax.jit(fn, donate_argnums=0 if donate else ()).lower(state).compile()

    compiled = compile_once(programs, ("evaluate", evaluate, mesh, map_seeds, block, donate), state, make)
    return compiled, time.perf_counter() - start


@functools.cache
def _measuring(assess_fn: Callable) -> Callable:
    """`assess_fn` as an evaluation that leaves the state as it is: one
    function per assessment, so that a program compiled for it is found again."""

    def measured(state):
        return state, assess_fn(state)

    return measured


def assess(
    algorithm: Algorithm, state: Any, seeds: int, mesh: Mesh | None = None, programs: Programs | None = None
) -> tuple[dict[str, np.ndarray], float]:
    """`algorithm.assess` of the final state: name -> `[seeds]`, and the
    seconds it took, its compile included (nothing without one)."""
    if algorithm.assess is None:
        return {}, 0.0
    start = time.perf_counter()
    compiled, _ = compile_evaluate(
        _measuring(algorithm.assess), state, mesh, algorithm.map_seeds, programs, donate=False
    )
    metrics = jax.device_get(compiled(state)[1])
    values = {name: np.asarray(value).reshape(seeds, -1)[:, 0] for name, value in metrics.items()}
    return values, time.perf_counter() - start


def init_state(
    algorithm: Algorithm,
    seeds: tuple[int, ...],
    mesh: Mesh | None = None,
    programs: Programs | None = None,
    numbers: dict[str, np.ndarray] | None = None,
) -> tuple[Any, float]:
    """The seed-batched initial state, and the seconds its compile took. On a
    mesh, every leaf is `[num_seeds, data_axis, ...]`: one shard per device.
    `numbers` (a sweep's, `[num_runs]` float32 per name) go to
    `algorithm.init(key, numbers)` with each run's seed (algorithms.sweep)."""
    inputs = devices.per_run((np.asarray(seeds, dtype=np.uint32), numbers), mesh)
    start = time.perf_counter()
    compiled = compile_once(
        programs,
        ("init", algorithm.init, mesh),
        inputs,
        lambda: _init_program(algorithm, mesh).lower(inputs).compile(),
    )
    compile_seconds = time.perf_counter() - start
    return jax.block_until_ready(compiled(inputs)), compile_seconds


def _init_program(algorithm: Algorithm, mesh: Mesh | None) -> Callable:
    """The jitted initialisation over per-run inputs (`devices.per_run`)."""

    # lax.map, not vmap: seed-batched orthogonal initialisers become batched
    # LAPACK QR calls, which on jaxlib's CPU backend parallelise inside the
    # XLA thread pool and can deadlock it when two run at once (seen with
    # jaxlib 0.10.2 on 2 cores). One seed at a time keeps each QR unbatched.
    def init(inputs):
        values, numbers = inputs
        keys = jax.vmap(jax.random.key)(values)
        if numbers is None:
            return jax.lax.map(algorithm.init, keys)
        return jax.lax.map(lambda run: algorithm.init(*run), (keys, numbers))

    return jax.jit(devices.init_on_mesh(init, mesh))


def lower_first_chunk(
    algorithm: Algorithm, seeds: tuple[int, ...], chunk_iterations: int, mesh: Mesh | None = None
) -> Any:
    """The first chunk's program as `run` compiles it, traced and lowered
    (not compiled, nothing run) from the initial state's shapes: everything
    a run does before its first device work but XLA's compile."""
    inputs = devices.per_run((np.asarray(seeds, dtype=np.uint32), None), mesh)
    state = jax.eval_shape(_init_program(algorithm, mesh), inputs)
    return make_chunk(algorithm.step, chunk_iterations, mesh, algorithm.map_seeds).lower(state)


# Resuming: given the freshly initialised state (the template of structure,
# dtypes and sharding), the restored state, the iterations it has done, and
# the metrics of those iterations (for the result).
Start = Callable[[Any], tuple[Any, int, Sequence[ChunkMetrics]]]


def run(
    algorithm: Algorithm,
    seeds: tuple[int, ...],
    num_iterations: int,
    chunk_iterations: int,
    *,
    sink: Sink | None = None,
    on_compiled: Callable[[float], None] | None = None,
    start: Start | None = None,
    checkpointer: Checkpointer | None = None,
    mesh: Mesh | None = None,
    programs: Programs | None = None,
    numbers: dict[str, np.ndarray] | None = None,
    block: int | None = None,
    profile_dir: str | None = None,
) -> RunResult:
    """Train every seed for `num_iterations` iterations.

    Args:
      algorithm: the pure pipeline; `step` is vmapped over seeds here (or
        mapped, `Algorithm.map_seeds`).
      seeds: one independent run per seed.
      num_iterations: iterations per seed.
      chunk_iterations: iterations per jitted call (the logging interval).
      sink: called on the host with each chunk's metrics, in order, after the
        NaN/Inf check. It runs while the device computes the next chunk.
        An algorithm with `evaluate` is evaluated after every chunk; the
        evaluation's metrics come with the chunk's (its time counts in the
        chunk's, so steps per second include it).
      on_compiled: called with the compile seconds once compiling is done.
      start: resume: called with the freshly initialised state (the template
        of structure, dtypes and sharding), returns (state, iterations done,
        their metrics); training continues after them in the same chunks as
        an uninterrupted run, so the metrics are bit-identical to its, and
        the metrics before are part of the result.
      checkpointer: asked after each chunk whether to save; the state is
        copied to the host before the next chunk is dispatched (the chunk
        donates its input) and saved, asynchronously, only once that chunk's
        metrics passed the NaN/Inf check. On SIGINT/SIGTERM the state after
        the last finished chunk is saved before `Interrupted` is raised;
        when chunks are long, a chunk that does not finish within seconds of
        the signal is dropped (harness.run.chunk_loop).
      mesh: a `("seed", "data")` device mesh to run on (`harness.run.devices`);
        the algorithm must then be made with `axis_name="data"`. None: one
        device, plain `jit`.
      programs: compiled programs to reuse and keep (harness.run.programs),
        for a caller that runs this algorithm again in this process; None:
        every program is compiled for this run.
      numbers: a sweep's hyperparameters, one value per run (`seeds` then
        holds each run's seed; algorithms.sweep).
      block: run the runs in consecutive blocks of this many, one block
        after another (a sweep's points, see `over_seeds`); None: all at once.
      profile_dir: write a JAX profiler trace of one steady-state chunk (the
        second this call runs, or the only one) here: the chunk before it is
        finished first and the traced one waited for inside the trace, so
        the trace holds that chunk alone (its own time is not overlapped
        with logging, which slows a profiled run's steady state a little).

    Raises:
      NonFiniteMetricError: a metric is NaN or Inf; no later chunk is logged
        and no state from that chunk on is checkpointed.
      Interrupted: SIGINT or SIGTERM came; acted on between chunks, or
        within STOP_WITHIN_SECONDS of it when chunks are long.
    """
    interrupts.before_training()
    state, compile_seconds = init_state(algorithm, seeds, mesh, programs, numbers)
    done = 0
    history: tuple[ChunkMetrics, ...] = ()
    if start is not None:
        state, done, history = start(state)
        history = tuple(history)
    lengths, chunk_iterations = remaining_chunks(num_iterations, chunk_iterations, done)
    compiled, compile_seconds = compile_programs(
        algorithm, state, lengths, chunk_iterations, compile_seconds, mesh, programs, block
    )
    if on_compiled is not None:
        on_compiled(compile_seconds)
    loop = ChunkLoop(
        seeds,
        mesh=mesh,
        sink=sink,
        checkpointer=checkpointer,
        history=history,
        done=done,
        profile=(1 if len(lengths) > 1 else 0) if profile_dir is not None else None,
        profile_dir=profile_dir,
    )
    state = loop.run(state, compiled, lengths, done + 1)
    assessment, seconds = assess(algorithm, state, len(seeds), mesh, programs)
    result = loop.result(state, compile_seconds, lengths, algorithm.env_steps_per_step)
    return result._replace(assessment=assessment, assessment_seconds=seconds)


def remaining_chunks(num_iterations: int, chunk_iterations: int, done: int) -> tuple[list[int], int]:
    """The lengths of the chunks after iteration `done` (0: all of them) and
    the full chunks' length. A run's chunks are `chunk_iterations` long but a
    shorter last one; a resumed run does the ones after `done`, so its chunks
    (and compiled programs) are those of an uninterrupted run."""
    chunk_iterations = min(chunk_iterations, num_iterations)
    full_chunks, remainder = divmod(num_iterations, chunk_iterations)
    schedule = [chunk_iterations] * full_chunks + ([remainder] if remainder else [])
    boundaries = list(itertools.accumulate(schedule))
    if done and done not in boundaries:
        raise ValueError(f"a run can resume only at a chunk boundary ({chunk_iterations} iterations); got {done}")
    return (schedule[boundaries.index(done) + 1 :] if done else schedule), chunk_iterations


def compile_programs(
    algorithm: Algorithm,
    state: Any,
    lengths: list[int],
    chunk_iterations: int,
    compile_seconds: float,
    mesh: Mesh | None = None,
    programs: Programs | None = None,
    block: int | None = None,
) -> tuple[Compiled, float]:
    """The programs that chunks of `lengths` need, compiled before the first
    runs (a shorter last chunk is a program of its own, compiled now rather
    than mid-run), and `compile_seconds` with their compile times added."""
    chunk_fn = tail_fn = evaluate_fn = None
    if any(n == chunk_iterations for n in lengths):
        chunk_fn, seconds = compile_chunk(
            algorithm.step, chunk_iterations, state, mesh, algorithm.map_seeds, programs, block
        )
        compile_seconds += seconds
    remainder = lengths[-1] if lengths and lengths[-1] != chunk_iterations else 0
    if remainder:
        tail_fn, seconds = compile_chunk(algorithm.step, remainder, state, mesh, algorithm.map_seeds, programs, block)
        compile_seconds += seconds
    if algorithm.evaluate is not None and lengths:
        evaluate_fn, seconds = compile_evaluate(algorithm.evaluate, state, mesh, algorithm.map_seeds, programs, block)
        compile_seconds += seconds
    return Compiled(chunk_fn, tail_fn, evaluate_fn), compile_seconds
