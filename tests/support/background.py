"""The modules' slow work done in the background of the session (see
`Background`); tests/conftest.py starts it and reports its times."""

from __future__ import annotations

import os
import threading
import time

import pytest


class Background:
    """The modules' slow fixtures whose work is mostly subprocesses (the
    bench's tiny entry, signalled runs, device layouts, a multi-process job,
    store faults, a published spec on unseen seeds), done in LANES threads
    started when the session starts, beside the in-process tests: each
    lane takes the next work (each module's BACKGROUND gives its works'
    wall seconds in a full run here, about). Two lanes: one at a time left
    the suite waiting for the chain long after the in-process tests were
    done; more than the cores starve the in-process tests.
    `result(name)` waits for one (re-raising its error).

    The queue (`plan`) starts with the LANES longest works, then takes the
    others in the order their modules' tests come, and those modules run in
    the order their works are expected to end: the session's own thread,
    when it comes to them, neither waits for a short work queued behind the
    long ones nor leaves a module's tests for the end, on one core.

    The lanes, and the processes they start, run at a lower priority
    (`NICE`): the in-process tests are one thread, which beside two lanes
    would get a third of two cores and be left with a long tail of its
    own once the lanes are done; niced, the lanes take the core it leaves,
    and both cores while it waits or once it ends."""

    LANES = 2
    NICE = 10

    @classmethod
    def plan(cls, works: dict) -> tuple[list[str], dict[str, float]]:
        """The queue of `works` (name -> (work, about how many seconds),
        in their modules' order) and when each is expected to end, the lanes
        each taking the next work when free."""
        longest = sorted(works, key=lambda name: -works[name][1])[: cls.LANES]
        queue = longest + [name for name in works if name not in longest]
        free, ends = [0.0] * cls.LANES, {}
        for name in queue:
            lane = free.index(min(free))
            free[lane] += works[name][1]
            ends[name] = free[lane]
        return queue, ends

    def __init__(self, works: dict, queue: list[str], tmp_path_factory: pytest.TempPathFactory):
        self.done = {name: threading.Event() for name in works}
        self.values: dict[str, object] = {}
        self.errors: dict[str, BaseException] = {}
        self.seconds: dict[str, float] = {}  # each work's wall time, for the session's summary
        self.started = time.perf_counter()
        self.ended: dict[str, float] = {}  # when each work ended, seconds after the start
        self._queue = [(name, works[name][0]) for name in queue]
        self._lock = threading.Lock()
        self.threads = [
            threading.Thread(target=self._run, args=(tmp_path_factory,), name=f"background-{lane}", daemon=True)
            for lane in range(min(self.LANES, len(works)))
        ]
        for thread in self.threads:
            thread.start()

    def _run(self, tmp_path_factory) -> None:
        try:  # this thread only (Linux); the processes it starts inherit it
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), self.NICE)
        except OSError:
            pass
        while True:
            with self._lock:
                if not self._queue:
                    return
                name, work = self._queue.pop(0)
            start = time.perf_counter()
            try:
                self.values[name] = work(tmp_path_factory)
            except BaseException as error:  # noqa: BLE001  (re-raised in the test that needs it)
                self.errors[name] = error
            self.seconds[name] = time.perf_counter() - start
            self.ended[name] = time.perf_counter() - self.started
            self.done[name].set()

    def result(self, name: str):
        self.done[name].wait()
        if name in self.errors:
            raise self.errors[name]
        return self.values[name]


# The session's background work (tests/conftest.py starts it).
RUNNING: list[Background] = []
# What background work leaves running for its tests (a server of its own).
_AT_SESSION_END: list = []


def at_session_end(stop) -> None:
    """Call `stop()` when the session ends, after its background work, also
    when the session stops early: what a work leaves running for its tests
    outlives none of them."""
    _AT_SESSION_END.append(stop)


def background_result(name: str):
    """The result of the background work `name` (waiting for it)."""
    (running,) = RUNNING
    return running.result(name)


def finish() -> None:
    """At the session's end: wait for the background work, then stop what
    it left running."""
    for running in RUNNING:
        for thread in running.threads:
            thread.join()
    while _AT_SESSION_END:
        _AT_SESSION_END.pop()()
