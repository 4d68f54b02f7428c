"""A spec's canonical form and hash: the resolved spec (every default
filled in, seeds expanded to a list) as JSON with sorted keys, without the
sections that say where or how it runs, without its claims and without
what it measures of the trained parameters (`strength:`). Key order,
YAML formatting and writing a default out do not change the hash; any
change of a value does."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import yaml

from harness.experiment_spec.model import Spec

# Sections that say where or how a spec runs, not what it computes: they are
# not part of the canonical form, so they do not change the spec hash (nor
# MLflow params). How often a run is checkpointed, or how many seeds a
# reproduction may add, changes no result.
RUNTIME_SECTIONS = ("devices", "checkpoint", "reproduction")
# What a spec claims of its results is not what it computes either: stating
# or sharpening a claim keeps the hash, so a published reference still
# belongs to its spec (and the claims are judged on it).
CLAIMS_SECTION = "claims"
# How strong the final parameters are (AlphaZero's `strength:`) is measured
# after training, of what it made: asking for it keeps the hash too.
STRENGTH_SECTION = "strength"


def canonical(spec: Spec) -> dict[str, Any]:
    """The resolved spec as plain JSON-able data, in the model's key order,
    without the runtime sections, the claims and the strength section."""
    data = spec.model_dump(mode="json")
    for section in (*RUNTIME_SECTIONS, CLAIMS_SECTION, STRENGTH_SECTION):
        data.pop(section, None)
    return {"algorithm": data.pop("algorithm"), **data} if "algorithm" in data else data


def canonical_json(spec: Spec) -> str:
    return json.dumps(canonical(spec), sort_keys=True, separators=(",", ":"), allow_nan=False)


def spec_hash(spec: Spec) -> str:
    return hashlib.sha256(canonical_json(spec).encode()).hexdigest()


def to_yaml(spec: Spec) -> str:
    """The resolved spec, runtime sections, strength and claims included."""
    data = canonical(spec)
    runtime = {section: getattr(spec, section).model_dump(mode="json") for section in RUNTIME_SECTIONS}
    ordered = {"name": data.pop("name"), "algorithm": data.pop("algorithm"), **data, **runtime}
    if getattr(spec, STRENGTH_SECTION, None) is not None:
        ordered[STRENGTH_SECTION] = spec.strength.model_dump(mode="json")
    if spec.claims:
        ordered[CLAIMS_SECTION] = {
            name: claim.model_dump(mode="json", exclude_none=True) for name, claim in spec.claims.items()
        }
    return yaml.safe_dump(ordered, sort_keys=False, default_flow_style=None)


def flatten(data: Any, prefix: str = "") -> dict[str, str]:
    """Nested dicts and lists as dotted keys with string values (MLflow params)."""
    out: dict[str, str] = {}
    if isinstance(data, dict):
        if not data and prefix:
            out[prefix] = "{}"
        for key, value in data.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(data, (list, tuple)) and not all(isinstance(v, (int, float, str, bool)) for v in data):
        for i, value in enumerate(data):
            out.update(flatten(value, f"{prefix}.{i}"))
    else:
        out[prefix] = json.dumps(data) if not isinstance(data, str) else data
    return out


def spec_differences(specs: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The dotted keys whose values differ between canonical specs (as in
    results.json's `spec`), each with its value in every spec, in order."""
    flat = [flatten(spec) for spec in specs]
    keys = sorted(set().union(*flat))
    return {
        key: [f.get(key, "(absent)") for f in flat] for key in keys if len({f.get(key, "(absent)") for f in flat}) > 1
    }
