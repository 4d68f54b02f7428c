"""An adaptive reproduction's verdict as users read it, beside a plain
one's (harness.judge.verdict_report): the result (`Adaptive`), the line
after each batch, the run page's description and what goes to MLflow.
harness.sessions.adaptive runs the batches."""

from __future__ import annotations

import time
from typing import Any, NamedTuple

from harness.experiment_spec.claims import Claim
from harness.judge import claims, levels
from harness.record import runs
from harness.record.schema import ClaimOutcome
from harness.stats import verdict


class Adaptive(NamedTuple):
    outcomes: dict[str, ClaimOutcome]  # each test claim on every seed run
    seeds: list[int]  # the seeds run, in order
    logged: Any  # the last batch's run (harness.sessions.run.Logged)
    compiles: int  # programs compiled over all batches
    evidence: list[tuple[int, str, ClaimOutcome]]  # (seeds so far, claim, its outcome) after each batch

    @property
    def verdict(self) -> str:
        """pass, fail, inconclusive or not judged (harness.stats.verdict)."""
        return verdict.of_claims(self.outcomes) or verdict.NOT_JUDGED


def progress_line(number: int, seeds: int, outcomes: dict[str, ClaimOutcome]) -> str:
    """After a batch: the seeds so far, then a line a test: its verdict so
    far and its log-evidence for each side beside the bound that decides it."""
    verdicts = {name: verdict.claim_word(outcome).upper() for name, outcome in outcomes.items()}
    name_width, verdict_width = (max(map(len, texts), default=0) for texts in (verdicts, verdicts.values()))
    lines = [f"batch {number}, {seeds} seeds (each log-evidence of the bound that decides it):"]
    for name, outcome in outcomes.items():
        fail_at, pass_at = levels.bounds(Claim.model_validate(outcome.claim), len(outcomes))
        lines.append(
            f"  {name:<{name_width}} {verdicts[name]:<{verdict_width}}"
            f"  pass {outcome.against_regressed or 0:.2f} of {pass_at:.2f}"
            f"  fail {outcome.against_faithful or 0:.2f} of {fail_at:.2f}"
        )
    return "\n".join(lines)


def description(adaptive: Adaptive, said: str) -> str:
    """The verdict as the run page opens on it (MLflow's run description):
    `said` (the verdict line), then a row a claim."""
    rows = [
        "| claim | value [95% CI] | level (faithful seeds) | fails at | α | power | Δ | evidence to FAIL | "
        "evidence to PASS | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, outcome in adaptive.outcomes.items():
        claim = Claim.model_validate(outcome.claim)
        fail_at, pass_at = levels.bounds(claim, len(adaptive.outcomes))
        cells = [f"`{name}` ({claim.metric})", f"{outcome.value:.4g} [{outcome.low:.4g}, {outcome.high:.4g}]"]
        if outcome.verdict is None:
            cells += [outcome.note or "untested", "", "", "", "", "", "", "untested"]
        else:
            cells += [
                f"{outcome.level:.4g} ({outcome.faithful_seeds or 'stated'})",
                f"{outcome.fails_at:.4g}",
                f"{outcome.alpha or claim.alpha:.2g}",
                f"{claim.power:g}",
                f"{claim.delta:g}",
                f"{outcome.against_faithful:.2f} of {fail_at:.2f}",
                f"{outcome.against_regressed:.2f} of {pass_at:.2f}",
                verdict.shown(outcome.verdict, "markdown"),
            ]
        rows.append("| " + " | ".join(cells) + " |")
    return f"{said}\n\n" + "\n".join(rows) + "\n"


def log_verdict(client, run_id: str, adaptive: Adaptive, said: str, changed: str = "") -> None:
    """The verdict's tags, its name and description, and the evidence over
    seeds on the reproduction's run `run_id`: `said` is the verdict line,
    `changed` the keys a changed spec set (`key old→new; ...`)."""
    from mlflow.entities import Metric

    timestamp = int(time.time() * 1000)
    name = f"reproduce · {verdict.shown(adaptive.verdict, 'plain')}" + (f" · {changed}" if changed else "")
    said = description(adaptive, said + (f"\n\nChanged: {changed}" if changed else ""))
    tags = {
        "adaptive.seeds_used": str(len(adaptive.seeds)),
        "adaptive.compiles": str(adaptive.compiles),
        **claims.tags(adaptive.outcomes),
    }
    runs.log_verdict(client, run_id, adaptive.verdict, name, said, tags)
    # Each claim's evidence over seeds beside the bound it must reach, named by what reaching it does:
    # `..._evidence_to_fail` FAILS the run at `..._fail_bound`, `..._evidence_to_pass` PASSES it at
    # `..._pass_bound` (the `against_*` names are the same evidence, kept for the charts users made).
    metrics = []
    for seeds, name, outcome in adaptive.evidence:
        if outcome.against_faithful is None:
            continue
        fail_at, pass_at = levels.bounds(Claim.model_validate(outcome.claim), len(adaptive.outcomes))
        for key, value in (
            ("against_faithful", outcome.against_faithful),
            ("against_regressed", outcome.against_regressed),
            ("evidence_to_fail", outcome.against_faithful),
            ("fail_bound", fail_at),
            ("evidence_to_pass", outcome.against_regressed),
            ("pass_bound", pass_at),
        ):
            metrics.append(Metric(f"adaptive_{name}_{key}", value, timestamp, seeds))
    client.log_batch(run_id, metrics=metrics)
