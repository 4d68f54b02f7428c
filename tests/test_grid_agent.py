"""The grid agents: the recurrent one (`network: {kind: grid_gru}`) on
xminigrid, and the feed-forward one (`kind: grid`) on MinAtar's binary
channels."""

from __future__ import annotations

import copy

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from support import train_plan

from algorithms.networks import make_policy
from harness import build, envs
from harness import experiment_spec as spec_module
from harness.experiment_spec import NetworkSpec, ObservePreviousActionReward, SpecError
from harness.run import runner
from harness.run.programs import Programs

WRAPPER = ObservePreviousActionReward(name="observe_previous_action_reward")
SMALL = {"gru_size": 16, "hidden_sizes": (16,), "conv_channels": (8, 8), "embedding_size": 4}


def policy_and_observation(**network):
    env, _ = envs.make("xminigrid", "MiniGrid-Empty-6x6", wrappers=(WRAPPER,))
    policy = make_policy(NetworkSpec(kind="grid_gru", **{**SMALL, **network}), env.num_actions, env.observation_shape)
    _, timestep = env.reset(jax.random.key(0))
    obs = timestep.observation
    return policy, policy.init(jax.random.key(1), obs), obs


def outputs(policy, params, obs, carry=None, reset=False):
    carry = policy.initial_carry((1,)) if carry is None else carry
    return policy.apply(params, carry, obs[None], jnp.full((1,), reset))


def test_previous_action_and_reward_reach_the_network():
    policy, params, obs = policy_and_observation(previous_action_reward=True)
    _, logits, value = outputs(policy, params, obs)
    for channel, new in ((-2, 3.0), (-1, 1.0)):  # the previous action, then the previous reward
        changed = obs.at[..., channel].set(new)
        _, other_logits, other_value = outputs(policy, params, changed)
        assert not np.allclose(other_logits, logits) and not np.allclose(other_value, value), channel


def test_the_tiles_colours_and_direction_are_embedded_ids():
    policy, params, obs = policy_and_observation(previous_action_reward=True)
    embedded = params["params"]["GridEncoder_0"]
    assert {f"embed_{i}" for i in range(3)} <= set(embedded)
    _, logits, _ = outputs(policy, params, obs)
    turned = obs.at[..., 2].set((obs[..., 2] + 1) % 4)  # the agent faces another way
    assert not np.allclose(outputs(policy, params, turned)[1], logits)


def test_grid_gru_memory_resets_at_episode_starts():
    policy, params, obs = policy_and_observation()
    memory = jnp.ones((1, SMALL["gru_size"]))
    fresh = outputs(policy, params, obs)
    np.testing.assert_array_equal(outputs(policy, params, obs, memory, reset=True)[1], fresh[1])
    assert not np.allclose(outputs(policy, params, obs, memory, reset=False)[1], fresh[1])


def test_bfloat16_compute_keeps_float32_parameters_memory_and_outputs():
    policy, params, obs = policy_and_observation(compute_dtype="bfloat16")
    assert {leaf.dtype for leaf in jax.tree.leaves(params)} == {jnp.dtype(jnp.float32)}
    carry, logits, value = outputs(policy, params, obs)
    assert carry.dtype == logits.dtype == value.dtype == jnp.float32
    exact, exact_params, _ = policy_and_observation()
    _, exact_logits, exact_value = outputs(exact, exact_params, obs)
    np.testing.assert_allclose(logits, exact_logits, atol=2e-2)
    np.testing.assert_allclose(value, exact_value, atol=2e-2)


TINY_GRID_PPO = {
    "name": "tiny_grid_ppo",
    "algorithm": "ppo",
    "env": {"suite": "xminigrid", "id": "MiniGrid-Empty-5x5", "wrappers": [{"name": "observe_previous_action_reward"}]},
    "seeds": [0],
    "budget": {"env_steps": 30 * 16 * 16},
    # Native-layout convolution gradients, as a new spec would train (both
    # forms agree: test_convolution).
    "network": {
        "kind": "grid_gru",
        "previous_action_reward": True,
        **SMALL,
        "hidden_sizes": [16],
        "conv_gradient": "conv",
    },
    "hyperparameters": {
        "num_envs": 16,
        "num_steps": 16,
        "num_minibatches": 2,
        "update_epochs": 2,
        # A greedy policy of a barely trained agent walks into a wall for
        # the whole episode; sampled actions show what it has learnt.
        "evaluation": {"episodes": 16, "policy": "sample"},
    },
    "optimizer": {"learning_rate": 0.003, "max_grad_norm": 0.5},
    "logging": {"interval": 10},
}


def test_a_tiny_xminigrid_ppo_run_improves_its_eval_return_and_reruns_bit_identically():
    plan = build.build(spec_module.parse(copy.deepcopy(TINY_GRID_PPO)))
    # Native convolutions become grouped ones under a vmap over seeds' kernels.
    assert plan.algorithm.map_seeds
    programs = Programs()
    first = train_plan(plan, programs)
    # A re-run of the first chunk (the same programs) gives its bits again.
    again = runner.run(plan.algorithm, plan.spec.seeds, 10, 10, programs=programs)
    for name, values in again.metrics.items():
        np.testing.assert_array_equal(values, first.metrics[name][:10], err_msg=name)
    for name, values in again.evaluation.items():
        np.testing.assert_array_equal(values, first.evaluation[name][:1], err_msg=name)
    returns = first.evaluation["eval_return"]  # [evaluations, seeds]
    assert first.evaluation_iterations == (10, 20, 30)
    assert returns[-1].mean() > returns[0].mean() + 0.2, returns
    assert first.evaluation["eval_length"][-1].mean() < first.evaluation["eval_length"][0].mean()


def test_the_feed_forward_grid_agent_reads_minatar_channels_as_they_are():
    env, _ = envs.make("gymnax", "Breakout-MinAtar")
    network = NetworkSpec(kind="grid", id_channels=0, conv_channels=(8,), hidden_sizes=(16,), activation="relu")
    policy = make_policy(network, env.num_actions, env.observation_shape)
    obs = env.reset(jax.random.key(0))[1].observation  # [10, 10, 4] of 0 and 1
    params = policy.init(jax.random.key(1), obs)
    assert not policy.recurrent and set(params["params"]) == {"GridEncoder_0", "actor", "critic"}
    assert not any(name.startswith("embed") for name in params["params"]["GridEncoder_0"])
    _, logits, value = policy.apply(params, policy.initial_carry((2,)), jnp.stack([obs, obs]), jnp.zeros(2, bool))
    assert logits.shape == (2, env.num_actions) and value.shape == (2,)
    for channel in range(obs.shape[-1]):  # every channel reaches the output
        moved = obs.at[..., channel].set(1.0 - obs[..., channel])
        other = policy.apply(params, policy.initial_carry(()), moved, jnp.zeros((), bool))[1]
        assert not np.allclose(other, logits[0]), channel


def test_a_tiny_minatar_ppo_run_with_the_grid_agent_trains_and_reruns_bit_identically():
    data = {
        **copy.deepcopy(TINY_GRID_PPO),
        "env": {"suite": "gymnax", "id": "Breakout-MinAtar"},
        "network": {
            "kind": "grid",
            "id_channels": 0,
            "conv_channels": [8],
            "hidden_sizes": [16],
            "conv_gradient": "conv",
        },
        "budget": {"env_steps": 10 * 16 * 16},
        "hyperparameters": {"num_envs": 16, "num_steps": 16, "num_minibatches": 2, "update_epochs": 2},
        "logging": {"interval": 5},
    }
    plan = build.build(spec_module.parse(data))
    programs = Programs()
    first = runner.run(plan.algorithm, plan.spec.seeds, 10, 5, programs=programs)
    again = runner.run(plan.algorithm, plan.spec.seeds, 10, 5, programs=programs)
    for name, values in first.metrics.items():
        assert np.isfinite(values).all(), name
        np.testing.assert_array_equal(again.metrics[name], values, err_msg=name)
    assert np.ptp(first.metrics["loss"]) > 0 and (first.metrics["grad_norm"] > 0).all()


@pytest.mark.parametrize(
    "env,network,key,message",
    [
        ({"suite": "gymnax", "id": "CartPole-v1"}, {}, "network.kind", "grid_gru needs a grid observation"),
        ({"suite": "gymnax", "id": "CartPole-v1"}, {"kind": "grid"}, "network.kind", "grid needs a grid observation"),
        (
            {
                "suite": "xminigrid",
                "id": "MiniGrid-Empty-5x5",
                "wrappers": [{"name": "observe_previous_action_reward"}],
            },
            {"kind": "grid", "previous_action_reward": True},
            "network.previous_a",
            "is for grid_gru",
        ),
        (
            {"suite": "xminigrid", "id": "MiniGrid-Empty-5x5"},
            {"previous_action_reward": True},
            "network.previous_a",
            "wrapper",
        ),
        (
            {"suite": "xminigrid", "id": "MiniGrid-Empty-5x5"},
            {"id_channels": 4},
            "network.id_channels",
            "has 3 channels",
        ),
    ],
    ids=[
        "flat-observation",
        "flat-observation-grid",
        "memory-inputs-without-memory",
        "no-wrapper",
        "too-many-id-channels",
    ],
)
def test_bad_grid_networks_name_their_key(env, network, key, message):
    data = {**copy.deepcopy(TINY_GRID_PPO), "env": env, "network": {"kind": "grid_gru", **network}}
    with pytest.raises(SpecError) as error:
        build.build(spec_module.parse(data))
    assert f": {key}" in str(error.value) and message in str(error.value), str(error.value)


def test_grid_keys_leave_other_networks_hashes_alone():
    data = {**copy.deepcopy(TINY_GRID_PPO), "network": {"kind": "gru"}}
    assert "compute_dtype" not in spec_module.canonical(spec_module.parse(data))["network"]
    data["network"] = {"kind": "grid"}
    kept = spec_module.canonical(spec_module.parse(data))["network"]
    assert {"id_channels", "conv_channels", "compute_dtype"} <= set(kept) and "previous_action_reward" not in kept
