"""docs/results/jax-versions.md: what another JAX line changes, from the
reports of `harness drift` committed in results/drift/."""

from __future__ import annotations

import json
from pathlib import Path

from docs_pages import ROOT
from docs_pages.common import header
from harness.judge import drift

PAGE = "docs/results/jax-versions.md"


def load_reports() -> list[tuple[Path, dict]]:
    """The committed reports, those over the most specs first."""
    reports = [(p, json.loads(p.read_text())) for p in sorted((ROOT / "results" / "drift").glob("*.json"))]
    return sorted(reports, key=lambda report: -len(report[1]["specs"]))


def drift_page(reports: list[tuple[Path, dict]]) -> str:
    out = [header("results/drift/*.json"), "# JAX versions\n\n"]
    out.append(
        "What moving the harness's packages to another JAX line changes, spec by spec, on one machine: each "
        "report is `harness drift` (see [Devices](../guides/devices.md#what-an-upgrade-changes-harness-drift)) "
        "run with the two lines' environments, or with one of them and the same environment with an XLA flag set "
        "(the side's label names the flag). *bits*: whether the two sides' curves are identical; "
        "*verdict*: the newer side's run judged against the older's as `harness reproduce` judges (statistical "
        "where the versions differ); *claims*: the spec's claims judged on the newer side's run (a report cut "
        "short drops them); the ratios are the newer side's median over the older's, with the "
        "round-by-round range of the speed ratio. A report cut to a few iterations per spec answers speed, "
        "compile time and bits; its returns are too short to judge, so its verdict is given only where the bits "
        "are identical (an exact PASS).\n\n"
    )
    if not reports:
        out.append("No report is committed yet.\n")
    for path, document in reports:
        machine = document["settings"].get("machine")
        count = len(document["specs"])
        title = f"{document['newer']} against {document['older']}: {count} spec{'s' * (count != 1)}"
        out.append(f"## {title}, {document['settings']['budget']}" + (f", on {machine}" if machine else "") + "\n\n")
        out.append(f"From `{path.relative_to(ROOT)}`.\n\n")
        out.append(drift.to_markdown(document) + "\n")
    return "".join(out)
