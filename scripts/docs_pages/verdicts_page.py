"""docs/results/verdict-errors.md: each published claim's test with its
measured errors, from the records `harness validate SPEC --errors` wrote
to results/errors/."""

from __future__ import annotations

import json

from docs_pages import ROOT
from docs_pages.common import header, table
from harness.judge import errors, levels, machines, references
from harness.record import schema
from harness.stats.stakes import SIZING_SEEDS

PAGE = "docs/results/verdict-errors.md"


def load_records() -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((ROOT / "results" / "errors").glob("*.json"))]


def _rate(row: dict) -> str:
    return f"{row['rate']:.2%} [{row['low']:.2%}, {row['high']:.2%}]"


def _seeds_cell(row: dict) -> str:
    if "design_seeds" not in row:
        return "<br>not frozen"
    return f"<br>designed on {row['design_seeds']}<br>confirmed on {row['confirming_seeds']}"


def _confirmed_cell(row: dict) -> str:
    """The errors measured on the confirming seeds alone, when there are enough of them."""
    if "confirmed" not in row:
        return "<br>confirming seeds: fewer than 16" if "design_seeds" in row else ""
    confirmed = row["confirmed"]
    worst = max(r["false_failure"]["rate"] for r in confirmed["faithful"].values())
    power = confirmed["regressed"]["shifted"]["power"]["rate"]
    said = errors.shortfall(confirmed)
    return f"<br>on confirming seeds: {f'**{said}**' if said else 'meets'} (fails {worst:.2%}, catches {power:.1%})"


def verdicts_page(records: list[dict]) -> str:
    out = [header("results/errors/*.json"), "# Verdicts' errors, measured\n\n"]
    out.append(
        "Each published claim is a test (see [what a verdict means](../guides/verdicts.md)). Its record is made "
        "by `harness validate experiments/SPEC.yaml --errors --errors-out results/errors/SPEC.json`: "
        f"{errors.SIMULATIONS:,} simulated reproductions a model, each with its own draw of the reference and "
        "the run from the same model of a faithful run, every rate with its Wilson 95% interval. A spec's test "
        "claims share its alpha (*α per claim* is the spec's over its test claims), so together they fail a "
        "faithful reproduction at most alpha of the time.\n\n"
        "*Fails faithful*, the share of faithful reproductions that FAIL, under four models of a faithful run "
        "from the spec's faithful seeds: *resampled* (the seeds themselves), *smoothed* (each draw jittered at "
        "Silverman's bandwidth), *wider* (their spread times 1.5) and *failure mode* (1 seed in 20 at the "
        "random policy's level, where the metric is a return). *Catches Δ*, the share of regressed "
        "reproductions that FAIL, under three regressions: *shifted* (every seed worse by delta; a share's "
        "rate down by delta), *collapsed* (a share of seeds at the random level, the mean down by delta) and "
        "*spread* (the spread doubled, the mean down by delta). A claim meets its errors when every "
        f"false-failure rate is at most its alpha with its interval under alpha + {errors.ALPHA_MARGIN:.1%}, "
        f"and every power at least its power with its interval over power - {errors.POWER_MARGIN:.0%}; "
        "otherwise the record says which model it misses. *Seeds*: the median seeds a faithful / a shifted "
        "by delta / a shifted by half of delta reproduction used, and the share of each that ran to the cap "
        "undecided, in batches of the first number up to the second (the spec's `reproduction` section). A "
        f"reference level with fewer than {levels.MIN_FAITHFUL} faithful seeds ({levels.MIN_FAITHFUL + SIZING_SEEDS} "
        "by rank) is not a test: "
        "the claim is a statement until unseen-seed runs (`nox -s unseen`) bring the seeds.\n\n"
        "A claim is frozen (`harness validate SPEC --freeze`, `results/frozen/SPEC.json`) before fresh seeds "
        "confirm it: *designed on* are the faithful seeds its design was chosen on, *confirmed on* every "
        "faithful seed recorded after, whatever its verdict. A rate measured on the seeds that chose the design "
        "is optimistic; the rates on the confirming seeds (once there are 16) are not: each simulated "
        "reproduction's run is drawn from the confirming seeds alone, its reference from the design seeds, as "
        "many as there are (a real reproduction is held to them all).\n\n"
    )
    rows = []
    for record in records:
        for name, row in record["claims"].items():
            spec_cell = f"`{record['spec']}`"
            if not row.get("test"):
                rows.append([spec_cell, name, "a statement, not a test", "", "", "", "", ""])
                continue
            if "faithful" not in row:
                short = errors.shortfall(row)
                rows.append(
                    [
                        spec_cell,
                        name,
                        f"{short}: {row.get('needed', levels.MIN_FAITHFUL) - row['faithful_seeds']} more needed",
                        "",
                        "",
                        "",
                        "",
                        "",
                    ]
                )
                continue
            short = errors.shortfall(row)
            rows.append(
                [
                    spec_cell,
                    name,
                    f"{row['faithful_mean']:.4g} ({row['faithful_seeds']})" + _seeds_cell(row),
                    f"{row['delta']:g}",
                    "<br>".join(
                        f"{m.replace('_', ' ')} {_rate(r['false_failure'])}" for m, r in row["faithful"].items()
                    )
                    + f"<br>(α {row['alpha']:.2%} per claim)",
                    "<br>".join(f"{s} {_rate(r['power'])}" for s, r in row["regressed"].items())
                    + f"<br>(of {row['power']:.0%})",
                    (f"**{short}**" if short else "meets") + _confirmed_cell(row),
                    _seeds_used(row),
                ]
            )
    headings = ["spec", "claim", "faithful level (seeds)", "Δ", "fails faithful", "catches Δ", "errors", "seeds"]
    out.append(table(headings, rows) if rows else "No record yet.\n")
    out.append(exact_machines())
    return "".join(out)


def _seeds_used(row: dict) -> str:
    """Median seeds a faithful / delta-shifted / half-delta-shifted reproduction uses, and how often each runs to the cap."""
    runs = (row["faithful"]["resampled"], row["regressed"]["shifted"], row["half_shifted"])
    return (
        " / ".join(f"{r['seeds_median']:.0f}" for r in runs)
        + "<br>capped "
        + " / ".join(f"{r['capped']:.0%}" for r in runs)
        + f"<br>{row['batch']} to {row['cap']}"
    )


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
