"""Devices: the same curves on 1, 2 and 4 (simulated CPU) devices for every
algorithm, and the same bits on every exact layout (tests/device_runs.py).

Simulated devices need XLA_FLAGS before JAX starts, so the multi-device runs
happen in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from device_runs import LAYOUTS, is_exact
from support import EXACT_XLA_FLAGS, TEST_XLA_FLAGS, background_result, device_env

ROOT = Path(__file__).resolve().parent.parent

# Relative difference allowed between layouts: float reductions (psum,
# all-gather then mean) add in another order. Metrics that pass through
# zero (a policy loss with normalised advantages) are compared at an
# absolute 1e-6 instead.
RTOL, ATOL = 1e-5, 1e-6


def _device_runs(*args: str, flags: str) -> dict:
    out = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "device_runs.py"), *args],
        env=device_env(4, flags),
        capture_output=True,
        text=True,
        # Several minutes alone on a 2-core CPU, compiles mostly; beside the
        # rest of the suite on the other core, twice that.
        timeout=1800,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def run_layouts(tmp_path_factory) -> dict:
    """Every algorithm's tiny spec on the plain path and on meshes of 1, 2
    and 4 devices (data-parallel, and seeds split as well), compiled as the
    suite compiles."""
    del tmp_path_factory
    return _device_runs(flags=TEST_XLA_FLAGS)


def run_exact_layouts(tmp_path_factory) -> dict:
    """The exact layouts' specs on the plain path and on 4 devices, compiled
    as users compile them (support.processes.EXACT_XLA_FLAGS): programs that
    differ, whose bits must not."""
    del tmp_path_factory
    return _device_runs("exact", flags=EXACT_XLA_FLAGS)


@pytest.fixture(scope="module")
def layouts_run():
    return background_result("layouts_run")


@pytest.fixture(scope="module")
def exact_layouts_run():
    return background_result("exact_layouts_run")


def _differences(curves: dict[str, list], reference: dict[str, list]) -> list[str]:
    assert curves.keys() == reference.keys()
    bad = []
    for name in reference:
        a, b = np.asarray(curves[name]), np.asarray(reference[name])
        if not np.allclose(a, b, rtol=RTOL, atol=ATOL):
            rel = np.abs(a - b) / np.maximum(np.abs(b), ATOL / RTOL)
            bad.append(f"{name}: max relative difference {rel.max():.2e}")
    return bad


@pytest.mark.parametrize(
    "algorithm, layout",
    [
        (name, layout)
        for name, layouts in LAYOUTS.items()
        for layout in layouts
        if layout not in ("plain", "1x1") and not is_exact(name)
    ],
)
def test_same_curves_on_1_2_and_4_devices(layouts_run, algorithm, layout):
    runs = layouts_run[algorithm]
    reference = runs["1x1"]
    assert len(next(iter(reference.values()))) >= 4  # iterations were run
    assert _differences(runs[layout], reference) == []


def test_one_device_mesh_matches_the_plain_program(layouts_run):
    """A one-device mesh computes what plain jit does, bit for bit: an axis of
    one device is no axis (`algorithms.parallel`). Two programs compiled
    apart, so also a re-run. (AlphaZero's and REINFORCE's plain programs
    are checked against 4 devices, bit for bit, on the exact layouts.)"""
    runs = layouts_run["ppo"]
    assert _differences(runs["1x1"], runs["plain"]) == []
    assert runs["1x1"] == runs["plain"]


def test_knapsack_with_mctx_s_search_runs_on_a_mesh(layouts_run):
    """The published Knapsack spec's search (mctx's) with ranked rewards
    and the set network, on a one-device mesh: every figure finite, games
    finished by the last iteration pack something, the ranked-reward
    threshold is tracked, and no evaluation packing beats its optimum."""
    run = {name: np.asarray(values) for name, values in layouts_run["alphazero_knapsack"]["1x1"].items()}
    assert {"episode_return", "ranked_threshold", "loss", "eval/eval_optimum"} <= set(run)
    assert len(run["loss"]) == 4 and all(np.isfinite(values).all() for values in run.values())
    assert np.all(run["games_finished"][-1] > 0) and np.all(run["episode_return"][-1] > 0)
    assert np.all(run["eval/eval_optimum"] >= run["eval/eval_return"] - 1e-6)
    assert not np.array_equal(run["loss"][:, 0], run["loss"][:, 1])


def _same_bits_on_every_layout(runs: dict[str, dict], iterations: int) -> dict[str, list]:
    """Every layout's curves (`iterations` of them) are the plain program's,
    bit for bit, and its seeds differ; returns the plain program's curves."""
    reference = runs["plain"]
    assert len(reference["loss"]) == iterations
    for layout, curves in runs.items():
        assert curves == reference, layout
    loss = np.asarray(reference["loss"])
    assert not np.array_equal(loss[:, 0], loss[:, 1])
    return reference


@pytest.mark.parametrize("algorithm", ["ppo_gru_exact", "reinforce_exact", "reinforce_exact_normalized"])
def test_exact_layouts_train_the_same_bits_on_1_and_4_devices(exact_layouts_run, algorithm):
    """`devices.shards`: whole runs (64 iterations, each of several
    minibatch updates, gradient clipping and an annealed learning rate),
    every metric of every iteration bit-identical on the plain program (8
    logical shards on one device) and on a mesh of 4 data-parallel devices
    (2 shards each). Each layout is a program compiled apart, most of this
    test's time."""
    reference = _same_bits_on_every_layout(exact_layouts_run[algorithm], 64)
    # Not a run that stands still: it learns.
    assert np.mean(reference["episode_length"][-8:]) > np.mean(reference["episode_length"][:8])


@pytest.mark.parametrize("algorithm", ["alphazero_exact", "alphazero_knapsack_exact"])
def test_alphazero_exact_layouts_train_the_same_bits(exact_layouts_run, algorithm):
    """AlphaZero on an exact layout: self-play, training and evaluation,
    every metric of every iteration (32) bit-identical on the plain program
    (8 logical shards on one device) and on 4 data devices (2 each), with
    the batched search: tic-tac-toe with an MLP, and Knapsack with the set
    network and ranked rewards, whose returns are real numbers."""
    reference = _same_bits_on_every_layout(exact_layouts_run[algorithm], 32)
    assert any(name.startswith("eval/") for name in reference)


def test_seeds_differ_from_each_other(layouts_run):
    """The check above would pass for a layout that ran one seed twice."""
    loss = np.asarray(layouts_run["ppo"]["2x2"]["loss"])
    assert not np.allclose(loss[:, 0], loss[:, 1])


def test_single_player_knapsack_with_ranked_rewards(exact_layouts_run):
    """AlphaZero on jumanji's Knapsack (one player, ranked rewards, the set
    network), as the exact layouts trained it (32 iterations), judged
    against each evaluation instance's optimum."""
    run = {name: np.asarray(values) for name, values in exact_layouts_run["alphazero_knapsack_exact"]["plain"].items()}
    assert {"episode_return", "ranked_threshold"} <= set(run)
    assert {name for name in run if name.startswith("eval/")} == {
        "eval/eval_return",
        "eval/eval_random_return",
        "eval/eval_greedy_return",
        "eval/eval_optimum",
        "eval/eval_optimality_gap",
        "eval/eval_random_optimality_gap",
        "eval/eval_greedy_optimality_gap",
    }
    # Knapsack episodes end when no item fits; returns are positive values.
    assert np.all(run["episode_return"][-1] > 0)
    assert np.all(run["eval/eval_greedy_return"] > 0)
    # No packing beats the optimum (`eval_optimum` is that of the agent's
    # instances; each player's gap is to its own); random play is far from
    # it, greedy close.
    assert np.all(run["eval/eval_optimum"] >= run["eval/eval_return"] - 1e-6)
    for who in ("", "random_", "greedy_"):
        gap = run[f"eval/eval_{who}optimality_gap"]
        assert np.all((gap >= -1e-6) & (gap < 1)), who
    assert np.all(run["eval/eval_random_optimality_gap"] > run["eval/eval_greedy_optimality_gap"])


BACKGROUND = {"layouts_run": run_layouts, "exact_layouts_run": run_exact_layouts}
