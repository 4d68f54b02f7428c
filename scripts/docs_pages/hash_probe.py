"""Which spec keys the spec hash covers, found by asking
`harness.experiment_spec.canonical` (the form the hash is taken of) whether a key is in
it: at its default, or with another value."""

from __future__ import annotations

import json
import typing
from collections.abc import Iterator
from typing import Any

from pydantic import ValidationError
from pydantic.fields import FieldInfo

from docs_pages.spec_fields import is_model, literal_choices, union_members, unwrap
from harness import experiment_spec as S


def sample_spec(algorithm: str) -> dict[str, Any]:
    """The smallest data that validates for `algorithm`: every default."""
    return {
        "name": "x",
        "algorithm": algorithm,
        "env": {"suite": "gymnax", "id": "CartPole-v1"},
        "seeds": [0],
        "budget": {"env_steps": 1},
    }


def set_path(data: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for key in parents:
        data = data.setdefault(key, {})
    data[last] = value


def key_paths(data: Any, prefix: str = "") -> set[str]:
    out: set[str] = set()
    if isinstance(data, dict):
        for key, value in data.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            out |= {path} | key_paths(value, path)
    return out


class HashProbe:
    """The hashed keys of one algorithm's spec model."""

    UNHASHED = (*S.RUNTIME_SECTIONS, S.CLAIMS_SECTION, S.STRENGTH_SECTION)

    def __init__(self, algorithm: str):
        self.algorithm = algorithm
        self.model = S.spec_models()[algorithm]
        self._cache: dict[str, set[str] | None] = {}

    def present(self, overrides: dict[str, Any]) -> set[str] | None:
        """The key paths of the canonical form of the sample spec with
        `overrides` (dotted path: value); None if that does not validate."""
        key = json.dumps(overrides, sort_keys=True, default=str)
        if key not in self._cache:
            data = sample_spec(self.algorithm)
            for path, value in overrides.items():
                set_path(data, path, value)
            try:
                self._cache[key] = key_paths(S.canonical(self.model.model_validate(data)))
            except ValidationError:
                self._cache[key] = None
        return self._cache[key]

    def status(self, path: str, field: FieldInfo, context: dict[str, Any]) -> str:
        """`yes`, `no`, or `unless at its default` (left out there, so that
        specs published before the key existed keep their hashes)."""
        if path.split(".")[0] in self.UNHASHED:
            return "no"
        present = self.present(context)
        if present is not None and path in present:
            return "yes"
        for value in other_values(field):
            present = self.present({**context, path: value})
            if present is not None and path in present:
                return "unless at its default"
        return "no"


def other_values(field: FieldInfo) -> Iterator[Any]:
    """Values other than a field's default, to probe the canonical form with
    (invalid ones are skipped by the probe)."""
    default = None if field.is_required() else field.default
    annotation, _ = unwrap(field.annotation)
    for member in union_members(annotation):
        member, _ = unwrap(member)
        for choice in literal_choices(member):
            if choice != default:
                yield choice
        if member is bool:
            yield not default
        elif member in (int, float):
            for value in (1, 2, 0.5, 0):
                if value != default:
                    yield value
        elif member is str:
            yield "x"
        elif is_model(member):
            yield {}
        elif typing.get_origin(member) is tuple:
            yield [1]
        elif typing.get_origin(member) is dict:
            yield {"budget.env_steps": [1, 2]}
