"""docs/reference/spec.md: every spec key of every algorithm's spec model,
with its type, default, bounds, whether it is in the spec hash, and its
description; and the keys that have none (`--undocumented`)."""

from __future__ import annotations

import typing
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

import algorithms
from docs_pages.common import codes, docstring, first_paragraph, header, table
from docs_pages.hash_probe import HashProbe
from docs_pages.spec_fields import (
    bounds_text,
    default_text,
    description,
    is_model,
    is_statistic,
    literal_choices,
    type_text,
    union_members,
    unwrap,
)
from harness import experiment_spec as S
from harness.experiment_spec.sections import SeedRange


class Row(typing.NamedTuple):
    path: str
    type: str
    default: str
    bounds: str
    hashed: str
    description: str


# Spec keys a validator accepts in a second form that the annotation does
# not show: `seeds:` as {count, base} (harness.experiment_spec.model._SpecBase._expand_seeds).
SECOND_FORMS = {"seeds": (SeedRange, "a list of seeds, or a range {count, base} of them")}


class SpecWalker:
    def __init__(self, probe: HashProbe):
        self.probe = probe
        self.scope = ""  # the algorithm, in its own sections
        self.undocumented: list[str] = []

    def note(self, path: str) -> None:
        """`path` has no description."""
        if not path.endswith("[].name"):
            self.undocumented.append(f"{path} ({self.scope})" if self.scope else path)

    def rows(self, model: type, prefix: str, context: dict[str, Any], inherited: str | None = None) -> list[Row]:
        out = []
        for name, field in model.model_fields.items():
            out += self.field_rows(f"{prefix}{name}", field, context, inherited)
        return out

    def field_rows(self, path: str, field: FieldInfo, context: dict[str, Any], inherited: str | None) -> list[Row]:
        annotation, _ = unwrap(field.annotation)
        members = [unwrap(m)[0] for m in union_members(annotation)]
        nested = next((m for m in members if is_model(m) and not is_statistic(m)), None)
        documented_by = next((m for m in members if is_model(m)), None)
        hashed = inherited if inherited is not None else self.probe.status(path, field, context)
        text = description(field, documented_by)
        kind = type_text(field.annotation)
        if path in SECOND_FORMS:
            nested, text = SECOND_FORMS[path][0], f"{SECOND_FORMS[path][1]}. {text}".strip()
            kind = f"{kind} or mapping"
        if not text:
            self.note(path)
        rows = [Row(path, kind, default_text(field), bounds_text(field), hashed, text)]
        if nested is not None:
            child_context = context
            present = self.probe.present(context)
            if inherited is None and (present is None or path not in present) and hashed != "no":
                child_context = {**context, path: {}}  # a section absent at its default: probe it given
            child_inherited = inherited
            if path in SECOND_FORMS:
                child_inherited = hashed
            elif hashed not in ("yes", "no") and inherited is None:
                child_inherited = f"when `{path}` is given"
            rows += self.rows(nested, f"{path}.", child_context, child_inherited)
        for member in members:
            rows += self.container_rows(path, member, hashed)
        return rows

    def container_rows(self, path: str, annotation: Any, hashed: str) -> list[Row]:
        """Rows for the models inside a list (`env.wrappers[]`) or a mapping
        (`claims.<name>`, `sweep.<key>`): their keys are hashed as the
        container is."""
        origin = typing.get_origin(annotation)
        inherited = "no" if hashed == "no" else "yes"
        if origin is tuple:
            (item, *_) = typing.get_args(annotation)
            item, _ = unwrap(item)
            variants = [m for m in union_members(item) if is_model(m)]
            rows = []
            for variant in variants:
                tag = literal_choices(variant.model_fields["name"].annotation) if "name" in variant.model_fields else []
                kind = f"mapping with `name: {tag[0]}`" if tag else "mapping"
                text = docstring(variant)
                if not text:
                    self.note(f"{path}[]")
                rows.append(Row(f"{path}[]", kind, "", "", inherited, text))
                for row in self.rows(variant, f"{path}[].", {}, inherited):
                    if not row.path.endswith("[].name"):
                        rows.append(
                            row._replace(description=f"({tag[0]}) {row.description}" if tag else row.description)
                        )
            return rows
        if origin is dict:
            key, value = typing.get_args(annotation)
            key, key_metadata = unwrap(key)
            placeholder = f"{path}.<{'name' if key_metadata else 'key'}>"
            models = [unwrap(m)[0] for m in union_members(value) if is_model(unwrap(m)[0])]
            if not models:
                return []
            text = " ".join(docstring(m) for m in models)
            if not text:
                self.note(placeholder)
            rows = [Row(placeholder, type_text(value), "", "", inherited, text)]
            for member in union_members(value):
                member, _ = unwrap(member)
                if is_model(member):
                    rows += self.rows(member, f"{placeholder}.", {}, inherited)
            return rows
        return []


def spec_rows_table(rows: list[Row]) -> str:
    return table(
        ["Key", "Type", "Default", "Bounds", "In the hash", "Description"],
        [[f"`{r.path}`", r.type, r.default, r.bounds, r.hashed, r.description] for r in rows],
    )


def spec_reference() -> tuple[str, list[str]]:
    models = S.spec_models()
    names = list(models)
    shared = S.Spec.model_fields
    per_algorithm = ("network", "hyperparameters", "algorithm")
    first = HashProbe(names[0])
    walker = SpecWalker(first)
    out = [
        header("harness.experiment_spec, its sections and claims, and the algorithms' configs"),
        "# Spec reference\n\n",
    ]
    out.append(
        "A spec is a YAML file, validated by the pydantic model that its `algorithm:` key picks "
        f"(`harness.experiment_spec.spec_models()`: {codes(names)}). Unknown keys are refused. "
        "Keys are written here as dotted paths: `optimizer.learning_rate` is `learning_rate:` inside "
        "`optimizer:`; `[]` is an item of a list and `<name>` a key of your choice.\n\n"
        "**In the hash**: whether the key is part of the spec hash, the sha256 of the resolved spec's "
        "canonical JSON (`harness.experiment_spec.canonical`). The sections "
        f"{codes(HashProbe.UNHASHED)} say where and how a spec runs, what it "
        "claims, or what is measured of the trained parameters afterwards, not what training computes, and are "
        "left out. *unless at its default*: the key is left out "
        "of the canonical form at its default, so that specs published before it existed keep their hashes; "
        "*for kinds ...*: a network key is hashed only for the kinds that read it.\n\n"
    )
    out.append("## Top-level keys\n\n")
    top = [n for n, f in shared.items() if n not in per_algorithm and not is_model(unwrap(f.annotation)[0])]
    algorithm_row = Row(
        "algorithm",
        "string",
        "required",
        "one of " + codes(names),
        "yes",
        "the algorithm: it picks the spec model and the `hyperparameters:` section below",
    )
    rows = [algorithm_row]
    for name in top:
        if name in ("sweep", "claims"):
            continue
        rows += walker.field_rows(name, shared[name], {}, None)
    out.append(spec_rows_table(rows))
    sections = [n for n in shared if n not in per_algorithm and n not in top] + ["sweep", "claims"]
    for name in sections:
        field = shared[name]
        rows = walker.field_rows(name, field, {}, None)
        out.append(f"\n## `{name}`\n\n")
        if rows[0].description:
            out.append(f"{rows[0].description}\n\n")
            rows[0] = rows[0]._replace(description="(above)")
        out.append(spec_rows_table(rows))

    out.append("\n## `network`\n\n")
    out.append(
        f"{docstring(S.NetworkSpec)}\n\nThe keys an algorithm's network kinds read; others are accepted and unused.\n"
    )
    for name in names:
        registration = algorithms.registry[name]
        probe = HashProbe(name)
        kinds = registration.network_kinds
        rows = []
        for key, field in S.NetworkSpec.model_fields.items():
            path = f"network.{key}"
            by_kind = {k: probe.status(path, field, {"network.kind": k}) for k in kinds}
            if key == "kind":
                hashed = "yes"
            elif all(v == "yes" for v in by_kind.values()):
                hashed = "yes"
            elif all(v == "no" for v in by_kind.values()):
                continue  # read by none of this algorithm's kinds
            else:
                read = [k for k, v in by_kind.items() if v != "no"]
                hashed = "for " + ("kind " if len(read) == 1 else "kinds ") + codes(read)
                if any(v == "unless at its default" for v in by_kind.values()):
                    hashed += ", unless at its default"
            if key == "kind":
                default, bounds = f"`{registration.default_network}`", "one of " + codes(kinds)
            else:
                default, bounds = default_text(field), bounds_text(field)
            text = field.description or ""
            if not text:
                walker.scope = name
                walker.note(path)
            rows.append(Row(path, type_text(field.annotation), default, bounds, hashed, text))
        out.append(f"\n### `algorithm: {name}`\n\n")
        out.append(f"Kinds: {codes(kinds)}; the default is `{registration.default_network}`.\n\n")
        out.append(spec_rows_table(rows))

    out.append("\n## `hyperparameters`\n\n")
    out.append(
        f"{first_paragraph(algorithms.config)} Each algorithm's config is declared beside its factory in "
        "`algorithms/` and registered with it (`algorithms.registry`).\n"
    )
    for name in names:
        registration = algorithms.registry[name]
        config = registration.config
        walker.probe, walker.scope = HashProbe(name), name
        rows = walker.rows(config, "hyperparameters.", {})
        bases = [c for c in config.__mro__[1:] if issubclass(c, BaseModel) and c.model_fields and c is not BaseModel]
        declared = f"`{config.__module__}.{config.__name__}`"
        if bases:
            declared += ", with the keys of " + codes(f"{b.__module__}.{b.__name__}" for b in bases)
        out.append(f"\n### `algorithm: {name}`\n\n{docstring(config)} Declared in {declared}.\n\n")
        out.append(spec_rows_table(rows))
        if registration.numeric:
            out.append(
                "\nA sweep carries these as numbers, all points of one structure in one program "
                f"(`Registration.numeric`): {codes(registration.numeric)}.\n"
            )
    return "".join(out), walker.undocumented
