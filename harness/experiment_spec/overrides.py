"""Overrides of a spec's values by dotted key (`--set KEY=V1,V2`, a
sweep's points, a reproduction's changes): read once here, set here, and
the changed spec validated again, so a key that is not the spec's is named
the same way wherever it comes from."""

from __future__ import annotations

from typing import Any

import yaml

from harness.experiment_spec.canonical import canonical, spec_differences
from harness.experiment_spec.errors import SpecError
from harness.experiment_spec.loading import parse
from harness.experiment_spec.model import Spec


def parse_sets(sets: list[str], source: str = "--set") -> dict[str, tuple[Any, ...]]:
    """`KEY=V1,V2,...` (values read as YAML: numbers, null, true) by key."""
    swept: dict[str, tuple[Any, ...]] = {}
    for item in sets:
        key, eq, text = item.partition("=")
        if not eq or not key.strip():
            raise SpecError(source, [("", f"{item!r} is not KEY=V1,V2,...")])
        try:
            values = tuple(yaml.safe_load(part) for part in text.split(",")) if text.strip() else ()
        except yaml.YAMLError:
            raise SpecError(source, [(key.strip(), f"cannot read the values {text!r}")]) from None
        if not values:
            raise SpecError(source, [(key.strip(), "an empty list of values")])
        swept[key.strip()] = values
    return swept


def assign(data: dict[str, Any], key: str, value: Any, source: str = "--set") -> None:
    """`data` (a spec as a mapping) with the dotted `key` set to `value`;
    SpecError naming the key where a part of its path is not a section."""
    *path, last = key.split(".")
    node = data
    for depth, part in enumerate([*path, None]):
        if not isinstance(node, dict):
            section = ".".join(path[:depth])
            raise SpecError(source, [(key, f"{section} is not a section with keys (it is {node!r})")])
        if part is None:
            break
        if part not in node:
            raise SpecError(source, [(key, f"{'.'.join(path[: depth + 1])} is not a section of the spec")])
        node = node[part]
    node[last] = value


def with_overrides(spec: Spec, values: dict[str, Any], source: str) -> tuple[Spec, dict[str, list[str]]]:
    """`spec` with each dotted key of `values` set to its value, validated
    again (its claims kept: they are not what is changed), and the keys
    whose values differ from the original, with both values. SpecError
    names `source` and the key for one that cannot be set."""
    data = canonical(spec)
    data["devices"] = spec.devices.model_dump()
    for key, value in values.items():
        assign(data, key, value, source)
    changed = parse(data, source).model_copy(update={"claims": spec.claims})
    return changed, spec_differences([canonical(spec), canonical(changed)])
