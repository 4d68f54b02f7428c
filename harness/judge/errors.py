"""What a claim's test really does: its false-failure rate and power,
measured by simulating reproductions from the faithful seeds at hand
(`harness validate SPEC --errors`).

Each simulated reproduction draws its own reference (as many seeds as the
real one pooled, with replacement), learns the level from it as the judge
does, then runs the sequential test (harness.judge.sequential) over fresh
seeds drawn in batches up to the cap, planned for as many looks:

- **faithful**: seeds drawn from the faithful seeds themselves; the share
  that FAIL is the false-failure rate, to be at most `alpha`;
- **regressed**: the same draws made worse by `delta` (a mean's values moved
  by `delta` in the metric's units, then clipped to the range as any run's
  are; a success turned into a failure with probability `delta / rate`, so
  the rate drops by `delta`); the share that FAIL is the power, to be at
  least the claim's `power`.

The draws come from a fixed `numpy.random.default_rng(seed)`, so a record
is the same every time it is made. Pure numpy: thousands of reproductions
take well under a second.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.judge import levels, sequential
from harness.spec_claims import REFERENCE, Claim

SIMULATIONS = 4000
SEED = 0
# Below this many faithful seeds the resampled reproductions cannot show the spread faithful runs have
# (a spread estimated from 4 seeds can be a third of the true one), so the measured rates are not trusted.
MEASURABLE = 5


def regress(claim: Claim, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Per-seed values in the claim's units made worse by its delta: a
    mean's values moved by delta (before the range clips them, as a real
    regression's would be); a share's successes (on the unit scale) turned
    into failures with probability delta / rate, so the rate drops by delta."""
    if claim.over_seeds.name == "mean":
        return values - claim.delta if claim.higher_is_better else values + claim.delta
    successes = levels.unit(claim, values)
    rate = float(successes.mean())
    keep = 1.0 - min(claim.delta / rate, 1.0) if rate > 0 else 0.0
    return successes * (rng.random(values.shape) < keep)


def simulate(
    claim: Claim, faithful: np.ndarray, batch: int, cap: int, sims: int = SIMULATIONS, seed: int = SEED
) -> dict[str, Any]:
    """The claim's measured errors from `faithful` per-seed values (its own
    units), reproductions in batches of `batch` up to `cap` seeds (whole
    batches: harness.sessions.errors_report.seeding), as `harness reproduce
    --adaptive` runs them."""
    faithful = np.asarray(faithful, dtype=np.float64)
    pool = levels.unit(claim, faithful)
    seeds = len(pool)
    rng = np.random.default_rng(seed)
    reference = pool[rng.integers(0, seeds, size=(sims, seeds))] if claim.bound[1] == REFERENCE else pool[None, :]
    test = levels.make_test(claim, reference, looks=cap // batch)
    draws = faithful[rng.integers(0, seeds, size=(sims, cap))]  # in the claim's units
    faithful_run = sequential.decide(test, levels.unit(claim, draws), batch)
    regressed = regress(claim, draws, rng)
    if claim.over_seeds.name == "mean":
        regressed = levels.unit(claim, regressed)
    regressed_run = sequential.decide(test, regressed, batch)

    def share(decision: sequential.Decision, verdict: str) -> float:
        return float(np.mean(decision.verdict == verdict))

    return {
        "faithful_seeds": seeds,
        "measurable": seeds >= MEASURABLE,
        "faithful_mean": levels.to_units(claim, float(pool.mean())),
        "level_median": levels.to_units(claim, float(np.median(test.level))),
        "delta": float(claim.delta),
        "alpha": float(claim.alpha),
        "power": float(claim.power),
        "batch": batch,
        "cap": cap,
        "simulations": sims,
        "false_failure": share(faithful_run, sequential.FAIL),
        "faithful_inconclusive": share(faithful_run, sequential.INCONCLUSIVE),
        "faithful_seeds_used": float(faithful_run.seeds.mean()),
        "measured_power": share(regressed_run, sequential.FAIL),
        "regressed_passed": share(regressed_run, sequential.PASS),
        "regressed_seeds_used": float(regressed_run.seeds.mean()),
    }


def meets(errors: dict[str, Any]) -> bool:
    """Whether the measured errors are within the claim's stated ones, from
    enough faithful seeds to trust them."""
    within = errors["false_failure"] <= errors["alpha"] and errors["measured_power"] >= errors["power"]
    return errors["measurable"] and within


def shortfall(errors: dict[str, Any]) -> str | None:
    """What keeps a measured claim from meeting its errors, in words
    (None when it meets them)."""
    if not errors["measurable"]:
        return "too few faithful seeds"
    if errors["false_failure"] > errors["alpha"]:
        return "fails faithful runs too often"
    return None if meets(errors) else "too weak"
