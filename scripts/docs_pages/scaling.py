"""The "Scaling curves" section of docs/performance.md and its plots,
docs/img/scale-<name>.svg: the records of `harness scale` in
results/scale/*.json (`harness.sessions.scale`), each a spec's throughput
at a ladder of sizes of one number on one machine."""

from __future__ import annotations

import json
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.ticker import FuncFormatter, LogFormatter, MaxNLocator, NullLocator

from docs_pages import ROOT
from docs_pages.common import drawing, svg, table
from harness.console import si
from harness.run import scaling

# What grows, in words (harness.run.scaling.AXES).
AXIS_WORDS = {"envs": "envs per seed", "seeds": "seeds side by side"}


class ScaleCurve(typing.NamedTuple):
    path: Path
    data: dict[str, Any]

    @property
    def stem(self) -> str:
        return self.path.stem

    @property
    def image(self) -> str:
        return f"scale-{self.stem}.svg"

    @property
    def axis(self) -> str:
        return self.data["axis"]

    @property
    def points(self) -> list[dict[str, Any]]:
        return self.data["points"]

    @property
    def heading(self) -> str:
        """`<machine>-<spec>-<axis>` (the file's name) as `spec, what grows, machine`."""
        words = AXIS_WORDS.get(self.axis, self.axis)
        rest = self.stem.removesuffix(f"-{self.axis}")
        machine, _, spec = rest.rpartition("-")
        if rest == self.stem or not machine:
            return f"{self.stem}, {words}"
        return f"{spec}, {words}, {machine}"

    @property
    def still_growing(self) -> bool:
        """The saturation size is the largest measured: a longer ladder would find it."""
        return scaling.still_growing([scaling.SizePoint(**point) for point in self.points])

    @property
    def saturates_at(self) -> int | None:
        return None if self.still_growing else self.data.get("saturation")


def load_curves() -> list[ScaleCurve]:
    return [ScaleCurve(p, json.loads(p.read_text())) for p in sorted((ROOT / "results" / "scale").glob("*.json"))]


def megabytes(value: int | None) -> str:
    return "-" if value is None else f"{value / 2**20:,.1f}"


def share_text(percent: float) -> str:
    return f"{percent:.1f}%" if percent >= 1 else f"{percent:.2g}%"


def curve_table(curve: ScaleCurve) -> str:
    rows = []
    for point in curve.points:
        size = f"**{point['size']}**" if point["size"] == curve.saturates_at else str(point["size"])
        share = point.get("fraction_of_ceiling")
        rows.append(
            [
                size,
                f"{point['env_steps_per_second']:,.0f}",
                "-" if share is None else share_text(100 * share),
                f"{point['compile_seconds']:.1f}",
                megabytes(point.get("program_bytes")),
                megabytes(point.get("device_peak_bytes")),
            ]
        )
    head = [curve.axis, "Env steps/s", "% of the matmul ceiling", "Compile s", "Program MB", "Device MB"]
    return table(head, rows, ["r"] * len(head))


def verdict(curve: ScaleCurve) -> str:
    """Where the throughput levels off, and where the ladder stopped."""
    points, axis = curve.points, curve.axis
    if not points:
        text = "No size ran."
    else:
        best = max(points, key=lambda p: p["env_steps_per_second"])
        at_best = f"{best['env_steps_per_second']:,.0f} env steps/s at {axis}={best['size']}"
        if curve.still_growing:
            text = f"Still growing at the largest size measured, {axis}={points[-1]['size']} ({at_best})."
        else:
            text = f"Saturates at {axis}={curve.saturates_at} (bold): {scaling.SATURATION}, {at_best}."
    stopped = curve.data.get("stopped")
    if stopped:
        text += f" The ladder stopped at {axis}={stopped['size']}: {stopped['reason']}."
    return text


class LogLabels(LogFormatter):
    """The ticks a log axis labels (its decades, and some others over a short
    range), written by `text`."""

    def __init__(self, text: Callable[[float], str]):
        super().__init__(labelOnlyBase=False)
        self.text = text

    def __call__(self, x: float, pos: int | None = None) -> str:
        return self.text(x) if super().__call__(x, pos) else ""


def label_log_axis(axis: Axes, values: list[float], text: Callable[[float], str]) -> None:
    """Ticks on a log y axis, labelled by `text`: round steps where the
    values span less than a decade (log ticks would label one or none),
    else matplotlib's log ticks."""
    if max(values) < 10 * min(values):
        axis.yaxis.set_major_locator(MaxNLocator(nbins=5))
        axis.yaxis.set_minor_locator(NullLocator())
        axis.yaxis.set_major_formatter(FuncFormatter(lambda value, _: text(value)))
    else:
        axis.yaxis.set_major_formatter(LogLabels(text))
        axis.yaxis.set_minor_formatter(LogLabels(text))


def curve_plot(curve: ScaleCurve) -> bytes:
    """Throughput on top and the share of the ceiling below, log-log (sizes
    in powers of two), a dashed line where the throughput saturates."""
    points = curve.points
    sizes = [p["size"] for p in points]
    panels = [
        (
            "env steps/s (steady state, all seeds)",
            sizes,
            [p["env_steps_per_second"] for p in points],
            si,
            "o",
            "tab:blue",
        )
    ]
    shared = [p for p in points if p.get("fraction_of_ceiling")]
    if shared:
        shares = [100 * p["fraction_of_ceiling"] for p in shared]
        panels.append(
            ("share of the matmul ceiling", [p["size"] for p in shared], shares, percent_text, "s", "tab:orange")
        )
    with drawing(7.0, 0.6 + 2.4 * len(panels)) as figure:
        axes = figure.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
        for axis, (label, xs, ys, text, marker, colour) in zip(axes, panels, strict=True):
            axis.plot(xs, ys, marker=marker, color=colour)
            axis.set_xscale("log", base=2)
            axis.set_yscale("log")
            label_log_axis(axis, ys, text)
            axis.set_ylabel(label)
            axis.grid(alpha=0.3, which="both")
            if curve.saturates_at is not None:
                axis.axvline(
                    curve.saturates_at,
                    color="0.4",
                    linestyle="--",
                    linewidth=1.0,
                    label=f"saturates at {curve.saturates_at}",
                )
        axes[0].set_xticks(sizes, [str(s) for s in sizes])
        axes[0].xaxis.set_minor_locator(NullLocator())
        axes[-1].set_xlabel(f"{curve.axis}: {AXIS_WORDS.get(curve.axis, curve.axis)} (log scale)")
        if curve.saturates_at is not None:
            axes[0].legend(loc="best", fontsize="small", frameon=False)
        figure.suptitle(curve.heading, fontsize="medium")
        return svg(figure)


def percent_text(value: float) -> str:
    return f"{value:g}%"


def scaling_section(curves: list[ScaleCurve]) -> str:
    out = ["## Scaling curves\n\n"]
    out.append(
        "Throughput against batch size: a spec trained at a ladder of sizes of one number, each seed's envs "
        "or the seeds side by side, to find where a machine saturates. Make one with "
        "`harness scale SPEC --axis envs --sizes 4,16,64,256,1024 --out results/scale/NAME.png` "
        "(NAME: `<machine>-<spec>-<axis>`), which writes its record, NAME.json, beside the plot. Env steps/s: "
        "steady state, all seeds, the median of the timed chunks; % of the matmul ceiling: the counted FLOPs "
        "per env step at that rate, as a share of the machine's float32 matmul rate; program MB: the compiled "
        "programs' largest need (XLA's memory analysis); device MB: the device allocator's peak (GPU and TPU "
        "only); 1 MB = 2²⁰ bytes.\n\n"
    )
    if not curves:
        out.append("No curves recorded yet (`results/scale/` holds none).\n\n")
    for curve in curves:
        out.append(f"### {curve.heading}\n\n")
        out.append(f"Record: `{curve.path.relative_to(ROOT)}`.\n\n")
        if curve.points:
            out.append(curve_table(curve) + "\n")
        out.append(verdict(curve) + "\n\n")
        if curve.points:
            out.append(f"![{curve.heading}: throughput and share of the ceiling against size](img/{curve.image})\n\n")
    return "".join(out).rstrip("\n") + "\n"
