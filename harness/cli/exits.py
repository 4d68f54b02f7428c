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
from harness.exit_codes import EXIT_FAILED, EXIT_INCOMPLETE, EXIT_INTERRUPTED, EXIT_NOT_JUDGED, EXIT_USER_ERROR

__all__ = ["EXIT_FAILED", "EXIT_INCOMPLETE", "EXIT_INTERRUPTED", "EXIT_NOT_JUDGED", "EXIT_USER_ERROR", "user_error"]


def user_error(message: str) -> int:
    err_console.print(f"[bold red]error:[/] {message}", soft_wrap=True)
    return EXIT_USER_ERROR
