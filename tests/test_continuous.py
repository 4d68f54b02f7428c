"""Continuous actions: the diagonal Gaussian against closed forms, actions
clipped to the env's bounds, running normalisation statistics, a tiny
Pendulum PPO run that learns, and the bad input that names its key. (A
checkpoint's normalisation statistics and a bit-identical resume:
test_checkpoint; device-count invariance: test_devices.)"""

from __future__ import annotations

import copy

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from support import TINY_PENDULUM, TINY_SPEC, train, write_spec

from algorithms import distributions, normalization
from harness import cli, envs


def test_gaussian_log_prob_and_entropy_match_closed_forms():
    key_mean, key_std, key_action = jax.random.split(jax.random.key(0), 3)
    mean = jax.random.normal(key_mean, (5, 3))
    log_std = 0.5 * jax.random.normal(key_std, (5, 3))
    action = jax.random.normal(key_action, (5, 3)) * 2.0
    head = jnp.concatenate([mean, log_std], -1)
    mask = jnp.ones((5, 3), bool)
    log_prob, entropy = distributions.DIAGONAL_GAUSSIAN.log_prob_entropy(head, mask, action)
    std = np.exp(np.asarray(log_std, np.float64))
    z = (np.asarray(action, np.float64) - np.asarray(mean, np.float64)) / std
    expected = (-0.5 * z**2 - np.log(std * np.sqrt(2 * np.pi))).sum(-1)
    np.testing.assert_allclose(log_prob, expected, rtol=1e-5)
    np.testing.assert_allclose(entropy, (0.5 * np.log(2 * np.pi * np.e * std**2)).sum(-1), rtol=1e-5)
    np.testing.assert_array_equal(distributions.DIAGONAL_GAUSSIAN.log_prob(head, mask, action), log_prob)
    np.testing.assert_array_equal(distributions.DIAGONAL_GAUSSIAN.mode(head, mask), mean)


def test_gaussian_samples_have_its_mean_and_standard_deviation():
    head = jnp.broadcast_to(jnp.array([1.5, -2.0, jnp.log(0.5), jnp.log(2.0)]), (20_000, 4))
    sample = distributions.DIAGONAL_GAUSSIAN.sample(jax.random.key(1), head, jnp.ones((20_000, 2), bool), None)
    assert sample.shape == (20_000, 2)
    np.testing.assert_allclose(sample.mean(0), [1.5, -2.0], atol=0.05)
    np.testing.assert_allclose(sample.std(0), [0.5, 2.0], rtol=0.03)


def test_categorical_log_prob_and_entropy_of_legal_actions():
    logits = jnp.array([[1.0, 2.0, 3.0], [0.5, 0.5, 9.0]])
    mask = jnp.array([[True, True, True], [True, True, False]])
    log_prob, entropy = distributions.CATEGORICAL.log_prob_entropy(logits, mask, jnp.array([2, 0]))
    p0 = np.exp([1.0, 2.0, 3.0]) / np.exp([1.0, 2.0, 3.0]).sum()
    np.testing.assert_allclose(log_prob, [np.log(p0[2]), np.log(0.5)], rtol=1e-6)
    np.testing.assert_allclose(entropy, [-(p0 * np.log(p0)).sum(), np.log(2.0)], rtol=1e-6)


def test_running_moments_are_those_of_every_batch_seen():
    batches = [np.random.default_rng(i).normal(i, 1 + i, (64, 3)).astype(np.float32) for i in range(4)]
    moments = normalization.init_moments((3,))
    for batch in batches:
        moments = normalization.update_moments(moments, jnp.asarray(batch))
    seen = np.concatenate(batches)
    # The prior (mean 0, variance 1, weight 1e-4) is negligible against 256 samples.
    np.testing.assert_allclose(moments.mean, seen.mean(0), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(moments.var, seen.var(0), rtol=1e-4)
    assert float(moments.count) == pytest.approx(256 + normalization.INITIAL_COUNT)


@pytest.mark.parametrize(
    "suite,env_id,kwargs", [("gymnax", "Pendulum-v1", {}), ("brax", "inverted_pendulum", {"backend": "positional"})]
)
def test_actions_outside_the_bounds_reach_the_env_clipped(suite, env_id, kwargs):
    env, _ = envs.make(suite, env_id, kwargs)
    low, high = env.action_bounds
    state, _ = env.reset(jax.random.key(0))
    key = jax.random.key(1)

    @jax.jit
    def observe(action):
        return env.step(state, action, key)[1].observation

    np.testing.assert_array_equal(observe(jnp.asarray(high * 50)), observe(jnp.asarray(high)))
    np.testing.assert_array_equal(observe(jnp.asarray(low * 50)), observe(jnp.asarray(low)))
    assert not np.array_equal(observe(jnp.asarray(low)), observe(jnp.asarray(high)))


def test_tiny_pendulum_ppo_learns(tiny_pendulum_run):
    plan, result = tiny_pendulum_run
    returns = np.asarray(result.metrics["episode_return"])  # [iterations, seeds]
    # Episodes last 200 steps: the first ends in iteration 4 (64 steps each).
    first, last = returns[3:12].mean(0), returns[-10:].mean(0)
    assert (first < -900).all(), first  # about a random policy's
    assert (last > first + 500).all(), (first, last)
    # The statistics saw every observation of every env: the resets and every step.
    normalizer = result.state.actor.normalizer
    hyper = plan.spec.hyperparameters
    seen = hyper.num_envs * (1 + plan.num_iterations * hyper.num_steps)
    np.testing.assert_allclose(normalizer.observation.count, seen + normalization.INITIAL_COUNT)
    assert normalizer.discounted_return.shape == (2, hyper.num_envs)
    # Pendulum observes (cos, sin, angular velocity): the first two within [-1, 1].
    assert (np.abs(np.asarray(normalizer.observation.mean)[:, :2]) <= 1).all()


def test_continuous_reinforce_runs_with_a_gaussian_policy():
    data = copy.deepcopy(TINY_SPEC) | {"env": {"suite": "gymnax", "id": "MountainCarContinuous-v0"}}
    data["hyperparameters"] = {**data["hyperparameters"], "normalize_observations": True}
    data["budget"] = {"env_steps": 4 * data["hyperparameters"]["num_envs"] * data["hyperparameters"]["num_steps"]}
    plan, result = train(data)
    assert plan.env.action_bounds is not None and not plan.env.discrete_actions
    assert all(np.isfinite(v).all() for v in result.metrics.values())
    assert result.state.params["params"]["log_std"].shape == (2, 1)


def test_normalisation_off_leaves_the_spec_hash_and_state_as_they_were(tiny_spec_data):
    from harness import experiment_spec as S

    plain = S.parse(copy.deepcopy(tiny_spec_data))
    explicit = copy.deepcopy(tiny_spec_data)
    explicit["hyperparameters"] |= {"normalize_observations": False, "normalize_rewards": False}
    assert S.spec_hash(S.parse(explicit)) == S.spec_hash(plain)


@pytest.mark.parametrize(
    "change,key,fragment",
    [
        ({"algorithm": "alphazero", "hyperparameters": {}}, "env.id", "alphazero needs a discrete action space"),
        ({"env": {"suite": "brax", "id": "antt"}}, "env.id", "brax has no env 'antt' (did you mean 'ant'?)"),
        (
            {"env": {"suite": "brax", "id": "ant", "kwargs": {"backend": "physx"}}},
            "env.kwargs.backend",
            "brax has no backend 'physx'",
        ),
        (
            {"env": {"suite": "brax", "id": "ant", "kwargs": {"backend": "positional", "episode_length": 0}}},
            "env.kwargs.episode_length",
            "must be a positive integer",
        ),
        (
            {"env": {"suite": "brax", "id": "inverted_pendulum", "wrappers": [{"name": "observe_legal_actions"}]}},
            "env.wrappers",
            "observe_legal_actions needs discrete actions",
        ),
    ],
    ids=["alphazero on pendulum", "unknown brax env", "unknown backend", "episode length", "legal actions on brax"],
)
def test_bad_continuous_specs_name_their_key(tmp_path, capsys, change, key, fragment):
    path = write_spec(tmp_path, copy.deepcopy(TINY_PENDULUM) | change)
    code = cli.main(["validate", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and key in err and fragment in err and "Traceback" not in err, err
