"""An algorithm's functions are traced once for the checks before a run
(its metric names) and the run's programs (harness.run.tracing.traced_once,
applied by build), and what the programs compute does not change."""

from __future__ import annotations

import copy
import functools

import jax
import numpy as np
from support import TINY_SPEC

from harness import build
from harness import spec as S
from harness.run import runner, tracing

# The tiny REINFORCE spec with an evaluation, so that all three functions
# (init, step, evaluate) are traced by the check and by the programs.
SPEC = copy.deepcopy(TINY_SPEC) | {
    "budget": {"env_steps": 4 * 16 * 32},
    "logging": {"interval": 2},
}
SPEC["hyperparameters"] = {**SPEC["hyperparameters"], "evaluation": {"episodes": 4, "max_steps": 32}}


def _counting(algorithm, counts: dict[str, int]):
    """The algorithm with each function counting how often its Python runs."""

    def counted(name, fn):
        @functools.wraps(fn)
        def wrapper(*args):
            counts[name] = counts.get(name, 0) + 1
            return fn(*args)

        return wrapper

    return algorithm._replace(
        **{name: counted(name, getattr(algorithm, name)) for name in ("init", "step", "evaluate")}
    )


def _raw(algorithm):
    """The algorithm as its factory made it (what build wrapped)."""
    return algorithm._replace(**{name: getattr(algorithm, name).__wrapped__ for name in ("init", "step", "evaluate")})


def test_the_claims_check_and_the_programs_share_one_trace():
    plan = build.build(S.parse(copy.deepcopy(SPEC)))
    assert all(hasattr(getattr(plan.algorithm, name), "trace") for name in ("init", "step", "evaluate"))  # jitted
    for wrap, once in ((lambda a: a, False), (tracing.traced_once, True)):
        counts: dict[str, int] = {}
        algorithm = wrap(_counting(_raw(plan.algorithm), counts))
        names = tracing.metric_names(algorithm, plan.layout)  # what `harness run` checks claims against
        runner.lower_first_chunk(algorithm, plan.spec.seeds, 2, plan.mesh)
        inputs = runner.devices.per_run((np.asarray(plan.spec.seeds, dtype=np.uint32), None), plan.mesh)
        state = jax.eval_shape(runner._init_program(algorithm, plan.mesh), inputs)
        jax.jit(runner.over_seeds(algorithm.evaluate)).lower(state)
        assert "episode_return" in names
        assert counts.keys() == {"init", "step", "evaluate"}
        # Unwrapped, each function's Python runs for the check and again for each program.
        assert all((n == 1) == once for n in counts.values()), counts


def test_traced_once_computes_the_same_bits():
    plan = build.build(S.parse(copy.deepcopy(SPEC)))
    runs = [
        runner.run(algorithm, plan.spec.seeds, plan.num_iterations, 2, mesh=plan.mesh)
        for algorithm in (plan.algorithm, _raw(plan.algorithm))
    ]
    ours, raw = ({**r.metrics, **{f"eval/{k}": v for k, v in r.evaluation.items()}} for r in runs)
    assert ours.keys() == raw.keys() and "eval/eval_return" in ours
    for name in ours:
        assert np.asarray(ours[name]).tobytes() == np.asarray(raw[name]).tobytes(), name
