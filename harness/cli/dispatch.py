"""`harness`'s main: parse the command line, run the command's handler
(harness.cli.table), and turn what it raised into one line and an exit
code: a user error 2, a NaN 1, Ctrl-C 130 and SIGTERM 143."""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from collections.abc import Sequence

import harness
from harness.cli.exits import EXIT_FAILED, EXIT_INCOMPLETE, user_error
from harness.cli.options import OptionError
from harness.cli.table import COMMANDS, parser
from harness.console import err_console
from harness.experiment_spec import SpecError
from harness.judge.compare import CompareError
from harness.judge.ladder import LadderError
from harness.judge.references import ReproduceError
from harness.record.rundir import CheckpointError
from harness.record.tracking import TrackingError
from harness.run import cluster, compile_cache, determinism, host_devices, interrupts
from harness.run.cluster import DistributedError
from harness.run.interrupts import Interrupted
from harness.run.runner import NonFiniteMetricError
from harness.sessions import drift as drift_session

USER_ERRORS = (
    SpecError,
    TrackingError,
    ReproduceError,
    CompareError,
    CheckpointError,
    DistributedError,
    determinism.DeterminismError,
    host_devices.HostDevicesError,
    OptionError,
    drift_session.DriftError,
    LadderError,
)


_commands_run = 0


def main(argv: Sequence[str] | None = None) -> int:
    global _commands_run
    args = parser().parse_args(argv)
    # The command's start: the harness's import for the first command of a
    # process (`harness run` imports it just before), else now.
    args.started_at = harness.STARTED if _commands_run == 0 else time.perf_counter()
    _commands_run += 1

    # SIGTERM (e.g. a scheduler's preemption) ends runs as Ctrl-C does; during
    # training the runner acts on either between chunks, with a final
    # checkpoint; once a program's training is over, its records are written
    # whole first (harness.run.interrupts).
    try:
        with interrupts.stop_signals():
            compile_cache.configure_from(args)
            if hasattr(args, "coordinator"):
                cluster.initialize(args.coordinator, args.num_processes, args.process_id, auto=args.cluster)
            code = COMMANDS[args.command].handler(args)
            if signum := interrupts.noted():
                return _finished_anyway(signum, code)
            return code
    except USER_ERRORS as error:
        return user_error(str(error))
    except NonFiniteMetricError as error:
        where = getattr(args, "spec", None) or f"run {getattr(args, 'run_id', '')}"
        err_console.print(f"[bold red]error:[/] {where}: {error}", soft_wrap=True)
        return EXIT_FAILED
    except KeyboardInterrupt as error:
        signum = error.signum if isinstance(error, Interrupted) else signal.SIGINT
        said = interrupts.said(signum, "before its work finished: MLflow runs it had started are marked KILLED")
        err_console.print(_highlighted(said), soft_wrap=True)
        if error.__cause__ is not None:  # another failure ended it after the signal came (interrupts.carrying)
            err_console.print(f"[bold red]error:[/] it also failed: {error.__cause__}", soft_wrap=True)
        return interrupts.exit_code(signum)
    finally:
        sys.stdout.flush()


def _finished_anyway(signum: int, code: int) -> int:
    """The exit of a command whose work finished after a stop signal came
    (during its last chunk, or while it wrote its records): 128 + the
    signal, so that `harness run A && harness run B` stops, and what it left."""
    state = {
        0: "its runs are complete and recorded",
        EXIT_INCOMPLETE: "its runs are complete; their record waits for harness sync",
    }.get(code, f"it would have exited {code}")
    err_console.print(_highlighted(interrupts.said(signum, f"after its work had finished: {state}")), soft_wrap=True)
    return interrupts.exit_code(signum)


def _highlighted(said: str) -> str:
    """An `interrupts.said` line with its first word in the warning colour."""
    return said.replace("interrupted", "[bold yellow]interrupted[/]", 1)


def console() -> None:
    """The `harness` command: `main()`, then the process ends at once.

    Python's own exit tears down every module and object JAX, XLA and MLflow
    made, about 1.3 s on the reference CPU after the last line was printed,
    with nothing left to write by then: the runs are ended, checkpoints and
    the compilation cache written, the metric writer gone. A process of a
    multi-process job exits normally, so that JAX leaves the job cleanly."""
    code = main()
    if cluster.joined:
        sys.exit(code)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
