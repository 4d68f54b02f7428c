"""The modules' slow work done in the background of the session (see
`Background`): which works the selected tests need, the order the tests
and the works go in (`order`), starting them (`start`), their results
(`background_result`), and their measured times, kept for the next
session's plan (`TIMES`) and reported (`summary`). tests/conftest.py
only calls these."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

# Each work's wall seconds as the last session that ran it measured them
# (this checkout's, not committed); before any, as one measured here and
# committed beside this module. The plan orders the works by them.
TIMES = Path(__file__).resolve().parents[2] / ".background-seconds.json"
MEASURED = Path(__file__).with_name("background_seconds.json")
UNKNOWN_SECONDS = 60.0  # a work never measured


def expected_seconds() -> dict[str, float]:
    """Each work's seconds as last measured: this checkout's, else the committed ones."""
    times: dict[str, float] = {}
    for path in (MEASURED, TIMES):  # this checkout's own measurements win
        try:
            times.update(json.loads(path.read_text()))
        except (OSError, ValueError):
            pass
    return times


def selected_works(items: list[pytest.Item]) -> dict:
    """The `BACKGROUND` works (fixture name -> work(tmp_path_factory)) that
    the selected tests use, in their order."""
    works = {}
    for item in items:
        for name, work in getattr(item.module, "BACKGROUND", {}).items():
            if name in item.fixturenames:
                works.setdefault(name, work)
    return works


_QUEUE: list[str] = []  # the background works in the order they start


def order(items: list[pytest.Item]) -> None:
    """Tests of modules with background work run last, in the order their
    works are expected to end (Background.plan), so that the session does
    other tests while that work runs instead of waiting for it."""
    known = expected_seconds()
    works = {name: (work, known.get(name, UNKNOWN_SECONDS)) for name, work in selected_works(items).items()}
    queue, ends = Background.plan(works)
    _QUEUE[:] = queue

    def expected_end(item: pytest.Item) -> float:
        return max((ends.get(name, 0.0) for name in getattr(item.module, "BACKGROUND", {})), default=-1.0)

    items.sort(key=expected_end)


def start(items: list[pytest.Item], tmp_path_factory: pytest.TempPathFactory) -> None:
    """Start the background works the selected tests use, in `order`'s queue."""
    if works := selected_works(items):
        RUNNING.append(Background(works, [name for name in _QUEUE if name in works], tmp_path_factory))


def summary() -> str | None:
    """The works' wall times, for the session's report; kept in TIMES."""
    for running in RUNNING:
        if running.seconds:
            try:
                TIMES.write_text(json.dumps({**expected_seconds(), **running.rounded()}, indent=1, sort_keys=True))
            except OSError:
                pass  # a read-only checkout: the next session plans with the committed times
            return "background work: " + ", ".join(
                f"{name} {seconds:.0f} s (ended at {running.ended[name]:.0f} s)"
                for name, seconds in running.seconds.items()
            )
    return None


class Background:
    """The modules' slow fixtures whose work is mostly subprocesses (the
    bench's tiny entry, signalled runs, device layouts, a multi-process job,
    store faults, a published spec on unseen seeds), done in LANES threads
    started when the session starts, beside the in-process tests: each
    lane takes the next work (planned with each work's seconds as the last
    session measured them: `expected_seconds`). Two lanes: one at a time left
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
        self._queue = [(name, works[name]) for name in queue]
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

    def rounded(self) -> dict[str, float]:
        """Each finished work's seconds, rounded (what TIMES keeps)."""
        return {name: round(seconds, 1) for name, seconds in self.seconds.items() if name not in self.errors}

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
