"""PPO through the runner, the GRU policy's memory, and PPO's spec checks."""

from __future__ import annotations

import copy
import re
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from support import TINY_PPO, train, write_spec

from algorithms.layers import product
from algorithms.networks import make_policy, unroll
from harness import build, cli
from harness import experiment_spec as S
from harness.run import runner


def test_ppo_improves_a_tiny_cartpole_run(tiny_ppo_run):
    _, result = tiny_ppo_run
    returns = result.metrics["episode_return"]
    assert returns.shape == (60, 2)
    early, late = returns[2:10].mean(), returns[-10:].mean()
    # Another device's floats give another trajectory (an H200: 103 -> 202).
    assert late > 1.5 * early, (early, late)


def test_ppo_reports_its_diagnostics(tiny_ppo_run):
    _, result = tiny_ppo_run
    for name in (
        "loss",
        "policy_loss",
        "value_loss",
        "entropy",
        "approx_kl",
        "clip_fraction",
        "grad_norm",
        "episode_return",
        "episode_length",
    ):
        assert np.isfinite(result.metrics[name]).all(), name
    assert (result.metrics["clip_fraction"] >= 0).all() and (result.metrics["clip_fraction"] <= 1).all()
    assert (result.metrics["approx_kl"] > -1e-6).all(), "(r - 1) - log r is never negative"


def test_no_recompilation_after_the_first_chunk():
    """Each chunk length is traced once; every later call reuses the program."""
    plan = build.build(
        S.parse(copy.deepcopy(TINY_PPO) | {"budget": {"env_steps": 7 * 512}, "logging": {"interval": 3}})
    )
    traces = []

    def counted(state):
        traces.append(1)  # runs at trace time only
        return plan.algorithm.step(state)

    algorithm = plan.algorithm._replace(step=counted)
    with jax.log_compiles(False):
        result = runner.run(algorithm, (0,), num_iterations=7, chunk_iterations=3)
    assert result.metrics["loss"].shape == (7, 1)
    assert len(traces) == 2, "one trace for the 3-iteration chunk, one for the 1-iteration tail"


def test_dense_product_gradients_and_their_layout_under_vmap():
    def loss(fn, g):
        return lambda x, k: jnp.sum(jnp.tanh(jax.vmap(fn)(x, k)) * g)

    def transposes(fn, *args):
        hlo = jax.jit(jax.grad(loss(fn, args[-1]), argnums=1)).lower(*args[:2]).compile().as_text()
        return len(re.findall(r"= \S+ transpose\(", hlo))

    for seeds in (1, 3):
        x = jax.random.normal(jax.random.key(0), (seeds, 5, 4))  # [seeds, rows, in]
        kernel = jax.random.normal(jax.random.key(1), (seeds, 4, 6))  # [seeds, in, out]
        g = jax.random.normal(jax.random.key(2), (seeds, 5, 6))
        ours = jax.grad(loss(product, g), argnums=(0, 1))(x, kernel)
        jaxs = jax.grad(loss(jnp.matmul, g), argnums=(0, 1))(x, kernel)
        for a, b in zip(ours, jaxs, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        # The kernel's gradient comes out [seeds, in, out] from the product
        # itself. On a CPU, JAX's own rule leaves a transpose after it when
        # the seed axis is one wide (if XLA folds it one day, `product` can
        # go); XLA's GPU backend folds it already.
        assert transposes(product, x, kernel, g) == 0
        if jax.default_backend() == "cpu":
            assert transposes(jnp.matmul, x, kernel, g) == (1 if seeds == 1 else 0)


def test_gru_memory_resets_at_episode_starts():
    network = SimpleNamespace(kind="gru", hidden_sizes=(8,), gru_size=6, activation="tanh")
    policy = make_policy(network, num_actions=2, observation_shape=(3,))
    params = policy.init(jax.random.key(0), jnp.zeros((3,)))
    obs = jax.random.normal(jax.random.key(1), (5, 2, 3))  # [T, B, obs]
    reset = jnp.zeros((5, 2), bool).at[0].set(True).at[3, 0].set(True)
    carry = jax.random.normal(jax.random.key(2), (2, 6))  # stale memory from before
    logits, value = unroll(policy, params, carry, obs, reset)
    # From a reset on, env 0 behaves exactly as if started afresh there.
    fresh_reset = jnp.zeros((2, 2), bool).at[0].set(True)
    fresh_logits, fresh_value = unroll(policy, params, jnp.zeros((2, 6)), obs[3:], fresh_reset)
    np.testing.assert_allclose(logits[3:, 0], fresh_logits[:, 0], rtol=1e-6)
    np.testing.assert_allclose(value[3:, 0], fresh_value[:, 0], rtol=1e-6)
    # The reset at t=0 wipes the stale carry; without it the outputs differ.
    no_reset_logits, _ = unroll(policy, params, carry, obs, jnp.zeros((5, 2), bool))
    assert not np.allclose(no_reset_logits[0], logits[0])
    # And memory matters: env 1 (no reset at t=3) differs from a fresh start there.
    assert not np.allclose(logits[3:, 1], fresh_logits[:, 1])


def test_gru_tiny_ppo_runs_and_carries_memory_across_fragments():
    data = copy.deepcopy(TINY_PPO) | {
        "network": {"kind": "gru", "hidden_sizes": [16], "gru_size": 16},
        "budget": {"env_steps": 6 * 4 * 32},
        "hyperparameters": {"num_envs": 4, "num_steps": 32, "num_minibatches": 2},
        "logging": {"interval": 3},
        "env": {"suite": "gymnax", "id": "CartPole-v1", "wrappers": [{"name": "mask_observation", "indices": [1, 3]}]},
    }
    plan, result = train(data)
    assert all(np.isfinite(v).all() for v in result.metrics.values())
    carry = np.asarray(result.state.actor.carry)
    assert carry.shape == (2, 4, 16) and np.abs(carry).sum() > 0


@pytest.mark.parametrize(
    "change,key,fragment",
    [
        (
            {"hyperparameters": {"num_envs": 3, "num_steps": 5, "num_minibatches": 4}},
            "hyperparameters.num_minibatches",
            "num_envs * num_steps (15) does not divide into num_minibatches (4)",
        ),
        (
            {"hyperparameters": {"num_envs": 6, "num_minibatches": 4}, "network": {"kind": "gru"}},
            "hyperparameters.num_minibatches",
            "num_envs (6) does not divide into num_minibatches (4)",
        ),
        (
            {"env": {"suite": "gymnax", "id": "Pendulum-v1", "wrappers": [{"name": "observe_legal_actions"}]}},
            "env.wrappers",
            "observe_legal_actions needs discrete actions",
        ),
        (
            {"env": {"suite": "gymnax", "id": "Pendulum-v1"}, "network": {"kind": "grid_gru"}},
            "network.kind",
            "has continuous actions, which grid_gru has no head for",
        ),
        (
            {
                "env": {
                    "suite": "gymnax",
                    "id": "CartPole-v1",
                    "wrappers": [{"name": "mask_observation", "indices": [7]}],
                }
            },
            "env.wrappers",
            "outside the observation",
        ),
    ],
    ids=[
        "minibatches",
        "gru minibatches",
        "legal actions of continuous",
        "grid net on continuous",
        "mask out of range",
    ],
)
def test_bad_ppo_specs(tmp_path, capsys, change, key, fragment):
    path = write_spec(tmp_path, copy.deepcopy(TINY_PPO) | change)
    code = cli.main(["validate", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and key in err and fragment in err and "Traceback" not in err, err


def test_lecun_initialization_is_flax_s_default_with_gymnax_blines_biases():
    """`network.initialization: lecun`: every dense layer of both MLPs has a
    lecun-normal kernel (std 1/sqrt(fan in)) and biases uniform in [0, 0.05),
    as gymnax-blines' CategoricalSeparateMLP; the default is orthogonal with
    zero biases."""

    def layers(initialization):
        network = S.NetworkSpec(kind="mlp", hidden_sizes=(256, 256), activation="relu", initialization=initialization)
        policy = make_policy(network, num_actions=6, observation_shape=(10, 10, 4))
        params = policy.init(jax.random.key(0), jnp.zeros((10, 10, 4)))["params"]
        return [layer for net in ("actor", "critic") for layer in params[net].values()]

    lecun = layers("lecun")
    assert len(lecun) == 6
    for layer in lecun:
        kernel, bias = np.asarray(layer["kernel"]), np.asarray(layer["bias"])
        assert 0 <= bias.min() and bias.max() < 0.05
        assert bias.size == 1 or bias.std() > 0.005
        if kernel.size > 10_000:  # enough draws to read the scale from
            assert np.std(kernel) == pytest.approx(1 / np.sqrt(kernel.shape[0]), rel=0.05)
    for layer in layers("orthogonal"):
        assert not np.asarray(layer["bias"]).any()
