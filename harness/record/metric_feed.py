"""The way per-iteration metrics leave the training process: a queue, a
thread that moves it into the stdin of the metric writer process
(harness.record.metric_writer), and that process's end, which says whether
every metric reached the store. A small run whose metrics wait until
training ends is written in this process instead, at `finish`: starting a
writer (a Python that imports MLflow and opens the store, about 2.5 CPU
seconds here) would cost more than its writing.

`Tracking` (harness.record.tracking) owns one `MetricFeed` and decides what
goes into it; this module only carries entries across. No JAX here.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from harness.exit_codes import EXIT_INCOMPLETE
from harness.record.client import TrackingError
from harness.record.metric_writer import write_here


class MetricFeed:
    """Entries of per-iteration metrics on their way to a metric writer
    process for the store at `uri`, which spreads them over `workers`
    processes of its own.

    `put` returns at once. With `live` off, entries wait in this process
    until `finish`: on a CPU backend the store's work would compete with
    training for the same cores; and if one process is to write them
    (`workers` 1) and the run's `client` is given, `finish` writes them with
    it, with no writer process. After `finish`, `start` begins a new writer
    for the entries that follow."""

    def __init__(self, uri: str, *, live: bool, workers: int, client=None):
        self.uri = uri
        self.workers = workers
        self._client = client if not live and workers == 1 else None  # writing here, at finish
        self._runs: list[str] | None = None  # between start and finish
        self._directory: Path | None = None
        self._writer: subprocess.Popen | None = None  # harness.record.metric_writer, between start and finish
        self._writer_log = None
        self._outbox: queue.Queue = queue.Queue()
        self._feeder: threading.Thread | None = None
        self._error: str | None = None
        self._release = threading.Event()
        if live:
            self._release.set()

    @property
    def running(self) -> bool:
        """Whether `start` was called and `finish` not yet."""
        return self._runs is not None

    def start(self, runs: list[str], directory: Path | None) -> None:
        """Start a writer (or, writing here, remember) for the seed columns'
        `runs` (run ids, in column order); with a run `directory`, which
        journal entries reached the store is recorded there."""
        self._runs, self._directory = runs, directory
        if self._client is not None:
            return
        # A session of its own, so that Ctrl-C reaches only this process,
        # which then flushes the writer before ending the runs.
        # Its stderr goes to a file: a pipe nobody reads could fill and stall it.
        self._writer_log = tempfile.TemporaryFile("w+")
        argv = [sys.executable, "-m", "harness.record.metric_writer", self.uri]
        argv += [str(directory) if directory is not None else "", str(self.workers)]
        self._writer = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stderr=self._writer_log, text=True, start_new_session=True
        )
        # The runs go first, at once: the writer opens the store and starts
        # its workers while training goes on, whether or not metrics wait.
        self._writer.stdin.write(json.dumps({"runs": runs}) + "\n")
        self._writer.stdin.flush()
        # The feeder is given the pipe: `finish` may clear `_writer` before
        # the thread first runs (a run stopped at once).
        self._feeder = threading.Thread(
            target=self._feed, args=(self._writer.stdin,), name="metric-feeder", daemon=True
        )
        self._feeder.start()

    def put(self, entry: dict) -> None:
        """Queue one entry of the writer's protocol (harness.record.metric_writer)."""
        self._outbox.put(entry)

    def finish(self, *, journaled: bool) -> str | None:
        """Send what is queued, then wait for the writer to end (it must be
        running). Returns why the store could not be reached when the writer
        says so and the entries are `journaled` (kept for harness sync);
        None otherwise. Any other failure is raised by `raise_error`."""
        runs, self._runs = self._runs, None
        if self._client is not None:
            entries = []
            while not self._outbox.empty():
                entries.append(self._outbox.get())
            offline = write_here(self._client, runs, entries, self._directory)
            if offline is not None and not journaled and self._error is None:
                self._error = offline
            return offline if journaled else None
        writer, self._writer = self._writer, None
        self._outbox.put(None)
        self._release.set()
        self._feeder.join()
        code = writer.wait()
        self._writer_log.seek(0)
        log = self._writer_log.read().strip()
        self._writer_log.close()
        if code == EXIT_INCOMPLETE and journaled:
            return log.splitlines()[-1].removeprefix("offline: ") if log else "the store could not be reached"
        if code != 0 and self._error is None:
            self._error = log.splitlines()[-1] if log else f"exit code {code}"
        return None

    def _feed(self, stdin) -> None:
        """Move queued entries into the writer's `stdin`. A thread of its
        own, because a write blocks whenever the writer lags behind. The
        pipe is closed however the thread ends, so that the writer, and
        `finish` waiting for it, always end."""
        try:
            self._release.wait()
            while (item := self._outbox.get()) is not None:
                if self._error is None:
                    try:
                        stdin.write(json.dumps(item, allow_nan=True) + "\n")
                        stdin.flush()
                    except OSError as error:  # the writer died; its stderr says why
                        self._error = f"the metric writer stopped ({error})"
        except Exception as error:  # noqa: BLE001  (reported by raise_error)
            self._error = self._error or f"the metric feeder stopped ({type(error).__name__}: {error})"
        finally:
            try:
                stdin.close()
            except OSError:
                pass

    def raise_error(self) -> None:
        """A TrackingError if the metrics could not be written."""
        if self._error is not None:
            raise TrackingError(f"logging metrics to {self.uri!r} failed: {self._error}")
