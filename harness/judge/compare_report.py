"""A comparison as users see it: the table (terminal and compare.md), the
plot of the runs' curves (compare.png), and the MLflow run that records it
(harness.judge.compare makes the comparison)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from harness.console import megabytes
from harness.judge.compare import PLOTTED_METRICS, ComparedRun, CompareError, Comparison, claim_tags
from harness.judge.machines import device_label
from harness.record import tracking
from harness.record.command_run import command_run
from harness.record.schema import EMPTY_CURVES
from harness.stats import intervals, verdict


def _columns(summaries: list[dict[str, Any]], markdown: bool) -> list[tuple[str, str, Any]]:
    """The comparison's columns, for the terminal and for compare.md alike:
    (header, justification, cell of a summary)."""
    metrics = list(summaries[0]["final"])
    run = (
        (lambda s: f"{s['run_name']} `{s['run_id']}`")
        if markdown
        else (lambda s: f"{s['run_name']}\n{s['run_id'][:12]}")
    )
    columns = [
        ("run", "left", run),
        ("device", "left", lambda s: s["device"]),
        ("jax / jaxlib", "left", lambda s: f"{s['jax']} / {s['jaxlib']}"),
        ("git", "left", lambda s: s["git"]),
        ("seeds", "right", lambda s: str(s["seeds"])),
        ("env steps/s", "right", lambda s: f"{s['sps']:,.0f}"),
        ("per seed", "right", lambda s: f"{s['sps_per_seed']:,.0f}"),
        ("compile s", "right", lambda s: f"{s['compile_seconds']:.1f}"),
        ("peak MB", "right", lambda s: _peak(*s["peak_memory"])),
        *[
            (f"final {m} IQM [95% CI]", "right", lambda s, m=m: f"{intervals.Estimate(**s['final'][m])}")
            for m in metrics
        ],
    ]
    if not markdown and any(s["verdict"] for s in summaries):
        columns.append(("verdict", "left", lambda s: s["verdict"] or "-"))
    return columns


def _peak(peak_bytes: int | None, where: str | None) -> str:
    """A run's peak memory in MB, marked with where it was measured (a
    device's allocator, or a CPU process's resident memory); "-" for a
    record made before peaks were kept."""
    return "-" if peak_bytes is None else f"{megabytes(peak_bytes)} ({where})"


def table(summaries: list[dict[str, Any]], title: str):
    from rich.table import Table

    columns = _columns(summaries, markdown=False)
    out = Table(title=title, title_justify="left")
    for name, justify, _ in columns:
        out.add_column(name, justify=justify)
    for s in summaries:
        out.add_row(*[cell(s) for _, _, cell in columns])
    return out


def to_markdown(summaries: list[dict[str, Any]], differences: dict[str, dict[str, list[str]]]) -> str:
    columns = _columns(summaries, markdown=True)
    lines = ["| " + " | ".join(name for name, _, _ in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(s) for _, _, cell in columns) + " |" for s in summaries]
    for title, diff in differences.items():
        if diff:
            lines += ["", f"{title}:", ""]
            lines += [f"- `{key}`: " + " / ".join(values) for key, values in diff.items()]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------- plot


def run_label(run: ComparedRun) -> str:
    record = run.record
    return (
        f"{run.run_id[:8]}: {device_label(record.fingerprint)}, jax {record.versions.get('jax')},"
        f" {len(record.seeds)} seeds"
    )


def plot(runs: list[ComparedRun], path: Path, title: str):
    """Each run's mean curve over seeds with a shaded 95% bootstrap band,
    overlaid, one panel per metric of `PLOTTED_METRICS` that every run has;
    x is env steps per seed. Written as a PNG to `path` with the Agg
    renderer (no display needed); returns the matplotlib Figure."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    names = set.intersection(
        *(set(r.record.curves.metrics) | set((r.record.evaluation_curves or EMPTY_CURVES).metrics) for r in runs)
    )
    metrics = [m for m in PLOTTED_METRICS if m in names]
    if not metrics:
        raise CompareError(f"the runs have none of the metrics {', '.join(PLOTTED_METRICS)} in common to plot")
    figure = Figure(figsize=(6.4 * len(metrics), 4.4), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(1, len(metrics), squeeze=False)[0]
    for ax, metric in zip(axes, metrics, strict=True):
        for index, run in enumerate(runs):
            curves = run.record.curves_of(metric)
            values = np.array([curves.metrics[metric][str(s)] for s in run.record.seeds])  # [seeds, points]
            mean, low, high = intervals.bootstrap_mean_band(values)
            color = f"C{index % 10}"
            ax.plot(curves.env_steps, mean, color=color, label=run_label(run))
            ax.fill_between(curves.env_steps, low, high, color=color, alpha=0.2, linewidth=0)
        ax.set_title(metric)
        ax.set_xlabel("env steps per seed")
        ax.set_ylabel(f"{metric} (mean over seeds, 95% CI)")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize="small", loc="best")
    figure.suptitle(title)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    return figure


# -------------------------------------------------------------------- logging


def log(
    uri: str,
    experiment: str,
    runs: list[ComparedRun],
    files: dict[str, str],
    png: Path,
    tags: dict[str, str] | None = None,
) -> str:
    """Record the comparison as a run of its own (harness.record.command_run:
    FINISHED, or FAILED or KILLED) in `experiment` (the first compared
    run's), with `tags` added; returns its id."""
    said = (tags or {}).get("verdict")
    name = f"compare · {len(runs)} run{'s' if len(runs) > 1 else ''}" + (
        f" · {verdict.shown(said, 'plain')}" if said else ""
    )
    tags = {
        "harness.kind": "compare",
        "compare.run_ids": ",".join(r.run_id for r in runs),
        "compare.spec_hashes": ",".join(sorted({r.record.spec_hash for r in runs})),
        **(tags or {}),
    }
    with command_run(uri, experiment, name, tags) as (client, run_id):
        with tempfile.TemporaryDirectory() as tmp:
            # Under one name whatever --out was, so every comparison looks alike.
            shutil.copyfile(png, Path(tmp) / "compare.png")
            client.log_artifact(run_id, str(Path(tmp) / "compare.png"))
        tracking.log_texts(client, run_id, files)
    return run_id


def record(client, uri: str, runs: list[ComparedRun], comparison: Comparison, png: Path) -> str:
    """Plot the curves into `png` and log the comparison (plot, table,
    numbers) as an MLflow run of its own in the first compared run's
    experiment (`client`'s store, at `uri`); returns its id."""
    plot(runs, png, comparison.title)
    files = {
        "compare.md": to_markdown(
            comparison.summaries,
            {
                "Spec keys that differ": comparison.spec_differences,
                "Devices and versions that differ": comparison.provenance_differences,
            },
        ),
        "compare.json": json.dumps(
            {
                "runs": comparison.summaries,
                "spec_differences": comparison.spec_differences,
                "provenance_differences": comparison.provenance_differences,
                "claims": {
                    run_id: {name: o.model_dump(mode="json", exclude_none=True) for name, o in outcomes.items()}
                    for run_id, outcomes in comparison.claims.items()
                },
            },
            indent=2,
        )
        + "\n",
    }
    experiment = client.get_experiment(runs[0].experiment_id).name
    return log(uri, experiment, runs, files, png, claim_tags(comparison))
