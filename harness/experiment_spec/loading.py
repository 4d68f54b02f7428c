"""Spec files in, validated models out: YAML read with `yaml.safe_load`,
its `algorithm:` picking the model, every problem a `SpecError`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from harness.experiment_spec.errors import SpecError, key_lines, problems
from harness.experiment_spec.model import Spec, spec_models


def parse(data: Any, source: str = "<spec>", text: str | None = None) -> Spec:
    """Validate already-loaded YAML data into a spec model."""
    lines = key_lines(text) if text is not None else {}
    if not isinstance(data, dict):
        raise SpecError(source, [("", "a spec must be a YAML mapping of keys to values")])
    algorithm = data.get("algorithm")
    if algorithm is None:
        raise SpecError(source, [("algorithm", "required key is missing")], lines)
    models = spec_models()
    if algorithm not in models:
        raise SpecError(
            source, [("algorithm", f"unknown algorithm {algorithm!r}; available: {', '.join(models)}")], lines
        )
    try:
        spec = models[algorithm].model_validate(data)
    except ValidationError as error:
        found = problems(error, data)
        # Point a missing key at its parent's line, the nearest place that exists.
        resolved = dict(lines)
        for key, _ in found:
            parent = key
            while parent and parent not in resolved:
                parent = parent.rpartition(".")[0]
            if parent:
                resolved[key] = resolved[parent]
        raise SpecError(source, found, resolved) from None
    crossed = spec.cross_checks()
    if crossed:
        raise SpecError(source, crossed, lines)
    return spec


def load(path: str | Path) -> Spec:
    """Read and validate a spec file; every problem raises `SpecError`."""
    path = Path(path)
    source = str(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise SpecError(source, [("", "no such file")]) from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as error:
        raise SpecError(source, [("", f"cannot read the file: {error}")]) from None
    return parse_text(text, source)


def parse_text(text: str, source: str = "<spec>") -> Spec:
    """Validate a spec given as YAML text (a file's, or a run's spec.yaml)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(error, "problem", None) or str(error)
        raise SpecError(source, [("", f"invalid YAML: {where}{problem}")]) from None
    return parse(data, source, text)
