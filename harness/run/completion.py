"""When a dispatched program finished on the device, as a clock on the host
sees it: one thread of the process waits for each chunk's outputs, in
dispatch order, and stamps the time they became ready.

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

import queue
import threading
import time
from typing import Any

import jax


class Completion:
    """The moment a watched tree became ready (`at` waits for it)."""

    def __init__(self) -> None:
        self._ready = threading.Event()
        self._at = 0.0

    def at(self) -> float:
        """perf_counter() when the outputs were ready (waits for them)."""
        self._ready.wait()
        return self._at


class _Clock:
    """One waiting thread for the process, fed in dispatch order (a thread
    per chunk cost milliseconds a chunk in start-up and GIL hand-overs)."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._work, name="chunk-completion", daemon=True).start()

    def watch(self, tree: Any) -> Completion:
        completion = Completion()
        self._queue.put((tree, completion))
        return completion

    def _work(self) -> None:
        while True:
            tree, completion = self._queue.get()
            try:
                jax.block_until_ready(tree)
            except Exception:  # noqa: BLE001  (a failed program ends too: its error reaches the host where the metrics are read)
                pass
            completion._at = time.perf_counter()
            completion._ready.set()


_clock: _Clock | None = None
_lock = threading.Lock()


def watch(tree: Any) -> Completion:
    """When `tree` (a chunk's outputs, never donated ones: a donated array
    may be gone before it is waited for) becomes ready."""
    global _clock
    with _lock:
        if _clock is None:
            _clock = _Clock()
    return _clock.watch(tree)
