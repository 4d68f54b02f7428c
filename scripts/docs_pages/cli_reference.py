"""docs/reference/cli.md: every `harness` command and option, from the
argparse parser the command table of `harness.cli.table` makes, written as `-h` prints them."""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator

from docs_pages.common import cell, header, table
from harness.cli import table as cli_table


@contextlib.contextmanager
def stable_environment() -> Iterator[None]:
    """Help texts that name a per-user path (the compile cache's default
    directory, under $XDG_CACHE_HOME or ~/.cache) name it the same way on every machine."""
    saved = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = "~/.cache"
    try:
        yield
    finally:
        if saved is None:
            del os.environ["XDG_CACHE_HOME"]
        else:
            os.environ["XDG_CACHE_HOME"] = saved


def metavar(action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""
    if action.metavar is not None:
        name = action.metavar
    elif action.choices is not None:
        name = "{" + ",".join(str(c) for c in action.choices) + "}"
    else:
        name = action.dest.upper()
    return {
        None: name,
        "?": f"[{name}]",
        "*": f"[{name} ...]",
        "+": f"{name} [{name} ...]",
    }.get(action.nargs, name)


def invocation(action: argparse.Action) -> str:
    if not action.option_strings:
        return metavar(action)
    value = metavar(action)
    return ", ".join(f"{o} {value}".strip() for o in action.option_strings)


def usage(prog: str, parser: argparse.ArgumentParser) -> str:
    parts = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            parts.append("{" + ",".join(action.choices) + "} ...")
        elif not action.option_strings:
            parts.append(metavar(action))
        else:
            text = f"{action.option_strings[0]} {metavar(action)}".strip()
            parts.append(text if action.required else f"[{text}]")
    return f"{prog} {' '.join(parts)}"


def help_text(action: argparse.Action, prog: str) -> str:
    """The help as `-h` prints it: %-formatted with the action's attributes
    (argparse.HelpFormatter._expand_help)."""
    if not action.help:
        return ""
    params = {k: v for k, v in vars(action).items() if v is not argparse.SUPPRESS}
    if params.get("choices") is not None:
        params["choices"] = ", ".join(str(c) for c in params["choices"])
    return action.help % {**params, "prog": prog}


def described(text: str, prog: str) -> str:
    """A parser's description as `-h` prints it (formatted only where it names %(prog))."""
    return text % {"prog": prog} if "%(prog)" in text else text


def default_cell(action: argparse.Action) -> str:
    if isinstance(action, argparse._StoreTrueAction | argparse._StoreFalseAction) or action.nargs == 0:
        return "off"
    if action.default is None or action.default is argparse.SUPPRESS:
        return ""
    return f"`{action.default}`"


def cli_reference() -> str:
    with stable_environment():
        root = cli_table.parser()
    sub = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help for choice in sub._choices_actions}
    out = [header("harness.cli.table"), "# Command line\n\n"]
    out.append(
        f"`harness` (also `python -m harness`): {cell(described(root.description, root.prog))} "
        "What each exit code means: [exit codes](exit-codes.md).\n\n"
    )
    out.append(f"```text\n{usage('harness', root)}\n```\n")
    for name, parser in sub.choices.items():
        out.append(f"\n## `harness {name}`\n\n{helps.get(name, '')}.\n\n")
        if parser.description:
            out.append(f"{described(parser.description, parser.prog)}\n\n")
        out.append(f"```text\n{usage(f'harness {name}', parser)}\n```\n")
        for group in parser._action_groups:
            actions = [a for a in group._group_actions if not isinstance(a, argparse._HelpAction)]
            if not actions:
                continue
            title = group.title or ""
            out.append(f"\n**{title[:1].upper() + title[1:]}**")
            out.append(f": {described(group.description, parser.prog)}\n\n" if group.description else "\n\n")
            out.append(
                table(
                    ["Argument", "Default", "Description"],
                    [[f"`{invocation(a)}`", default_cell(a), help_text(a, parser.prog)] for a in actions],
                )
            )
        if parser.epilog:
            out.append(f"\n{parser.epilog}\n")
    return "".join(out)
