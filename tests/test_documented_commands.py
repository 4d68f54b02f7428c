"""Every `harness ...` and `nox ...` command that README.md and docs/ show,
checked against the real CLI: the command and its options parse, the files
it names exist, and the cheap ones run to exit 0 (validate, --help, and
run, sweep, scale, sync and compare of a tiny variant of the spec named:
the same options, a few iterations of few envs). What cannot be checked
that way is listed in NOT_RUN with its reason.

Placeholders stand for what a reader would put there: `SPEC` a spec file
(one with a sweep: section on the sweeps page), `3f2a...` and `RUN_ID` a
run id, `DIR` a folder, `NAME` a file name."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from documented_commands import ROOT, Files, argv_of, documented, runnable
from support import background_result

from harness import cli, jax_build
from harness.cli.table import parser

COMMANDS = documented()
HARNESS = [c for c in COMMANDS if c.words[0] == "harness"]
NOX = [c for c in COMMANDS if c.words[0] == "nox"]


def _options(subcommand: str) -> set[str]:
    """The option strings of one `harness` subcommand."""
    (sub,) = [a for a in parser()._subparsers._group_actions]
    return {o for action in sub.choices[subcommand]._actions for o in action.option_strings}


@pytest.mark.parametrize("command", HARNESS, ids=[c.where for c in HARNESS])
def test_each_documented_harness_command_parses(command, tmp_path):
    argv = argv_of(command, Files(tmp_path))
    assert argv and argv[0] in cli.COMMANDS, f"{command.where}: no command {argv[:1]}"
    if not command.whole:  # a mention: its options must exist
        unknown = {w for w in argv[1:] if w.startswith("-")} - _options(argv[0])
        assert not unknown, f"{command.where}: {command.text}: no option {', '.join(sorted(unknown))}"
        return
    try:
        args = parser().parse_args(argv)
    except SystemExit as stop:
        pytest.fail(f"{command.where}: `{command.text}` does not parse (exit {stop.code})")
    spec = getattr(args, "spec", None)
    if spec is not None:
        assert Path(spec).exists(), f"{command.where}: {spec} does not exist"


def _bench_options() -> set[str]:
    """The options `nox -s bench -- ...` passes to pytest that the bench's
    plugin adds, and pytest's -k."""
    from benchmarks.machinery import plugin

    names: set[str] = {"-k"}

    class Group:
        def getgroup(self, name):
            return self

        def addoption(self, *options, **kwargs):
            names.update(options)

    plugin.pytest_addoption(Group())
    return names


def _nox_sessions() -> set[str]:
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.decorator_list}


@pytest.mark.parametrize("command", NOX, ids=[c.where for c in NOX])
def test_each_documented_nox_command_names_a_session_and_its_options(command):
    """Not run: nox builds a virtual environment; its session, options and
    the specs it names are checked."""
    words = command.words[1:]
    session = words[words.index("-s") + 1] if "-s" in words else "tests"
    assert session in _nox_sessions(), f"{command.where}: no nox session {session}"
    posargs = words[words.index("--") + 1 :] if "--" in words else []
    # The JAX build and line (noxfile.py's _install), taken before the session's own options.
    for option, known, what in (("--accelerator", jax_build.PACKAGES, "build"), ("--jax", jax_build.LINES, "line")):
        if option in posargs:
            at = posargs.index(option)
            assert session in ("tests", "bench", "publish", "unseen"), (
                f"{command.where}: nox -s {session} installs no JAX"
            )
            assert posargs[at + 1] in known, f"{command.where}: no JAX {what} {posargs[at + 1]}"
            posargs = posargs[:at] + posargs[at + 2 :]
    if session == "bench":
        if "--baseline" in posargs:  # noxfile.py's own: REV's worktree, the options that start its bench
            at = posargs.index("--baseline")
            assert at + 1 < len(posargs), f"{command.where}: --baseline takes a commit"
            posargs = posargs[:at] + posargs[at + 2 :]
        unknown = {w for w in posargs if w.startswith("-")} - _bench_options()
        assert not unknown, f"{command.where}: the bench has no option {', '.join(sorted(unknown))}"
        if "--full" in posargs and posargs.index("--full") + 1 < len(posargs):
            names = posargs[posargs.index("--full") + 1]
            if not names.startswith("-"):
                for name in names.split(","):
                    assert (ROOT / "experiments" / f"{name}.yaml").exists(), f"{command.where}: no spec {name}"
    elif session in ("publish", "unseen"):
        for name in posargs:
            assert (ROOT / "experiments" / f"{name}.yaml").exists(), f"{command.where}: no spec {name}"
    else:
        assert not posargs, f"{command.where}: nox -s {session} takes no options"


def run_documented_commands(tmp_path_factory) -> list[dict]:
    folder = tmp_path_factory.mktemp("documented-commands")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]),
    }
    out = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "documented_commands.py"), str(folder)],
        env=env, capture_output=True, text=True, timeout=1800, cwd=folder,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


BACKGROUND = {"documented_runs": run_documented_commands}


@pytest.fixture(scope="module")
def documented_runs():
    return background_result("documented_runs")


def test_the_cheap_documented_commands_run(documented_runs):
    """A page's commands in the order a reader meets them, with the page's
    own store, the published specs named replaced by tiny variants
    (tests/documented_commands.py, in a process of its own)."""
    ran = {line["where"] for line in documented_runs}
    assert ran == {c.where for c in runnable()}
    failures = [
        f"{line['where']}: `{line['command']}` exited {line['code']}: {line['stderr']}"
        for line in documented_runs
        if line["code"] != 0
    ]
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("subcommand", sorted(cli.COMMANDS))
def test_every_command_has_help(subcommand):
    with pytest.raises(SystemExit) as stop:
        parser().parse_args([subcommand, "--help"])
    assert stop.value.code == 0


def test_the_docs_name_every_command():
    named = {c.words[1] for c in HARNESS if len(c.words) > 1}
    assert named >= set(cli.COMMANDS)
