"""REINFORCE through the runner: it learns, it is reproducible, seeds differ."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from support import train

from algorithms.base import Algorithm
from harness.run import runner


def test_tiny_run_learns(tiny_run):
    _, result = tiny_run
    returns = result.metrics["episode_return"]  # [iterations, seeds]
    assert returns.shape == (80, 2)
    early, late = returns[5:15].mean(), returns[-10:].mean()
    # A random CartPole policy lasts about 22 steps.
    assert early < 60
    assert late > 2 * early, (early, late)


def test_every_metric_is_reported_per_iteration_and_finite(tiny_run):
    _, result = tiny_run
    expected = {
        "loss",
        "policy_loss",
        "value_loss",
        "entropy",
        "grad_norm",
        "importance_weight",
        "episode_return",
        "episode_length",
    }
    assert expected <= set(result.metrics)
    for values in result.metrics.values():
        assert values.shape == (80, 2) and np.isfinite(values).all()
    # One update per fragment: the behaviour policy is the current one.
    np.testing.assert_allclose(result.metrics["importance_weight"], 1.0, rtol=1e-5)
    assert result.compile_seconds > 0 and result.sps > 0


def test_rerun_with_the_same_seeds_is_bit_identical(tiny_run, tiny_spec_data):
    _, first = tiny_run
    _, again = train(tiny_spec_data)
    for name, values in first.metrics.items():
        np.testing.assert_array_equal(again.metrics[name], values, err_msg=name)
    jax.tree.map(np.testing.assert_array_equal, jax.device_get(again.state.params), jax.device_get(first.state.params))


def test_different_seeds_give_different_curves(tiny_run):
    _, result = tiny_run
    returns = result.metrics["episode_return"]
    assert not np.array_equal(returns[:, 0], returns[:, 1])
    assert not np.array_equal(result.metrics["loss"][:, 0], result.metrics["loss"][:, 1])


def test_off_policy_passes_clip_importance_weights(tiny_spec_data):
    tiny_spec_data["budget"]["env_steps"] = 10 * 16 * 32
    tiny_spec_data["logging"]["interval"] = 10
    tiny_spec_data["hyperparameters"].update(update_epochs=3, num_minibatches=2, c_rho=1.0)
    _, result = train(tiny_spec_data)
    rho = result.metrics["importance_weight"]
    assert (rho <= 1.0 + 1e-6).all(), "weights are clipped at c_rho"
    assert (rho < 1.0 - 1e-4).any(), "later passes are off-policy, so some weights fall below 1"


def _nan_at(iteration: int) -> Algorithm:
    def init(key):
        del key
        return jnp.zeros((), jnp.int32)

    def step(i):
        i = i + 1
        return i, {"loss": jnp.where(i == iteration, jnp.nan, 1.0), "episode_return": i.astype(jnp.float32)}

    return Algorithm(init, step, env_steps_per_step=8)


def test_nan_guard_names_metric_iteration_and_seed():
    logged = []
    with pytest.raises(runner.NonFiniteMetricError) as info:
        runner.run(_nan_at(7), (3, 4), num_iterations=20, chunk_iterations=5, sink=logged.append)
    assert (info.value.metric, info.value.iteration, info.value.seed) == ("loss", 7, 3)
    assert "'loss'" in str(info.value) and "iteration 7" in str(info.value)
    assert [c.first_iteration for c in logged] == [1], "chunks before the bad one are logged, none after"


def test_remainder_iterations_run_in_a_shorter_last_chunk():
    logged = []
    result = runner.run(_nan_at(-1), (0,), num_iterations=12, chunk_iterations=5, sink=logged.append)
    assert [c.first_iteration for c in logged] == [1, 6, 11]
    np.testing.assert_array_equal(result.metrics["episode_return"][:, 0], np.arange(1, 13))


def test_seeds_mapped_one_after_another_train_as_the_vmapped_batch(tiny_run):
    """`Algorithm.map_seeds` (what AlphaZero's ResNet asks for) changes how
    the runner lays the seeds out (`lax.map` instead of `vmap`), not what
    each computes: the same curves up to float rounding."""
    plan, vmapped = tiny_run
    assert not plan.algorithm.map_seeds
    mapped = runner.run(
        plan.algorithm._replace(map_seeds=True), plan.spec.seeds, plan.num_iterations, plan.spec.logging.interval
    )
    assert set(mapped.metrics) == set(vmapped.metrics)
    for name, values in vmapped.metrics.items():
        # On a GPU the two programs get different kernels, which round
        # differently (seen on an H200: up to 7e-5 relative in `entropy`).
        rtol = 1e-5 if jax.default_backend() == "cpu" else 2e-4
        np.testing.assert_allclose(mapped.metrics[name], values, rtol=rtol, atol=1e-6, err_msg=name)


def test_evaluation_rollouts_use_envs_of_their_own(tiny_run, tiny_spec_data):
    """With `evaluation` on, every chunk ends with whole episodes on envs of
    their own: the training curves are bit-identical to the run without."""
    plan, without = tiny_run
    tiny_spec_data["hyperparameters"]["evaluation"] = {"episodes": 4, "max_steps": 600}
    _, result = train(tiny_spec_data)
    for name, values in without.metrics.items():
        np.testing.assert_array_equal(result.metrics[name], values, err_msg=name)
    assert set(result.evaluation) == {"eval_return", "eval_length"}
    interval = plan.spec.logging.interval
    assert result.evaluation_iterations == tuple(range(interval, plan.num_iterations + 1, interval))
    # CartPole pays 1 per step: an episode's return is its length.
    np.testing.assert_array_equal(result.evaluation["eval_return"], result.evaluation["eval_length"])
    assert (result.evaluation["eval_length"] >= 8).all()
