"""docs/reference/exit-codes.md: the exit status of every `harness`
command, from the `EXIT_*` constants of `harness.cli`."""

from __future__ import annotations

import inspect
import signal

from docs_pages.common import SCRIPT, header, table
from harness import cli
from harness.cli import exits
from harness.cli.table import TABLE
from harness.run.interrupts import Interrupted

# What each EXIT_* constant of harness.cli means: the values are read from
# the constants; a new constant without a line here stops this script.
EXIT_MEANINGS = {
    "EXIT_FAILED": "the run failed: a metric became NaN or infinite (`NonFiniteMetricError`, any training command); "
    "`harness run` and `harness reproduce`: a claim's test FAILED (or, reproducing, a gating metric failed its "
    "check); `harness drift`: the newer side fails, or is SLOWER; `harness scale`: no size of the ladder ran",
    "EXIT_USER_ERROR": "a user error, printed as one message without a traceback: a spec that does not validate, a "
    "bad option, an unusable tracking store, a checkpoint that cannot be resumed, a reference or comparison that "
    "cannot be made; nothing is logged to MLflow for a spec that does not validate. argparse's own errors (an "
    "unknown option) exit 2 too",
    "EXIT_INCOMPLETE": "trained to the end, but the MLflow store could not be reached: the record is in the run "
    "directory, for `harness sync`",
    "EXIT_NOT_JUDGED": "undecided, never a failure: trained and recorded, but a claim's test is INCONCLUSIVE (its "
    "seed cap reached without PASS or FAIL: more seeds would decide) or untested (fewer faithful seeds than a test "
    "needs), or `harness reproduce`'s verdict is statistical and a side has one seed, so there is no spread to "
    "compare (logged as `not judged`); `harness drift`: no agreement shown",
    "EXIT_INTERRUPTED": "interrupted by Ctrl-C (SIGINT) at any moment: while starting or compiling; while training, "
    "after a final checkpoint (the MLflow runs are marked KILLED); or after the work finished (during the last "
    "chunk, or while the records were written: they are written whole, the runs end FINISHED and the message says "
    "so, and the exit is still 130)",
}
# The codes every command can return; the others are returned by the
# commands whose row of the table (harness.cli.table) lists them.
EVERY_COMMAND = {"EXIT_USER_ERROR", "EXIT_INTERRUPTED"}


def returned_by(name: str, value: int) -> str:
    """The commands that return `value`: every one, or those whose row lists it."""
    if name in EVERY_COMMAND:
        return "every command"
    return ", ".join(f"`{command.name}`" for command in TABLE if value in command.exits)


# 0, 2, 130 and 143 mean the same for every command: success, a user error,
# Ctrl-C, SIGTERM; each command's other codes are its row of the command
# table (harness.cli.table), which the suite holds to its handler's returns.
SIGNALS = {130: "Ctrl-C (SIGINT)", 143: "SIGTERM"}
# `nox -s bench` is pytest with the bench's plugin (benchmarks/machinery): nox exits 0 when
# pytest did and 1 otherwise, and prints pytest's code, one of these.
BENCH_EXITS = {
    0: "every selected entry measured (a regression is reported, not failed, without --fail-on-regression)",
    1: "an entry failed, or with --fail-on-regression and --baseline the speed test finds an entry SLOWER, or the"
    " compile seconds SLOWER or the peak memory LARGER, than the baseline's",
    2: "interrupted (Ctrl-C): the entries measured so far are written",
    4: "bad input, one message, before anything runs: `-k` matching no entry, an unknown --full spec, peer "
    "or device, a --spec that does not validate, an unusable tracking store; or a side-by-side call past its "
    "deadline (the bench names the call that hung)",
}


def by_command() -> str:
    """One table per command: the codes it returns and what each means there."""
    out = [
        "## By command\n\nA statement that does not hold (a claim without `delta`) and a spec without claims "
        "exit 0: only a test gates. A run that both waits for `harness sync` (3) and has a verdict exits with the "
        "verdict's code (1 or 4), which says more.\n\n"
    ]
    for command in TABLE:
        rows = [["`0`", "success"]] + [[f"`{c}`", m] for c, m in sorted(command.exits.items())]
        rows.append(["`2`", "a user error (one message, no traceback)"])
        rows += [[f"`{c}`", f"stopped by {name}"] for c, name in SIGNALS.items()]
        rows.sort(key=lambda row: int(row[0].strip("`")))
        out.append(f"### harness {command.name}\n\n")
        out.append(table(["Code", "Meaning"], rows, ["r", "l"]) + "\n")
    out.append(
        "### nox -s bench\n\n`nox` itself exits 0 when the bench's pytest did and 1 otherwise; the log's last lines "
        "give pytest's code:\n\n"
    )
    out.append(table(["Code", "Meaning"], [[f"`{c}`", m] for c, m in BENCH_EXITS.items()], ["r", "l"]))
    return "".join(out)


def exit_codes() -> str:
    constants = {
        name: value for name, value in vars(cli).items() if name.startswith("EXIT_") and isinstance(value, int)
    }
    unknown = set(constants) - set(EXIT_MEANINGS)
    if unknown:
        raise SystemExit(f"{SCRIPT}: harness.cli has exit codes this script does not describe: {sorted(unknown)}")
    sigterm = Interrupted(signal.SIGTERM).exit_code
    rows = [
        [
            "`0`",
            "",
            "success (every claim's test PASSED; `harness reproduce`: every gating metric passed too)",
            "every command",
        ]
    ]
    for name, value in sorted(constants.items(), key=lambda item: item[1]):
        rows.append([f"`{value}`", f"`{name}`", EXIT_MEANINGS[name], returned_by(name, value)])
    rows.append(
        [
            f"`{sigterm}`",
            "`Interrupted.exit_code`",
            "stopped by SIGTERM (e.g. a scheduler's preemption), as Ctrl-C: a final checkpoint, runs marked "
            "KILLED; 128 + the signal number, the shell's convention",
            "every command",
        ]
    )
    out = [header("the EXIT_* constants of harness.cli"), "# Exit codes\n\n"]
    prose = " ".join(inspect.cleandoc(exits.__doc__ or "").split("\n\n", 1)[-1].split())
    out.append(f"The exit status of every `harness` command ([command line](cli.md)). {prose}\n\n")
    out.append(table(["Code", "Name", "Meaning", "Returned by"], rows, ["r", "l", "l", "l"]))
    out.append("\n" + by_command())
    return "".join(out)
