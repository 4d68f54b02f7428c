"""Checkpoints of the whole training state, in a run's `state/` directory
(harness.record.rundir).

A checkpoint is the runner's state, one pytree with a leading seed axis
(parameters, optimizer state, env states, replay buffers, typed PRNG keys,
counters), stored leaf by leaf: typed keys as their raw key data, each leaf
with its key path and a CRC32 of its bytes, beside the iteration it follows
and the spec hash. Restoring fills a freshly initialised state of the same
spec (its structure, dtypes and sharding are the template), so a state saved
on one device layout restores onto another. A checkpoint whose files are
truncated or corrupted (orbax cannot read it, or a CRC differs) is reported
and moved aside, and the one before it is used.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import itertools
import os
import shutil
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

from harness.record.rundir import FORMAT, CheckpointError
from harness.run import cluster

DAMAGED_DIR = "damaged"


# ---------------------------------------------------------- state <-> leaves


def _is_key(leaf: Any) -> bool:
    return isinstance(leaf, jax.Array) and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key)


class Snapshot(NamedTuple):
    """A state on the host: its leaves as numpy arrays, typed keys as key data."""

    leaves: dict[str, np.ndarray]  # "00000" ... in tree order
    paths: list[str]  # each leaf's key path
    keys: list[int]  # which leaves were typed PRNG keys


def snapshot(state: Any) -> Snapshot:
    """Copy `state` to host memory (blocking until it is computed). The
    copies are numpy arrays of their own: a later chunk that donates the
    state's device buffers cannot change them. In a multi-process job every
    process gets the whole state (a collective: all must call it)."""
    flat, _ = jax.tree_util.tree_flatten_with_path(state)
    device_leaves = [jax.random.key_data(leaf) if _is_key(leaf) else leaf for _, leaf in flat]
    host = cluster.gather_to_host(device_leaves)
    return Snapshot(
        {f"{i:05d}": np.array(leaf, copy=True) for i, leaf in enumerate(host)},
        [jax.tree_util.keystr(path) for path, _ in flat],
        [i for i, (_, leaf) in enumerate(flat) if _is_key(leaf)],
    )


def _checksums(leaves: dict[str, np.ndarray]) -> dict[str, int]:
    return {name: zlib.crc32(np.ascontiguousarray(leaf).view(np.uint8).reshape(-1)) for name, leaf in leaves.items()}


def _paths(template: Any) -> list[str]:
    return [jax.tree_util.keystr(path) for path, _ in jax.tree_util.tree_flatten_with_path(template)[0]]


def _host_shapes(template: Any) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Each leaf's shape and dtype as stored (typed keys as key data)."""
    out = {}
    for i, leaf in enumerate(jax.tree_util.tree_leaves(template)):
        data = jax.eval_shape(jax.random.key_data, leaf) if _is_key(leaf) else leaf
        out[f"{i:05d}"] = (tuple(data.shape), np.dtype(data.dtype))
    return out


def _place(value: np.ndarray, sharding: jax.sharding.Sharding) -> jax.Array:
    """A host array onto `sharding`'s devices; in a multi-process job each
    process places the blocks of its own devices (every process holds the
    whole value)."""
    if sharding.is_fully_addressable:
        return jax.device_put(value, sharding)
    return jax.make_array_from_callback(value.shape, sharding, lambda index: value[index])


def _fill(template: Any, leaves: dict[str, np.ndarray]) -> Any:
    """The template's pytree with the saved leaves (checked against it by
    `Checkpointer.read_latest`), on the template's devices."""
    flat, treedef = jax.tree_util.tree_flatten(template)
    out = []
    for i, leaf in enumerate(flat):
        value = _place(leaves[f"{i:05d}"], leaf.sharding)
        out.append(jax.random.wrap_key_data(value, impl=jax.random.key_impl(leaf)) if _is_key(leaf) else value)
    return jax.tree_util.tree_unflatten(treedef, out)


# --------------------------------------------------------------- checkpointer


# A checkpoint as read: its leaves (host arrays, by tree position) and the
# iteration it follows.
Found = tuple[dict[str, np.ndarray], int]


class SaveTiming(NamedTuple):
    iteration: int
    blocking_seconds: float  # the host copy and handing it to the writer thread: the training loop waits for this
    final: bool


class _Schedule:
    """When saves are due: at the first chunk end at or past each multiple of
    `every` (None or 0: never) after the iteration training went on from."""

    def __init__(self, every: int | None, mark: int):
        self.every = every or 0
        self._mark = mark  # the last iteration a save was due at

    def due(self, last_iteration: int) -> bool:
        if not self.every or last_iteration // self.every <= self._mark // self.every:
            return False
        self._mark = last_iteration
        return True

    def continue_after(self, iteration: int) -> None:
        """Training goes on from the state after `iteration`."""
        self._mark = iteration


class Checkpointer(_Schedule):
    """orbax's CheckpointManager over `directory`, saving every `every`
    iterations (at the first chunk end at or past each multiple; None or 0:
    never, except `final` saves) and keeping the newest `keep`.

    Saves are asynchronous: the training loop waits only for the host copy
    (`snapshot`, which also makes the save safe from the next chunk's buffer
    donation); checksums and orbax's save run in a writer thread, one save
    at a time. A checkpoint is complete on disk only after orbax renamed its
    temporary folder, so an interrupted write is never mistaken for one.
    `close()` (or leaving the `with` block) waits for writes in flight."""

    def __init__(self, directory: Path, *, every: int | None, keep: int, spec_hash: str):
        import orbax.checkpoint as ocp

        self.directory = Path(directory)
        self.keep = keep
        self.spec_hash = spec_hash
        self.timings: list[SaveTiming] = []
        # In a multi-process job this process (0) writes alone: the state it
        # saves was gathered from every process (see `Follower`).
        alone = jax.process_count() > 1
        try:
            self.directory.mkdir(parents=True, exist_ok=True)  # orbax creates it only for every process
            self.manager = ocp.CheckpointManager(
                self.directory.resolve(),
                options=ocp.CheckpointManagerOptions(
                    max_to_keep=keep,
                    create=False,
                    enable_async_checkpointing=True,
                    cleanup_tmp_directories=True,
                    multiprocessing_options=ocp.options.MultiprocessingOptions(
                        primary_host=0, active_processes={0} if alone else None
                    ),
                ),
                item_names=("state", "meta"),
            )
        except Exception as error:  # noqa: BLE001  (filesystem problems come in many kinds)
            raise CheckpointError(f"cannot use the checkpoint directory {self.directory}: {error}") from None
        self._ocp = ocp
        self._writer = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix="checkpoint-writer", initializer=_lower_priority
        )
        self._pending: list[concurrent.futures.Future] = []
        super().__init__(every, max(self.manager.all_steps(), default=0))

    def __enter__(self) -> Checkpointer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -------------------------------------------------------------- saving

    def snapshot(self, state: Any) -> tuple[Snapshot, float]:
        """The host copy, and the seconds the copy took (the loop waits for
        it; the wait for the chunk to finish computing is not counted: the
        loop waits for that anyway, for the chunk's metrics)."""
        state = jax.block_until_ready(state)
        started = time.perf_counter()
        host = snapshot(state)
        return host, time.perf_counter() - started

    def save(self, taken: tuple[Snapshot, float], last_iteration: int, *, final: bool = False) -> None:
        """Write the snapshot as the checkpoint after `last_iteration`: in
        the writer thread, while training goes on; with `final`, on disk on
        return. A write that failed raises CheckpointError here or in
        `close()`."""
        host, copy_seconds = taken
        started = time.perf_counter()
        self._raise_failure()
        self._pending.append(self._writer.submit(self._write, host, last_iteration))
        self.timings.append(SaveTiming(last_iteration, copy_seconds + time.perf_counter() - started, final))
        if final:
            self.wait()

    def _write(self, host: Snapshot, last_iteration: int) -> None:
        """orbax's save, in the writer thread (orbax's own setup for a save
        takes tens of milliseconds that the training loop need not wait for)."""
        if last_iteration in self.manager.all_steps():
            return
        # orbax does not store empty arrays; their shape and dtype say it all.
        stored = {name: leaf for name, leaf in host.leaves.items() if leaf.size}
        meta = {
            "format": FORMAT,
            "iteration": last_iteration,
            "spec_hash": self.spec_hash,
            "paths": host.paths,
            "keys": host.keys,
            "crc32": _checksums(stored),
            "empty": {name: [list(leaf.shape), str(leaf.dtype)] for name, leaf in host.leaves.items() if not leaf.size},
            "saved": datetime.now(UTC).isoformat(),
        }
        ocp = self._ocp
        self.manager.save(
            last_iteration,
            args=ocp.args.Composite(state=ocp.args.PyTreeSave(stored), meta=ocp.args.JsonSave(meta)),
            force=True,
        )
        self.manager.wait_until_finished()

    def _raise_failure(self) -> None:
        done = [f for f in self._pending if f.done()]
        self._pending = [f for f in self._pending if not f.done()]
        for future in done:
            error = future.exception()
            if error is not None:
                raise CheckpointError(f"writing a checkpoint to {self.directory} failed: {error}") from error

    def wait(self) -> None:
        """Until every save so far is on disk."""
        for future in list(self._pending):
            future.exception()
        self._raise_failure()

    def close(self) -> None:
        try:
            self.wait()
        finally:
            self._writer.shutdown(wait=True)
            self.manager.close()

    # ----------------------------------------------------------- restoring

    def steps(self) -> list[int]:
        self.manager.reload()
        return sorted(self.manager.all_steps())

    def restore_latest(self, template: Any, notes: list[str]) -> tuple[Any, int] | None:
        """The newest readable checkpoint, filled into `template`, and its
        iteration; None when there is none. A damaged one is named in
        `notes`, moved to `damaged/` beside `state/`, and the one before is
        tried. A checkpoint of another spec raises CheckpointError."""
        found = self.read_latest(template, notes)
        if found is None:
            return None
        leaves, step = found
        return _fill(template, leaves), step

    def read_latest(self, template: Any, notes: list[str]) -> Found | None:
        """`restore_latest`'s reading: the newest readable checkpoint's
        leaves (host arrays, checked against `template`) and iteration."""
        for step in reversed(self.steps()):
            try:
                leaves = self._read(step, template)
            except CheckpointError:
                raise
            except _Damaged as damage:
                notes.append(self._set_aside(step, str(damage)))
            except Exception as error:  # noqa: BLE001  (orbax/tensorstore raise many kinds on bad files)
                notes.append(self._set_aside(step, f"{type(error).__name__}: {str(error)[:300]}"))
            else:
                self.continue_after(step)
                return leaves, step
        self.continue_after(0)
        return None

    def _read(self, step: int, template: Any) -> dict[str, np.ndarray]:
        ocp = self._ocp
        meta = self.manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore())).meta
        if meta.get("spec_hash") != self.spec_hash:
            raise CheckpointError(
                f"the checkpoint at iteration {step} in {self.directory} was made from another spec"
                f" (spec_hash {str(meta.get('spec_hash'))[:12]}, this spec's is {self.spec_hash[:12]})"
            )
        if meta.get("paths") != _paths(template):
            raise CheckpointError(
                f"the checkpoint at iteration {step} in {self.directory} holds a state of another structure"
                " than this code's (was the code changed?)"
            )
        empty = meta.get("empty", {})
        shapes = _host_shapes(template)
        abstract = {
            name: jax.ShapeDtypeStruct(shape, dtype) for name, (shape, dtype) in shapes.items() if name not in empty
        }
        restore_args = jax.tree.map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), abstract)
        restored = self.manager.restore(
            step,
            args=ocp.args.Composite(state=ocp.args.PyTreeRestore(abstract, restore_args=restore_args)),
        ).state
        leaves = {name: np.asarray(value) for name, value in restored.items()}
        if set(leaves) != set(meta["crc32"]):
            raise _Damaged("its leaves do not match its metadata")
        bad = [name for name, crc in _checksums(leaves).items() if crc != meta["crc32"][name]]
        if bad:
            raise _Damaged(f"{len(bad)} state leaves fail their CRC32 check (first: {meta['paths'][int(bad[0])]})")
        leaves.update({name: np.zeros(shape, dtype) for name, (shape, dtype) in empty.items()})
        for name, (shape, dtype) in shapes.items():
            if leaves[name].shape != shape or leaves[name].dtype != dtype:
                raise CheckpointError(
                    f"state leaf {meta['paths'][int(name)]}: saved {leaves[name].dtype}{list(leaves[name].shape)},"
                    f" expected {dtype}{list(shape)}"
                )
        return leaves

    def _set_aside(self, step: int, reason: str) -> str:
        source = self.directory / str(step)
        target = self.directory.parent / DAMAGED_DIR / f"{step}.{int(time.time())}"
        with contextlib.suppress(OSError):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(source), str(target))
        self.manager.reload()
        return f"the checkpoint at iteration {step} ({source}) is damaged ({reason}); moved to {target}"


def _lower_priority() -> None:
    """Nice the writer thread (Linux nices threads one by one; the threads
    orbax starts from it inherit it): on a CPU backend its checksums and
    serialisation would otherwise take cores from training, as the metric
    writer process would (it is niced too)."""
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)


class _Damaged(Exception):
    """A checkpoint that orbax read but whose contents are wrong."""


# ------------------------------------------------------ multi-process jobs
#
# In a job of several processes the state is spread over every process's
# devices. Process 0 owns the run directory: each save gathers the whole
# state into every process (a collective) and process 0 writes it; a resume
# is read by process 0 and broadcast to the others, which fill their devices'
# blocks. No filesystem needs to be shared. The other processes follow with a
# `Follower`, which takes part in the same collectives at the same chunks.


class Follower(_Schedule):
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
        return (_fill(template, found[0]), found[1]) if found else (template, 0)
    shapes = _host_shapes(template)
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
    return _fill(template, leaves), iteration


@contextlib.contextmanager
def opened(directory: Path, *, every: int | None, keep: int, spec_hash: str) -> Iterator[Checkpointer]:
    checkpointer = Checkpointer(directory, every=every, keep=keep, spec_hash=spec_hash)
    try:
        yield checkpointer
    finally:
        checkpointer.close()
