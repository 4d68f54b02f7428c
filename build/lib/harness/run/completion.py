"""When a dispatched program finished on the device, as a clock on the host
sees it: a thread per chunk waits for the chunk's outputs and stamps the
time they became ready.

The chunk loop reads chunk i's metrics after it dispatched chunk i+1, and
that dispatch does not always return at once: on a GPU a program with a
`while` loop whose trip count the device decides (an episode's rollout, a
tree search) hands the loop's predicate to the host every iteration, so
dispatch returns only near the program's end. The time the host gets round
to reading chunk i is then the end of chunk i+1, and chunk times measured
from it are shifted by one chunk: the first covers two chunks, the last
almost none. A waiting thread sees each chunk end when it ends, whichever
way the backend dispatches (`block_until_ready` releases the GIL).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import jax


class Completion:
    """The moment `tree` (a chunk's outputs, never donated ones: a donated
    array may be gone before it is waited for) became ready."""

    def __init__(self, tree: Any):
        self._at: float | None = None
        self._thread = threading.Thread(target=self._wait, args=(tree,), name="chunk-completion", daemon=True)
        self._thread.start()

    def _wait(self, tree: Any) -> None:
        try:
            jax.block_until_ready(tree)
        finally:  # a failed program ends too: its error reaches the host where the metrics are read
            self._at = time.perf_counter()

    def at(self) -> float:
        """perf_counter() when the outputs were ready (waits for them)."""
        self._thread.join()
        assert self._at is not None
        return self._at
