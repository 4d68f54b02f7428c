"""The `harness` command's entry point: a stop signal during start-up,
while the harness and JAX are imported (seconds), ends it with exit 130
(143 for SIGTERM) and one line, not a traceback."""

from __future__ import annotations

import os
import signal
import sys


def console() -> None:
    from harness.run.interrupts import STOP_SIGNALS, Interrupted

    def stop(signum, frame):
        raise Interrupted(signum)

    for signum in STOP_SIGNALS:
        signal.signal(signum, stop)
    try:
        from harness import cli
    except KeyboardInterrupt as error:
        signum = error.signum if isinstance(error, Interrupted) else signal.SIGINT
        sys.stderr.write(f"interrupted ({signal.Signals(signum).name}) while starting: nothing was run\n")
        sys.stderr.flush()
        os._exit(128 + signum)
    cli.console()
