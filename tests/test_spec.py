"""Specs: defaults, seeds, the canonical hash, printing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError
from support import run_cli

from harness import build
from harness import experiment_spec as S

BASE = """
name: demo
algorithm: reinforce
env: {suite: gymnax, id: CartPole-v1}
seeds: [0, 1, 2]
budget: {env_steps: 10000}
"""


def parse_text(text: str) -> S.ReinforceSpec:
    return S.parse(yaml.safe_load(text), "demo.yaml", text)


def test_defaults_are_filled_in_and_the_model_is_frozen():
    spec = parse_text(BASE)
    assert spec.hyperparameters.num_envs == 16
    assert spec.optimizer.name == "adam"
    assert spec.network.hidden_sizes == (64, 64)
    assert spec.experiment_name == "demo"
    with pytest.raises(ValidationError):
        spec.name = "other"  # type: ignore[misc]


def test_seed_count_and_base_expand_to_a_list():
    spec = parse_text(BASE.replace("seeds: [0, 1, 2]", "seeds: {count: 3, base: 5}"))
    assert spec.seeds == (5, 6, 7)


def test_hash_ignores_key_order_formatting_and_explicit_defaults():
    reordered = """
budget:
    env_steps: 10_000
seeds:
  - 0
  - 1
  - 2
env:
  id: "CartPole-v1"
  suite: gymnax
algorithm: reinforce
name: demo
"""
    explicit = BASE + "hyperparameters: {num_envs: 16, gamma: 0.99, c_rho: null}\noptimizer: {learning_rate: 3.0e-4}\n"
    seeds_as_range = BASE.replace("seeds: [0, 1, 2]", "seeds: {count: 3}")
    hashes = {S.spec_hash(parse_text(t)) for t in (BASE, reordered, explicit, seeds_as_range)}
    assert len(hashes) == 1
    assert len(next(iter(hashes))) == 64


@pytest.mark.parametrize(
    "change",
    [
        ("seeds: [0, 1, 2]", "seeds: [0, 1, 3]"),
        ("env_steps: 10000", "env_steps: 10001"),
        ("id: CartPole-v1", "id: Acrobot-v1"),
        ("name: demo", "name: demo2"),
    ],
)
def test_hash_changes_with_any_value(change):
    assert S.spec_hash(parse_text(BASE)) != S.spec_hash(parse_text(BASE.replace(*change)))


def test_hash_changes_with_a_nested_hyperparameter():
    a = parse_text(BASE + "hyperparameters: {gamma: 0.99}\n")
    b = parse_text(BASE + "hyperparameters: {gamma: 0.98}\n")
    assert S.spec_hash(a) != S.spec_hash(b)


def test_printed_yaml_round_trips_to_the_same_hash():
    spec = parse_text(BASE)
    again = parse_text(S.to_yaml(spec))
    assert again == spec
    assert S.spec_hash(again) == S.spec_hash(spec)


def test_flatten_gives_dotted_string_params():
    flat = S.flatten(S.canonical(parse_text(BASE)))
    assert flat["env.id"] == "CartPole-v1"
    assert flat["hyperparameters.num_envs"] == "16"
    assert flat["seeds"] == "[0, 1, 2]"
    assert flat["hyperparameters.c_rho"] == "null"
    assert all(isinstance(v, str) for v in flat.values())


def test_errors_name_the_key_and_its_line():
    text = BASE + "hyperparameters:\n  num_envs: 10\n  num_minibatches: 4\n  bogus: 1\n"
    with pytest.raises(S.SpecError) as info:
        parse_text(text)
    message = str(info.value)
    assert "demo.yaml: hyperparameters.bogus (line 10): unknown key" in message


@pytest.mark.parametrize("name", ["my run", "a/b", "../x", "..", "x:y", "caf\u00e9", "a\\b"])
def test_a_name_that_is_not_a_safe_identifier_is_refused(name):
    with pytest.raises(S.SpecError) as info:
        parse_text(BASE.replace("name: demo", f"name: {json.dumps(name)}"))
    assert str(info.value).startswith("demo.yaml: name (line 2): "), str(info.value)
    assert "letters, digits, _, - and . only" in str(info.value)


def test_a_safe_name_is_accepted_and_kept():
    assert parse_text(BASE.replace("name: demo", "name: PPO_cartpole-v1.2")).name == "PPO_cartpole-v1.2"


def test_validate_refuses_an_unsafe_name_in_one_message(tmp_path):
    path = tmp_path / "spaced.yaml"
    path.write_text(BASE.replace("name: demo", "name: my run"))
    code, out, err = run_cli("validate", str(path))
    assert code == 2
    assert err.strip().endswith("(it names an MLflow experiment, files and URLs)"), err
    assert f"{path}: name (line 2): 'my run'" in err and err.count(str(path)) == 1, err
    assert "Traceback" not in err + out


def test_batch_rules_are_the_algorithms_and_name_the_key_and_its_line():
    """Minibatches that do not divide the rollout are found when the spec is
    built (the algorithm's own rule), reported like a key's error."""
    text = BASE + "hyperparameters:\n  num_envs: 10\n  num_minibatches: 4\n"
    with pytest.raises(S.SpecError) as info:
        build.build(parse_text(text), "demo.yaml", S.key_lines(text))
    message = str(info.value)
    assert (
        "demo.yaml: hyperparameters.num_minibatches (line 9): num_envs (10) does not divide into num_minibatches (4)"
        in message
    )


RESNET = """
name: demo_az
algorithm: alphazero
env: {suite: pgx, id: tic_tac_toe}
seeds: [0]
budget: {env_steps: 1000}
network: {kind: resnet, num_blocks: 1, num_channels: 8}
"""


def test_conv_gradient_at_its_default_keeps_a_resnet_spec_s_hash():
    """`network.conv_gradient` came after resnet specs were published: left
    at `matmul` (written out or not) the hash is the one they were published
    with; `conv` is another spec; a value it does not take names its key."""
    plain = parse_text(RESNET)
    explicit = parse_text(RESNET.replace("num_channels: 8}", "num_channels: 8, conv_gradient: matmul}"))
    conv = parse_text(RESNET.replace("num_channels: 8}", "num_channels: 8, conv_gradient: conv}"))
    assert "conv_gradient" not in S.canonical(plain)["network"]
    assert S.spec_hash(plain) == S.spec_hash(explicit) != S.spec_hash(conv)
    assert S.canonical(conv)["network"]["conv_gradient"] == "conv"
    with pytest.raises(S.SpecError, match=r"network\.conv_gradient \(line 7\)"):
        parse_text(RESNET.replace("num_channels: 8}", "num_channels: 8, conv_gradient: winograd}"))


GRID = """
name: demo_grid
algorithm: ppo
env: {suite: xminigrid, id: MiniGrid-Empty-5x5, wrappers: [{name: observe_previous_action_reward}]}
seeds: [0]
budget: {env_steps: 100000}
network: {kind: grid_gru, previous_action_reward: true}
"""


def test_conv_gradient_unset_keeps_a_grid_spec_s_hash():
    """The grid agents took `conv_gradient` after their specs were published:
    unset, the hash is theirs; `conv` is another spec; `matmul` (the
    ResNet's form) is refused with its key."""
    plain = parse_text(GRID)
    conv = parse_text(
        GRID.replace("previous_action_reward: true}", "previous_action_reward: true, conv_gradient: conv}")
    )
    assert "conv_gradient" not in S.canonical(plain)["network"]
    assert S.canonical(conv)["network"]["conv_gradient"] == "conv"
    assert S.spec_hash(plain) != S.spec_hash(conv)
    published = S.load(Path(__file__).parents[1] / "experiments" / "ppo_minigrid_empty_6x6.yaml")
    assert "conv_gradient" not in S.canonical(published)["network"]
    with pytest.raises(S.SpecError, match=r"network.*matmul is for kind resnet; grid_gru takes conv"):
        parse_text(
            GRID.replace("previous_action_reward: true}", "previous_action_reward: true, conv_gradient: matmul}")
        )


def test_shuffle_at_its_default_keeps_the_hash():
    """`hyperparameters.shuffle` came after on-policy specs were published."""
    plain = parse_text(BASE)
    explicit = parse_text(BASE + "hyperparameters: {shuffle: permutation}\n")
    feistel = parse_text(BASE + "hyperparameters: {shuffle: feistel}\n")
    assert S.spec_hash(plain) == S.spec_hash(explicit) != S.spec_hash(feistel)
    assert "shuffle" not in S.canonical(plain)["hyperparameters"]


def test_initialization_at_its_default_keeps_the_hash_and_is_for_mlps():
    """`network.initialization` came after specs were published: left at
    `orthogonal` the hash is the published one; `lecun` is another spec; a
    network other than an MLP refuses it, naming the key."""
    plain = parse_text(BASE)
    explicit = parse_text(BASE + "network: {initialization: orthogonal}\n")
    lecun = parse_text(BASE + "network: {initialization: lecun}\n")
    assert "initialization" not in S.canonical(plain)["network"]
    assert S.spec_hash(plain) == S.spec_hash(explicit) != S.spec_hash(lecun)
    with pytest.raises(S.SpecError, match=r"network.*is for kind mlp, not resnet"):
        parse_text(RESNET.replace("num_channels: 8}", "num_channels: 8, initialization: lecun}"))
