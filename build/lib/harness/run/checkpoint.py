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

This module is orbax's side: `Checkpointer` writes and reads checkpoints.
The state's leaves on the host are in harness.run.checkpoint_leaves, when
saves are due in harness.run.checkpoint_schedule, and a job of several
processes (`Follower`, and `restore`, which every job starts from) in
harness.run.checkpoint_multiprocess; `snapshot`, `Follower` and `restore`
are re-exported here.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import shutil
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

from harness.record.rundir import FORMAT, CheckpointError
from harness.run.checkpoint_leaves import Found, Snapshot, checksums, fill, host_shapes, leaf_paths, snapshot
from harness.run.checkpoint_multiprocess import Follower, restore
from harness.run.checkpoint_schedule import SaveSchedule

__all__ = ["DAMAGED_DIR", "Checkpointer", "Follower", "SaveTiming", "opened", "restore", "snapshot"]

DAMAGED_DIR = "damaged"


class SaveTiming(NamedTuple):
    iteration: int
    blocking_seconds: float  # the host copy and handing it to the writer thread: the training loop waits for this
    final: bool


class Checkpointer(SaveSchedule):
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
            "crc32": checksums(stored),
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
        return fill(template, leaves), step

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
        if meta.get("paths") != leaf_paths(template):
            raise CheckpointError(
                f"the checkpoint at iteration {step} in {self.directory} holds a state of another structure"
                " than this code's (was the code changed?)"
            )
        empty = meta.get("empty", {})
        shapes = host_shapes(template)
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
        bad = [name for name, crc in checksums(leaves).items() if crc != meta["crc32"][name]]
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


@contextlib.contextmanager
def opened(directory: Path, *, every: int | None, keep: int, spec_hash: str) -> Iterator[Checkpointer]:
    checkpointer = Checkpointer(directory, every=every, keep=keep, spec_hash=spec_hash)
    try:
        yield checkpointer
    finally:
        checkpointer.close()
