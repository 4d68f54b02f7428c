"""An anchored Elo ladder (algorithms.alphazero.anchors and .ladder,
harness.judge.ladder, `harness ladder`): the newcomer's rating and interval
against a brute-force likelihood, the anchors' fit against known ratings,
the playout anchor against random play, and a spec's `strength:` section as
a user runs it, bad input included."""

from __future__ import annotations

import copy
import hashlib
import json

import jax
import numpy as np
import pytest
from mlflow import MlflowClient
from support import TINY_AZ, new_store, run_cli, write_spec

from algorithms.alphazero.anchors import anchor_player
from algorithms.alphazero.config import check_anchor
from algorithms.alphazero.ladder import CHI2_95, rate
from algorithms.alphazero.opponents import play
from harness import envs
from harness import experiment_spec as S
from harness.judge import ladder


def _log_likelihood(r, scores, games, ratings):
    p = 1 / (1 + 10 ** (-(r[:, None] - ratings[None, :]) / 400))
    return (scores * np.log(p) + (games - scores) * np.log(1 - p)).sum(axis=1)


def test_a_newcomer_gets_the_maximum_likelihood_rating_and_the_likelihood_ratio_interval():
    ratings, games, scores = np.array([0.0, 150.0, 400.0]), np.array([64.0, 64.0, 64.0]), np.array([58.0, 41.5, 12.0])
    best, low, high = (float(v) for v in jax.jit(rate)(scores, games, ratings))
    grid = np.arange(-1000.0, 1500.0, 0.25)
    ll = _log_likelihood(grid, scores, games, ratings)
    inside = grid[2 * (ll.max() - ll) <= CHI2_95]
    assert best == pytest.approx(grid[ll.argmax()], abs=0.5)
    assert low == pytest.approx(inside.min(), abs=0.5) and high == pytest.approx(inside.max(), abs=0.5)
    assert low < best < high and high - low < 250


def test_a_clean_sweep_is_rated_beyond_the_top_anchor_not_at_infinity():
    ratings, games = np.array([0.0, 300.0]), np.array([32.0, 32.0])
    best, low, high = (float(v) for v in rate(games, games, ratings))
    assert 300 < low < best < high < 300 + 4000


def test_the_anchors_ratings_are_recovered_from_a_tournament():
    truth = {"random": 0.0, "greedy": 150.0, "playouts_8": 450.0, "playouts_32": 700.0}
    names, rng, pairs = list(truth), np.random.default_rng(0), []
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            p = 1 / (1 + 10 ** (-(truth[first] - truth[second]) / 400))
            wins = int(rng.binomial(4000, p))
            pairs.append(ladder.PairResult(first=first, second=second, wins=wins, draws=0, losses=4000 - wins))
    fitted = ladder.fit(names, pairs)
    assert fitted["random"].rating == 0 and fitted["random"].standard_error == 0
    for name in names[1:]:
        assert 0 < fitted[name].standard_error < 40
        assert abs(fitted[name].rating - truth[name]) < 3 * fitted[name].standard_error


def test_a_tournament_with_no_finite_ratings_is_refused():
    pairs = [
        ladder.PairResult(first="random", second="greedy", wins=3, draws=0, losses=13),
        ladder.PairResult(first="random", second="playouts_8", wins=0, draws=0, losses=16),
        ladder.PairResult(first="greedy", second="playouts_8", wins=0, draws=0, losses=16),
    ]
    with pytest.raises(ladder.LadderError, match="never scored.*against playouts_8"):
        ladder.fit(["random", "greedy", "playouts_8"], pairs)


@pytest.mark.parametrize(
    "name, fragment",
    [("playouts_0", "1 to 4096"), ("playouts_5000", "1 to 4096"), ("minimax", "not an anchor"), ("playouts", "not an")],
)
def test_anchor_names_out_of_range_are_refused(name, fragment):
    assert check_anchor("playouts_64") == "playouts_64" and check_anchor("greedy") == "greedy"
    with pytest.raises(ValueError, match=fragment):
        check_anchor(name)


def test_playout_search_beats_random_play():
    env = envs.make("pgx", "connect_four")[0]
    searcher, random = anchor_player(env, "playouts_32"), anchor_player(env, "random")
    totals = np.asarray(jax.jit(lambda key: play(env, key, 32, searcher, random))(jax.random.key(0)))
    assert (totals > 0).sum() >= 26, totals  # about 90% (58 of 64 measured)


@pytest.fixture
def strength_spec(tmp_path, monkeypatch):
    """The tiny AlphaZero spec asking for perfect play and a three-anchor
    ladder, in a folder of its own (its ladder in results/ladders/ there)."""
    monkeypatch.chdir(tmp_path)
    data = copy.deepcopy(TINY_AZ)
    data["strength"] = {"perfect_play": True, "anchors": ["random", "greedy", "playouts_2"], "games": 8}
    return data


def test_a_run_is_rated_on_the_committed_ladder(tmp_path, strength_spec):
    path = write_spec(tmp_path, strength_spec)
    without = {k: v for k, v in strength_spec.items() if k != "strength"}
    assert S.spec_hash(S.load(path)) == S.spec_hash(S.parse(without)), "strength: is not in the spec hash"
    code, out, err = run_cli("run", str(path), "--tracking-uri", new_store(tmp_path), "--no-progress")
    assert code == 2 and "strength.anchors" in err and "harness ladder" in err, err

    code, out, err = run_cli("ladder", str(path), "--games", "16")
    assert code == 0, err
    record = json.loads((tmp_path / "results" / "ladders" / "pgx-tic_tac_toe.json").read_text())
    assert record["anchors"]["random"]["rating"] == 0 and len(record["pairs"]) == 3
    assert all(p["wins"] + p["draws"] + p["losses"] == 16 for p in record["pairs"])
    assert "playouts_2 v" in out or "v playouts_2" in out

    results = tmp_path / "results.json"
    uri = new_store(tmp_path)
    code, out, err = run_cli("run", str(path), "--tracking-uri", uri, "--no-progress", "--results-out", str(results))
    assert code == 0, err
    record = json.loads(results.read_text())
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(strength_spec["name"])
    runs = client.search_runs([experiment.experiment_id])
    digest = hashlib.sha256((tmp_path / "results" / "ladders" / "pgx-tic_tac_toe.json").read_bytes()).hexdigest()
    assert len(runs) == 3 and all(run.data.tags["strength.ladder_sha256"] == digest for run in runs)
    assert json.loads(runs[0].data.tags["strength"])["anchors"] == ["random", "greedy", "playouts_2"]
    finals = record["per_seed_final"]
    for seed in ("0", "1"):
        final = finals[seed]
        assert final["ladder_elo_low"] <= final["ladder_elo"] <= final["ladder_elo_high"]
        assert {"ladder_score_random", "ladder_score_greedy", "ladder_score_playouts_2", "perfect_loss"} <= set(final)


BAD_STRENGTH = {
    "anchor out of range": ({"anchors": ["random", "playouts_0"]}, "tic_tac_toe", "strength.anchors", "1 to 4096"),
    "unknown anchor": ({"anchors": ["random", "alphabeta"]}, "tic_tac_toe", "strength.anchors", "not an anchor"),
    "no committed ladder": ({"anchors": ["random", "greedy"]}, "connect_four", "strength.anchors", "harness ladder"),
    "perfect play of an unsolved game": (
        {"perfect_play": True},
        "connect_four",
        "strength.perfect_play",
        "not solved here",
    ),
    "odd games": ({"perfect_play": True, "games": 7}, "tic_tac_toe", "strength", "even"),
    "nothing asked": ({"games": 8}, "tic_tac_toe", "strength", "ask for perfect_play"),
}


@pytest.mark.parametrize("case", list(BAD_STRENGTH), ids=list(BAD_STRENGTH))
def test_bad_strength_gets_one_line_naming_the_key(tmp_path, monkeypatch, case):
    monkeypatch.chdir(tmp_path)
    strength, game, key, fragment = BAD_STRENGTH[case]
    data = copy.deepcopy(TINY_AZ)
    data["env"]["id"] = game
    data["strength"] = strength
    path = write_spec(tmp_path, data)
    code, out, err = run_cli("run", str(path), "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", "--no-progress")
    assert code == 2 and str(path) in err and key in err and fragment in err, err
    assert "Traceback" not in err + out and not (tmp_path / "mlflow.db").exists()


def test_an_algorithm_without_a_strength_section_refuses_one(tmp_path, tiny_spec_data):
    path = write_spec(tmp_path, {**tiny_spec_data, "strength": {"perfect_play": True}})
    code, out, err = run_cli("validate", str(path))
    assert code == 2 and "strength" in err and "Traceback" not in err, err


def test_a_ladder_of_a_one_player_game_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = copy.deepcopy(TINY_AZ)
    data["env"] = {"suite": "jumanji", "id": "Knapsack-v1"}
    data["strength"] = {"anchors": ["random", "greedy"]}
    code, out, err = run_cli("ladder", str(write_spec(tmp_path, data)))
    assert code == 2 and "strength.anchors" in err and "two-player" in err, err
