"""What a claim's test really does: its false-failure rate and power,
measured by simulating reproductions (`harness validate SPEC --errors`),
under faithful runs and regressions of several shapes, not only the pool's.

Each simulated reproduction draws its own reference (as many seeds as the
real one pooled) and its own run's seeds in batches up to the cap, from one
model of a faithful run, applied to both alike, and runs the claim's test
(harness.judge.levels, sequential) as a reproduction would. The faithful
models, each from the faithful seeds at hand (their values in the claim's
units):

- **resampled**: the seeds themselves, drawn with replacement;
- **smoothed**: each draw jittered by a normal of the pool's spread at
  Silverman's bandwidth (`1.06 sd n^-1/5`), so values between and beyond
  the seeds occur;
- **wider**: the spread about the pool's mean times 1.5;
- **failure mode**: where the metric has a random policy's level (a
  return), 1 seed in 20 collapsed to it.

The share of faithful reproductions that FAIL is the false-failure rate, to
be at most the claim's alpha (its share of the spec's alpha). Power, the
share of regressed reproductions that FAIL, under three regressions of the
run's seeds (the reference stays faithful):

- **shifted**: every seed worse by delta (for a share, each success lost
  with probability delta / rate: the rate drops by delta);
- **collapsed**: a share of seeds at the random level, the mean down by
  delta (a mean with a random level only);
- **spread**: the spread about the mean doubled, the mean down by delta
  (a mean only).

A fourth, **half shifted** (every seed worse by half of delta), is not a
regression the claim promises to catch: it says how long a reproduction
of a smaller change runs, and how often it runs to the cap. Every row
has the mean and median seeds used and the share that ran to the cap
undecided.

Every rate comes with its Wilson 95% interval over the simulations. A claim
meets its errors when each false-failure rate is at most alpha with its
interval below alpha + `ALPHA_MARGIN`, and each power at least the claim's
with its interval above power - `POWER_MARGIN`. The draws come from a fixed
`numpy.random.default_rng(seed)`, so a record is the same every time it is
made. Pure numpy: each model takes well under a second.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.experiment_spec.claims import REFERENCE, Claim
from harness.judge import levels
from harness.stats import ranks, sequential

SIMULATIONS = 4000
SEED = 0
FAITHFUL_MODELS = ("resampled", "smoothed", "wider", "failure_mode")
REGRESSIONS = ("shifted", "collapsed", "spread")
WIDER = 1.5  # the wider tails' spread, times the pool's
FAILURE_SHARE = 1 / 20  # the failure mode: this share of seeds at the random level
# How far past alpha (below power) a rate's interval may reach for the claim to meet its errors.
ALPHA_MARGIN, POWER_MARGIN = 0.005, 0.03
Z = 1.959964  # a 95% interval


def wilson(hits: int, n: int) -> tuple[float, float]:
    """Wilson's 95% interval of a rate observed `hits` times in `n`."""
    p = hits / n
    centre = (p + Z**2 / (2 * n)) / (1 + Z**2 / n)
    half = Z * np.sqrt(p * (1 - p) / n + Z**2 / (4 * n**2)) / (1 + Z**2 / n)
    low = 0.0 if hits == 0 else max(centre - half, 0.0)
    return float(low), float(min(centre + half, 1.0))


def _sign(claim: Claim) -> float:
    return 1.0 if claim.higher_is_better else -1.0


def faithful_draws(
    claim: Claim, pool: np.ndarray, model: str, shape: tuple[int, int], rng: np.random.Generator, random: float | None
) -> np.ndarray | None:
    """Per-seed values in the claim's units, `shape`, from the faithful
    `pool` under `model`; None where the model does not apply (a failure
    mode without a random level)."""
    draws = pool[rng.integers(0, len(pool), size=shape)]
    if model == "resampled":
        return draws
    if model == "smoothed":
        bandwidth = 1.06 * pool.std(ddof=1) * len(pool) ** -0.2
        return draws + rng.normal(0.0, bandwidth, size=shape)
    if model == "wider":
        return pool.mean() + WIDER * (draws - pool.mean())
    if model == "failure_mode":
        return None if random is None else np.where(rng.random(shape) < FAILURE_SHARE, random, draws)
    raise ValueError(f"unknown faithful model {model!r}")


def regressed_draws(
    claim: Claim, draws: np.ndarray, shape_of: str, rng: np.random.Generator, random: float | None
) -> np.ndarray | None:
    """Faithful `draws` (the claim's units) made worse by delta in the shape
    `shape_of`, on the unit scale; None where the shape does not apply."""
    delta = float(claim.delta)
    if claim.over_seeds.name != "mean":  # a share: the rate drops by delta, whatever the cause
        if shape_of != "shifted":
            return None
        successes = levels.unit(claim, draws)
        rate = float(successes.mean())
        keep = 1.0 - min(delta / rate, 1.0) if rate > 0 else 0.0
        return successes * (rng.random(draws.shape) < keep)
    mean = float(draws.mean())
    if shape_of == "shifted":
        return levels.unit(claim, draws - _sign(claim) * delta)
    if shape_of == "spread":
        return levels.unit(claim, mean - _sign(claim) * delta + 2.0 * (draws - mean))
    if shape_of == "collapsed":
        drop = _sign(claim) * (mean - random) if random is not None else 0.0
        if drop <= delta:
            return None  # no random level, or one too near the faithful mean to lose delta by collapsing
        return levels.unit(claim, np.where(rng.random(draws.shape) < delta / drop, random, draws))
    raise ValueError(f"unknown regression {shape_of!r}")


def _rate(decisions: sequential.Decision, verdict: str) -> dict[str, Any]:
    hits = int(np.sum(decisions.verdict == verdict))
    low, high = wilson(hits, len(decisions.verdict))
    return {"rate": hits / len(decisions.verdict), "low": low, "high": high}


def simulate(
    claim: Claim,
    faithful: np.ndarray,
    batch: int,
    cap: int,
    tests: int = 1,
    random: float | None = None,
    sims: int = SIMULATIONS,
    seed: int = SEED,
    reference_pool: np.ndarray | None = None,
) -> dict[str, Any]:
    """The claim's measured errors from `faithful` per-seed values (its own
    units), the claim one of `tests` test claims of its spec, reproductions
    in batches of `batch` up to `cap` seeds (whole batches:
    harness.sessions.errors_report.seeding), as `harness reproduce
    --adaptive` runs them; `random`: the random policy's level of the
    claim's metric, in its units, where it has one. With `reference_pool`,
    each reproduction's reference is drawn from it (as many seeds as it
    has) and only its run from `faithful`: how a claim designed on those
    seeds does on runs of seeds it never saw."""
    pool = np.asarray(faithful, dtype=np.float64)
    seeds = len(pool)
    held_to = pool if reference_pool is None else np.asarray(reference_pool, dtype=np.float64)
    rng = np.random.default_rng(seed)
    alpha, beta = levels.split(claim, tests)
    # The faithful seeds a reproduction is judged with: its level's for a `reference` bound, and
    # for a stated one what sizes its stakes, as the judge passes them (levels.test_of).
    reference_size = len(held_to)

    ties = np.random.default_rng([seed, ranks.TIE_KEY])  # each simulated run's own draws, as a real run's seeds give

    def reproduce(reference: np.ndarray, run: np.ndarray) -> sequential.Decision:
        test = levels.test_of(claim, reference, tests)
        return sequential.decide(test, run, batch, ties.random(run.shape) if test.ranks else None)

    out: dict[str, Any] = {
        "faithful_seeds": seeds,
        "reference": claim.bound[1] == REFERENCE,
        "faithful_mean": float(pool.mean()),
        "random_level": random,
        "delta": float(claim.delta),
        "alpha": alpha,
        "alpha_stated": float(claim.alpha),
        "tests": tests,
        "power": float(claim.power),
        "batch": batch,
        "cap": cap,
        "simulations": sims,
        "faithful": {},
        "regressed": {},
    }
    resampled_reference = None
    for model in FAITHFUL_MODELS:
        reference = faithful_draws(claim, held_to, model, (sims, reference_size), rng, random)
        if reference is None:
            continue
        run = faithful_draws(claim, pool, model, (sims, cap), rng, random)
        decisions = reproduce(reference, levels.unit(claim, run))
        out["faithful"][model] = {
            "false_failure": _rate(decisions, sequential.FAIL),
            "inconclusive": _rate(decisions, sequential.INCONCLUSIVE)["rate"],
            **_seeds(decisions),
        }
        if model == "resampled":
            resampled_reference = reference
    for shape_of in REGRESSIONS:
        run = regressed_draws(
            claim, faithful_draws(claim, pool, "resampled", (sims, cap), rng, random), shape_of, rng, random
        )
        if run is None:
            continue
        decisions = reproduce(resampled_reference, run)
        out["regressed"][shape_of] = {
            "power": _rate(decisions, sequential.FAIL),
            "passed": _rate(decisions, sequential.PASS)["rate"],
            **_seeds(decisions),
        }
    half = claim.model_copy(update={"delta": float(claim.delta) / 2})
    run = regressed_draws(
        half, faithful_draws(claim, pool, "resampled", (sims, cap), rng, random), "shifted", rng, random
    )
    decisions = reproduce(resampled_reference, run)
    out["half_shifted"] = {
        "failed": _rate(decisions, sequential.FAIL)["rate"],
        "passed": _rate(decisions, sequential.PASS)["rate"],
        **_seeds(decisions),
    }
    return out


def _seeds(decisions: sequential.Decision) -> dict[str, float]:
    """The seeds simulated reproductions used: mean, median, and the share that ran to the cap undecided."""
    return {
        "seeds_used": float(decisions.seeds.mean()),
        "seeds_median": float(np.median(decisions.seeds)),
        "capped": float(np.mean(decisions.verdict == sequential.INCONCLUSIVE)),
    }


def shortfall(errors: dict[str, Any]) -> str | None:
    """What keeps a measured claim from meeting its errors, in words (None
    when it meets them)."""
    needed = errors.get("needed", levels.MIN_FAITHFUL)
    if errors.get("faithful_seeds", 0) < needed and errors.get("reference", True):
        return f"a statement: {errors.get('faithful_seeds', 0)} faithful seeds, a test needs {needed}"
    alpha, power = errors["alpha"], errors["power"]
    loose = [
        model
        for model, row in errors["faithful"].items()
        if row["false_failure"]["rate"] > alpha or row["false_failure"]["high"] > alpha + ALPHA_MARGIN
    ]
    if loose:
        return f"fails faithful runs too often ({', '.join(loose)})"
    weak = [
        shape_of
        for shape_of, row in errors["regressed"].items()
        if row["power"]["rate"] < power or row["power"]["low"] < power - POWER_MARGIN
    ]
    return f"too weak ({', '.join(weak)})" if weak else None


def meets(errors: dict[str, Any]) -> bool:
    """Whether the measured errors are within the claim's stated ones."""
    return shortfall(errors) is None
