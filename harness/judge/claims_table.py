"""Claims judged on runs, as the terminal shows them: a table kept to 80
columns, and where each outside figure comes from."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from harness.console import out_console
from harness.experiment_spec.claims import Claim
from harness.judge import levels
from harness.judge.claims import SIGNS, claims_hash, reproduction_alpha
from harness.record.schema import ClaimOutcome
from harness.stats import verdict

WIDTH = 80  # the table is kept to a terminal's width


def number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}"


def describe(claim: Claim) -> str:
    """The statistic in words, e.g. `mean of seeds, final` (the metric apart):
    over seeds, then over iterations."""
    seeds, iterations = claim.over_seeds, claim.over_iterations
    of_seeds = {
        "iqm": "IQM of seeds",
        "fraction_at_least": f"share of seeds ≥ {number(seeds.value or 0)}",
        "fraction_above": f"share of seeds > {number(seeds.value or 0)}",
    }.get(seeds.name, f"{seeds.name} of seeds")
    over = f"mean of last {iterations.value:.0%}" if iterations.name == "mean_last" else iterations.name
    return f"{of_seeds}, {over}"


def bound_cell(claim: Claim, outcome: ClaimOutcome) -> str:
    """The bound and its outcome: a statement's number, or a test's level
    (H0: what a faithful run reaches), the regression it fails and its
    errors, with its verdict."""
    bound, limit = claim.bound
    if not claim.is_test:
        return f"{SIGNS[bound]} {number(limit)}\n{'holds' if outcome.holds else '[bold red]FAILS[/]'}"
    if outcome.verdict is None:
        return f"{SIGNS[bound]} {limit}\n[yellow]untested[/]"
    where = f"ref, {outcome.faithful_seeds} seeds" if outcome.faithful_seeds else "stated"
    return (
        f"level {number(outcome.level)} ({where})\nfails at {number(outcome.fails_at)}, "
        f"α {outcome.alpha or claim.alpha:.2g}, power {claim.power:g}\n{verdict.shown(outcome.verdict)} after {outcome.seeds_used} seeds"
    )


def table(rows: Sequence[tuple[str, ClaimOutcome]], title: str = "claims"):
    """A rich table of claims judged on runs: each row a `(label, outcome)`,
    the label a claim's name (and, comparing runs, the run's); the interval
    is the 95% bootstrap interval over seeds. Kept within 80 columns: long
    names wrap rather than widen it."""
    from rich.markup import escape
    from rich.measure import Measurement
    from rich.table import Table

    outside = any(outcome.consistent is not None for _, outcome in rows)
    out = Table(title=title, title_justify="left", show_lines=True)
    out.add_column("claim")
    out.add_column("value [95% CI]", justify="right")
    out.add_column("bound", justify="right")
    if outside:
        out.add_column("outside figure", justify="right")
    for label, outcome in rows:
        claim = Claim.model_validate(outcome.claim)
        cells = [
            f"[bold]{escape(label)}[/]\n{escape(claim.metric)}\n{describe(claim)}",
            f"{number(outcome.value)}\n{escape(f'[{number(outcome.low)}, {number(outcome.high)}]')}",
            bound_cell(claim, outcome),
        ]
        if outside:
            consistent = "consistent" if outcome.consistent else "[bold red]NOT consistent[/]"
            cells.append("-" if claim.outside is None else f"{number(claim.outside.value)}\n{consistent}")
        out.add_row(*cells)
    if Measurement.get(out_console, out_console.options.update_width(10_000), out).maximum > WIDTH:
        out.width = WIDTH
    return out


def sources(outcomes: Mapping[str, ClaimOutcome]) -> list[str]:
    """One line per outside figure: where it comes from; and why a test went untested."""
    lines = []
    for name, outcome in outcomes.items():
        figure = Claim.model_validate(outcome.claim).outside
        if figure is not None:
            where = ":".join(str(part) for part in (figure.file, figure.line) if part is not None)
            lines.append(f"  {name}: {number(figure.value)} from {figure.source}{f' {where}' if where else ''}")
        if outcome.note:
            lines.append(f"  {name}: {outcome.note}")
    return lines


def rows_by_run(by_run: Mapping[str, Mapping[str, ClaimOutcome]]) -> list[tuple[str, ClaimOutcome]]:
    """`table`'s rows for claims judged on several runs (run id -> claim
    name -> outcome): claim by claim, run by run."""
    names = dict.fromkeys(name for outcomes in by_run.values() for name in outcomes)
    return [
        (f"{name}\nrun {run_id[:12]}", outcomes[name])
        for name in names
        for run_id, outcomes in by_run.items()
        if name in outcomes
    ]


def validate_lines(claims: Mapping[str, Claim]) -> str:
    """What `harness validate` says of a spec's claims: their hash, and each
    one's kind, as comment lines after the resolved spec."""
    if not claims:
        return ""
    lines = [f"# claims_hash: {claims_hash(claims)}"]
    tests = [claim for claim in claims.values() if claim.is_test]
    if tests:
        alpha = reproduction_alpha(claims)
        lines.append(
            f"# a reproduction fails a faithful run at most {alpha:.2g} of the time: its {len(tests)} test"
            f" claim{'s' if len(tests) > 1 else ''} share{'' if len(tests) > 1 else 's'} that alpha"
        )
    for name, claim in claims.items():
        if claim.is_test:
            share, _ = levels.split(claim, len(tests))
            what = (
                f"a test: alpha {share:.2g} (its {claim.alpha:g} over {len(tests)}), power {claim.power:g},"
                f" delta {claim.delta:g} (measured by --errors)"
            )
        else:
            what = "a statement, judged on the point estimate; never a gate"
        lines.append(f"# claim {name}: {what}")
    return "\n".join(lines) + "\n"
