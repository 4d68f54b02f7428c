"""docs/results/verdict-errors.md: each published claim's test with its
measured errors, from the records `harness validate SPEC --errors` wrote
to results/errors/."""

from __future__ import annotations

import json

from docs_pages import ROOT
from docs_pages.common import header, table
from harness.judge import errors, machines, references
from harness.record import schema

PAGE = "docs/results/verdict-errors.md"


def load_records() -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((ROOT / "results" / "errors").glob("*.json"))]


def verdicts_page(records: list[dict]) -> str:
    out = [header("results/errors/*.json"), "# Verdicts' errors, measured\n\n"]
    out.append(
        "Each published claim is a test (see [what a verdict means](../guides/verdicts.md)). Its record is made "
        "by `harness validate experiments/SPEC.yaml --errors --errors-out results/errors/SPEC.json`: 4,000 "
        "simulated reproductions from the spec's faithful seeds (its references and unseen-seed runs, each "
        "seed once), each with its own draw of the reference. *fails faithful*: the share of faithful "
        "reproductions that FAIL (at most alpha); *catches Δ*: the share of reproductions regressed by delta "
        "that FAIL (at least the claim's power); *undecided*: faithful reproductions INCONCLUSIVE at the cap; "
        "*seeds*: the mean seeds a faithful / a regressed reproduction used; *batches*: a batch's seeds "
        "to the cap (the spec's `reproduction` section; by default its seed count, four batches). A "
        "claim marked **too weak** does not reach its stated power with the faithful seeds at hand: a PASS "
        "says little; one that **fails faithful runs too often** meets a spread the t-test's normal "
        "approximation misses (larger batches help). One with **too few faithful seeds** has its rates measured "
        f"from fewer than {errors.MEASURABLE} seeds, which cannot show the spread faithful runs have: its "
        "figures are not evidence either way.\n\n"
    )
    rows = []
    for record in records:
        for name, row in record["claims"].items():
            if "false_failure" not in row:
                what = "a statement, not a test" if not row.get("test") else "too few faithful seeds"
                rows.append([f"`{record['spec']}`", name, what, "", "", "", "", "", ""])
                continue
            rows.append(
                [
                    f"`{record['spec']}`",
                    name,
                    f"{row['faithful_mean']:.4g} ({row['faithful_seeds']})",
                    f"{row['delta']:g}",
                    f"{row['false_failure']:.2%} (α {row['alpha']:.0%})",
                    f"{row['measured_power']:.1%} (of {row['power']:.0%})"
                    + (f" **{short}**" if (short := errors.shortfall(row)) else ""),
                    f"{row['faithful_inconclusive']:.1%}",
                    f"{row['faithful_seeds_used']:.0f} / {row['regressed_seeds_used']:.0f}",
                    f"{row['batch']} to {row['cap']}",
                ]
            )
    headings = [
        "spec",
        "claim",
        "faithful level (seeds)",
        "Δ",
        "fails faithful",
        "catches Δ",
        "undecided",
        "seeds",
        "batches",
    ]
    out.append(table(headings, rows) if rows else "No record yet.\n")
    out.append(exact_machines())
    return "".join(out)


def exact_machines() -> str:
    """Where an exact (bit for bit) verdict is possible: each reference's
    machine and numerics versions, which a reproduction must match along
    with the reference's seeds."""
    rows = []
    for first in sorted((ROOT / "results").glob("*.json")):
        if "@" in first.name:
            continue
        for path, device_class in references.references(first):
            record = schema.parse(path.read_text(), str(path))
            fingerprint, versions = record.fingerprint, record.versions
            machine = machines.cpu_name(fingerprint) if fingerprint.get("platform") == "cpu" else device_class
            rows.append(
                [f"`{path.name}`", machine, versions.get("jax", "?"), versions.get("python", "?"), len(record.seeds)]
            )
    return (
        "\n## Where an exact verdict is possible\n\n`harness reproduce` judges bit for bit only on the reference's "
        "device fingerprint (for a CPU, its model and instruction set), numerics versions and seeds "
        "([reproducing](../guides/reproduce.md#exact-verdicts)); elsewhere the claims' tests judge.\n\n"
        + table(["reference", "machine", "jax", "Python", "seeds"], rows)
    )
