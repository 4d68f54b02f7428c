"""When checkpoints are due: the schedule that process 0's `Checkpointer`
(harness.run.checkpoint) keeps, and the other processes of a multi-process
job keep too (`Follower`, harness.run.checkpoint_multiprocess), so that all
of them take part in the same saves at the same chunks."""

from __future__ import annotations


class SaveSchedule:
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
