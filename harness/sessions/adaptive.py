"""`harness reproduce --adaptive`: fresh seeds, a batch at a time, until
every claim's test decides.

The seeds are numbered after every seed the spec's faithful records used
(reference and unseen runs), so a run is never judged on a seed its level
was learned from. Every batch has the same size, so the training program
is traced and compiled once and reused (harness.run.programs): a batch is
one `harness run` of the spec on its seeds, its run in MLflow nested under
the reproduction's one run (harness.record.command_run), tagged with the
batch and what it reproduces. After each batch every test
claim (harness.judge.claims) is judged on all the seeds so far, in the
order they ran, with looks after every batch (harness.stats.sequential:
the false-failure bound holds at whatever batch it stops). It stops when
every test has a PASS or a FAIL, or at the seed cap (INCONCLUSIVE, never a
FAIL). The reproduction's run gets the verdict (harness.judge.adaptive_report): its name, tags
`verdict`, `adaptive.seeds_used`, `adaptive.compiles`,
`claim.<name>` with its alpha, power and delta, and each claim's evidence
as metrics over the seeds used.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from harness import build
from harness import experiment_spec as spec
from harness.console import out_console
from harness.experiment_spec.claims import Claim
from harness.judge import claims
from harness.judge.adaptive_report import Adaptive, progress_line
from harness.judge.references import ReproduceError
from harness.plan import Plan
from harness.record.schema import ClaimOutcome, Results
from harness.run.programs import Programs
from harness.sessions.run import train_and_log
from harness.sessions.run_options import RunOptions
from harness.stats import verdict


def first_fresh_seed(records: list[tuple[str, Results]], reference: Results) -> int:
    used = [seed for _, record in records for seed in record.seeds] + list(reference.seeds)
    return max(used, default=-1) + 1


def fresh_seeds(records: list[tuple[str, Results]], reference: Results, cap: int) -> list[int]:
    """The `cap` seeds an adaptive reproduction may run, after every seed the
    faithful records and the reference used."""
    start = first_fresh_seed(records, reference)
    return list(range(start, start + cap))


def prepare(plan: Plan, overrides: dict, seeds: list[int], source: str) -> tuple[Plan, dict[str, list[str]]]:
    """The plan of a reproduction's first batch: `plan`'s spec with the
    `overrides` (dotted key -> value; harness.experiment_spec.overrides) and `seeds`,
    validated and built once, its claims kept; and the keys the overrides
    changed, with both values."""
    changed, differences = spec.with_overrides(plan.spec, {**overrides, "seeds": list(seeds)}, f"{source} (--set)")
    built = build.build(changed, source)
    return built._replace(spec=built.spec.model_copy(update={"claims": plan.spec.claims})), {
        key: values for key, values in differences.items() if key.split(".")[0] != "seeds"
    }


def tests_of(built: Plan, source: str) -> dict[str, Claim]:
    """The test claims that decide an adaptive reproduction of `built`; a
    ReproduceError when it has none."""
    tests = {name: claim for name, claim in built.spec.claims.items() if claim.is_test}
    if not tests:
        raise ReproduceError(
            f"{source}: no claim is a test (a claim with delta), so no verdict could stop an adaptive reproduction"
        )
    return tests


def run(
    built: Plan,
    source: str,
    uri: str,
    options: RunOptions,
    every: list[int],
    batch: int,
    tags: dict,
    results_out: Path | None = None,
) -> Adaptive:
    """Batches of `batch` of the fresh seeds `every` until the tests of
    `built` (the first batch's plan: `prepare`) decide or every seed has
    run, logged to `uri`; `options.faithful` are the records levels come
    from. With `results_out` (a folder), each batch's results.json is
    written there as `<spec>@seeds-<first>-<last>.json`."""
    tests = tests_of(built, source)
    programs = Programs()  # traced and compiled once, for every batch
    faithful = claims.faithful(options.faithful, tests, exclude=every)
    values: dict[str, list[float]] = {name: [] for name in tests}
    seeds: list[int] = []
    outcomes: dict[str, ClaimOutcome] = {}
    logged = None
    evidence: list[tuple[int, str, ClaimOutcome]] = []
    for number, first in enumerate(range(0, len(every), batch), start=1):
        chunk = tuple(every[first : first + batch])
        batch_spec = built.spec.model_copy(update={"seeds": chunk})
        batch_plan = built._replace(spec=batch_spec, spec_hash=spec.spec_hash(batch_spec))
        batch_tags = {
            **tags,
            "adaptive.batch": str(number),
            "adaptive.seeds": f"{chunk[0]}-{chunk[-1]}",
            "mlflow.runName": f"batch {number} · seeds {chunk[0]}-{chunk[-1]}",
        }
        logged = train_and_log(batch_plan, uri, dataclasses.replace(options, tags=batch_tags, programs=programs))
        seeds += chunk
        if results_out is not None:
            results_out.mkdir(parents=True, exist_ok=True)
            written = results_out / f"{Path(source).stem}@seeds-{chunk[0]}-{chunk[-1]}.json"
            written.write_text(logged.record.to_json())
            out_console.print(f"results written to {written}")
        for name, claim in tests.items():
            values[name] += [float(v) for v in claims.seed_values(logged.record, claim)]
            outcomes[name] = claims.judge_values(
                claim, np.array(values[name]), seeds, faithful.get(name), batch, len(tests)
            )
            evidence.append((len(seeds), name, outcomes[name]))
        out_console.print(progress_line(number, len(seeds), outcomes), soft_wrap=True)
        if verdict.of_claims(outcomes) != verdict.INCONCLUSIVE:
            break  # a FAIL decides; an untested claim no seed can decide
    return Adaptive(outcomes, seeds, logged, len(programs), evidence)
