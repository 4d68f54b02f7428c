"""The one place outcomes become a verdict.

Every command that judges (`run` on its claims, `reproduce` plain and
`--adaptive`, `drift` over its specs) turns what it judged into one word
here; the word becomes the process's exit code
(`harness.exit_codes.of_verdict`) and the `verdict` tag of its MLflow run
(`harness.record.runs.verdict_tags`). `compare` shows the words it finds
and exits 0; `sweep` ranks its points and judges no claim. The words:

- **pass**: every test claim PASSED (or, bit for bit, the reproduction is
  identical to its reference; or, for a spec without a test claim, its
  learning metrics' intervals overlap the reference's);
- **fail**: a test claim FAILED (each is tested at its share of the
  spec's alpha, so one FAIL is a verdict), or the bits differ;
- **inconclusive**: a test claim is undecided at its seed cap;
- **not judged**: a test claim is *untested* (no level: too few faithful
  seeds), or a statistical verdict lacks the seeds it needs. An untested
  claim is never a PASS.

`RULES` names the version of the test rules; every judged outcome records
it (results.json `claims.<name>.rules`), and a stored outcome judged under
other rules is judged again rather than reused.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

PASS, FAIL, INCONCLUSIVE, NOT_JUDGED = "pass", "fail", "inconclusive", "not judged"
OUTCOMES = (PASS, FAIL, INCONCLUSIVE, NOT_JUDGED)
UNTESTED = "untested"  # a test claim without a level: no seed could decide it
# The version of the test rules (harness.stats.sequential, ranks, levels): betting e-processes,
# a run's seeds bet pair by pair (or by rank) against the faithful seeds', alpha split over a
# spec's test claims. 3: a test by ranks breaks a run seed's ties by that seed's own draw. 4: every
# stake is sized before the seed it bets on (harness.stats.stakes): a paired test's on the pairs
# before, a rank test's on faithful seeds it never ranks against. The constants of the tests each
# version fixed are pinned in tests/test_verdict.py.
RULES = "4"
# The versions whose freezes still hold under RULES (harness.sessions.freeze): 3 changed how a
# test by ranks breaks ties, 4 how stakes are sized, which no claim's design (range, delta, batch,
# cap) reads.
SAME_DESIGNS = ("2", "3", "4")

STYLES = {
    PASS: "bold green",
    FAIL: "bold red",
    INCONCLUSIVE: "bold yellow",
    NOT_JUDGED: "bold yellow",
    UNTESTED: "yellow",
}


def shown(word: str, markup: str = "rich") -> str:
    """A verdict or a claim's word as users read it: upper case (`PASS`,
    `NOT JUDGED`; `untested` stays lower), styled for the terminal
    (`rich`), bold where it fails for Markdown (`markdown`), or plain."""
    text = word if word == UNTESTED else word.upper()
    if markup == "rich":
        return f"[{STYLES[word]}]{text}[/]"
    return f"**{text}**" if markup == "markdown" and word == FAIL else text


def claim_word(outcome) -> str | None:
    """A test claim's word (pass, fail, inconclusive, untested); None for a
    statement, which never gates. `outcome` is a ClaimOutcome."""
    if outcome.claim.get("delta") is None:
        return None
    return outcome.verdict or UNTESTED


def of_words(words: Iterable[str | None]) -> str | None:
    """The verdict of test claims' words (None entries, statements, are
    left out); None when there is no test."""
    words = [word for word in words if word is not None]
    if not words:
        return None
    if FAIL in words:
        return FAIL
    if UNTESTED in words:
        return NOT_JUDGED
    return INCONCLUSIVE if INCONCLUSIVE in words else PASS


def of_claims(outcomes: Mapping | None) -> str | None:
    """The verdict of judged claims (name -> ClaimOutcome); None without a test."""
    return of_words(claim_word(outcome) for outcome in (outcomes or {}).values())


def of_reproduction(exact: bool, bits_identical: bool, claims: str | None, metrics: str) -> str:
    """A plain reproduction's verdict: bit for bit when `exact` (an
    identical run is a PASS of its reference, whatever its seeds can decide
    of the claims); else its test claims' verdict `claims`, or, without a
    test claim, `metrics` (the learning metrics' intervals: pass, fail, or
    not judged for too few seeds)."""
    if exact:
        return PASS if bits_identical else FAIL
    return claims if claims is not None else metrics
