"""Experiment specs: YAML in, frozen pydantic models out, and a canonical hash.

A spec file is loaded with `yaml.safe_load`, its `algorithm:` field picks the
model, and every problem is reported as a `SpecError` naming the file, the
key and, where it can be found, the line.

The hash is sha256 of the canonical JSON form of the *resolved* spec (all
defaults filled in, seeds expanded to a list, keys sorted), so key order,
YAML formatting and writing a default out explicitly do not change it, while
any change of a value does.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, ValidationInfo, create_model, field_validator, model_serializer

import algorithms

# The sections are part of this module's interface (harness.spec.NetworkSpec, ...).
from harness.spec_claims import Claim, ClaimName  # noqa: F401
from harness.spec_lines import key_lines  # noqa: F401  (where a key is, for messages)
from harness.spec_sections import (  # noqa: F401
    BudgetSpec,
    CheckpointSpec,
    DevicesSpec,
    EnvSpec,
    LoggingSpec,
    MaskObservation,
    NetworkSpec,
    ObserveLegalActions,
    ObservePreviousActionReward,
    OptimizerSpec,
    ReproductionSpec,
    SeedRange,
    SweepRange,
    SweepValues,
    TrackingSpec,
    Wrapper,
    _Model,
    check_name,
)


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


def check_seeds(seeds: tuple[int, ...]) -> tuple[int, ...]:
    """A spec's seeds (or --seeds): at least one, distinct, in [0, 2**32)."""
    if not seeds:
        raise ValueError("at least one seed is needed")
    if len(set(seeds)) != len(seeds):
        raise ValueError("seeds must be distinct")
    if any(not 0 <= s < 2**32 for s in seeds):
        raise ValueError("seeds must be in [0, 2**32)")
    return seeds


class _SpecBase(_Model):
    name: str = Field(
        min_length=1,
        description="the experiment's name, of letters, digits, _, - and .; also its MLflow experiment by default",
    )
    env: EnvSpec = Field(description="the environment")
    seeds: tuple[int, ...] = Field(description="a list of seeds, or {count, base}; one independent run each")
    budget: BudgetSpec = Field(description="how long each seed trains")
    network: NetworkSpec = Field(default=NetworkSpec(), description="the policy/value network")
    optimizer: OptimizerSpec = Field(default=OptimizerSpec(), description="the optimizer and its schedule")
    logging: LoggingSpec = Field(default=LoggingSpec(), description="how often metrics reach the host")
    tracking: TrackingSpec = Field(default=TrackingSpec(), description="where runs are logged (MLflow)")
    devices: DevicesSpec = DevicesSpec()
    checkpoint: CheckpointSpec = CheckpointSpec()
    reproduction: ReproductionSpec = ReproductionSpec()
    # Dotted spec key -> its values (a list: a grid; a range: random draws),
    # trained as one program where they are numbers (harness.sweep).
    sweep: dict[str, SweepValues] | None = Field(
        default=None,
        description="spec keys to sweep: a list of values (a grid) or a range (random draws); numbers in one program",
    )
    # What the spec claims of its runs, by name (harness.judge.claims).
    claims: dict[ClaimName, Claim] = Field(
        default_factory=dict, description="what the spec claims of its runs, by name; checked on every run"
    )

    @field_validator("name")
    @classmethod
    def _check_name(cls, name: str) -> str:
        return check_name(name)

    @field_validator("seeds", mode="before")
    @classmethod
    def _expand_seeds(cls, value: Any) -> Any:
        if isinstance(value, dict):
            rng = SeedRange.model_validate(value)
            return tuple(range(rng.base, rng.base + rng.count))
        return value

    @field_validator("seeds")
    @classmethod
    def _check_seeds(cls, seeds: tuple[int, ...]) -> tuple[int, ...]:
        return check_seeds(seeds)

    @field_validator("reproduction")
    @classmethod
    def _a_batch_of_seeds_fits(cls, stated: ReproductionSpec, info: ValidationInfo) -> ReproductionSpec:
        batch = stated.batch or len(info.data.get("seeds", ()))
        if stated.max_seeds is not None and stated.max_seeds < batch:
            raise ValueError(f"max_seeds ({stated.max_seeds}) is below one batch (the spec's {batch} seeds)")
        return stated

    @field_validator("sweep", mode="before")
    @classmethod
    def _sweep_shapes(cls, sweep: Any) -> Any:
        if isinstance(sweep, dict):
            for key, values in sweep.items():
                if not isinstance(values, (list, tuple, dict, SweepRange)):
                    raise ValueError(f"{key}: give a list of values, or a range {{low, high}} (got {values!r})")
        return sweep

    @field_validator("sweep")
    @classmethod
    def _check_sweep(cls, sweep: dict[str, Any] | None) -> dict[str, Any] | None:
        if sweep is not None and not sweep:
            raise ValueError("a sweep needs at least one key")
        for key, values in (sweep or {}).items():
            if isinstance(values, tuple) and not values:
                raise ValueError(f"{key}: an empty list of values")
        return sweep

    @model_serializer(mode="wrap")
    def _drop_no_sweep(self, handler: Any) -> dict[str, Any]:
        # Sweeps came after specs were published: a spec without one keeps its hash.
        data = handler(self)
        if self.sweep is None:
            data.pop("sweep", None)
        return data

    @property
    def experiment_name(self) -> str:
        return self.tracking.experiment or self.name

    def cross_checks(self) -> list[tuple[str, str]]:
        """Problems that involve more than one section: (dotted key, message)."""
        kinds = algorithms.registry[self.algorithm].network_kinds
        if self.network.kind not in kinds:
            takers = [name for name, other in algorithms.registry.items() if self.network.kind in other.network_kinds]
            return [
                (
                    "network.kind",
                    f"{self.network.kind} is a network for {' and '.join(takers)};"
                    f" {self.algorithm} takes {', '.join(kinds)}",
                )
            ]
        return []


@functools.cache
def _spec_model(name: str, registration: algorithms.base.Registration) -> type[_SpecBase]:
    """The spec model of one registered algorithm: the shared sections, its
    name as the `algorithm:` tag, its hyperparameters and its default network."""
    return create_model(
        f"{registration.config.__name__.removesuffix('Config')}Spec",
        __base__=_SpecBase,
        __module__=__name__,
        algorithm=(Literal[name], ...),
        hyperparameters=(registration.config, registration.config()),
        network=(NetworkSpec, NetworkSpec(kind=registration.default_network)),
    )


def spec_models() -> dict[str, type[_SpecBase]]:
    """One model per registered algorithm (`algorithms.registry`), by the
    name a spec's `algorithm:` gives: registering an algorithm is all it
    takes for specs to name it."""
    return {name: _spec_model(name, registration) for name, registration in sorted(algorithms.registry.items())}


# What a validated spec is: an instance of one of `spec_models()`.
Spec = _SpecBase


# ---------------------------------------------------------------- canonical


# Sections that say where or how a spec runs, not what it computes: they are
# not part of the canonical form, so they do not change the spec hash (nor
# MLflow params). How often a run is checkpointed, or how many seeds a
# reproduction may add, changes no result.
RUNTIME_SECTIONS = ("devices", "checkpoint", "reproduction")
# What a spec claims of its results is not what it computes either: stating
# or sharpening a claim keeps the hash, so a published reference still
# belongs to its spec (and the claims are judged on it).
CLAIMS_SECTION = "claims"


def canonical(spec: _SpecBase) -> dict[str, Any]:
    """The resolved spec as plain JSON-able data, in the model's key order,
    without the runtime sections and the claims."""
    data = spec.model_dump(mode="json")
    for section in (*RUNTIME_SECTIONS, CLAIMS_SECTION):
        data.pop(section, None)
    return {"algorithm": data.pop("algorithm"), **data} if "algorithm" in data else data


def canonical_json(spec: _SpecBase) -> str:
    return json.dumps(canonical(spec), sort_keys=True, separators=(",", ":"), allow_nan=False)


def spec_hash(spec: _SpecBase) -> str:
    return hashlib.sha256(canonical_json(spec).encode()).hexdigest()


def to_yaml(spec: _SpecBase) -> str:
    """The resolved spec, runtime sections and claims included."""
    data = canonical(spec)
    runtime = {section: getattr(spec, section).model_dump(mode="json") for section in RUNTIME_SECTIONS}
    ordered = {"name": data.pop("name"), "algorithm": data.pop("algorithm"), **data, **runtime}
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


# ------------------------------------------------------------------ loading


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


def _problems(error: ValidationError, data: Any) -> list[tuple[str, str]]:
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
        problems = _problems(error, data)
        # Point a missing key at its parent's line, the nearest place that exists.
        resolved = dict(lines)
        for key, _ in problems:
            parent = key
            while parent and parent not in resolved:
                parent = parent.rpartition(".")[0]
            if parent:
                resolved[key] = resolved[parent]
        raise SpecError(source, problems, resolved) from None
    problems = spec.cross_checks()
    if problems:
        raise SpecError(source, problems, lines)
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


def spec_differences(specs: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The dotted keys whose values differ between canonical specs (as in
    results.json's `spec`), each with its value in every spec, in order."""
    flat = [flatten(spec) for spec in specs]
    keys = sorted(set().union(*flat))
    return {
        key: [f.get(key, "(absent)") for f in flat] for key in keys if len({f.get(key, "(absent)") for f in flat}) > 1
    }
