"""Checkpoints in a job of several processes (harness.run.cluster), and the
restore every job starts from.

In a job of several processes the state is spread over every process's
devices. Process 0 owns the run directory: each save gathers the whole
state into every process (a collective) and process 0 writes it; a resume
is read by process 0 and broadcast to the others, which fill their devices'
blocks. No filesystem needs to be shared. The other processes follow with a
`Follower`, which takes part in the same collectives at the same chunks.
Process 0's own checkpointer is `Checkpointer` (harness.run.checkpoint).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from harness.record.rundir import CheckpointError
from harness.run import cluster
from harness.run.checkpoint_leaves import Found, fill, host_shapes, snapshot
from harness.run.checkpoint_schedule import SaveSchedule


class Follower(SaveSchedule):
    """The checkpointer of a process other than 0 in a multi-process job:
    due at the same iterations as process 0's `Checkpointer` (same `every`),
    it joins each save's gathering of the state and writes nothing."""

    def __init__(self, every: int | None):
        super().__init__(every, 0)

    def snapshot(self, state: Any) -> tuple:
        snapshot(jax.block_until_ready(state))
        return ()

    def save(self, taken: Any, last_iteration: int, *, final: bool = False) -> None:
        pass


def restore(template: Any, read: Callable[[], Found | None] | None = None) -> tuple[Any, int]:
    """The state training starts from, and the iterations it has done (0:
    `template` itself, a fresh start). `read` returns the leaves and the
    iteration of the checkpoint to resume from (`Checkpointer.read_latest`),
    or None to start afresh.

    In a multi-process job this is a collective: process 0 passes `read`
    (or nothing, to start afresh), the others nothing, and every process gets process 0's state, placed on
    its own devices; a CheckpointError that `read` raises is raised in every
    process."""
    if jax.process_count() == 1:
        found = read() if read is not None else None
        return (fill(template, found[0]), found[1]) if found else (template, 0)
    shapes = host_shapes(template)
    found, failure = None, None
    if read is not None:
        try:
            found = read()
        except CheckpointError as error:
            failure = error
    iteration = -1 if failure is not None else (found[1] if found else 0)
    iteration = int(cluster.broadcast_from_main(np.int64(iteration)))
    if failure is not None:
        raise failure
    if iteration < 0:
        raise CheckpointError("process 0 of the job could not restore the checkpoint (see its output)")
    if iteration == 0:
        return template, 0
    # As one byte buffer: every dtype (and the sign of a zero) arrives as saved.
    sizes = {name: int(np.prod(shape)) * dtype.itemsize for name, (shape, dtype) in shapes.items()}
    if found:
        sent = np.concatenate([np.ascontiguousarray(found[0][name]).view(np.uint8).reshape(-1) for name in shapes])
    else:
        sent = np.zeros(sum(sizes.values()), np.uint8)
    received = np.asarray(cluster.broadcast_from_main(sent)).astype(np.uint8)
    offsets = itertools.accumulate(sizes.values(), initial=0)
    leaves = {
        name: received[offset : offset + sizes[name]].view(dtype).reshape(shape)
        for (name, (shape, dtype)), offset in zip(shapes.items(), offsets, strict=False)
    }
    return fill(template, leaves), iteration
