"""The exit codes of the `harness` command.

User errors (a bad spec, an unusable tracking store, a checkpoint that cannot
be resumed) print one message and exit 2 without a traceback; nothing is
logged to MLflow for a spec that does not validate. A run that fails (a NaN,
a crash) exits 1; Ctrl-C exits 130 and SIGTERM 143 at any moment, after a
final checkpoint, or after the records are written whole when training had
finished (harness.run.interrupts). A run that finished while its MLflow
store could not be reached exits 3: its record is in the run directory, for
`harness sync`.
"""

from __future__ import annotations

from harness.console import err_console
from harness.judge import verdict

EXIT_USER_ERROR = 2
EXIT_FAILED = verdict.EXIT_FAILED
EXIT_INTERRUPTED = 130  # SIGINT; SIGTERM exits 143
EXIT_INCOMPLETE = 3  # trained to the end; the MLflow record waits for harness sync
EXIT_NOT_JUDGED = verdict.EXIT_NOT_JUDGED


def user_error(message: str) -> int:
    err_console.print(f"[bold red]error:[/] {message}", soft_wrap=True)
    return EXIT_USER_ERROR
