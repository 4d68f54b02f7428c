"""`harness validate SPEC --errors`: each claim's test, simulated from the
faithful seeds the spec has (harness.judge.errors), printed as a table and
written as a record (`results/errors/<spec>.json` for a published spec)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness import spec
from harness.console import out_console, print_table
from harness.judge import claims, errors, references
from harness.judge.claims_table import number

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
    if cap < batch:
        raise ValueError(f"--max-seeds ({cap}) must be at least one batch (--batch {batch})")
    return batch, cap - cap % batch


def report(loaded: spec.Spec, spec_path: str, batch: int, cap: int) -> dict[str, Any]:
    """Every test claim's measured errors, from the spec's faithful records."""
    records = references.faithful_of(spec_path, loaded)
    faithful = claims.faithful(records, loaded.claims)
    out: dict[str, Any] = {"spec": loaded.name, "claims_hash": claims.claims_hash(loaded.claims), "claims": {}}
    for name, claim in loaded.claims.items():
        if not claim.is_test:
            out["claims"][name] = {"test": False}
            continue
        pool = faithful[name]
        if len(pool.values) < 2:
            out["claims"][name] = {"test": True, "faithful_seeds": len(pool.values), "sources": list(pool.sources)}
            continue
        measured = errors.simulate(claim, pool.values, batch, cap)
        out["claims"][name] = {"test": True, **measured, "meets": errors.meets(measured), "sources": list(pool.sources)}
    return out


def show(record: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title=f"{record['spec']}: claims' errors, simulated", title_justify="left", show_lines=True)
    for column in ("claim", "faithful", "Δ", "fails faithful", "catches Δ", "seeds"):
        table.add_column(column, justify="left" if column == "claim" else "right")
    for name, row in record["claims"].items():
        if not row.get("test"):
            table.add_row(name, "a statement", "", "", "", "")
            continue
        if "false_failure" not in row:
            table.add_row(name, f"{row.get('faithful_seeds', 0)} seeds:\ntoo few", "", "", "", "")
            continue
        short = errors.shortfall(row)
        mark = f"\n[bold red]{short}[/]" if short else ""
        table.add_row(
            name,
            f"{number(row['faithful_mean'])}\n{row['faithful_seeds']} seeds",
            number(row["delta"]),
            f"{row['false_failure']:.2%}\nα {row['alpha']:.1%}\n{row['faithful_inconclusive']:.1%} undecided",
            f"{row['measured_power']:.1%}\nof {row['power']:.0%}{mark}",
            f"{row['faithful_seeds_used']:.0f} / {row['regressed_seeds_used']:.0f}\n{row['batch']} to {row['cap']}",
        )
    print_table(table)
    out_console.print(
        f"{next(iter(record['claims'].values()), {}).get('simulations', errors.SIMULATIONS)} simulated reproductions"
        " a claim, each with its own draw of the reference; seeds: the mean used by faithful / regressed"
        " runs, in batches of the first number up to the second",
        soft_wrap=True,
    )


def write(record: dict[str, Any], path: str) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(record, indent=1, sort_keys=False) + "\n")
    out_console.print(f"errors written to {path}")


def command(loaded: spec.Spec, spec_path: str, batch: int, cap: int, out: str | None) -> None:
    """`harness validate SPEC --errors [--errors-out PATH]`."""
    record = report(loaded, spec_path, batch, cap)
    show(record)
    if out:
        write(record, out)
