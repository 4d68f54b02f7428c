"""The `harness` command's entry point: a stop signal during start-up,
while the harness and JAX are imported (seconds), ends it with exit 130
(143 for SIGTERM) and one line, not a traceback."""

from __future__ import annotations

import os
import signal
import sys


def console() -> None:
    from harness.run import interrupts

    interrupts.install()
    try:
        from harness.cli import dispatch
    except KeyboardInterrupt as error:
        signum = error.signum if isinstance(error, interrupts.Interrupted) else signal.SIGINT
        sys.stderr.write(interrupts.said(signum, "while starting: nothing was run") + "\n")
        sys.stderr.flush()
        os._exit(interrupts.exit_code(signum))
    dispatch.console()
