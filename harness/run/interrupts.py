"""Ctrl-C and SIGTERM in a command: always answered, with exit 130 (143 for
SIGTERM), never swallowed and never leaving a record half-written.

A command (`stop_signals`) goes through the moments `Phase` names:
- start-up, planning and compiling: a signal raises `Interrupted` at once
  (the runs it had started end KILLED), except while its runs are being
  created (holding): that step ends first, so that every run is known and
  ended (`held`);
- training: the chunk loop notes it and acts on it between chunks, or
  within seconds when chunks are long (harness.run.chunk_loop), with a
  final checkpoint (`interrupt_between_chunks`);
- after a program's training, writing its records: the signal is noted
  and the writing finishes. A signal that came during the last chunk is
  noted the same way. The next program's training (a sweep's, a scale's
  next size) stops before it starts (`before_training`); at the end the
  command exits 130 all the same and says its work had finished
  (`noted`).

A second signal while one is noted raises at once. A noted signal outlives
any other error that ends the command (`carrying`): the command exits 130
(143) with its runs KILLED, and the other error is shown beside. One handler
(`_on_signal`) answers every moment, from the process's start (`install`)
to its end; the moment it is in decides what it does. The exit code and
the line a stopped command ends with are made here (`exit_code`, `said`).
"""

from __future__ import annotations

import contextlib
import enum
import signal
import threading
from collections.abc import Iterator


class Interrupted(KeyboardInterrupt):
    """Training was stopped by a signal (Ctrl-C is SIGINT, `kill` SIGTERM);
    a KeyboardInterrupt, so that runs end KILLED. `exit_code` is the shell's
    convention, 128 + the signal number (130, 143)."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(signal.Signals(signum).name)

    @property
    def exit_code(self) -> int:
        return exit_code(self.signum)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def exit_code(signum: int) -> int:
    """The shell's exit code for a command a signal stopped: 128 + its number."""
    return 128 + signum


def said(signum: int, when: str) -> str:
    """The line a stopped command ends with: `interrupted (SIGINT) WHEN`."""
    return f"interrupted ({signal.Signals(signum).name}) {when}"


class Phase(enum.Enum):
    """A command's moment, which decides what a signal does."""

    STARTING = "start-up, planning, compiling: a signal stops at once"
    TRAINING = "between chunks: noted, acted on by the chunk loop"
    WRITING = "a program's records after its training: noted, acted on after"
    HOLDING = "a step that must not be cut (runs being created): noted, acted on as it ends"


class _Command:
    """The running command's moment and the signal noted, if any."""

    phase = Phase.STARTING
    noted = 0  # a signal that came while the work could not stop at once (0: none)


_command = _Command()


def _on_signal(signum, frame) -> None:
    """The one handler of SIGINT and SIGTERM, whatever the moment: it stops
    at once while starting, else notes the signal; a second one stops at once."""
    if _command.phase is Phase.STARTING:
        raise Interrupted(signum)
    if _command.noted:
        raise Interrupted(_command.noted)
    _command.noted = signum


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def _handled() -> Iterator[bool]:
    """`_on_signal` installed for the block (in the main thread; elsewhere
    signals cannot be handled and are left as they are: yields False)."""
    if not _main_thread():
        yield False
        return
    previous = {signum: signal.signal(signum, _on_signal) for signum in STOP_SIGNALS}
    try:
        yield True
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def install() -> None:
    """The handler from the process's start (the `harness` command's entry
    point, before the harness is imported): a signal stops it at once."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, _on_signal)


@contextlib.contextmanager
def stop_signals() -> Iterator[None]:
    """One command's handling of SIGINT and SIGTERM."""
    global _command
    _command = _Command()
    try:
        with _handled():
            try:
                yield
            except BaseException as error:
                carried = carrying(error)
                if carried is not error:
                    raise carried from error
                raise
    finally:
        _command = _Command()  # what the command noted ends with it


def noted() -> int:
    """The signal that came after the command's work could no longer stop
    (its last chunk, the writing of its records), or 0: the command
    finished its work and exits 128 + this number all the same."""
    return _command.noted


def before_training() -> None:
    """The start of a program's training (compiling first): a signal noted
    while the previous program's records were written stops here."""
    _command.phase = Phase.STARTING
    if _command.noted:
        raise Interrupted(_command.noted)


@contextlib.contextmanager
def held() -> Iterator[None]:
    """A short step of start-up that must not be cut (a command's MLflow
    runs being created, each to be ended with it): a signal during it is
    noted and stops the command as the step ends; a second one stops it at
    once."""
    if _command.phase is not Phase.STARTING:
        yield
        return
    _command.phase = Phase.HOLDING
    try:
        yield
    finally:
        _command.phase = Phase.STARTING
    if _command.noted:
        raise Interrupted(_command.noted)


@contextlib.contextmanager
def interrupt_between_chunks():
    """While training, Ctrl-C (SIGINT) and SIGTERM are noted and acted on
    between chunks, where no lock or half-sent metric is held and the state
    can be checkpointed; a second one interrupts at once. Yields a function
    that returns the signal number that came, or 0. When training ends
    without acting on one (it came during the last chunk), it stays noted
    for the command (`noted`), and what follows is writing."""
    with _handled() as handled:
        if not handled:
            yield lambda: 0
            return
        # A new training: nothing noted yet (runner.run's `before_training`
        # acted on what its command had noted before).
        _command.phase, _command.noted = Phase.TRAINING, 0
        try:
            yield lambda: _command.noted
        except BaseException as error:
            carried = carrying(error)
            _command.phase, _command.noted = Phase.STARTING, 0  # acted on: the error carries it
            if carried is not error:
                raise carried from error
            raise
        _command.phase = Phase.WRITING


def carrying(error: BaseException) -> BaseException:
    """What ends the command after `error`: `error` itself, or, when a signal
    was noted and `error` is another failure (a NaN metric, a store out of
    reach), `Interrupted` for that signal, so that the signal is never
    swallowed (exit 130 or 143, runs KILLED); the caller chains `error` to
    it, so that its message is shown too."""
    if _command.noted and not isinstance(error, KeyboardInterrupt):
        return Interrupted(_command.noted)
    return error
