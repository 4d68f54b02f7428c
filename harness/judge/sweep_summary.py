"""The end of a sweep: every point's final metric (IQM over seeds, with its
stratified-bootstrap 95% interval), best first, as a table, as markdown, as
JSON, and a plot of the metric against each swept key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from harness.record.schema import Results
from harness.stats import intervals

# The metric a sweep is ranked by, when the run has it: evaluation first.
RANKED_BY = ("eval_return", "episode_return", "eval_random_win", "eval_greedy_win")


class Row(NamedTuple):
    point: int
    values: dict[str, Any]  # swept key -> value
    estimate: intervals.Estimate  # IQM over seeds of the final metric
    sps: float  # the point's share of its program's steady-state env steps/s
    run_id: str | None


def ranked_metric(records: dict[int, Results], asked: str | None = None) -> str:
    """The metric to rank by: `asked` (checked before training, see
    harness.sessions.sweep.check_metric), else the first of RANKED_BY
    that every point has."""
    have = set.intersection(*(set(r.final) for r in records.values()))
    if asked is not None:
        return asked
    for name in RANKED_BY:
        if name in have:
            return name
    return sorted(have)[0]


def rows(
    records: dict[int, Results], values: dict[int, dict[str, Any]], metric: str, run_ids: dict[int, str]
) -> list[Row]:
    """One row per point, best (highest IQM) first; ties keep point order."""
    out = [
        Row(
            point,
            values[point],
            intervals.stratified_bootstrap_iqm(record.finals(metric), reps=5_000),
            record.speed.sps,
            run_ids.get(point),
        )
        for point, record in sorted(records.items())
    ]
    return sorted(out, key=lambda row: -row.estimate.point)


def _show(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def table(summary: list[Row], keys: tuple[str, ...], metric: str, title: str):
    from harness.console import fitting_table

    columns = [*keys, f"{metric} IQM", "95% CI", "env steps/s"]
    cells = [
        [
            *(_show(row.values[key]) for key in keys),
            f"{row.estimate.point:.4g}",
            f"[{row.estimate.low:.4g}, {row.estimate.high:.4g}]",
            f"{row.sps:,.0f}",
        ]
        for row in summary
    ]
    return fitting_table(title, "point", [str(row.point) for row in summary], columns, cells)


def to_markdown(summary: list[Row], keys: tuple[str, ...], metric: str) -> str:
    head = ["rank", "point", *keys, f"{metric} (IQM)", "95% CI", "env steps/s", "run"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for rank, row in enumerate(summary, 1):
        cells = [
            str(rank),
            str(row.point),
            *(_show(row.values[key]) for key in keys),
            f"{row.estimate.point:.4g}",
            f"[{row.estimate.low:.4g}, {row.estimate.high:.4g}]",
            f"{row.sps:,.0f}",
            row.run_id or "",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def to_json(summary: list[Row], keys: tuple[str, ...], metric: str) -> str:
    return json.dumps(
        {
            "metric": metric,
            "keys": list(keys),
            "points": [
                {
                    "rank": rank,
                    "point": row.point,
                    "values": row.values,
                    "iqm": row.estimate.point,
                    "ci": [row.estimate.low, row.estimate.high],
                    "seeds": row.estimate.n,
                    "sps": row.sps,
                    "run_id": row.run_id,
                }
                for rank, row in enumerate(summary, 1)
            ],
        },
        indent=2,
    )


def plot(summary: list[Row], keys: tuple[str, ...], metric: str, path: Path, title: str) -> None:
    """The final metric (IQM, 95% CI bars) against each swept key, one panel
    per key; a numeric key spanning more than 20x on a log axis."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(4.2 * len(keys), 3.6), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(1, len(keys), squeeze=False)[0]
    iqm = np.array([row.estimate.point for row in summary])
    error = np.array(
        [[row.estimate.point - row.estimate.low, row.estimate.high - row.estimate.point] for row in summary]
    )
    for ax, key in zip(axes, keys, strict=True):
        values = [row.values[key] for row in summary]
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        if numeric:
            x = np.array(values, dtype=np.float64)
            if x.min() > 0 and x.max() / x.min() > 20:
                ax.set_xscale("log")
        else:
            labels = list(dict.fromkeys(json.dumps(v) if not isinstance(v, str) else v for v in values))
            x = np.array([labels.index(json.dumps(v) if not isinstance(v, str) else v) for v in values], float)
            ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
        ax.errorbar(x, iqm, yerr=error.T, fmt="o", capsize=3, alpha=0.8)
        best = int(np.argmax(iqm))
        ax.plot([x[best]], [iqm[best]], "r*", markersize=12, label="best")
        ax.set_xlabel(key)
        ax.set_ylabel(f"final {metric} (IQM)")
        ax.grid(alpha=0.3)
    axes[0].legend(loc="best")
    figure.suptitle(title)
    figure.savefig(path, dpi=100)
