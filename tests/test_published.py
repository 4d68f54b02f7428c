"""Every published spec has a reference made by running it, and the
reference shows what the spec's comment claims."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness import spec as S

ROOT = Path(__file__).resolve().parent.parent
SPECS = sorted((ROOT / "experiments").glob("*.yaml"))


def reference(stem: str) -> dict:
    return json.loads((ROOT / "results" / f"{stem}.json").read_text())


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_reference_was_made_from_this_spec(path):
    ref = reference(path.stem)
    loaded = S.load(path)
    assert ref["spec_hash"] == S.spec_hash(loaded), "the spec changed since its reference was published"
    assert ref["seeds"] == list(loaded.seeds)
    assert set(ref["per_seed_final"]) == {str(s) for s in loaded.seeds}
    assert ref["git"]["dirty"] == "false", "references come from runs of committed code"
    assert ref["mlflow_run_id"]


def test_reinforce_cartpole_claim():
    assert reference("reinforce_cartpole")["final"]["episode_return"] >= 400


def test_ppo_cartpole_claim():
    finals = [v["episode_return"] for v in reference("ppo_cartpole")["per_seed_final"].values()]
    assert sum(f >= 475 for f in finals) > len(finals) / 2, finals


def test_gru_beats_the_feed_forward_policy_on_masked_cartpole():
    gru = reference("ppo_gru_cartpole_masked")["final"]["episode_return"]
    mlp = reference("ppo_mlp_cartpole_masked")["final"]["episode_return"]
    assert gru > 2 * mlp, (gru, mlp)


def test_ppo_game2048_learns_well_above_a_random_policy():
    ref = reference("ppo_game2048")
    random_score = ref["baselines"]["random_policy"]["mean_return"]
    assert ref["final"]["episode_return"] > 2 * random_score


def test_alphazero_tic_tac_toe_claim():
    ref = reference("alphazero_tic_tac_toe")
    for seed, final in ref["per_seed_final"].items():
        assert final["eval_random_loss"] <= 0.05, (seed, final["eval_random_loss"])
        # Against itself: the best earlier parameters, and in self-play.
        assert final["eval_best_draw"] >= 0.9, (seed, final["eval_best_draw"])
        assert final["draw_rate"] >= 0.8, (seed, final["draw_rate"])


def test_alphazero_connect_four_claim():
    ref = reference("alphazero_connect_four")
    for seed, final in ref["per_seed_final"].items():
        assert final["eval_random_win"] >= 0.9, (seed, final["eval_random_win"])


def test_alphazero_othello_reference_records_its_evaluation():
    ref = reference("alphazero_othello")
    for name in ("eval_random_win", "eval_greedy_win", "elo", "loss"):
        assert name in ref["final"]
    assert ref["evaluation_curves"]["env_steps"]


def test_alphazero_knapsack_claim():
    """The set network's AlphaZero ends above greedy one-ply (return, and
    its gap to each instance's optimum: half of greedy's), and it learns:
    at the first evaluation it is far from the optimum."""
    ref = reference("alphazero_knapsack")
    final = ref["final"]
    assert final["eval_return"] > final["eval_greedy_return"] > final["eval_random_return"] > 0
    assert final["eval_optimality_gap"] < 0.03 < final["eval_greedy_optimality_gap"]
    first = np.mean([curve[0] for curve in ref["evaluation_curves"]["metrics"]["eval_optimality_gap"].values()])
    assert first > 3 * final["eval_optimality_gap"]
    assert ref["spec"]["network"]["kind"] == "item_set"
    assert ref["baselines"]["random_policy"]["mean_return"] > 0
    assert ref["speed"]["wall_seconds"] < 30 * 60


def test_ppo_minigrid_empty_6x6_claim():
    ref = reference("ppo_minigrid_empty_6x6")
    finals = [v["eval_return"] for v in ref["per_seed_final"].values()]
    assert min(finals) >= 0.9, finals
    assert ref["baselines"]["random_policy"]["mean_return"] < 0.5
    first = [curve[0] for curve in ref["evaluation_curves"]["metrics"]["eval_return"].values()]
    assert max(first) < 0.5, first


def test_ppo_minigrid_doorkey_5x5_claim():
    ref = reference("ppo_minigrid_doorkey_5x5")
    finals = [v["eval_return"] for v in ref["per_seed_final"].values()]
    assert sum(f >= 0.9 for f in finals) > len(finals) / 2, finals
    assert ref["baselines"]["random_policy"]["mean_return"] < 0.1
    first = [curve[0] for curve in ref["evaluation_curves"]["metrics"]["eval_return"].values()]
    assert max(first) < 0.5, first
    assert ref["speed"]["wall_seconds"] < 20 * 60


def test_ppo_minatar_breakout_claim():
    ref = reference("ppo_minatar_breakout")
    assert ref["final"]["episode_return"] >= 30, ref["final"]["episode_return"]
    assert ref["baselines"]["random_policy"]["mean_return"] < 1


def test_ppo_brax_inverted_pendulum_claim():
    ref = reference("ppo_brax_inverted_pendulum")
    assert ref["final"]["episode_return"] >= 900, ref["final"]["episode_return"]
    assert ref["env_steps_per_seed"] <= 1_000_000
    assert ref["baselines"]["random_policy"]["mean_return"] < 100


def test_ppo_pendulum_claim():
    ref = reference("ppo_pendulum")
    assert ref["final"]["episode_return"] > -300, ref["final"]["episode_return"]
    assert ref["baselines"]["random_policy"]["mean_return"] < -1000
