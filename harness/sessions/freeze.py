"""`harness validate SPEC --freeze`: a spec's claims frozen before fresh
seeds confirm them.

A claim's design (its range, delta, batch, cap) is chosen on the faithful
seeds at hand; a rate measured on the seeds that chose the design is
optimistic. Freezing writes `results/frozen/<spec>.json`: the hash of the
spec's test claims (a statement added or changed tests nothing and
confirms nothing, so it leaves a freeze as it is), the test rules'
version and, per test claim, the faithful seeds it was designed on. Every faithful seed recorded after it (`nox -s unseen`,
`reproduce --adaptive --results-out`) confirms the claim, whatever its
verdict: `harness validate --errors` measures the rates on the confirming
seeds alone beside those on every seed. A claim changed after freezing
(another claims hash, `reproduction` section or test rules) starts its
confirmation again: freeze it anew.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness import experiment_spec as spec
from harness.console import out_console
from harness.judge import claims, references
from harness.stats import verdict

FOLDER = "frozen"


def path_of(spec_path: str | Path) -> Path:
    """`results/frozen/<spec>.json` beside the spec's first reference."""
    first = references.reference_path(spec_path)
    return first.parent / FOLDER / f"{first.stem}.json"


def load(spec_path: str | Path) -> dict[str, Any] | None:
    path = path_of(spec_path)
    return json.loads(path.read_text()) if path.exists() else None


def tests_hash(loaded: spec.Spec) -> str:
    """The hash of the spec's test claims as stated (statements left out)."""
    return claims.claims_hash({name: claim for name, claim in loaded.claims.items() if claim.is_test})


def current(frozen: dict[str, Any] | None, loaded: spec.Spec) -> bool:
    """Whether `frozen` holds the spec's claims and reproduction seeding as
    they are now, under today's test rules (or earlier ones that designed
    claims alike: verdict.SAME_DESIGNS)."""
    return (
        frozen is not None
        and frozen["claims_hash"] == tests_hash(loaded)
        and frozen["rules"] in verdict.SAME_DESIGNS
        and frozen["reproduction"] == loaded.reproduction.model_dump()
    )


def record(loaded: spec.Spec, spec_path: str | Path) -> dict[str, Any]:
    """The freeze: each test claim's design seeds, the faithful seeds now."""
    faithful = claims.faithful(references.faithful_of(spec_path, loaded), loaded.claims)
    return {
        "spec": loaded.name,
        "claims_hash": tests_hash(loaded),
        "rules": verdict.RULES,
        "reproduction": loaded.reproduction.model_dump(),
        "design": {name: {"seeds": list(pool.seeds), "sources": list(pool.sources)} for name, pool in faithful.items()},
    }


def command(loaded: spec.Spec, spec_path: str) -> None:
    """Write the freeze; ReproduceError (a user error) if the claims are
    frozen as they are (freezing again would make confirming seeds design
    seeds)."""
    path = path_of(spec_path)
    if current(load(spec_path), loaded):
        raise references.ReproduceError(
            f"--freeze: {path} already freezes these claims under these rules; its confirming seeds would become"
            " design seeds"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    frozen = record(loaded, spec_path)
    if not frozen["design"]:
        raise references.ReproduceError(f"--freeze: {spec_path} states no test claim: nothing to freeze")
    path.write_text(json.dumps(frozen) + "\n")
    out_console.print(f"claims frozen in {path}", soft_wrap=True)
