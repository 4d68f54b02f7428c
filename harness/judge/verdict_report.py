"""A reproduction's verdict (harness.judge.reproduce) as it is shown and
kept: the terminal's table and headline, verdict.json, verdict.md and the
MLflow tags of the reproduction's parent run."""

from __future__ import annotations

import json
from typing import Any

from harness.judge.reproduce import MODE_RULES, MetricVerdict, Verdict, word


def _metric_word(verdict: Verdict, metric: MetricVerdict) -> str:
    if verdict.not_judged:
        return "not judged"
    return word(metric.passed) if metric.gates or verdict.mode == "exact" else "reported"


def to_dict(verdict: Verdict) -> dict[str, Any]:
    return {
        "verdict": verdict.outcome,
        "mode": verdict.mode,
        "rule": MODE_RULES[verdict.mode],
        "not_judged": verdict.not_judged or None,
        "not_exact_because": verdict.not_exact_because,
        "spec_name": verdict.spec_name,
        "spec_hash": verdict.spec_hash,
        "reference": {
            "source": verdict.reference_source,
            "mlflow_run_id": verdict.reference_run_id,
            "seeds": verdict.reference_seeds,
        },
        "reproduction": {"seeds": verdict.reproduction_seeds},
        "claims": verdict.claims,
        "metrics": {
            m.name: {
                "verdict": _metric_word(verdict, m),
                "gates": m.gates,
                "detail": m.detail,
                "reference": m.reference.as_dict(),
                "reproduction": m.reproduction.as_dict() if m.reproduction else None,
                "first_difference": m.first_difference,
            }
            for m in verdict.metrics
        },
        "speed": {**verdict.speed._asdict(), "ratio": verdict.speed.ratio, "judged": False},
    }


def to_json(verdict: Verdict) -> str:
    return json.dumps(to_dict(verdict), indent=2) + "\n"


def headline(verdict: Verdict) -> str:
    failed = [m.name for m in verdict.metrics if m.gates and not m.passed]
    failed += [name for name, outcome in verdict.claims.items() if outcome == "fail" and verdict.claims_gate]
    outcome = "PASS" if verdict.passed else f"FAIL ({', '.join(failed)})"
    if verdict.outcome == "inconclusive":
        undecided = [name for name, outcome in verdict.claims.items() if outcome == "inconclusive"]
        outcome = f"INCONCLUSIVE ({', '.join(undecided)})"
    if verdict.not_judged:
        outcome = "NOT JUDGED (too few seeds)"
    return (
        f"{verdict.spec_name} ({verdict.spec_hash[:12]}) against {verdict.reference_source}: {verdict.mode}, {outcome}"
    )


def to_markdown(verdict: Verdict) -> str:
    lines = [f"# Reproduction: {headline(verdict)}", "", f"Rule ({verdict.mode}): {MODE_RULES[verdict.mode]}.", ""]
    if verdict.not_exact_because:
        lines += ["Not judged bit for bit because:", "", *[f"- {reason}" for reason in verdict.not_exact_because], ""]
    if verdict.not_judged:
        lines += [f"Not judged statistically: {verdict.not_judged}.", ""]
    lines += [
        "| metric | gates | reference IQM [95% CI] | reproduction IQM [95% CI] | verdict | detail |",
        "|---|---|---|---|---|---|",
    ]
    for m in verdict.metrics:
        new = f"{m.reproduction} (n={m.reproduction.n})" if m.reproduction else "-"
        lines.append(
            f"| {m.name} | {'yes' if m.gates else 'no'} | {m.reference} (n={m.reference.n}) | {new} "
            f"| {_metric_word(verdict, m)} | {m.detail} |"
        )
    lines += ["", f"Speed: {verdict.speed.describe()}.", ""]
    return "\n".join(lines)


def table(verdict: Verdict):
    """The verdict: a row per metric (`*`: it decides), the detail most
    metrics share in the caption, any other below the table. Into a pipe or
    a file it is printed at its natural width (harness.console.print_table),
    so that no metric name or interval is cut."""
    from collections import Counter

    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    common = Counter(m.detail for m in verdict.metrics).most_common(1)
    usual = common[0][0] if common else ""
    ref_n, new_n = len(verdict.reference_seeds), len(verdict.reproduction_seeds)
    out = Table(
        title=f"reproduce: {headline(verdict)}",
        title_justify="left",
        caption=f"IQM [95% CI] over seeds; * decides the verdict{f'; {usual}' if usual else ''}",
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    out.add_column("metric", no_wrap=True)
    out.add_column(f"reference ({ref_n} seeds)", justify="right", no_wrap=True)
    out.add_column(f"reproduction ({new_n})", justify="right", no_wrap=True)
    out.add_column("verdict", no_wrap=True)
    ordered = sorted(verdict.metrics, key=lambda m: (not m.gates, m.name))
    for m in ordered:
        mark = "[green]pass[/]" if m.passed else ("[bold red]fail[/]" if m.gates else "[yellow]differs[/]")
        mark = "[yellow]not judged[/]" if verdict.not_judged else mark
        new = f"{m.reproduction}" if m.reproduction else "-"
        out.add_row(f"{m.name}{' *' if m.gates else ''}", f"{m.reference}", new, mark)
    details = [Text(f"{m.name}: {m.detail}") for m in ordered if m.detail and m.detail != usual]
    return Group(out, *details)


def verdict_tags(verdict: Verdict) -> dict[str, str]:
    """Tags for the reproduction's parent run, to filter on in the MLflow UI
    (beside `verdict`, harness.record.runs.log_verdict's)."""
    return {
        "verdict.mode": verdict.mode,
        **{f"verdict.{m.name}": _metric_word(verdict, m) for m in verdict.metrics},
        **{f"verdict.claim.{name}": outcome for name, outcome in verdict.claims.items()},
        "verdict.speed_ratio": f"{verdict.speed.ratio:.3f}",
    }


def log_verdict(client, run_id: str, verdict: Verdict) -> None:
    from harness.record import runs

    markdown = to_markdown(verdict)
    name = f"reproduce · {verdict.outcome.upper()} ({verdict.mode})"
    texts = {"verdict.json": to_json(verdict), "verdict.md": markdown}
    runs.log_verdict(client, run_id, verdict.outcome, name, markdown, verdict_tags(verdict), texts)
