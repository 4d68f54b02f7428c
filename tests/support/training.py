"""Training a tiny spec once for the session, and the records of a run."""

from __future__ import annotations

from harness import build
from harness import experiment_spec as spec_module
from harness.run import runner
from harness.run.programs import Programs

# The compiled programs of each plan `train` trained, by `id(plan.algorithm)`:
# a test that trains the same plan again (resumed, interrupted) reuses them.
_PROGRAMS: dict[int, Programs] = {}


def train(data: dict) -> tuple[build.Plan, runner.RunResult]:
    plan = build.build(spec_module.parse(data))
    programs = _PROGRAMS.setdefault(id(plan.algorithm), Programs())
    return plan, train_plan(plan, programs)


def programs_of(plan: build.Plan) -> Programs:
    """The programs `train` compiled for `plan` (kept for the session)."""
    return _PROGRAMS[id(plan.algorithm)]


def train_plan(plan: build.Plan, programs: Programs | None = None) -> runner.RunResult:
    return runner.run(
        plan.algorithm, plan.spec.seeds, plan.num_iterations, plan.spec.logging.interval, programs=programs
    )


def record_of(plan: build.Plan, result: runner.RunResult):
    """The results.json a run of `plan` would log, read back."""
    from harness.record import schema
    from harness.sessions import results

    return schema.parse(results.make_results(plan, result, 1.0, 0.0).to_json(), "results.json")
