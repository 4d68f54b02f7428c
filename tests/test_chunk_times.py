"""Chunk times are the device's, whichever way the backend dispatches
(harness.run.completion): on a GPU a chunk's dispatch can return only at the
chunk's end, when the host reads the chunk before it."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import pytest

from harness.run.chunk_loop import ChunkLoop, Compiled

CHUNK_SECONDS = 0.15


@jax.jit
def _step(state):
    state = state + 1.0
    return state, {"value": state[None, :]}


def blocking_chunk(state):
    """A chunk whose dispatch returns when it is done, as a GPU program with
    device-decided `while` loops does."""
    state, metrics = jax.block_until_ready(_step(state))
    time.sleep(CHUNK_SECONDS)
    return state, metrics


@pytest.mark.parametrize("chunks", [2, 5])
def test_chunk_times_when_dispatch_blocks(chunks):
    jax.block_until_ready(_step(jnp.zeros(1)))  # compiled before the clock starts
    loop = ChunkLoop((0,), mesh=None, sink=None, checkpointer=None)
    programs = Compiled(chunk=blocking_chunk, tail=None, evaluate=None)
    started = time.perf_counter()
    state = loop.run(jnp.zeros(1), programs, [1] * chunks, 1)
    elapsed = time.perf_counter() - started
    result = loop.result(state, 0.0, [1] * chunks, env_steps_per_step=1)

    assert result.metrics["value"][:, 0].tolist() == [float(i) for i in range(1, chunks + 1)]
    times = result.chunk_seconds
    assert len(times) == chunks and [t.wall for t in result.chunk_times] == pytest.approx(times)
    # Together they are the loop's time: every sleep in it, nothing outside it.
    assert chunks * CHUNK_SECONDS <= sum(times) <= elapsed
    # Each chunk is its own share of it, whatever the machine's speed: not
    # the last ~0 (read right after the one before), nor the first two
    # chunks' (read after the second's dispatch). (Each end is stamped by a
    # thread that may wait a few ms for the GIL: hence not exactly equal.)
    mean = sum(times) / chunks
    assert all(0.5 * mean < t < 1.5 * mean for t in times), times
