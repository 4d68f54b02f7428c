"""Resuming a program: its newest good checkpoint restored into the freshly
initialised state, and the metrics its journal holds before it (for the
result, and so that they are not logged twice)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from harness.console import err_console
from harness.record import journal, rundir, tracking
from harness.run import checkpoint, runner
from harness.run.progress import ProgressBar
from harness.types import ChunkMetrics


def resumer(
    name: str,
    directory: rundir.RunDirectory,
    ckpt: checkpoint.Checkpointer,
    journal_: journal.Journal,
    tracker: tracking.Tracking,
    bar: ProgressBar,
) -> runner.Start:
    """The runner's `start`: restore the newest good checkpoint into the
    freshly initialised state (in a multi-process job: and send it to the
    other processes), tag the runs, and give the journaled metrics before
    it. `name` is the spec's, for the message."""

    def start(template: Any) -> tuple[Any, int, list[ChunkMetrics]]:
        chunks = []

        def read():
            notes: list[str] = []
            found = ckpt.read_latest(template, notes)
            for note in notes:
                err_console.print(f"[bold yellow]warning:[/] {note}", soft_wrap=True)
            iteration = found[1] if found else 0
            chunks.extend(journal_.chunks(iteration))
            covered = chunks[-1][1] if chunks else None
            if iteration and (covered is None or chunks[-1][0] + len(next(iter(covered.values()))) - 1 != iteration):
                raise rundir.CheckpointError(
                    f"the journal of run {directory.run_id} lacks the metrics up to iteration {iteration}"
                )
            return found

        state, iteration = checkpoint.restore(template, read)
        history = [ChunkMetrics(first, metrics, evaluation) for first, metrics, evaluation in chunks]
        info = directory.info
        resumes = [*info.get("resumes", []), {"iteration": iteration, "at": datetime.now(UTC).isoformat()}]
        directory.update(resumes=resumes)
        count = len(resumes)
        tags = {"resumed": str(count), f"resumed.{count}": f"from iteration {iteration}"}
        for run_id in [tracker.parent_id, *tracker.child_ids.values()]:
            tracking.set_tags(tracker.client, run_id, tags)
        where = f"the checkpoint at iteration {iteration}" if iteration else "the start (no checkpoint was written)"
        err_console.print(f"{name}: resuming run {directory.run_id} from {where}")
        bar.skip(iteration)
        return state, iteration, history

    return start


def restart_from_main(template: Any) -> tuple[Any, int, tuple]:
    """The runner's `start` in process 0 of a multi-process job that is not
    resuming: the other processes wait to hear whether to resume, so process
    0 sends them its fresh state (checkpoint.restore with nothing to read)."""
    return (*checkpoint.restore(template), ())
