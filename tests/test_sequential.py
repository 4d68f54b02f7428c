"""The claims' sequential tests (harness.stats.sequential, levels, errors)
as pure numpy on simulated seeds: false-failure rates that hold for seeds of
any shape, alpha split over a spec's claims, power, the seeds they take, and
the claims and options they refuse."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError
from support import TINY_SPEC, run_cli
from support.draws import claim_of, rare_failures, share_of, two_clusters

from harness import experiment_spec as S
from harness.judge import errors, levels
from harness.sessions import errors_report
from harness.stats import sequential, verdict

ROOT = Path(__file__).resolve().parents[1]


ROWS = 20_000
MEAN = claim_of(over_seeds="mean", at_least="reference", delta=0.1, range=[0, 1])
SHARE = claim_of(over_seeds={"fraction_at_least": 0.5}, at_least="reference", delta=0.25)


@pytest.mark.parametrize(
    "draw, faithful, batch, cap",
    [
        (lambda rng, s: np.clip(rng.normal(0.5, 0.08, s), 0, 1), 16, 8, 32),
        (two_clusters, 44, 4, 16),  # the shape and batch a t-test failed 3.4% of faithful runs at
        (two_clusters, 16, 8, 64),
        (rare_failures, 16, 4, 64),
        (lambda rng, s: rng.beta(0.3, 0.3, s), 24, 1, 48),  # most mass at both ends
    ],
    ids=["normal", "two-clusters-batch-4", "two-clusters-cap-64", "rare-failures", "u-shaped"],
)
def test_a_mean_test_fails_faithful_runs_at_most_alpha_for_any_shape(draw, faithful, batch, cap):
    """Whatever the seeds' distribution on the range, a run drawn like the
    faithful seeds fails at most alpha of the time over all its looks, the
    faithful seeds' own draw included (each row draws its own)."""
    rng = np.random.default_rng(batch * 1000 + faithful)
    test = levels.make_test(MEAN, draw(rng, (ROWS, faithful)))
    measured = sequential.decide(test, draw(rng, (ROWS, cap)), batch)
    assert share_of(measured, sequential.FAIL) <= MEAN.alpha


@pytest.mark.parametrize("rate", [0.3, 0.6, 0.9, 0.97, 1.0])
def test_a_share_test_fails_faithful_runs_at_most_alpha(rate):
    rng = np.random.default_rng(int(rate * 100))
    test = levels.make_test(SHARE, (rng.random((ROWS, 24)) < rate).astype(float))
    measured = sequential.decide(test, (rng.random((ROWS, 48)) < rate).astype(float), 8)
    assert share_of(measured, sequential.FAIL) <= SHARE.alpha


def test_a_faithful_share_with_one_miss_is_not_failed_nor_left_undecided():
    """Every faithful seed solved (60 of 60), a run with one miss in its
    first batches: the test PASSES it within 32 seeds (a rate of 1 - 1e-12
    made one miss decisive; stakes that learn the rate from the pairs
    before, harness.stats.stakes, take a few batches to trust it)."""
    test = levels.make_test(SHARE, np.ones(60))
    run = np.ones(32)
    run[5] = 0.0
    decision = sequential.decide(test, run, 8)
    assert decision.verdict == sequential.PASS and decision.seeds <= 32


def test_a_mean_test_catches_a_shifted_run_and_rarely_passes_it():
    rng = np.random.default_rng(1)
    test = levels.make_test(MEAN, rng.normal(0.5, 0.08, (ROWS, 32)))
    regressed = sequential.decide(test, rng.normal(0.5 - MEAN.delta, 0.08, (ROWS, 32)), 8)
    assert share_of(regressed, sequential.FAIL) >= 0.8
    assert share_of(regressed, sequential.PASS) <= 1 - MEAN.power


def test_evidence_is_anytime_valid_so_looks_are_free():
    """The same faithful runs looked at after every seed or once at the end:
    looking after every seed fails no more than alpha (no split over looks)."""
    rng = np.random.default_rng(2)
    test = levels.make_test(MEAN, rng.normal(0.5, 0.08, (ROWS, 64)))
    every_seed = sequential.decide(test, rng.normal(0.5, 0.08, (ROWS, 64)), 1)
    assert share_of(every_seed, sequential.FAIL) <= MEAN.alpha


def test_a_run_is_bet_on_against_the_faithful_seeds_pair_by_pair():
    """A run's seeds past the faithful seeds' number add no evidence against
    a faithful run, and seeds equal to their pairs add none either way."""
    faithful = np.full(16, 0.5)
    test = levels.make_test(MEAN, faithful)
    against_h0, _ = sequential.evidence(test, np.r_[np.full(16, 0.5), np.zeros(16)][None, :])
    assert np.all(against_h0 == pytest.approx(0.0))


def test_a_test_looks_only_after_whole_batches_and_stops_at_the_first_decision():
    test = levels.make_test(SHARE, np.r_[np.ones(18), np.zeros(2)])
    decision = sequential.decide(test, np.zeros(16), 4)
    assert decision.verdict == sequential.FAIL and decision.seeds % 4 == 0
    passed = sequential.decide(test, np.ones(16), 4)
    assert passed.verdict == sequential.PASS and passed.seeds % 4 == 0
    undecided = sequential.decide(test, np.array([1.0, 0.0, 1.0]), 4)  # the last look is the last seed
    assert undecided.verdict == sequential.INCONCLUSIVE and undecided.seeds == 3


def test_values_off_the_unit_scale_are_refused():
    with pytest.raises(ValueError, match="unit scale"):
        sequential.decide(levels.make_test(MEAN, np.full(16, 0.5)), np.array([1.5]), 1)


def test_a_reference_level_is_the_faithful_seeds_mean_and_needs_16_of_them():
    claim = claim_of(over_seeds="mean", at_least="reference", delta=50, range=[0, 500])
    returns = np.array([480.0, 490, 470, 500, 460, 495, 485, 475] * 2)
    faithful = levels.unit(claim, returns)
    test = levels.make_test(claim, faithful)
    assert test.level == pytest.approx(faithful.mean())
    assert test.spread == pytest.approx(faithful.std(ddof=1))
    np.testing.assert_array_equal(test.faithful, faithful)  # the run is paired with them
    assert levels.make_test(claim, faithful[:15]) is None
    assert "15 faithful seeds, a test needs 16" in levels.untested(claim, faithful[:15])
    lower = claim_of(over_seeds="mean", at_most="reference", delta=0.1, range=[0, 1])
    assert levels.unit(lower, np.array([0.2])) == pytest.approx([0.8])  # lower is better: flipped


def test_alpha_is_split_over_a_specs_test_claims():
    """Three test claims: each is tested at a third of alpha, so together
    they fail a faithful reproduction at most alpha of the time."""
    rng = np.random.default_rng(3)
    alone, of_three = levels.make_test(MEAN, np.full(16, 0.5), 1), levels.make_test(MEAN, np.full(16, 0.5), 3)
    assert of_three.alpha == pytest.approx(alone.alpha / 3) and of_three.beta == alone.beta
    fails = np.zeros(ROWS, dtype=bool)
    for _ in range(3):  # three independent claims of one reproduction
        test = levels.make_test(MEAN, rng.beta(0.3, 0.3, (ROWS, 16)), 3)
        fails |= sequential.decide(test, rng.beta(0.3, 0.3, (ROWS, 32)), 4).verdict == sequential.FAIL
    assert fails.mean() <= MEAN.alpha


def test_simulated_errors_of_a_published_like_claim():
    """CartPole-like returns: the simulation measures a false-failure rate
    within alpha under every faithful model, with its interval, and the
    power under each regression; the same draws every time."""
    rng = np.random.default_rng(4)
    returns = np.clip(rng.normal(480, 30, 32), 0, 500)
    claim = claim_of(over_seeds="mean", at_least="reference", delta=60, range=[0, 500])
    measured = errors.simulate(claim, returns, batch=8, cap=32, random=22.0, sims=2000)
    assert set(measured["faithful"]) == set(errors.FAITHFUL_MODELS)
    assert set(measured["regressed"]) == set(errors.REGRESSIONS)
    for row in measured["faithful"].values():
        assert row["false_failure"]["high"] <= claim.alpha + errors.ALPHA_MARGIN
    assert measured["regressed"]["shifted"]["power"]["rate"] >= 0.8
    assert errors.simulate(claim, returns, batch=8, cap=32, random=22.0, sims=2000) == measured


def test_models_that_do_not_apply_are_left_out():
    """No random level: no failure mode and no collapse; a share has one
    regression, its rate down by delta."""
    returns = np.linspace(400, 500, 20)
    mean = errors.simulate(
        claim_of(over_seeds="mean", at_least="reference", delta=60, range=[0, 500]), returns, 4, 8, sims=200
    )
    assert "failure_mode" not in mean["faithful"] and "collapsed" not in mean["regressed"]
    share = errors.simulate(
        claim_of(over_seeds={"fraction_at_least": 450}, at_least="reference", delta=0.25),
        returns,
        4,
        8,
        random=22.0,
        sims=200,
    )
    assert list(share["regressed"]) == ["shifted"]


def test_wilson_intervals_hold_the_rate():
    assert errors.wilson(0, 4000)[0] == 0.0 and errors.wilson(0, 4000)[1] < 0.001
    low, high = errors.wilson(3200, 4000)
    assert low < 0.8 < high and high - low < 0.03


@pytest.mark.parametrize(
    "fields, key",
    [
        ({"over_seeds": "max", "at_most": "reference", "delta": 0.1}, "cannot gate"),
        ({"over_seeds": "mean", "at_least": "reference", "delta": 1}, "range"),
        ({"over_seeds": "mean", "at_least": 1, "delta": 0, "range": [0, 2]}, "greater than 0"),
        ({"over_seeds": "mean", "at_least": 1, "delta": 1, "range": [0, 2], "alpha": 0.6}, "less than or equal to 0.5"),
        ({"over_seeds": "mean", "at_least": 1, "delta": 1, "range": [0, 2], "power": 1}, "less than 1"),
        ({"over_seeds": "mean", "at_least": "reference"}, "needs delta"),
        ({"over_seeds": "mean", "at_least": 1, "delta": 3, "range": [0, 2]}, "not smaller than the range"),
        ({"over_seeds": {"fraction_at_least": 1}, "at_least": "reference", "delta": 1}, "share of seeds"),
    ],
)
def test_claims_that_cannot_be_a_test_are_refused(fields, key):
    with pytest.raises(ValidationError, match=key):
        claim_of(**fields)


PUBLISHED_TESTS = sorted(
    p for p in (ROOT / "experiments").glob("*.yaml") if any(c.is_test for c in S.load(p).claims.values())
)


@pytest.mark.parametrize("path", PUBLISHED_TESTS, ids=[p.stem for p in PUBLISHED_TESTS])
def test_each_published_tests_errors_record_is_the_commands(path):
    """results/errors/<spec>.json is what `harness validate --errors` makes
    from the committed records under today's rules (never edited by hand);
    whether each claim meets its errors is the record's to say, not a gate."""
    loaded = S.load(path)
    batch, cap = errors_report.seeding(loaded)
    made = json.loads(json.dumps(errors_report.report(loaded, str(path), batch, cap)))
    assert json.loads((ROOT / "results" / "errors" / f"{path.stem}.json").read_text()) == made
    assert made["rules"] == verdict.RULES


def test_a_reproductions_seeding_comes_from_options_then_the_spec_then_its_seeds():
    plain = S.parse({**TINY_SPEC, "seeds": [0, 1, 2, 3]})
    stated = S.parse({**TINY_SPEC, "seeds": [0, 1, 2, 3], "reproduction": {"batch": 16, "max_seeds": 48}})
    assert errors_report.seeding(plain) == (4, 16)
    assert errors_report.seeding(stated) == (16, 48)
    assert errors_report.seeding(stated, batch=8) == (8, 48)
    assert errors_report.seeding(stated, cap=16) == (16, 16)
    assert errors_report.seeding(plain, batch=4, cap=10) == (4, 8)  # whole batches
    assert S.spec_hash(stated) == S.spec_hash(plain)  # how a verdict takes seeds changes no run


@pytest.mark.parametrize(
    "reproduction, message",
    [
        ({"batch": 0}, "greater than 0"),
        ({"batch": 8, "max_seeds": 4}, "max_seeds (4) is below one batch (8)"),
        ({"max_seeds": 2}, "max_seeds (2) is below one batch (the spec's 4 seeds)"),
    ],
)
def test_a_reproduction_section_that_cannot_run_is_refused(reproduction, message):
    with pytest.raises(S.SpecError, match="reproduction") as caught:
        S.parse({**TINY_SPEC, "seeds": [0, 1, 2, 3], "reproduction": reproduction}, "spec.yaml")
    assert message in str(caught.value) and "spec.yaml" in str(caught.value)


def _record(false_failure=0.004, high=0.006, power=0.9, low=0.88, seeds=32):
    rate = {"rate": false_failure, "low": 0.0, "high": high}
    return {
        "faithful_seeds": seeds,
        "alpha": 0.01,
        "power": 0.8,
        "faithful": {"resampled": {"false_failure": rate}},
        "regressed": {"shifted": {"power": {"rate": power, "low": low, "high": 1.0}}},
    }


@pytest.mark.parametrize(
    "change, words",
    [
        ({}, None),
        ({"power": 0.7, "low": 0.68}, "too weak (shifted)"),
        ({"power": 0.81, "low": 0.76}, "too weak (shifted)"),  # its interval reaches past the margin
        ({"false_failure": 0.02, "high": 0.025}, "fails faithful runs too often (resampled)"),
        ({"false_failure": 0.009, "high": 0.016}, "fails faithful runs too often (resampled)"),
        ({"seeds": 12}, "a statement: 12 faithful seeds, a test needs 16"),
    ],
)
def test_a_records_shortfall_names_what_it_misses(change, words):
    assert errors.shortfall(_record(**change)) == words


def test_faithful_seeds_split_into_design_and_confirming():
    pool = levels.pool([("ref", {0: 1.0, 1: 2.0}), ("unseen", {5: 3.0, 6: 4.0, 7: 5.0, 9: 6.0})])
    design, confirming = levels.design_and_confirming(pool, {0, 1})
    assert design.seeds == (0, 1) and list(design.values) == [1.0, 2.0]
    assert confirming.seeds == (5, 6, 7, 9) and list(confirming.values) == [3.0, 4.0, 5.0, 6.0]
    assert errors_report.seed_ranges(confirming.seeds) == "5-7, 9" and errors_report.seed_ranges(()) == "none"


def test_errors_of_a_published_spec_without_a_test_claim_is_one_user_error():
    """`harness validate SPEC --errors` on a spec whose claims are all
    statements (ppo_game2048) says so in one line and exits 2."""
    path = ROOT / "experiments" / "ppo_game2048.yaml"
    assert path not in PUBLISHED_TESTS, "ppo_game2048 has a test claim now: pick a spec without one"
    code, out, err = run_cli("validate", str(path), "--errors")
    assert code == 2 and "Traceback" not in out + err
    assert f"{path}: claims: no claim is a test" in " ".join(err.split())
