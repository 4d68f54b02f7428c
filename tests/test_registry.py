"""One home per algorithm: the spec models come from `algorithms.registry`,
so an algorithm declared in one module (its typed config, network kinds,
numeric keys and factory) is a spec's `algorithm:` with nothing else to edit;
and spec errors name keys as the user wrote them."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import yaml
from pydantic import Field

import algorithms
from algorithms.base import Algorithm, Registration, single_agent
from algorithms.config import Config
from harness import build, sweep
from harness import experiment_spec as S

TOY = """
name: toy
algorithm: toy_bandit
env: {suite: gymnax, id: CartPole-v1}
seeds: [0, 1]
budget: {env_steps: 64}
hyperparameters: {arms: 3, step_size: 0.5}
"""


class ToyConfig(Config):
    """A gradient bandit over `arms` arms, rewarded 1 for arm 0."""

    arms: int = Field(default=2, gt=1, description="arms to choose from")
    step_size: float = Field(default=0.1, gt=0, description="of the preference update")
    pulls: int = Field(default=8, gt=0, description="pulls per iteration")


class ToyState(NamedTuple):
    preferences: jax.Array  # [arms]
    key: jax.Array


def make_toy(config: ToyConfig, env: Any, *, network: Any, optimizer: optax.GradientTransformation, axis_name=None):
    del env, network, optimizer, axis_name

    def init(key: jax.Array) -> ToyState:
        return ToyState(jnp.zeros(config.arms), key)

    def step(state: ToyState):
        key, pull_key = jax.random.split(state.key)
        probs = jax.nn.softmax(state.preferences)
        arms = jax.random.categorical(pull_key, state.preferences, shape=(config.pulls,))
        reward = (arms == 0).astype(jnp.float32)
        grad = (jax.nn.one_hot(arms, config.arms) - probs) * (reward - reward.mean())[:, None]
        preferences = state.preferences + config.step_size * grad.mean(0)
        return ToyState(preferences, key), {"episode_return": reward.mean(), "p_best": probs[0]}

    return Algorithm(init=init, step=step)


TOY_REGISTRATION = Registration(
    config=ToyConfig,
    factory=make_toy,
    updates_per_step=lambda config: 1,
    env_steps_per_step=lambda config: config.pulls,
    check_env=single_agent("toy_bandit"),
    network_kinds=("mlp",),
    numeric=("step_size",),
)


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(algorithms.registry, "toy_bandit", TOY_REGISTRATION)


def test_a_registered_algorithm_is_a_spec_with_nothing_else_to_edit(toy):
    spec = S.parse(yaml.safe_load(TOY), "toy.yaml", TOY)
    assert isinstance(spec.hyperparameters, ToyConfig)
    assert spec.hyperparameters.arms == 3 and spec.hyperparameters.pulls == 8
    assert build.numeric_keys(spec) == (
        "hyperparameters.step_size",
        "optimizer.learning_rate",
        "optimizer.adam_eps",
    )
    plan = build.build(spec, "toy.yaml")
    assert plan.num_iterations == 64 // 8 and plan.algorithm.env_steps_per_step == 8
    state = plan.algorithm.init(jax.random.key(0))
    for _ in range(plan.num_iterations):
        state, metrics = jax.jit(plan.algorithm.step)(state)
    assert float(metrics["p_best"]) > 1 / 3  # it learns the rewarded arm


def test_its_config_refuses_bad_values_with_file_key_and_line(toy):
    text = TOY.replace("arms: 3", "arms: 1").replace("step_size: 0.5", "step_size: 0.5, pull: 2")
    with pytest.raises(S.SpecError) as error:
        S.parse(yaml.safe_load(text), "toy.yaml", text)
    assert "toy.yaml: hyperparameters.arms (line 7): Input should be greater than 1 (got 1)" in str(error.value)
    assert "toy.yaml: hyperparameters.pull (line 7): unknown key" in str(error.value)


def test_its_network_kinds_are_the_ones_a_spec_may_name(toy):
    text = TOY + "network: {kind: resnet}\n"
    with pytest.raises(S.SpecError, match="network.kind .line 8.: resnet is a network for alphazero; toy_bandit"):
        S.parse(yaml.safe_load(text), "toy.yaml", text)


def test_a_sweep_carries_its_numeric_hyperparameters_in_one_program(toy):
    text = TOY + "sweep: {hyperparameters.step_size: [0.1, 1.0]}\n"
    swept = sweep.make_sweep(S.parse(yaml.safe_load(text), "toy.yaml", text), "toy.yaml")
    assert len(swept.points) == 2 and len(swept.groups) == 1
    group = swept.groups[0]
    np.testing.assert_array_equal(group.numbers["hyperparameters.step_size"], np.float32([0.1, 0.1, 1.0, 1.0]))


@pytest.mark.parametrize(
    ("sweep_section", "expected"),
    [
        (
            "{optimizer.learning_rate: {low: 1.0, high: 0.1}}",
            ["sweep.optimizer.learning_rate (line 8): high (0.1) is below low (1.0)"],
        ),
        (
            "{hyperparameters.gamma: {low: 0.9, hight: 0.99}}",
            [
                "sweep.hyperparameters.gamma.high (line 8): required key is missing",
                "sweep.hyperparameters.gamma.hight (line 8): unknown key",
            ],
        ),
    ],
)
def test_sweep_errors_name_the_keys_as_written(sweep_section, expected):
    text = TOY.replace("toy_bandit", "ppo").replace("{arms: 3, step_size: 0.5}", "{}") + f"sweep: {sweep_section}\n"
    with pytest.raises(S.SpecError) as error:
        S.parse(yaml.safe_load(text), "toy.yaml", text)
    assert str(error.value).splitlines() == [f"toy.yaml: {line}" for line in expected]


def test_published_specs_name_only_registered_algorithms():
    assert set(S.spec_models()) == set(algorithms.registry) == {"alphazero", "ppo", "reinforce"}
    for name, registration in algorithms.registry.items():
        model = S.spec_models()[name]
        assert model.model_fields["hyperparameters"].annotation is registration.config
        assert model.model_fields["network"].default.kind == registration.network_kinds[0]
