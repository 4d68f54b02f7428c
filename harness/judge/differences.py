"""Where two runs of a spec first differ, for exact verdicts: at the 20
curve points and final values of their results.json, and at every
iteration. A reference published with its run's `iterations.parquet`
(harness.record.iterations; `results/<spec>.iterations.parquet` beside its
results.json) is compared with the reproduction's own file value by value,
so that an exact verdict sees every bit the run computed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from harness.record import iterations
from harness.record.schema import EMPTY_CURVES, Results

SUFFIX = ".iterations.parquet"


def beside(reference: Path) -> Path:
    """Where a published reference's iterations file lives."""
    return reference.with_name(reference.name.removesuffix(".json") + SUFFIX)


def load(path: Path | None) -> dict[str, np.ndarray] | None:
    return iterations.read(path) if path is not None and path.exists() else None


def _same_bits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise: the same value, NaN equal to NaN (evaluation columns are
    NaN on the iterations no evaluation followed)."""
    same = a == b
    if np.issubdtype(a.dtype, np.floating) and np.issubdtype(b.dtype, np.floating):
        same |= np.isnan(a) & np.isnan(b)
    return same


def at_every_iteration(
    reference: dict[str, np.ndarray], run: dict[str, np.ndarray], metric: str
) -> dict[str, Any] | None:
    """Where `metric` first differs between two iterations files (earliest
    iteration, then lowest seed), as `at_curve_points` says it;
    None when every value is bit-identical (or the reference lacks it)."""
    if metric not in reference:
        return None
    if metric not in run:
        return {"what": "the reproduction does not record this metric at every iteration", "count": None}
    keys = ("iteration", "seed")
    if any(len(run[k]) != len(reference[k]) or (run[k] != reference[k]).any() for k in keys):
        return {"what": "the iterations files hold other iterations or seeds", "count": None}
    a, b = reference[metric], run[metric]
    if a.dtype != b.dtype:
        return {"what": f"computed in {b.dtype} here, {a.dtype} in the reference", "count": None}
    differ = np.flatnonzero(~_same_bits(a, b))
    if not len(differ):
        return None
    row = differ[0]
    seed, iteration, steps = (
        int(reference["seed"][row]),
        int(reference["iteration"][row]),
        int(reference["env_steps"][row]),
    )
    return {
        "what": f"seed {seed} differs first at iteration {iteration} (env step {steps}): {a[row]!r} in the"
        f" reference, {b[row]!r} here",
        "seed": seed,
        "env_step": steps,
        "reference": float(a[row]),
        "reproduction": float(b[row]),
        "count": len(differ),
    }


def _at_final_values(reference: Results, record: Results, metric: str) -> dict[str, Any] | None:
    """A metric without a curve (the trained policy's assessment, harness.run.runner.assess): each
    seed's final value alone, where it first differs (lowest seed), or None."""
    differing = []
    for seed in reference.seeds:
        new = record.per_seed_final.get(str(seed), {}).get(metric)
        if new is None:
            return {"what": "the reproduction does not report this metric", "count": None}
        if reference.per_seed_final[str(seed)][metric] != new:
            differing.append((seed, reference.per_seed_final[str(seed)][metric], new))
    if not differing:
        return None
    seed, ref, new = differing[0]
    return {
        "what": f"seed {seed}'s final value differs: {ref!r} in the reference, {new!r} here",
        "seed": seed,
        "env_step": None,
        "reference": ref,
        "reproduction": new,
        "count": len(differing),
    }


def at_curve_points(reference: Results, record: Results, metric: str) -> dict[str, Any] | None:
    """Where `metric` first differs (earliest env step, then lowest seed), with
    the number of differing values; None when every value is bit-identical."""
    # Per-iteration metrics are in "curves"; evaluations (kept after whole
    # logging chunks) in "evaluation_curves".
    if metric not in reference.curves.metrics and metric not in (reference.evaluation_curves or EMPTY_CURVES).metrics:
        return _at_final_values(reference, record, metric)
    section = "curves" if metric in reference.curves.metrics else "evaluation_curves"
    ref_block = getattr(reference, section) or EMPTY_CURVES
    new_block = getattr(record, section) or EMPTY_CURVES
    steps = ref_block.env_steps
    if new_block.env_steps != steps:
        return {"what": "the curves are kept at other env steps", "count": None}
    ref_curves = ref_block.metrics.get(metric, {})
    new_curves = new_block.metrics.get(metric)
    if new_curves is None:
        return {"what": "the reproduction does not report this metric", "count": None}
    differences = []
    for seed in reference.seeds:
        ref, new = ref_curves[str(seed)], new_curves[str(seed)]
        differences += [(i, seed, a, b) for i, (a, b) in enumerate(zip(ref, new, strict=True)) if a != b]
        ref_final = reference.per_seed_final[str(seed)][metric]
        new_final = record.per_seed_final[str(seed)][metric]
        if ref_final != new_final:
            differences.append((len(steps), seed, ref_final, new_final))
    if not differences:
        return None
    i, seed, ref, new = min(differences, key=lambda d: (d[0], d[1]))
    where = f"env step {steps[i]}" if i < len(steps) else "the final value"
    return {
        "what": f"seed {seed} differs first at {where}: {ref!r} in the reference, {new!r} here",
        "seed": seed,
        "env_step": steps[i] if i < len(steps) else None,
        "reference": ref,
        "reproduction": new,
        "count": len(differences),
    }
