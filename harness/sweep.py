"""Sweeps: a spec's `sweep:` section (and `--set KEY=V1,V2`) as points, each
validated like a spec, grouped into as few programs as their structure allows.

    sweep:
      optimizer.learning_rate: [1.0e-4, 3.0e-4, 1.0e-3]   # a list: a grid axis
      hyperparameters.entropy_coef: {low: 0.0, high: 0.02} # a range: random draws (--samples N)

A grid is every combination of the lists, in order (the last key varies
fastest); `--samples N` draws N points instead, each key's value uniformly
from its list or range (`log: true`: log-uniform), from a generator seeded
with `--sample-seed` (default 0), so a random sweep is reproducible.

Every point is a spec of its own (the sweep section removed, its values set)
with its own spec hash. Points whose specs differ only in numeric keys
(`harness.build.numeric_keys`: the algorithm's numeric hyperparameters and
the optimizer's) share one program, which carries those values in its state
and trains all their runs (points x seeds) in one vmap (algorithms.sweep);
points that differ in anything else (sizes, network, ...) are grouped by
structure, one program per group, trained in turn.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
from typing import Any, NamedTuple

import numpy as np

from harness import build
from harness.experiment_spec import Spec, SpecError, SweepRange, assign, canonical, parse, spec_hash

# Keys that say what a sweep is, where it runs or how it is recorded, not a
# configuration to compare; seeds are the sweep's other axis.
FIXED = {
    "name": "the sweep's runs share one name (its MLflow experiment)",
    "algorithm": "an algorithm is not a hyperparameter: sweep each in a spec of its own",
    "seeds": "every point runs the spec's seeds; they are the sweep's other axis",
    "logging": "every point of a program shares its chunks (logging.interval)",
    "tracking": "the sweep is recorded in one store and experiment",
    "devices": "where a sweep runs is not a point of it",
    "checkpoint": "how often a sweep is saved is not a point of it",
    "sweep": "a sweep cannot sweep itself",
}
MAX_POINTS = 1024
NUMBER = "<number>"  # a numeric key's value in a structure's fingerprint
MISSING = object()  # no such key


class Point(NamedTuple):
    index: int
    values: dict[str, Any]  # swept key -> this point's value
    spec: Spec  # the point's own spec: no sweep section, its values set

    def label(self, short: bool = False) -> str:
        """`key=value, ...`; `short`: each key by its last part (`learning_rate=0.001`), as a run name shows it."""
        return _label({key.rsplit(".", 1)[-1] if short else key: value for key, value in self.values.items()})


class Group(NamedTuple):
    """Points trained in one program: runs are points x seeds, point-major."""

    points: tuple[Point, ...]
    numeric: tuple[str, ...]  # swept keys carried as numbers in the state
    plan: build.Plan  # its first point's spec, the numeric keys swept
    block: int | None = None  # runs per block mapped one after another (exact points); None: all vmapped

    @property
    def run_seeds(self) -> tuple[int, ...]:
        return tuple(seed for _ in self.points for seed in self.plan.spec.seeds)

    @property
    def numbers(self) -> dict[str, np.ndarray] | None:
        """Each run's value of every numeric key, float32 `[runs]`, or None."""
        if not self.numeric:
            return None
        seeds = len(self.plan.spec.seeds)
        return {
            key: np.repeat(np.asarray([p.values[key] for p in self.points], np.float32), seeds) for key in self.numeric
        }


class Sweep(NamedTuple):
    spec: Spec  # the spec with its resolved sweep section
    keys: tuple[str, ...]
    mode: str  # "grid", or "random: N samples, seed S"
    points: tuple[Point, ...]
    groups: tuple[Group, ...]
    exact_points: bool = False  # points one after another in their program: their own runs' bits

    @property
    def sweep_hash(self) -> str:
        """sha256 of the points' spec hashes, in order, and of how a
        program batches them: what the sweep trains, bit for bit."""
        hashes = [spec_hash(p.spec) for p in self.points]
        return hashlib.sha256(json.dumps([hashes, self.exact_points]).encode()).hexdigest()


def _show(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else value


def _label(values: dict[str, Any]) -> str:
    return ", ".join(f"{key}={_show(value)}" for key, value in values.items())


def _draw(values: Any, rng: np.random.Generator) -> Any:
    if isinstance(values, SweepRange):
        if values.log:
            drawn = math.exp(rng.uniform(math.log(values.low), math.log(values.high)))
        else:
            drawn = rng.uniform(values.low, values.high)
        if float(values.low).is_integer() and float(values.high).is_integer() and not values.log:
            return int(rng.integers(int(values.low), int(values.high) + 1))
        return float(drawn)
    return values[int(rng.integers(len(values)))]


def make_sweep(
    spec: Spec,
    source: str,
    lines: dict[str, int] | None = None,
    *,
    sets: dict[str, tuple[Any, ...]] | None = None,
    samples: int | None = None,
    sample_seed: int = 0,
    max_points: int = MAX_POINTS,
    exact_points: bool = False,
) -> Sweep:
    """The sweep of `spec` (its `sweep:` section with `sets` added or
    replacing keys): every point validated and every group built before
    anything compiles. Problems raise `SpecError` naming `sweep.<key>`.
    `exact_points`: each program trains its points one after another, each
    point's seeds batched as in the point's own run, which then gives the
    same bits (one compile still; no batching across points)."""
    lines = lines or {}
    swept: dict[str, Any] = {**(spec.sweep or {}), **(sets or {})}
    if not swept:
        raise SpecError(source, [("sweep", "no sweep: add a sweep: section or --set KEY=V1,V2")], lines)
    base = spec.model_dump(mode="json")
    base.pop("sweep", None)
    problems = []
    for key, values in swept.items():
        where = f"sweep.{key}"
        root = key.split(".")[0]
        if root in FIXED:
            problems.append((where, f"cannot be swept: {FIXED[root]}"))
        elif _value_at(base, key) is MISSING:
            problems.append(
                (where, f"no such key in a {spec.algorithm} spec (keys are dotted, e.g. optimizer.learning_rate)")
            )
        elif isinstance(values, SweepRange) and samples is None:
            problems.append((where, "a range {low, high} is drawn from: give --samples N (random points)"))
    if samples is not None and samples < 1:
        problems.append(("sweep", f"--samples must be at least 1, not {samples}"))
    if problems:
        raise SpecError(source, problems, lines)

    keys = tuple(swept)
    if samples is None:
        combos = [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*swept.values())]
        mode = "grid"
    else:
        rng = np.random.default_rng(sample_seed)
        combos = [{key: _draw(swept[key], rng) for key in keys} for _ in range(samples)]
        mode = f"random: {samples} samples, seed {sample_seed}"
    if len(combos) > max_points:
        sizes = " x ".join(str(len(v)) for v in swept.values()) if samples is None else f"--samples {samples}"
        raise SpecError(source, [("sweep", f"{len(combos)} points ({sizes}) exceed --max-points {max_points}")], lines)

    points = []
    for index, values in enumerate(combos):
        data = copy.deepcopy(base)
        for key, value in values.items():
            assign(data, key, value)
        try:
            point_spec = parse(data, f"{source} (sweep point {index}: {_label(values)})")
        except SpecError as error:
            raise SpecError(
                source,
                [(_blame(key, values), f"value {_shown_at(data, key)}: {message}") for key, message in error.problems],
                {_blame(key, values): lines.get(_blame(key, values), lines.get("sweep")) for key, _ in error.problems},
            ) from None
        points.append(Point(index, values, point_spec))
    resolved = spec.model_copy(update={"sweep": swept})
    groups = _groups(points, keys, source, lines, exact_points)
    return Sweep(resolved, keys, mode, tuple(points), groups, exact_points)


def _blame(key: str, values: dict[str, Any]) -> str:
    """The swept key a point's problem at `key` comes from (or a key it contains)."""
    for swept in values:
        if key == swept or key.startswith(f"{swept}.") or swept.startswith(f"{key}."):
            return f"sweep.{swept}"
    return key


def _shown_at(data: dict[str, Any], key: str) -> str:
    value = _value_at(data, key)
    return _show(None if value is MISSING else value)


def _value_at(data: dict[str, Any], key: str) -> Any:
    """The value at dotted `key` (list items by index), or MISSING."""
    node: Any = data
    for part in key.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return MISSING
    return node


def _groups(
    points: list[Point], keys: tuple[str, ...], source: str, lines: dict[str, int], exact_points: bool
) -> tuple[Group, ...]:
    """Points by structure (their specs with numeric keys' values blanked),
    in order of first appearance; each group built once."""
    by_structure: dict[str, list[tuple[Point, tuple[str, ...]]]] = {}
    for point in points:
        numbers = build.numeric_keys(point.spec)
        numeric = tuple(key for key in keys if key in numbers)
        blank = canonical(point.spec)
        for key in numeric:
            assign(blank, key, NUMBER)
        by_structure.setdefault(json.dumps(blank, sort_keys=True), []).append((point, numeric))
    groups = []
    for members in by_structure.values():
        first, numeric = members[0]
        runs = len(members) * len(first.spec.seeds)
        try:
            plan = build.build(first.spec, source, lines, swept=numeric, runs=runs)
        except SpecError as error:
            problems = [
                (_blame(key, first.values), f"{message} (sweep point {first.index}: {first.label()})")
                for key, message in error.problems
            ]
            raise SpecError(source, problems, {key: lines.get(key) for key, _ in problems}) from None
        seed_axis = plan.layout.seed_axis if plan.layout else 1
        if exact_points and len(members) % seed_axis:
            problem = f"--exact-points needs whole points on every device: seed_axis {seed_axis} does not divide"
            raise SpecError(source, [("devices.seed_axis", f"{problem} a program's {len(members)} points")], lines)
        block = len(first.spec.seeds) if exact_points else None
        groups.append(Group(tuple(p for p, _ in members), numeric, plan, block))
    return tuple(groups)
