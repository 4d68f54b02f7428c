"""The `harness` command. Its commands are one table (`table`: each
command's name, handler, arguments, help and exit codes), run by
`dispatch.main`; each command's arguments and handler are one module of
`commands` (`commands.publish` is `harness publish`), the option groups
they share are `arguments`, and what those options make (a plan, run
options) is `options`. `launch.console` is the installed entry point. The
exit codes, and what each means, are in `exits`.
"""

import importlib

from harness.cli.exits import EXIT_FAILED, EXIT_INCOMPLETE, EXIT_INTERRUPTED, EXIT_NOT_JUDGED, EXIT_USER_ERROR

# Loaded when first used, so that `harness.cli.launch` starts in a moment (a Ctrl-C while the
# harness and JAX are imported ends it with one line).
_LAZY = {
    "main": "harness.cli.dispatch",
    "console": "harness.cli.dispatch",
    "USER_ERRORS": "harness.cli.dispatch",
    "COMMANDS": "harness.cli.table",
    "TABLE": "harness.cli.table",
    "parser": "harness.cli.table",
}

__all__ = ["EXIT_FAILED", "EXIT_INCOMPLETE", "EXIT_INTERRUPTED", "EXIT_NOT_JUDGED", "EXIT_USER_ERROR", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'harness.cli' has no attribute {name!r}")
