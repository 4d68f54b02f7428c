"""A spec's problems as users read them: `SpecError` names the file, the
dotted key and, where it can be found, the line (`key_lines`); pydantic's
errors become such (key, message) pairs (`problems`)."""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import ValidationError


class SpecError(Exception):
    """A problem with a spec, reported to the user without a traceback."""

    def __init__(self, source: str, problems: list[tuple[str, str]], lines: dict[str, int] | None = None):
        self.source = source
        self.problems = problems  # (dotted key or "", message)
        self.lines = lines or {}
        super().__init__(self.render())

    def render(self) -> str:
        out = []
        for key, message in self.problems:
            where = self.source
            if key:
                where += f": {key}"
            line = self.lines.get(key)
            if line is not None:
                where += f" (line {line})"
            out.append(f"{where}: {message}")
        return "\n".join(out)


def key_lines(text: str) -> dict[str, int]:
    """Map each dotted key path of a YAML document to its 1-based line."""
    lines: dict[str, int] = {}
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return lines

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                path = f"{prefix}.{key_node.value}" if prefix else str(key_node.value)
                lines[path] = key_node.start_mark.line + 1
                walk(value_node, path)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                path = f"{prefix}.{i}"
                lines[path] = item.start_mark.line + 1
                walk(item, path)

    walk(root, "")
    return lines


# Errors of a union member whose shape the value does not have (a range
# given where a list is also allowed): the other member's errors say more.
_SHAPE_MISMATCH = ("tuple_type", "list_type", "dict_type", "model_type", "model_attributes_type")


def _user_key(loc: tuple[Any, ...], data: Any, kind: str) -> list[str]:
    """The parts of a pydantic error location that are keys as the user
    wrote them: each part that indexes into `data`, walked from its root.
    Pydantic adds its own parts for unions and validators (`tuple`,
    `function-after[_ordered(), SweepRange]`); those name nothing in the
    file. The last part of a missing or unknown key (error `kind`) names a key
    the data lacks, and is kept."""
    parts: list[str] = []
    node = data
    for i, part in enumerate(loc):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, (list, tuple)) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        elif i == len(loc) - 1 and kind in ("missing", "extra_forbidden"):
            parts.append(str(part))  # a key that is missing or unknown
            break
        else:
            continue
        parts.append(str(part))
    return parts


def problems(error: ValidationError, data: Any) -> list[tuple[str, str]]:
    """A pydantic error as (dotted key as the user wrote it, message) pairs."""
    problems = []
    errors = error.errors()
    keys = [".".join(_user_key(err["loc"], data, err["type"])) for err in errors]
    for err, key in zip(errors, keys, strict=True):
        others = [k for e, k in zip(errors, keys, strict=True) if e is not err]
        if err["type"] in _SHAPE_MISMATCH and any(k == key or k.startswith(f"{key}.") for k in others):
            continue
        message = err["msg"]
        if err["type"] == "extra_forbidden":
            message = "unknown key"
        elif err["type"] == "missing":
            message = "required key is missing"
        elif message.startswith("Value error, "):
            message = message[len("Value error, ") :]
        if (
            "input" in err
            and err["type"] not in ("extra_forbidden", "missing", "value_error")
            and not isinstance(err["input"], (dict, list))
        ):
            message += f" (got {err['input']!r})"
        problems.append((key, message))
    return problems
