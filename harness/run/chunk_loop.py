"""The host's side of training (`harness.run.runner.run`): a loop over the
compiled chunks that dispatches chunk i+1 before it reads chunk i's
metrics, so that logging and the progress bar overlap with the device's
work instead of stalling it.

Between chunks it checks the metrics for NaN/Inf, hands them to the sink,
copies and saves checkpoints, acts on SIGINT/SIGTERM (a final checkpoint,
then `Interrupted`), traces one steady-state chunk with JAX's profiler when
asked, and times all of it (`ChunkTimes`). When chunks are long (over
`STOP_WITHIN_SECONDS`, or not timed yet), it keeps a host copy of the state
before the running chunk and waits for the chunk in short polls: a signal
that the chunk does not answer within STOP_WITHIN_SECONDS drops the chunk
and saves that copy (`ChunkLoop.abandon`), so that Ctrl-C answers in
seconds, not at the end of a chunk of minutes. The programs, and so the
bits of a run and of its resumption, are the same either way.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import jax
import numpy as np

from harness.run import cluster, completion, devices
from harness.run.completion import Completion
from harness.run.interrupts import Interrupted, interrupt_between_chunks
from harness.types import ChunkMetrics, ChunkTimes, RunResult, Sink

if TYPE_CHECKING:
    from jax.sharding import Mesh


class NonFiniteMetricError(RuntimeError):
    """A metric became NaN or Inf; names the metric, iteration and seed."""

    def __init__(self, metric: str, iteration: int, seed: int, value: float):
        self.metric, self.iteration, self.seed, self.value = metric, iteration, seed, value
        super().__init__(f"metric {metric!r} is {value} at iteration {iteration} (seed {seed}); training stopped")


def check_finite(chunk: ChunkMetrics, seeds: tuple[int, ...]) -> None:
    """Raise NonFiniteMetricError for the first NaN or Inf in `chunk` (by
    iteration, then seed; an evaluation's at the chunk's last iteration)."""
    for name, values in chunk.metrics.items():
        bad = ~np.isfinite(values)
        if bad.any():
            k, s = np.argwhere(bad)[0]
            raise NonFiniteMetricError(name, chunk.first_iteration + int(k), seeds[int(s)], float(values[k, s]))
    for name, values in chunk.evaluation.items():
        bad = ~np.isfinite(values)
        if bad.any():
            s = int(np.argwhere(bad)[0][0])
            raise NonFiniteMetricError(name, chunk.last_iteration, seeds[s], float(values[s]))


class Checkpointer(Protocol):
    """What `run` asks of a checkpointer (harness.run.checkpoint.Checkpointer)."""

    def due(self, last_iteration: int) -> bool:
        """Whether the state after `last_iteration` is to be saved."""
        ...

    def snapshot(self, state: Any) -> Any:
        """A host copy of `state` that the next chunk (which donates the
        state's buffers) cannot touch. Blocks until the state is computed."""
        ...

    def save(self, snapshot: Any, last_iteration: int, *, final: bool = False) -> None:
        """Write a snapshot whose chunk's metrics were found finite;
        asynchronously, unless `final`."""
        ...


# How long a stop signal waits for the running chunk before the chunk is
# dropped (when chunks are long), and how often the host looks.
STOP_WITHIN_SECONDS = 5.0
POLL_SECONDS = 0.01


class Compiled(NamedTuple):
    """The compiled programs a loop runs: `chunk` (the logging interval's
    iterations; None when only the tail is left), `tail` (the shorter last
    chunk, or None when there is none) and `evaluate` (after every chunk, or
    None); each takes the state and donates it."""

    chunk: Callable | None
    tail: Callable | None
    evaluate: Callable | None


class _Pending(NamedTuple):
    """A dispatched chunk whose metrics the host has not read yet."""

    first_iteration: int
    metrics: Any  # on the device: name -> [K, num_seeds]
    evaluation: Any  # on the device: name -> [num_seeds], or {}
    snapshot: Any  # its state's host copy, when a checkpoint is due after it; else None
    copied: float  # seconds the host copy took
    finished: Completion  # when the chunk (and its evaluation) ended on the device


class ChunkLoop:
    """One `run` call's chunks on the host. `history` holds the metrics of
    the iterations a resumed run did before (`done` of them); `profile` is
    the index (among the chunks this loop runs) of the chunk to trace into
    `profile_dir`, or None."""

    def __init__(
        self,
        seeds: tuple[int, ...],
        *,
        mesh: Mesh | None,
        sink: Sink | None,
        checkpointer: Checkpointer | None,
        history: Sequence[ChunkMetrics] = (),
        done: int = 0,
        profile: int | None = None,
        profile_dir: str | None = None,
    ):
        self.seeds, self.mesh, self.sink, self.checkpointer = seeds, mesh, sink, checkpointer
        self.collected: list[ChunkMetrics] = list(history)
        self.done_at: list[float] = []  # when each chunk ended on the device (perf_counter)
        self.saved_through = done  # the last iteration whose state is saved
        self.spent = {"evaluation": 0.0, "checkpoint": 0.0}  # seconds, of the chunks' wall time
        self.times: list[ChunkTimes] = []
        self.profile, self.profile_dir = profile, profile_dir
        self.profiled_through: int | None = None
        self.pending: _Pending | None = None
        self.started = time.perf_counter()
        # Whether the running chunk is waited for in polls (`long_chunks`
        # when it was dispatched), and the host copy of the state before it
        # with its last iteration (None: nothing to save).
        self.polled = False
        self.fallback: tuple[Any, int] | None = None
        self.signalled_at: float | None = None  # when a signal found a chunk running

    def timed(self, kind: str, fn: Callable, *args, **kwargs) -> Any:
        """`fn(*args, **kwargs)`, its seconds added to `spent[kind]`."""
        begin = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self.spent[kind] += time.perf_counter() - begin

    def run(self, state: Any, programs: Compiled, lengths: Sequence[int], first_iteration: int) -> Any:
        """Run chunks of `lengths` iterations from `first_iteration` on (the
        last one with `programs.tail` when there is one); returns the final
        state, computed."""
        self.started = time.perf_counter()
        with interrupt_between_chunks() as interrupted:
            for i, length in enumerate(lengths):
                if self.polled:  # the chunk before, the pending one, is running
                    self.await_chunk(self.pending.metrics, self.pending.evaluation, state, interrupted)
                # Every process of a job stops after the same chunk.
                if signum := cluster.agree_on_signal(interrupted()):
                    self.stop(signum, state, first_iteration - 1)
                self.polled = self.long_chunks()
                self.fallback = self.host_copy(state, first_iteration - 1) if self.polled else None
                fn = programs.tail if (programs.tail is not None and i == len(lengths) - 1) else programs.chunk
                last = first_iteration + length - 1
                state, metrics, evaluation = self.dispatch(i, fn, programs.evaluate, state, last)
                finished = completion.watch((metrics, evaluation))
                due = self.checkpointer is not None and self.checkpointer.due(last)
                if self.polled:
                    self.receive()  # the chunk before, finished: logged while this one runs
                    if due:
                        self.await_chunk(metrics, evaluation, state, interrupted)
                # Copied before the next chunk is dispatched: it donates `state`.
                snapshot, copied = self.copy_if_due(state, due)
                self.receive()
                self.pending = _Pending(first_iteration, metrics, evaluation, snapshot, copied, finished)
                first_iteration += length
            if self.polled:
                self.await_chunk(self.pending.metrics, self.pending.evaluation, state, interrupted)
            self.receive()
        return jax.block_until_ready(state)

    def long_chunks(self) -> bool:
        """Whether the next chunk is waited for in polls: while chunks are
        not timed yet or the last took over STOP_WITHIN_SECONDS. Never in a
        job of several processes, which must all stop after the same chunk."""
        if jax.process_count() > 1:
            return False
        return not self.times or self.times[-1].wall > STOP_WITHIN_SECONDS

    def host_copy(self, state: Any, last: int) -> tuple[Any, int] | None:
        """The state after iteration `last` on the host, to save if a signal
        drops the chunk after it: the pending chunk's snapshot when it took
        one, None without a checkpointer or when that state is saved."""
        if self.checkpointer is None or self.saved_through == last:
            return None
        if self.pending is not None and self.pending.snapshot is not None:
            return self.pending.snapshot, last
        return self.timed("checkpoint", self.checkpointer.snapshot, state), last

    def await_chunk(self, metrics: Any, evaluation: Any, state: Any, interrupted: Callable[[], int]) -> None:
        """Wait in polls for the running chunk: its metrics, then the
        evaluation after it (its seconds counted as evaluation, as `receive`
        counts them) and the state. A stop signal that the chunk does not
        answer within STOP_WITHIN_SECONDS abandons it."""
        self.await_ready(metrics, interrupted)
        if evaluation:
            self.timed("evaluation", self.await_ready, evaluation, interrupted)
        self.await_ready(state, interrupted)
        self.signalled_at = None

    def await_ready(self, tree: Any, interrupted: Callable[[], int]) -> None:
        # Typed PRNG keys have no is_ready; the arrays of the same program do.
        leaves = [x for x in jax.tree.leaves(tree) if hasattr(x, "is_ready")]
        while leaves:
            if leaves[-1].is_ready():
                leaves.pop()
                continue
            if self.signalled_at is None and interrupted():
                self.signalled_at = time.perf_counter()
            if self.signalled_at is not None and time.perf_counter() - self.signalled_at > STOP_WITHIN_SECONDS:
                self.abandon(interrupted())
            time.sleep(POLL_SECONDS)

    def abandon(self, signum: int) -> None:
        """Stop without waiting for the running chunk: it is dropped (the
        pending chunk, if any, is the running one: the chunk before it was
        logged before the wait), the state before it saved from its host
        copy, then `Interrupted` raised. A resumed run does the dropped
        chunk again, with the same bits. The chunk goes on on the device
        until the process ends (`harness.cli.console` ends it at once)."""
        self.pending = None
        if self.fallback is not None:
            snapshot, last = self.fallback
            if self.saved_through != last:
                self.timed("checkpoint", self.checkpointer.save, snapshot, last, final=True)
                self.saved_through = last
        raise Interrupted(signum)

    def dispatch(self, i: int, fn: Callable, evaluate: Callable | None, state: Any, last: int) -> tuple[Any, Any, Any]:
        """Start chunk `i` (and the evaluation after it) on the device;
        returns the new state and the chunk's metrics, not waited for,
        except for the traced chunk (see `run`'s `profile_dir`)."""
        with contextlib.ExitStack() as tracing:
            if i == self.profile:
                self.receive()  # the trace holds this chunk alone
                tracing.enter_context(jax.profiler.trace(self.profile_dir, create_perfetto_trace=True))
            state, metrics = fn(state)
            evaluation = {}
            if evaluate is not None:
                state, evaluation = evaluate(state)
            if i == self.profile:
                jax.block_until_ready((state, metrics, evaluation))
                self.profiled_through = last
        return state, metrics, evaluation

    def copy_if_due(self, state: Any, due: bool) -> tuple[Any, float]:
        """The state's host copy when a checkpoint is `due` after this chunk
        (else None), and the seconds the copy took."""
        if not due:
            return None, 0.0
        copy_started = time.perf_counter()
        snapshot = self.timed("checkpoint", self.checkpointer.snapshot, state)
        return snapshot, time.perf_counter() - copy_started

    def receive(self) -> None:
        """Read the pending chunk's metrics (waiting for the device), check
        them, hand them to the sink, then save its checkpoint if one is due."""
        if self.pending is None:
            return
        first_iteration, metrics, evaluation, snapshot, copied, finished = self.pending
        self.pending = None
        begin = time.perf_counter()
        metrics = devices.metrics_to_host(metrics, self.mesh)
        waited = time.perf_counter()
        evaluation = self.timed("evaluation", devices.metrics_to_host, evaluation, self.mesh) if evaluation else {}
        host = ChunkMetrics(
            first_iteration,
            {k: np.asarray(v) for k, v in metrics.items()},
            {k: np.asarray(v) for k, v in evaluation.items()},
        )
        received = time.perf_counter()
        self.done_at.append(finished.at())
        check_finite(host, self.seeds)
        self.collected.append(host)
        if self.sink is not None:
            self.sink(host)
        logged = time.perf_counter()
        if snapshot is not None:
            self.timed("checkpoint", self.checkpointer.save, snapshot, host.last_iteration)
            self.saved_through = host.last_iteration
        wall = self.done_at[-1] - (self.done_at[-2] if len(self.done_at) > 1 else self.started)
        checkpointing = copied + time.perf_counter() - logged
        self.times.append(
            ChunkTimes(host.last_iteration, wall, waited - begin, received - waited, logged - received, checkpointing)
        )

    def stop(self, signum: int, state: Any, last: int) -> None:
        """A stop signal came before the chunk after iteration `last`: the
        chunk before is read and logged, the state after it saved (unless it
        is already), then `Interrupted` raised."""
        self.receive()
        if self.checkpointer is not None and self.saved_through != last:
            snapshot = self.timed("checkpoint", self.checkpointer.snapshot, state)
            self.timed("checkpoint", self.checkpointer.save, snapshot, last, final=True)
        raise Interrupted(signum)

    def result(self, state: Any, compile_seconds: float, lengths: Sequence[int], env_steps_per_step: int) -> RunResult:
        """The run's result, once `run` returned `state`: every iteration's
        metrics (the resumed history's too) and the timings of the chunks run."""
        ends = [self.started, *self.done_at]
        chunk_seconds = [b - a for a, b in itertools.pairwise(ends)]
        env_steps = [n * env_steps_per_step * len(self.seeds) for n in lengths]
        # The first chunk carries one-off costs (allocation, first transfers); when
        # there are several, steady state starts after it.
        skip = 1 if len(lengths) > 1 else 0
        steady_seconds = math.fsum(chunk_seconds[skip:])
        collected = self.collected
        metrics = {k: np.concatenate([c.metrics[k] for c in collected]) for k in collected[0].metrics}
        evaluation = {k: np.stack([c.evaluation[k] for c in collected]) for k in collected[0].evaluation}
        return RunResult(
            metrics,
            state,
            compile_seconds,
            steady_seconds,
            sum(env_steps[skip:]),
            chunk_seconds,
            evaluation,
            tuple(c.last_iteration for c in collected),
            self.spent["evaluation"],
            self.spent["checkpoint"],
            tuple(self.times),
            self.profiled_through,
        )
