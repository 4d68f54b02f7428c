"""Ctrl-C and SIGTERM during training: noted, and acted on between chunks
(`interrupt_between_chunks`), or while a long chunk runs
(harness.run.chunk_loop), then raised as `Interrupted`."""

from __future__ import annotations

import contextlib
import signal
import threading


class Interrupted(KeyboardInterrupt):
    """Training was stopped by a signal (Ctrl-C is SIGINT, `kill` SIGTERM);
    a KeyboardInterrupt, so that runs end KILLED. `exit_code` is the shell's
    convention, 128 + the signal number (130, 143)."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(signal.Signals(signum).name)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def interrupt_between_chunks():
    """While training, Ctrl-C (SIGINT) and SIGTERM are noted and acted on
    between chunks, where no lock or half-sent metric is held and the state
    can be checkpointed; a second one interrupts at once. Yields a function
    that returns the signal number that came, or 0."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: 0
        return
    received: list[int] = []

    def note(signum, frame):
        if received:
            raise Interrupted(received[0])
        received.append(signum)

    previous = {signum: signal.signal(signum, note) for signum in STOP_SIGNALS}
    try:
        yield lambda: received[0] if received else 0
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
