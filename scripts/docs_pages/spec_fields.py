"""What a spec key's pydantic field says, as the spec reference writes it:
its type, bounds, default and description, read from the annotation."""

from __future__ import annotations

import json
import types
import typing
from typing import Any

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from docs_pages.common import codes, docstring


def literal_choices(annotation: Any) -> list[Any]:
    return list(typing.get_args(annotation)) if typing.get_origin(annotation) is typing.Literal else []


def unwrap(annotation: Any) -> tuple[Any, list[Any]]:
    """The annotation without `Annotated`, and the constraints it carried."""
    metadata: list[Any] = []
    while typing.get_origin(annotation) is typing.Annotated:
        annotation, *extra = typing.get_args(annotation)
        for item in extra:
            metadata += item.metadata if isinstance(item, FieldInfo) else [item]
    return annotation, metadata


def union_members(annotation: Any) -> list[Any]:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return list(typing.get_args(annotation))
    return [annotation]


def is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def is_statistic(model: type) -> bool:
    """A model written as a name or `{name: number}` (harness.experiment_spec.claims._Statistic)."""
    return hasattr(model, "PLAIN") and hasattr(model, "VALUED")


def type_text(annotation: Any) -> str:
    annotation, _ = unwrap(annotation)
    members = union_members(annotation)
    if len(members) > 1:
        parts = [type_text(m) for m in members if m is not type(None)]
        text = " or ".join(dict.fromkeys(parts))
        return f"{text} or null" if type(None) in members else text
    if choices := literal_choices(annotation):
        return f"`{choices[0]}`" if len(choices) == 1 else type_text(type(choices[0]))
    origin = typing.get_origin(annotation)
    if origin is tuple:
        (item, *_) = typing.get_args(annotation)
        return f"list of {type_text(item)}"
    if origin is dict:
        key, value = typing.get_args(annotation)
        return f"mapping of {type_text(key)} to {type_text(value)}"
    if is_model(annotation):
        if is_statistic(annotation):
            return "statistic"
        return "mapping"
    if annotation is typing.Any:
        return "any"
    return {str: "string", int: "int", float: "float", bool: "bool"}.get(
        annotation, getattr(annotation, "__name__", str(annotation))
    )


BOUND_SIGNS = (
    (annotated_types.Gt, "gt", ">"),
    (annotated_types.Ge, "ge", "≥"),
    (annotated_types.Lt, "lt", "<"),
    (annotated_types.Le, "le", "≤"),
)


def bounds_text(field: FieldInfo) -> str:
    annotation, metadata = unwrap(field.annotation)
    metadata = list(field.metadata) + metadata
    for member in union_members(annotation):
        metadata += unwrap(member)[1]
    parts = []
    for item in metadata:
        for kind, attribute, sign in BOUND_SIGNS:
            if isinstance(item, kind):
                parts.append(f"{sign} {yaml_value(getattr(item, attribute))}")
        if isinstance(item, annotated_types.MinLen):
            parts.append(f"at least {item.min_length} long")
        if isinstance(item, annotated_types.MaxLen):
            parts.append(f"at most {item.max_length} long")
    members = [unwrap(m)[0] for m in union_members(annotation) if m is not type(None)]
    choices = [c for m in members for c in literal_choices(m)]
    if choices and all(literal_choices(m) for m in members):  # a mix (int or `all`) shows them in its type
        parts.append("one of " + codes(choices))
    model = next((m for m in union_members(annotation) if is_model(m) and is_statistic(m)), None)
    if model is not None:
        written = [f"`{name}`" for name in model.PLAIN] + [
            f"`{{{name}: {kind}}}`" for name, kind in model.VALUED.items()
        ]
        parts.append("one of " + ", ".join(written))
    return "; ".join(parts)


def yaml_value(value: Any) -> str:
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
    return {"null": "null", "true": "true", "false": "false"}.get(text, text)


def default_text(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.default_factory() if field.default_factory is not None else field.default
    if isinstance(value, BaseModel) and not is_statistic(type(value)):
        return "(its keys' defaults)"
    return f"`{yaml_value(value)}`"


def description(field: FieldInfo, model: type | None) -> str:
    if field.description:
        return field.description
    return docstring(model) if model is not None else ""
