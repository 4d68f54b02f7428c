"""The claims' sequential tests (harness.judge.sequential, levels, errors)
as pure functions on simulated seeds: their false-failure rates and power,
the seeds they take, and the claims and options they refuse."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError
from support import TINY_SPEC

from harness import spec as S
from harness.judge import errors, levels, sequential
from harness.sessions import errors_report
from harness.spec_claims import Claim

ROOT = Path(__file__).resolve().parents[1]


def _share(decision, verdict):
    return float(np.mean(decision.verdict == verdict))


def test_the_bernoulli_sprt_meets_its_errors_at_any_batch():
    """p0 = 0.5 against p1 = 0.2, alpha 1%, power 95%, batches of 4 up to 64."""
    rng = np.random.default_rng(0)
    test = sequential.Test("rate", 0.5, 0.3, 0.01, 0.05)
    faithful = sequential.decide(test, (rng.random((20_000, 64)) < 0.5).astype(float), 4)
    regressed = sequential.decide(test, (rng.random((20_000, 64)) < 0.2).astype(float), 4)
    assert _share(faithful, sequential.FAIL) <= 0.01
    assert _share(regressed, sequential.FAIL) >= 0.9
    assert faithful.seeds.mean() < 40  # fewer than a fixed-n test with the same errors needs


def _faithful_and_run_rates(rows: int, faithful: int, run: int, rate: float, run_rate: float, seed: int):
    rng = np.random.default_rng(seed)
    reference = (rng.random((rows, faithful)) < rate).astype(float)
    return reference, (rng.random((rows, run)) < run_rate).astype(float)


@pytest.mark.parametrize("rate", [0.3, 0.6, 0.9, 0.97])
def test_the_two_sample_exact_test_of_a_share_fails_faithful_runs_at_most_alpha(rate):
    """Whatever the faithful rate, a run drawn like the faithful seeds fails
    at most alpha of the time over all its looks, the faithful seeds' own
    draw included (each row draws its own)."""
    reference, run = _faithful_and_run_rates(20_000, 24, 32, rate, rate, seed=int(rate * 100))
    mean = reference.mean(1)
    test = sequential.Test("rate", mean, 0.25, 0.01, 0.2, target=mean, reference_seeds=24, looks=4)
    assert _share(sequential.decide(test, run, 8), sequential.FAIL) <= 0.01


def test_the_exact_test_of_a_share_catches_what_a_bound_on_the_faithful_rate_could_not():
    """32 faithful seeds that all solve, a run whose rate fell by a quarter,
    in batches of 16 up to 64: the two-sample exact test fails it 4 times
    in 5; a level bounded below from the faithful seeds (a Clopper-Pearson
    bound at alpha / 2, about 0.85) left the run's likelihood ratio against
    it to rise slowly, and caught about one in eight."""
    reference, run = _faithful_and_run_rates(20_000, 32, 64, 1.0, 0.75, seed=3)
    test = sequential.Test("rate", 1.0, 0.25, 0.01, 0.2, target=1.0, reference_seeds=32, looks=4)
    assert _share(sequential.decide(test, run, 16), sequential.FAIL) >= 0.8
    bounded = test._replace(level=0.005 ** (1 / 32), reference_seeds=0, alpha=0.005)  # Clopper-Pearson at 32 of 32
    assert _share(sequential.decide(bounded, run, 16), sequential.FAIL) < 0.2


def test_the_t_test_meets_its_errors_at_any_of_its_looks():
    """Normal seeds, a reference of 16 drawn like the run's: a faithful run
    fails at most alpha of the time over its four looks, though each look
    alone is tested; a run regressed by delta is caught and rarely passes."""
    rng = np.random.default_rng(1)
    rows, delta = 20_000, 0.1
    reference = rng.normal(0.5, 0.08, (rows, 16))
    test = sequential.Test(
        "mean", reference.mean(1), delta, 0.01, 0.2, reference.std(1, ddof=1), reference.mean(1), 16, looks=4
    )
    faithful = sequential.decide(test, rng.normal(0.5, 0.08, (rows, 32)), 8)
    assert _share(faithful, sequential.FAIL) <= 0.01
    regressed = sequential.decide(test, rng.normal(0.5 - delta, 0.08, (rows, 32)), 8)
    assert _share(regressed, sequential.FAIL) >= 0.8
    assert _share(regressed, sequential.PASS) <= 0.2
    # Looked at once, at all 32 seeds, with the whole alpha: more false failures than over four looks
    # would be allowed would show here as a rate above alpha.
    once = sequential.decide(test._replace(looks=1), rng.normal(0.5, 0.08, (rows, 32)), 32)
    assert _share(once, sequential.FAIL) <= 0.01 < _share(once, sequential.FAIL) * 4


def test_a_mean_test_refuses_more_looks_than_it_planned():
    test = sequential.Test("mean", 0.5, 0.1, 0.01, 0.2, 0.1, 0.5, 8, looks=2)
    sequential.decide(test, np.full(16, 0.5), 8)
    with pytest.raises(ValueError, match="planned 2"):
        sequential.decide(test, np.full(24, 0.5), 8)


def test_a_seed_spread_the_reference_missed_is_seen_by_the_run():
    """Faithful seeds that all agree: the spread floor (a quarter of delta)
    and the run's own spread keep a scattered faithful-looking run from
    failing on its first batch."""
    test = sequential.Test("mean", 1.0, 0.1, 0.01, 0.2, 0.0, 1.0, 8, looks=4)
    agreeing = sequential.decide(test, np.full(8, 0.99), 8)
    assert agreeing.verdict == sequential.PASS
    scattered = sequential.decide(test, np.array([1.0, 0.7, 1.0, 1.0, 0.8, 1.0, 1.0, 0.9]), 8)
    assert scattered.verdict != sequential.FAIL


def test_a_test_looks_only_after_whole_batches_and_stops_at_the_first_decision():
    test = sequential.Test("rate", 0.9, 0.5, 0.01, 0.2)
    decision = sequential.decide(test, np.zeros(16), 4)
    assert decision.verdict == sequential.FAIL and decision.seeds % 4 == 0
    passed = sequential.decide(test, np.ones(16), 4)
    assert passed.verdict == sequential.PASS and passed.seeds % 4 == 0
    undecided = sequential.decide(test, np.array([1.0, 0.0, 1.0]), 4)  # the last look is the last seed
    assert undecided.verdict == sequential.INCONCLUSIVE and undecided.seeds == 3


def _claim(**fields):
    return Claim.model_validate({"metric": "episode_return", **fields})


def test_a_reference_level_is_the_faithful_seeds_mean_or_rate_and_their_number():
    claim = _claim(over_seeds="mean", at_least="reference", delta=50, range=[0, 500])
    faithful = levels.unit(claim, np.array([480.0, 490, 470, 500, 460, 495, 485, 475]))
    test = levels.make_test(claim, faithful, looks=4)
    assert test.level == test.target == pytest.approx(faithful.mean())
    assert (test.reference_seeds, test.looks, test.alpha) == (8, 4, 0.01)  # the t-test holds their uncertainty
    assert test.spread == pytest.approx(faithful.std(ddof=1))
    rate = _claim(over_seeds={"fraction_at_least": 475}, at_least="reference", delta=0.3)
    successes = levels.unit(rate, np.array([480.0, 490, 470, 500, 460, 495, 485, 475]))
    share = levels.make_test(rate, successes, looks=2)
    assert share.level == share.target == pytest.approx(0.75)
    assert (share.reference_seeds, share.looks, share.alpha) == (8, 2, 0.01)  # Fisher's test holds their draw
    lower = _claim(over_seeds="mean", at_most="reference", delta=0.1, range=[0, 1])
    assert levels.unit(lower, np.array([0.2])) == pytest.approx([0.8])  # lower is better: flipped


def test_simulated_errors_of_a_published_like_claim():
    """CartPole-like returns: the simulation measures a false-failure rate
    within alpha and the power it states."""
    returns = np.array([500.0, 479, 498, 485, 484, 494, 377, 487, 480, 494, 430, 465, 476, 500, 477, 500])
    claim = _claim(over_seeds="mean", at_least="reference", delta=60, range=[0, 500])
    measured = errors.simulate(claim, returns, batch=8, cap=32, sims=2000)
    assert measured["false_failure"] <= claim.alpha
    assert measured["measured_power"] >= 0.8 and errors.meets(measured)
    # The same draws every time: a record is reproducible.
    assert errors.simulate(claim, returns, batch=8, cap=32, sims=2000) == measured


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
        _claim(**fields)


PUBLISHED_TESTS = sorted(
    p for p in (ROOT / "experiments").glob("*.yaml") if any(c.is_test for c in S.load(p).claims.values())
)


@pytest.mark.parametrize("path", PUBLISHED_TESTS, ids=[p.stem for p in PUBLISHED_TESTS])
def test_each_published_tests_errors_record_is_the_commands_and_within_alpha(path):
    """results/errors/<spec>.json is what `harness validate --errors` makes
    from the committed records (never edited by hand), and every test's
    measured false-failure rate is within its alpha."""
    loaded = S.load(path)
    batch, cap = errors_report.seeding(loaded)
    made = json.loads(json.dumps(errors_report.report(loaded, str(path), batch, cap)))
    assert json.loads((ROOT / "results" / "errors" / f"{path.stem}.json").read_text()) == made
    for name, row in made["claims"].items():
        if "false_failure" in row:
            assert row["false_failure"] <= row["alpha"], name


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


@pytest.mark.parametrize(
    "change, words",
    [
        ({}, None),
        ({"measured_power": 0.5}, "too weak"),
        ({"false_failure": 0.02}, "fails faithful runs too often"),
        ({"measurable": False}, "too few faithful seeds"),
    ],
)
def test_a_records_shortfall_names_what_it_misses(change, words):
    row = {"measurable": True, "false_failure": 0.004, "alpha": 0.01, "measured_power": 0.9, "power": 0.8}
    assert errors.shortfall({**row, **change}) == words
