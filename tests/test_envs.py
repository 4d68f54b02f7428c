"""One API test that every adapted env passes, plus auto-reset checks."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import jax
import numpy as np
import pytest

from algorithms.base import random_step
from harness import envs

ENVS = [
    ("gymnax", "CartPole-v1"),
    ("gymnax", "Acrobot-v1"),
    ("gymnax", "Breakout-MinAtar"),
    ("gymnax", "Pendulum-v1"),
    ("gymnax", "MountainCarContinuous-v0"),
    ("jumanji", "Snake-v1"),
    ("jumanji", "Game2048-v1"),
    ("jumanji", "Knapsack-v1"),
    ("pgx", "tic_tac_toe"),
    ("pgx", "connect_four"),
    ("pgx", "othello"),
    ("xminigrid", "MiniGrid-Empty-6x6"),
    ("brax", "inverted_pendulum"),
]
NUM_ENVS, NUM_STEPS = 4, 64


def random_rollout(env, seed=0):
    """NUM_STEPS steps of NUM_ENVS envs with uniformly random legal actions."""

    def step(carry, key):
        state, ts = carry
        action, state, next_ts = random_step(env, state, ts, key)
        return (state, next_ts), (ts, action, next_ts)

    @jax.jit
    def rollout(key):
        reset_key, key = jax.random.split(key)
        carry = jax.vmap(env.reset)(jax.random.split(reset_key, NUM_ENVS))
        return jax.lax.scan(step, carry, jax.random.split(key, NUM_STEPS))[1]

    return jax.device_get(rollout(jax.random.key(seed)))


@pytest.mark.parametrize("suite,env_id", ENVS, ids=[f"{s}/{e}" for s, e in ENVS])
def test_env_api(suite, env_id):
    env, info = envs.make(suite, env_id)
    check_env_api(env, info)
    if suite != "xminigrid" and not env_id.endswith("MinAtar"):  # ids without a version; the library's pins them
        assert info.env_version, "every adapted env here has a version of its own"


def check_env_api(env, info):
    before, action, after = random_rollout(env)
    assert before.observation.shape == (NUM_STEPS, NUM_ENVS, *env.observation_shape)
    assert before.observation.dtype == np.float32
    assert before.legal_action_mask.shape == (NUM_STEPS, NUM_ENVS, env.num_actions)
    assert before.legal_action_mask.dtype == bool
    assert before.legal_action_mask.any(-1).all(), "every state has a legal action"
    if env.discrete_actions:  # random legal actions are legal
        assert np.take_along_axis(before.legal_action_mask, action[..., None], -1).all()
    else:  # random continuous actions are within the bounds
        low, high = env.action_bounds
        assert action.shape == (NUM_STEPS, NUM_ENVS, env.num_actions)
        assert (low <= action).all() and (action <= high).all() and (low < high).all()
    assert after.reward.shape == (NUM_STEPS, NUM_ENVS, env.num_players)
    assert after.reward.dtype == np.float32
    assert after.terminated.dtype == bool and after.truncated.dtype == bool
    assert not (after.terminated & after.truncated).any()
    assert ((0 <= after.current_player) & (after.current_player < env.num_players)).all()
    assert np.isfinite(after.observation).all() and np.isfinite(after.reward).all()
    assert info.library_version == importlib.metadata.version(info.suite)
    return before, action, after


def test_cartpole_auto_resets_to_a_fresh_state():
    env, _ = envs.make("gymnax", "CartPole-v1")
    _, _, after = random_rollout(env)
    done = after.terminated | after.truncated
    assert done.any(), "random CartPole episodes end within 64 steps"
    # A fresh CartPole state has every component within 0.05 of zero.
    assert (np.abs(after.observation[done]) <= 0.05).all()
    assert after.reward[done].sum() == done.sum(), "the last step of an episode is rewarded"


def test_tic_tac_toe_auto_resets_to_an_empty_board_and_reports_the_result():
    env, _ = envs.make("pgx", "tic_tac_toe")
    _, _, after = random_rollout(env)
    ended = after.terminated
    assert ended.any()
    assert (after.observation[ended] == 0).all(), "the next board is empty"
    assert after.legal_action_mask[ended].all(), "every square is free again"
    assert (after.current_player[ended] >= 0).all()
    # Zero-sum: the two players' rewards cancel, and a finished game pays out
    # to someone unless it is a draw.
    np.testing.assert_array_equal(after.reward.sum(-1), 0)
    assert (after.reward[~ended] == 0).all()


def test_knapsack_uses_the_action_mask():
    env, _ = envs.make("jumanji", "Knapsack-v1")
    before, _, after = random_rollout(env)
    assert (~before.legal_action_mask).any(), "items already packed or too heavy are masked"
    assert after.terminated.any()


def test_observe_legal_actions_appends_the_mask_to_the_observation():
    from harness.experiment_spec import ObserveLegalActions

    plain, _ = envs.make("jumanji", "Knapsack-v1")
    env, _ = envs.make("jumanji", "Knapsack-v1", wrappers=(ObserveLegalActions(name="observe_legal_actions"),))
    assert env.observation_shape == (plain.observation_shape[0] + plain.num_actions,)
    ts, _, after = random_rollout(env)
    base = random_rollout(plain)[0]
    np.testing.assert_array_equal(ts.observation[..., : plain.observation_shape[0]], base.observation)
    np.testing.assert_array_equal(ts.observation[..., plain.observation_shape[0] :], ts.legal_action_mask)
    # After an auto-reset the mask observed is the new episode's.
    np.testing.assert_array_equal(after.observation[..., plain.observation_shape[0] :], after.legal_action_mask)
    with pytest.raises(ValueError, match="needs a flat observation"):
        envs.make("pgx", "tic_tac_toe", wrappers=(ObserveLegalActions(name="observe_legal_actions"),))


def test_continuous_gymnax_env_reports_its_action_space():
    env, _ = envs.make("gymnax", "Pendulum-v1")
    assert not env.discrete_actions and env.num_actions == 1


@pytest.mark.parametrize(
    "suite,env_id,expect",
    [("gymnax", "CartPole-v2", "CartPole-v1"), ("pgx", "tictactoe", "tic_tac_toe"), ("jumanji", "Snake", "Snake-v1")],
)
def test_unknown_env_suggests_the_nearest(suite, env_id, expect):
    with pytest.raises(envs.UnknownEnvError, match=expect):
        envs.make(suite, env_id)


# ------------------------------------------------------------------ xminigrid


def write_ruleset_file(path, count: int = 2) -> None:
    """An xminigrid benchmark file of `count` rulesets, in xminigrid's own
    format: "pick up the ball" (ruleset i: a ball of colour i + 1), no rules."""
    from xminigrid.benchmarks import save_bz2_pickle
    from xminigrid.core.constants import TILES_REGISTRY, Tiles
    from xminigrid.core.goals import AgentHoldGoal
    from xminigrid.core.rules import EmptyRule

    balls = [TILES_REGISTRY[Tiles.BALL, i + 1] for i in range(count)]
    save_bz2_pickle(
        {
            "goals": np.stack([np.asarray(AgentHoldGoal(tile=ball).encode()) for ball in balls]),
            "rules": np.stack([np.asarray(EmptyRule().encode())[None] for _ in balls]),
            "init_tiles": np.stack([np.asarray(ball)[None] for ball in balls]),
            "num_rules": np.zeros(count, np.uint8),
        },
        str(path),
    )


def test_minigrid_observes_tiles_colours_and_direction():
    env, info = envs.make("xminigrid", "MiniGrid-Empty-6x6")
    assert env.observation_shape[-1] == 3 and env.num_actions == 6
    before, _, after = random_rollout(env)
    grid = before.observation
    assert (grid == np.round(grid)).all() and grid.min() >= 0
    # The direction channel holds one direction (0-3) over the whole view.
    direction = grid[..., 2]
    assert set(np.unique(direction)) <= {0, 1, 2, 3}
    assert (direction == direction[..., :1, :1]).all()
    # An episode ends by reaching the goal (rewarded) or by the time limit.
    assert (after.reward[after.terminated] > 0).all() and (after.reward[~after.terminated] == 0).all()


def test_xland_takes_its_ruleset_from_a_local_file(tmp_path):
    import hashlib

    path = tmp_path / "rulesets.pkl.bz2"
    write_ruleset_file(path)
    kwargs = {"ruleset_file": str(path), "ruleset_index": 1, "max_steps": 32}
    env, info = envs.make("xminigrid", "XLand-MiniGrid-R1-9x9", kwargs)
    _, _, after = check_env_api(env, info)
    assert info.env_version == f"ruleset {hashlib.sha256(path.read_bytes()).hexdigest()[:12]}#1"
    assert after.truncated.any(), "random play rarely picks the ball up within 32 steps"


@pytest.mark.parametrize(
    "env_id,kwargs,key,message",
    [
        ("XLand-MiniGrid-R1-9x9", {}, "env.kwargs.ruleset_file", "needs a ruleset: a local xminigrid benchmark file"),
        ("XLand-MiniGrid-R1-9x9", {"ruleset_file": "no/such.pkl"}, "env.kwargs.ruleset_file", "no such ruleset file"),
        ("XLand-MiniGrid-R1-9x9", {"ruleset_file": "NOT_A_RULESET"}, "env.kwargs.ruleset_file", "not an xminigrid"),
        ("XLand-MiniGrid-R1-9x9", {"ruleset_file": "RULESET", "ruleset_index": 5}, "env.kwargs.ruleset_index", "has 2"),
        ("MiniGrid-Empty-6x6", {"ruleset_file": "RULESET"}, "env.kwargs.ruleset_file", "takes no ruleset"),
        ("MiniGrid-Empty-6x6", {"no_such_param": 1}, "env.kwargs", "MiniGrid-Empty-6x6"),
        ("MiniGrid-Emtpy-6x6", {}, "env.id", "did you mean 'MiniGrid-Empty-6x6'?"),
    ],
    ids=["no-ruleset", "missing-file", "not-a-ruleset", "bad-index", "ruleset-on-minigrid", "bad-param", "unknown-id"],
)
def test_bad_xminigrid_specs_name_their_key(tmp_path, env_id, kwargs, key, message):
    from harness import build
    from harness import experiment_spec as spec_module
    from harness.experiment_spec import SpecError

    write_ruleset_file(tmp_path / "ruleset.pkl.bz2")
    (tmp_path / "garbage.pkl.bz2").write_bytes(b"not a bz2 pickle")
    files = {"RULESET": str(tmp_path / "ruleset.pkl.bz2"), "NOT_A_RULESET": str(tmp_path / "garbage.pkl.bz2")}
    kwargs = {k: files.get(v, v) if isinstance(v, str) else v for k, v in kwargs.items()}
    data = {
        "name": "bad_xminigrid",
        "algorithm": "ppo",
        "env": {"suite": "xminigrid", "id": env_id, "kwargs": kwargs},
        "seeds": [0],
        "budget": {"env_steps": 1024},
        "hyperparameters": {"num_envs": 4, "num_steps": 16},
    }
    with pytest.raises(SpecError) as error:
        build.build(spec_module.parse(data))
    assert f": {key}" in str(error.value) and message in str(error.value), str(error.value)


def test_gymnax_drawing_modules_load_on_first_use_only():
    # A fresh interpreter: this one may have imported them already.
    script = """
import sys
from harness.envs import make
make("gymnax", "Breakout-MinAtar", {})
print(type(sys.modules["seaborn"]).__name__, type(sys.modules["matplotlib.pyplot"]).__name__)
import seaborn, matplotlib.pyplot as plt
print(len(seaborn.color_palette("cubehelix", 3)), callable(plt.subplots), type(sys.modules["seaborn"]).__name__)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["_Deferred", "_Deferred", "3", "True", "module"]
