"""Where each key of a spec's YAML is: its 1-based line, for messages that
name the key and the line (harness.spec.SpecError)."""

from __future__ import annotations

from typing import Any

import yaml


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
