"""The one verdict function (harness.stats.verdict): how outcomes become a
verdict and an exit code in every command, the rule for an untested claim,
and the verdict words; pure, on made-up outcomes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from harness import exit_codes
from harness.judge import compare
from harness.judge.adaptive_report import Adaptive
from harness.record import runs
from harness.record.schema import ClaimOutcome
from harness.stats import verdict

TEST = {"metric": "episode_return", "over_seeds": "mean", "at_least": "reference", "delta": 60, "range": [0, 500]}
STATEMENT = {"metric": "episode_return", "over_seeds": "mean", "at_least": 400}


def _outcome(word: str | None, claim=TEST, holds: bool = False) -> ClaimOutcome:
    return ClaimOutcome(claim=claim, value=1.0, low=0.0, high=2.0, seeds=8, holds=holds, verdict=word)


@pytest.mark.parametrize(
    "words, expected",
    [
        (["pass", "pass"], "pass"),
        (["pass", "fail", "untested"], "fail"),  # a FAIL is a verdict at its share of alpha
        (["pass", "untested"], "not judged"),  # an untested claim is never a PASS
        (["inconclusive", "untested"], "not judged"),
        (["pass", "inconclusive"], "inconclusive"),
        ([None, "pass"], "pass"),  # a statement never gates
        ([None], None),
        ([], None),
    ],
)
def test_test_claims_words_make_one_verdict(words, expected):
    assert verdict.of_words(words) == expected


def test_exit_codes_follow_the_verdict():
    assert [exit_codes.of_verdict(v) for v in (None, "pass", "fail", "inconclusive", "not judged")] == [0, 0, 1, 4, 4]


def test_an_untested_claim_is_a_word_of_its_own_and_a_statement_has_none():
    assert verdict.claim_word(_outcome(None)) == "untested"
    assert verdict.claim_word(_outcome(None, STATEMENT, holds=False)) is None
    assert verdict.of_claims({"a": _outcome("pass"), "b": _outcome(None, STATEMENT)}) == "pass"


def test_an_adaptive_reproduction_with_an_untested_claim_is_not_judged():
    """It was read as a PASS, and `reproduce --adaptive` exited 0."""
    adaptive = Adaptive({"a": _outcome("pass"), "b": _outcome(None)}, [8], None, 1, [])
    assert adaptive.verdict == "not judged" and exit_codes.of_verdict(adaptive.verdict) == 4


@pytest.mark.parametrize(
    "exact, bits, claims, metrics, expected",
    [
        (True, True, "inconclusive", "pass", "pass"),  # bit-identical: a PASS, whatever the seeds can decide
        (True, True, None, "not judged", "pass"),
        (True, False, "pass", "pass", "fail"),
        (False, True, "pass", "fail", "pass"),  # statistical: the tests gate, intervals are reported
        (False, True, "not judged", "pass", "not judged"),
        (False, True, None, "fail", "fail"),  # no test claim: the learning metrics' intervals
    ],
)
def test_a_plain_reproduction_is_judged_bit_for_bit_where_it_can_be(exact, bits, claims, metrics, expected):
    assert verdict.of_reproduction(exact, bits, claims, metrics) == expected


def test_a_comparison_tags_each_claim_with_its_verdict_across_runs():
    """An INCONCLUSIVE or untested test was tagged `fails`."""
    comparison = SimpleNamespace(
        claims={
            "run1": {"t": _outcome("pass"), "u": _outcome("inconclusive"), "s": _outcome(None, STATEMENT, True)},
            "run2": {"t": _outcome("pass"), "u": _outcome(None), "s": _outcome(None, STATEMENT, True)},
        }
    )
    assert compare.claim_tags(comparison) == {
        "claim.t": "pass",
        "claim.u": "not judged",
        "claim.s": "holds",
        "verdict": "not judged",  # the tests' words across the runs, as one (a statement never gates)
    }


def test_every_verdict_has_one_tag_and_its_words():
    assert runs.verdict_tags("fail") == {"verdict": "fail"} and runs.verdict_tags(None) == {}
    assert verdict.shown("not judged", "plain") == "NOT JUDGED" and verdict.shown("fail", "markdown") == "**FAIL**"
    assert verdict.shown("pass") == "[bold green]PASS[/]" and verdict.shown("untested", "plain") == "untested"


# The constants of the tests that change a verdict, as the rules' version that fixed them says:
# a change to one is a new version (harness.stats.verdict.RULES), and this table with it.
RULES_CONSTANTS = {
    "4": {
        "stakes.STAKES": (0.5, 1.0, 2.0),
        "stakes.MAX_LOSS": 0.9,
        "stakes.FIRST_PAIRS": 2,
        "stakes.SIZING_SEEDS": 16,
        "stakes.GRID": 257,
        "ranks.TAILS": (0.03, 0.1, 0.2),
        "ranks.PASS_TAIL": 0.15,
        "ranks.PASS_LINEAR": 0.5,
        "ranks.TIE_KEY": 0x7469,
        "levels.MIN_FAITHFUL": 16,
    },
    "3": {
        "sequential.STAKES": (0.5, 1.0, 2.0),
        "sequential.MAX_LOSS": 0.9,
        "ranks.TAILS": (0.03, 0.1, 0.2),
        "ranks.PASS_TAIL": 0.15,
        "ranks.PASS_LINEAR": 0.5,
        "ranks.TIE_KEY": 0x7469,
        "levels.MIN_FAITHFUL": 16,
    },
}


def test_the_rules_version_covers_every_constant_that_changes_a_verdict():
    """A stored outcome is reused while its rules' version is today's: a
    constant of the tests changed without a new version would reuse
    outcomes the tests no longer give."""
    from harness.judge import levels
    from harness.stats import ranks, sequential, stakes

    modules = {"sequential": sequential, "ranks": ranks, "levels": levels, "stakes": stakes}
    now = {key: getattr(modules[key.split(".")[0]], key.split(".")[1]) for key in RULES_CONSTANTS[verdict.RULES]}
    assert now == RULES_CONSTANTS[verdict.RULES], "a constant of the tests changed: bump verdict.RULES"
