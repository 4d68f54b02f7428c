"""The default bench's planned work, and the ledger it is held to.

What each training entry of the default bench runs, read from the specs and
the code that picks what an entry times, without compiling: its spec's hash,
seeds, iterations and chunks, the env steps they make, and whether an
evaluation or an assessment runs inside the entry. `benchmarks/planned.json`
keeps the same for the commit that made it, and the test suite compares the
two: work that enters the default bench (a larger budget, an assessment run
after training, as once doubled its time unnoticed) fails a test until the
ledger is written again on purpose:

    python -m benchmarks.machinery.planned --write

The `filled[...]` entries' sizes depend on the machine (results/scale/); the
ledger holds what they train (the published spec's hash and seeds) and
whether anything runs after it.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from benchmarks.machinery import measure, selection
from benchmarks.machinery.paths import BENCH_SPECS, PUBLISHED_SPECS, ROOT

LEDGER = ROOT / "benchmarks" / "planned.json"


def _after_training(algorithm: Any) -> dict[str, bool]:
    return {"evaluation": algorithm.evaluate is not None, "assessment": algorithm.assess is not None}


def planned() -> dict[str, dict[str, Any]]:
    """Entry name -> what it runs (the default bench on a machine whose
    cores take the many-seed entry's seeds)."""
    from harness import build
    from harness import experiment_spec as spec_module
    from harness.run import scaling

    out: dict[str, dict[str, Any]] = {}
    for entry in selection.default_entries(BENCH_SPECS, lambda seeds: True):
        plan = entry.plan()
        lengths = measure.chunk_lengths(plan.num_iterations, plan.spec.logging.interval)
        out[f"spec[{entry.id}]"] = {
            "spec_hash": plan.spec_hash,
            "seeds": len(plan.spec.seeds),
            "iterations": plan.num_iterations,
            "chunks": len(lengths),
            "env_steps": plan.num_iterations * plan.env_steps_per_iteration * len(plan.spec.seeds),
            **_after_training(measure.timed_algorithm(plan, entry.evaluate)),
        }
    for path in sorted(BENCH_SPECS.glob("*.yaml")):
        plan = build.build(spec_module.load(PUBLISHED_SPECS / path.name), str(PUBLISHED_SPECS / path.name))
        out[f"filled[{path.stem}]"] = {
            "spec_hash": plan.spec_hash,
            "seeds": len(plan.spec.seeds),
            **_after_training(scaling.timed_algorithm(plan)),
        }
    return out


def changes(now: dict[str, dict[str, Any]], ledger: dict[str, dict[str, Any]]) -> list[str]:
    """What differs between the planned work and the ledger, a line each."""
    lines = [f"{name}: new entry" for name in now if name not in ledger]
    lines += [f"{name}: no longer planned" for name in ledger if name not in now]
    for name in sorted(set(now) & set(ledger)):
        lines += [
            f"{name}: {key} {ledger[name].get(key)} -> {now[name].get(key)}"
            for key in sorted(set(now[name]) | set(ledger[name]))
            if now[name].get(key) != ledger[name].get(key)
        ]
    return lines


def main(argv: list[str]) -> int:
    now = planned()
    if argv == ["--write"]:
        LEDGER.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
        print(f"wrote {LEDGER.relative_to(ROOT)}: {len(now)} entries")
        return 0
    differ = changes(now, json.loads(LEDGER.read_text()))
    print("\n".join(differ) or "the default bench's planned work is the ledger's")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
