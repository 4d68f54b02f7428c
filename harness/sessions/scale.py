"""`harness scale SPEC`: where a device saturates for a spec.

The spec is trained at a ladder of sizes (`harness.run.scaling`); each size
is a child run in MLflow under one parent (tag `harness.kind=scale`) that
holds the table, the saturation point and the plot. The terminal gets a
line per size and a table that fits 80 columns.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import yaml

from harness import build
from harness import experiment_spec as spec
from harness.console import megabytes, out_console, print_table, si
from harness.record import runs, store, tracking
from harness.run import ceiling, provenance, scaling


class ScaleOptions(NamedTuple):
    axis: str
    sizes: list[int]
    chunk_iterations: int | None  # None: the spec's logging interval
    timed_chunks: int
    uri: str
    out: Path
    measure_ceiling: bool
    until_flat: bool = False  # end the ladder once the throughput has stopped growing (scaling.flat)
    max_seconds: float | None = None  # start no size that would end after this (from the command's start)


def table(points: list[scaling.SizePoint], axis: str, title: str, saturated: scaling.SizePoint | None):
    from rich.table import Table

    out = Table(title=title, title_justify="left")
    out.add_column(axis, justify="right")
    out.add_column("env steps/s", justify="right")
    out.add_column("% ceiling", justify="right")
    out.add_column("compile s", justify="right")
    out.add_column("program MB", justify="right")
    out.add_column("device MB", justify="right")
    for p in points:
        share = f"{100 * p.fraction_of_ceiling:.2g}%" if p.fraction_of_ceiling is not None else "-"
        mark = " *" if saturated is not None and p.size == saturated.size else ""
        out.add_row(
            f"{p.size}{mark}",
            si(p.env_steps_per_second),
            share,
            f"{p.compile_seconds:.1f}",
            megabytes(p.program_bytes),
            megabytes(p.device_peak_bytes),
        )
    return out


def plot(points: list[scaling.SizePoint], axis: str, title: str, saturated, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import EngFormatter, PercentFormatter

    sizes = [p.size for p in points]
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6.5), sharex=True, layout="constrained")
    top.plot(sizes, [p.env_steps_per_second for p in points], "o-")
    top.set_ylabel("env steps/s (steady state)")
    shares = [(p.size, 100 * p.fraction_of_ceiling) for p in points if p.fraction_of_ceiling]
    if shares:
        bottom.plot(*zip(*shares, strict=True), "s-", color="tab:orange")
    bottom.set_ylabel("share of the matmul ceiling")
    top.yaxis.set_major_formatter(EngFormatter())
    bottom.yaxis.set_major_formatter(PercentFormatter(decimals=1))
    bottom.set_xlabel(scaling.AXES[axis])
    for ax in (top, bottom):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.grid(alpha=0.3, which="both")
        if saturated is not None:
            ax.axvline(saturated.size, color="grey", linestyle="--", label=f"saturates at {saturated.size}")
    if saturated is not None:  # the dashed line is the only labelled artist
        top.legend(loc="best", fontsize="small")
    figure.suptitle(title)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def scale(path: str, options: ScaleOptions) -> int:
    """Measure the spec at each size; 0 when at least one size ran."""
    started = time.perf_counter()
    data = yaml.safe_load(Path(path).read_text())
    base = spec.load(path)
    fingerprint = provenance.fingerprint()
    title = f"{base.name}: {options.axis} on {fingerprint['device_kind']}"
    top = None
    if options.measure_ceiling:
        top = ceiling.measure_ceiling()
        out_console.print(f"device ceiling: {top.matmul_gflops[0]:,.1f} GFLOP/s float32 matmul")

    def plan_for(size: int):
        return build.build(spec.parse(scaling.resized(data, options.axis, size), source=path), path)

    points: list[scaling.SizePoint] = []

    def measure_one(plan) -> scaling.SizePoint:
        chunk = options.chunk_iterations or scaling.chunk_iterations(plan, points[-1] if points else None)
        return scaling.measure(plan, chunk, options.timed_chunks, top.matmul_gflops[0] if top else None)

    client = tracking.open_client(options.uri)
    experiment = store.get_or_create_experiment(client, options.uri, base.tracking.experiment or base.name)
    parent = client.create_run(
        experiment,
        run_name=f"scale {options.axis}",
        tags={
            "harness.kind": "scale",
            "scale.axis": options.axis,
            "scale.sizes": ",".join(map(str, options.sizes)),
            **runs.provenance_tags(fingerprint, provenance.versions(), provenance.git_state()),
        },
    )
    parent_id = parent.info.run_id
    stop: scaling.Stop | None = None
    status = "KILLED"
    out_console.print(_ladder(options), soft_wrap=True)
    try:
        for found in scaling.climb(options.sizes, plan_for, measure_one, (spec.SpecError, ValueError)):
            if isinstance(found, scaling.Stop):
                stop = found
                out_console.print(f"{options.axis}={found.size}: stopped, {found.reason}")
                break
            points.append(found)
            _log_point(client, experiment, parent_id, options.axis, found)
            out_console.print(
                f"{options.axis}={found.size}: {si(found.env_steps_per_second)} env steps/s, "
                f"compiled in {found.compile_seconds:.1f} s, {found.seconds:.0f} s in all"
            )
            if stop := _stop_after(points, options, time.perf_counter() - started):
                out_console.print(f"{options.axis}={stop.size}: not measured, {stop.reason}", soft_wrap=True)
                break
            if len(points) == 1 and len(options.sizes) > 1:
                out_console.print(_estimate(points[0], options), soft_wrap=True)
        saturated = scaling.saturation(points)
        _finish(client, parent_id, points, stop, saturated, options, title)
        status = "FINISHED" if points else "FAILED"
    finally:
        client.set_terminated(parent_id, status)
    if not points:
        return 1
    print_table(table(points, options.axis, title, scaling.marked(points)))
    best = max(p.env_steps_per_second for p in points)
    out_console.print(
        f"{scaling.describe_saturation(points, options.axis)}; best {si(best)} env steps/s; plot: {options.out}"
    )
    return 0


def _ladder(options: ScaleOptions) -> str:
    """What the ladder will measure and when it ends, said before the first size."""
    sizes = options.sizes
    listed = ", ".join(map(str, sizes)) if len(sizes) <= 6 else f"{sizes[0]}, {sizes[1]}, ..., {sizes[-1]}"
    ends = []
    if options.until_flat:
        ends.append(f"once the throughput has stopped growing ({scaling.FLAT_SIZES} sizes in a row below the best)")
    if options.max_seconds:
        ends.append(f"before a size that would end after {options.max_seconds:.0f} s")
    chunks = (
        f"chunks of {options.chunk_iterations} iterations"
        if options.chunk_iterations
        else f"chunks of about {scaling.CHUNK_SECONDS:.0f} s"
    )
    return (
        f"ladder: {options.axis} = {listed} ({len(sizes)} sizes; a warm-up and {options.timed_chunks} timed {chunks}"
        " each)" + (f", ending {' or '.join(ends)}" if ends else "") + "; time estimated after the first size"
    )


def _estimate(first: scaling.SizePoint, options: ScaleOptions) -> str:
    """The ladder's time from its first size's: each later size compiles anew
    and runs chunks of about the same seconds (given a fixed chunk, the work
    grows with the size instead)."""
    left = len(options.sizes) - 1
    if options.chunk_iterations:
        per_size = [first.seconds * size / first.size for size in options.sizes[1:]]
    else:
        per_size = [first.seconds] * left
    return (
        f"estimate: about {first.seconds:.0f} s a size; at most about {sum(per_size):.0f} s for the {left} sizes left"
        + (" (fewer once the throughput stops growing)" if options.until_flat else "")
    )


def _stop_after(points: list[scaling.SizePoint], options: ScaleOptions, elapsed: float) -> scaling.Stop | None:
    """Why the ladder ends after the sizes measured (None: it goes on)."""
    following = options.sizes[len(points)] if len(points) < len(options.sizes) else None
    return scaling.stop_after(
        points,
        following,
        until_flat=options.until_flat,
        elapsed=elapsed,
        limit=options.max_seconds,
        limit_name=f"--max-seconds {options.max_seconds or 0:.0f}",
        # A fixed chunk's work grows with the size; a timed chunk's does not.
        grows=following / points[-1].size if following and options.chunk_iterations else 1.0,
    )


def _log_point(client, experiment: str, parent_id: str, axis: str, point: scaling.SizePoint) -> None:
    child = client.create_run(
        experiment, run_name=f"{axis}={point.size}", tags={"mlflow.parentRunId": parent_id, "harness.kind": "scale"}
    )
    run_id = child.info.run_id
    try:
        client.log_param(run_id, f"scale.{axis}", point.size)
        now = int(time.time() * 1000)
        metrics = {
            "env_steps_per_second": point.env_steps_per_second,
            "compile_seconds": point.compile_seconds,
            "flops_per_env_step": point.flops_per_env_step,
            "fraction_of_ceiling": point.fraction_of_ceiling,
            "program_bytes": point.program_bytes,
            "device_peak_bytes": point.device_peak_bytes,
        }
        for name, value in metrics.items():
            if value is not None:
                client.log_metric(run_id, name, float(value), timestamp=now)
                # On the parent too, one step per size: a curve in the UI.
                client.log_metric(parent_id, name, float(value), timestamp=now, step=point.size)
    finally:
        client.set_terminated(run_id, "FINISHED")


def _finish(client, parent_id, points, stop, saturated, options: ScaleOptions, title: str) -> None:
    document = scaling.record(options.axis, options.sizes, points, stop)
    text = json.dumps(document, indent=1)
    runs.log_texts(client, parent_id, {"scale.json": text})
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.out.with_suffix(".json").write_text(text + "\n")  # beside the plot
    tags = {"scale.stopped": stop.reason[:250] if stop else "no"}
    if saturated is not None:
        tags["scale.saturation"] = str(saturated.size)
    runs.set_tags(client, parent_id, tags)
    if points:
        plot(points, options.axis, title, scaling.marked(points), options.out)
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / "scale.png"
            copy.write_bytes(options.out.read_bytes())
            client.log_artifact(parent_id, str(copy))
