"""`harness validate SPEC --errors`: each claim's test, simulated from the
faithful seeds the spec has (harness.judge.errors), printed as a table and
written as a record (`results/errors/<spec>.json` for a published spec)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness import experiment_spec as spec
from harness.console import out_console, print_table
from harness.experiment_spec.sections import check_batch_fits
from harness.judge import claims, errors, levels, references
from harness.judge.claims_table import number
from harness.sessions import freeze
from harness.stats import verdict

# A reproduction's seeds by default (the spec's `reproduction` section
# says otherwise): batches of the spec's own seed count, up to four of them.
BATCHES = 4


def seeding(loaded: spec.Spec, batch: int | None = None, cap: int | None = None) -> tuple[int, int]:
    """The batch size and seed cap a reproduction of `loaded` uses: as
    given (--batch, --max-seeds), else as its `reproduction` section
    states, else batches of its seed count, four of them; the cap in whole
    batches (every batch is one compiled program's size). ValueError naming
    the option for a batch or cap below 1, or a cap below one batch."""
    stated = loaded.reproduction
    batch = batch if batch is not None else stated.batch or len(loaded.seeds)
    cap = cap if cap is not None else stated.max_seeds or BATCHES * batch
    if batch < 1:
        raise ValueError(f"--batch must be at least 1, not {batch}")
    check_batch_fits(cap, batch, "--max-seeds", f"--batch {batch}")
    return batch, cap - cap % batch


# Metrics whose random policy's level is the reference's `baselines.random_policy.mean_return`.
RETURNS = ("episode_return", "eval_return")


def random_level(claim, records) -> float | None:
    """The random policy's level of the claim's metric, in its units, from
    the faithful records' baselines: a return's, at the end of training (a
    claim on the first evaluation starts there)."""
    if claim.metric not in RETURNS or claim.over_iterations.name == "first":
        return None
    for _, record in records:
        level = (record.baselines or {}).get("random_policy", {}).get("mean_return")
        if level is not None:
            return float(level)
    return None


def report(loaded: spec.Spec, spec_path: str, batch: int, cap: int) -> dict[str, Any]:
    """Every test claim's measured errors, from the spec's faithful records:
    on every seed, and, where the claims are frozen (harness.sessions.freeze),
    on the seeds that confirm them alone."""
    records = references.faithful_of(spec_path, loaded)
    faithful = claims.faithful(records, loaded.claims)
    tests = claims.test_count(loaded.claims)
    frozen = freeze.load(spec_path)
    out: dict[str, Any] = {
        "spec": loaded.name,
        "claims_hash": claims.claims_hash(loaded.claims),
        "rules": verdict.RULES,
        "tests": tests,
        "alpha_per_reproduction": claims.reproduction_alpha(loaded.claims),
        "frozen": None if frozen is None else ("current" if freeze.current(frozen, loaded) else "changed since"),
        "claims": {},
    }
    for name, claim in loaded.claims.items():
        if not claim.is_test:
            out["claims"][name] = {"test": False}
            continue
        pool = faithful[name]
        row: dict[str, Any] = {"test": True, "faithful_seeds": len(pool.values), "sources": list(pool.sources)}
        row["needed"] = levels.needed(claim)
        random = random_level(claim, records)
        if len(pool.values) >= row["needed"]:
            measured = errors.simulate(claim, pool.values, batch, cap, tests, random)
            row |= {**measured, "meets": errors.meets(measured)}
        if out["frozen"] == "current":
            design, confirming = levels.design_and_confirming(pool, set(frozen["design"][name]["seeds"]))
            row["design_seeds"] = seed_ranges(design.seeds)
            row["confirming_seeds"] = seed_ranges(confirming.seeds)
            if len(confirming.values) >= levels.MIN_FAITHFUL and len(design.values) >= row["needed"]:
                confirmed = errors.simulate(
                    claim, confirming.values, batch, cap, tests, random, reference_pool=design.values
                )
                row["confirmed"] = {**confirmed, "meets": errors.meets(confirmed)}
        out["claims"][name] = row
    return out


def seed_ranges(seeds: tuple[int, ...]) -> str:
    """Seeds as ranges: `0-7, 32-47` (empty: "none")."""
    ranges, start = [], None
    for previous, seed in zip((None, *seeds), seeds, strict=False):
        if start is None:
            start = seed
        elif seed != previous + 1:
            ranges.append((start, previous))
            start = seed
    if start is not None:
        ranges.append((start, seeds[-1]))
    return ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in ranges) or "none"


def _rate(row: dict[str, Any]) -> str:
    return f"{row['rate']:.2%} [{row['low']:.2%}, {row['high']:.2%}]"


def show(record: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title=f"{record['spec']}: claims' errors, simulated", title_justify="left", show_lines=True)
    for column in ("claim", "faithful", "fails faithful", "catches Δ", "seeds"):
        table.add_column(column, justify="left" if column == "claim" else "right")
    for name, row in record["claims"].items():
        if not row.get("test"):
            table.add_row(name, "a statement", "", "", "")
            continue
        if "faithful" not in row:
            table.add_row(name, f"{row.get('faithful_seeds', 0)} seeds:\na statement", "", "", "")
            continue
        short = errors.shortfall(row)
        mark = f"\n[bold red]{short}[/]" if short else ""
        fails = "\n".join(f"{model} {_rate(r['false_failure'])}" for model, r in row["faithful"].items())
        catches = "\n".join(f"{shape} {_rate(r['power'])}" for shape, r in row["regressed"].items())
        resampled, shifted, half = row["faithful"]["resampled"], row["regressed"]["shifted"], row["half_shifted"]
        table.add_row(
            name,
            f"{number(row['faithful_mean'])}\n{row['faithful_seeds']} seeds\nΔ {number(row['delta'])}",
            f"{fails}\nα {row['alpha']:.2%}",
            f"{catches}\nof {row['power']:.0%}{mark}",
            f"{resampled['seeds_median']:.0f} / {shifted['seeds_median']:.0f} / {half['seeds_median']:.0f}\n"
            f"capped {resampled['capped']:.0%} / {shifted['capped']:.0%} / {half['capped']:.0%}\n"
            f"{row['batch']} to {row['cap']}",
        )
    print_table(table)
    for name, row in record["claims"].items():
        if "design_seeds" in row:
            confirmed = row.get("confirmed")
            said = "fewer than 16 confirming seeds" if confirmed is None else errors.shortfall(confirmed) or "meets"
            out_console.print(
                f"{name}: designed on seeds {row['design_seeds']}, confirmed on {row['confirming_seeds']}: {said}",
                soft_wrap=True,
            )
    out_console.print(
        f"{errors.SIMULATIONS} simulated reproductions a model, each with its own draw of the reference, 95% Wilson"
        f" intervals; alpha per reproduction {record['alpha_per_reproduction']:.0%}, split over {record['tests']}"
        " test claims; seeds: the median used by faithful / shifted by Δ / shifted by ½Δ runs and the share that ran"
        " to the cap undecided, in batches of the first number up to the second",
        soft_wrap=True,
    )


def write(record: dict[str, Any], path: str) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(record, indent=1, sort_keys=False) + "\n")
    out_console.print(f"errors written to {path}")


def command(loaded: spec.Spec, spec_path: str, batch: int, cap: int, out: str | None) -> None:
    """`harness validate SPEC --errors [--errors-out PATH]`."""
    if not claims.test_count(loaded.claims):
        raise spec.SpecError(
            spec_path,
            [("claims", "no claim is a test (one with `delta`): --errors measures the errors of a spec's tests")],
            spec.key_lines(Path(spec_path).read_text()),
        )
    record = report(loaded, spec_path, batch, cap)
    show(record)
    if out:
        write(record, out)
