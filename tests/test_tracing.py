"""An algorithm's functions are traced once for the checks before a run
(its metric names) and the run's programs (harness.run.tracing.traced_once,
applied by build), and what the programs compute does not change."""

from __future__ import annotations

import copy
import functools

import numpy as np
from support import TINY_SPEC

from harness import build
from harness import experiment_spec as S
from harness.run import runner, tracing

# The tiny REINFORCE spec with an evaluation, so that all three functions
# (init, step, evaluate) are traced by the check and by the programs.
SPEC = copy.deepcopy(TINY_SPEC) | {
    "budget": {"env_steps": 4 * 16 * 32},
    "logging": {"interval": 2},
}
SPEC["hyperparameters"] = {**SPEC["hyperparameters"], "evaluation": {"episodes": 4, "max_steps": 32}}


FUNCTIONS = ("init", "step", "evaluate")


def _counting(algorithm, counts: dict[str, int]):
    """The algorithm with each function counting how often its Python runs."""

    def counted(name, fn):
        @functools.wraps(fn)
        def wrapper(*args):
            counts[name] = counts.get(name, 0) + 1
            return fn(*args)

        return wrapper

    return algorithm._replace(**{name: counted(name, getattr(algorithm, name)) for name in FUNCTIONS})


def test_the_claims_check_and_the_run_share_one_trace_and_compute_the_same_bits():
    """What `harness run` does: the claims check's trace of the metric names,
    then the run's init, chunk and evaluation programs. Unwrapped, each
    function's Python runs for the check and again for its program; wrapped
    by build (`traced_once`), once, and the run's bits are the same."""
    plan = build.build(S.parse(copy.deepcopy(SPEC)))
    assert all(hasattr(getattr(plan.algorithm, name), "trace") for name in FUNCTIONS)  # build jitted them
    raw = plan.algorithm._replace(**{name: getattr(plan.algorithm, name).__wrapped__ for name in FUNCTIONS})
    curves = []
    for wrap, once in ((lambda a: a, False), (tracing.traced_once, True)):
        counts: dict[str, int] = {}
        algorithm = wrap(_counting(raw, counts))
        assert "episode_return" in tracing.metric_names(algorithm, plan.layout)
        result = runner.run(algorithm, plan.spec.seeds, plan.num_iterations, 2, mesh=plan.mesh)
        assert counts.keys() == set(FUNCTIONS)
        assert all((n == 1) == once for n in counts.values()), counts
        curves.append({**result.metrics, **{f"eval/{k}": v for k, v in result.evaluation.items()}})
    unwrapped, wrapped = curves
    assert wrapped.keys() == unwrapped.keys() and "eval/eval_return" in wrapped
    for name in wrapped:
        assert np.asarray(wrapped[name]).tobytes() == np.asarray(unwrapped[name]).tobytes(), name
