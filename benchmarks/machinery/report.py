"""The benchmark suite's report: the table of a bench run's entries, their
speed tests against a baseline or a peer (harness.stats.speed), their ratio
to the last run on the same device (benchmarks.machinery.history), its
header and notes, and the chart of their rates.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from benchmarks.machinery.history import Change, ceiling_change
from benchmarks.machinery.measure import ENV_STEPS, SIMULATIONS, UPDATES, VALUES, Result
from harness.console import megabytes, si
from harness.run.ceiling import Ceiling

# ------------------------------------------------------------------- table

# harness.stats.speed's outcomes, as a record holds them. Named here, not imported: a
# baseline's bench (--baseline REV) runs this module over a harness that may predate the test.
SLOWER, NOT_SLOWER = "slower", "not slower"

_SHORT_UNITS = {ENV_STEPS: "steps/s", SIMULATIONS: "sims/s", UPDATES: "updates/s", VALUES: "values/s"}


def _percent(value: float | None, ceiling: float | None, prefix: str = "") -> str:
    if value is None or not ceiling:
        return "-"
    percent = 100 * value / ceiling
    return f"{prefix}{percent:.2g}%" if percent < 10 else f"{prefix}{percent:.0f}%"


NAME_WIDTH = 26  # the entry column's width, so that each table fits 80 columns


def wrap_name(name: str, width: int) -> str:
    """`name` in lines of at most `width` characters, each broken after a
    separator so that no word of an entry's name is split: after its `[`
    when the parameters then fit on a line, else after the last `-`, `_`,
    `/` or `|` in the line; a part longer than a line is cut at the width."""
    lines, rest = [], name
    while len(rest) > width:
        head = rest[:width]
        bracket = head.find("[") + 1
        if bracket and len(rest) - bracket <= width:
            cut = bracket
        else:
            cut = max(head.rfind(c) for c in "[-_/|") + 1 or width
        lines.append(rest[:cut])
        rest = rest[cut:]
    return "\n".join([*lines, rest])


def slower(result: Result) -> bool:
    """Whether the entry's speed test (against a baseline) found it SLOWER."""
    return result.extra.get("speed", {}).get("outcome") == SLOWER and "baseline" in result.extra


def _tested(r: Result) -> str:
    """An entry's speed test as its cell: `0.93x [0.90-0.96]`."""
    test = r.extra.get("speed")
    if test is None:
        return r.extra.get("baseline", {}).get("missing", "-")[:38]
    return f"{test['ratio']:.2f}x [{test['interval'][0]:.2f}-{test['interval'][1]:.2f}]"


def _outcome(r: Result) -> str:
    test = r.extra.get("speed")
    if test is None:
        return "-"
    word = {SLOWER: "SLOWER", NOT_SLOWER: f"not slower by {test['slower_by']:.0%}"}
    return word.get(test["outcome"], "undecided") + f", {test['rounds']} rounds"


def table(results: list[Result], changes: dict[str, Change], ceiling: Ceiling | None, title: str):
    """The report as rich tables of a row per entry (speed; its test against
    a baseline or peer, where there is one; work; against the device
    ceiling; memory and the learning figure), each narrow enough for an
    80-column terminal."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    bandwidth = ceiling.bandwidth_gbs[0] if ceiling else None

    def lower_bound(r: Result) -> str:
        return "≥" if r.unbounded_loops else ""

    groups = (
        (
            title,
            [
                ("rate (median)", lambda r: f"{si(r.rate[0])} {_SHORT_UNITS.get(r.unit, r.unit)}"),
                ("min-max", lambda r: f"{si(r.rate[1])}-{si(r.rate[2])}"),
                ("vs last", lambda r: changes.get(r.name, Change("new")).label()),
            ],
        ),
        *(
            [
                (
                    tested_title(results),
                    [("ratio [95%]", _tested), ("speed test", _outcome)],
                )
            ]
            if any("speed" in r.extra or "baseline" in r.extra for r in results)
            else []
        ),
        (
            "work",
            [
                ("compile s", lambda r: f"{r.compile_seconds:.1f}" if r.compile_seconds is not None else "-"),
                ("sims/s", lambda r: si(r.simulations_per_second)),
                ("updates/s", lambda r: si(r.updates_per_second)),
                (
                    "FLOP/iter",
                    lambda r: (
                        f"{lower_bound(r)}{si(r.flops_per_iteration)}" if r.flops_per_iteration is not None else "-"
                    ),
                ),
            ],
        ),
        (
            "against the device ceiling",
            [
                (
                    "GFLOP/s",
                    lambda r: f"{lower_bound(r)}{r.gflops_per_second:.3g}" if r.gflops_per_second is not None else "-",
                ),
                (
                    "% matmul",
                    lambda r: _percent(
                        r.gflops_per_second, ceiling.matmul_for(r.compute_dtype) if ceiling else None, lower_bound(r)
                    ),
                ),
                ("% BW", lambda r: _percent(r.gbytes_per_second, bandwidth, "≤")),
            ],
        ),
        (
            "memory and result",
            [
                ("peak RSS MB", lambda r: megabytes(r.peak_host_bytes)),
                ("device MB", lambda r: megabytes(r.peak_device_bytes)),
                (
                    "final metric / note",
                    lambda r: f"{r.final_metric} {r.final_value:.3g}" if r.final_metric else r.note or "-",
                ),
            ],
        ),
    )
    tables = []
    longest = max((len(r.name) for r in results), default=5)
    name_width = min(NAME_WIDTH, longest)
    for heading, columns in groups:
        # Text, not markup: entry names hold brackets ("spec[ppo_cartpole-1seed]").
        out = Table(title=Text(heading), title_justify="left")
        # Long entry names continue on a second line, broken after a
        # separator ("spec[ppo_cartpole-16seeds-" / "cores]"), never cut.
        out.add_column("entry", justify="left", overflow="fold", min_width=name_width)
        for name, _ in columns:
            # A change's label is read whole ("-20.0%").
            left = name.startswith("final") or name == "speed test"
            out.add_column(name, justify="left" if left else "right", no_wrap=name == "vs last")
        for r in results:
            out.add_row(
                Text(wrap_name(r.name, name_width)),
                *[Text(cell(r)) for _, cell in columns],
                style="bold red" if slower(r) else None,
            )
        tables.append(out)
    return Group(*tables)


def tested_title(results: list[Result]) -> str:
    """The speed tests' table title: against which baseline, or the peers."""
    revs = {r.extra["baseline"]["rev"] for r in results if "baseline" in r.extra}
    if revs:
        return f"speed test against the baseline {', '.join(str(rev)[:10] for rev in sorted(revs))}"
    return "speed test against the peer"


def header(info: dict[str, Any], ceiling: Ceiling | None, previous_ceiling: dict[str, Any] | None) -> list[str]:
    """The lines printed above the table: the device, the conditions, the ceiling."""
    fingerprint, load = info["fingerprint"], info["load_average"]
    lines = [
        f"device: {fingerprint['platform']} ({fingerprint['device_kind']}, {fingerprint['cpu_model']}); "
        f"{fingerprint['local_device_count']} local device(s), entries run on one (-cores: seeds over the cores);"
        f" jax {info['versions']['jax']}",
        f"session: {info['wall_seconds']:.0f} s wall, {info['cpu_seconds']:.0f} s CPU in this process; load average "
        f"(1 min) {load['start']:.2f} at start, {load['end']:.2f} at end, on {info['cpu_count']} CPUs "
        "(a machine shared with other work runs everything slower)",
    ]
    if ceiling:
        lines.append(
            f"device ceiling: {_matmuls(ceiling)} on {ceiling.matmul_size}² matmuls, "
            f"{ceiling.bandwidth_gbs[0]:.1f} GB/s updating {ceiling.copy_bytes // 2**20} MB in place (medians)"
        )
        moved = ceiling_change(ceiling, previous_ceiling)
        if moved:
            lines.append(moved)
    return lines


def against_summary(results: list[Result]) -> str | None:
    """One line above the table for the side-by-side entries (`--against`)."""
    judged = [r for r in results if "speed" in r.extra and "baseline" not in r.extra]
    return speed_summary(judged, "peers") if judged else None


def speed_summary(results: list[Result], against: str) -> str:
    """What the speed tests of a run's entries against a baseline (or the
    peers) found: how many SLOWER (named), not slower or undecided, how
    many had no baseline, the lowest ratio, and what the verdicts promise."""
    from benchmarks.machinery.compat import speed

    judged = [r for r in results if "speed" in r.extra]
    missing = [r.name for r in results if r.extra.get("baseline", {}).get("missing")]
    if not judged:
        return f"against {against}: no entry compared" + (f" ({len(missing)} without a baseline)" if missing else "")
    counts = {outcome: [r.name for r in judged if r.extra["speed"]["outcome"] == outcome] for outcome in speed.OUTCOMES}
    test = min((r.extra["speed"] for r in judged), key=lambda t: t["ratio"])
    lowest = next(r.name for r in judged if r.extra["speed"] is test)
    parts = [f"{len(counts[speed.NOT_SLOWER])} not slower by {test['slower_by']:.0%}"]
    if counts[speed.SLOWER]:
        parts.insert(0, f"{len(counts[speed.SLOWER])} SLOWER ({', '.join(counts[speed.SLOWER])})")
    if counts[speed.UNDECIDED]:
        parts.append(f"{len(counts[speed.UNDECIDED])} undecided ({', '.join(counts[speed.UNDECIDED])})")
    if missing:
        parts.append(f"{len(missing)} without a baseline")
    return (
        f"against {against}, {len(judged)} {'entry' if len(judged) == 1 else 'entries'} tested: {', '.join(parts)};"
        f" lowest ratio {test['ratio']:.2f}x"
        f" [{test['interval'][0]:.2f}-{test['interval'][1]:.2f}] ({lowest}). Any SLOWER in the run is wrong at"
        f" most {speed.ALPHA:.0%} of the time when nothing is slower; a slowdown of"
        f" {test['slower_by']:.0%} reads 'not slower' at most {test['beta']:.0%} of the time"
        " (harness.stats.speed; docs/guides/bench.md)"
    )


def _matmuls(ceiling: Ceiling) -> str:
    """`167.1 GFLOP/s float32, 160.3 bfloat16`."""
    text = f"{ceiling.matmul_gflops[0]:.1f} GFLOP/s float32"
    if ceiling.matmul_bf16_gflops:
        text += f", {ceiling.matmul_bf16_gflops[0]:.1f} bfloat16"
    return text


def notes(results: list[Result], ceiling: Ceiling | None, previous_started: set[str], key: str) -> list[str]:
    """The lines printed under the table: what each column means."""
    lines = [
        "rate: median over repeats, all seeds together (spec entries: the runner's chunks after the first; "
        "micro: pytest-benchmark rounds); min-max: the slowest and fastest repeat",
    ]
    if previous_started:
        lines.append(
            f"vs last: median against the last run of the entry on this device (key {key}, runs of "
            f"{', '.join(sorted({s[:16].replace('T', ' ') for s in previous_started}))} UTC): a ratio to read, not "
            "a verdict (a stored run meets another machine state: --baseline REV runs both side by side)"
        )
    else:
        lines.append(f"vs last: no earlier run on this device (key {key}); this run is the baseline for the next")
    lines.append(
        "FLOP/iter: counted from the jaxpr with scan trip counts (harness.run.flops), per training iteration of "
        "one seed (spec) or per call (micro); XLA's cost analysis counts a loop body once, so it is kept "
        "only as xla_flops_per_call in the JSON; ≥: a while loop counted once"
    )
    if ceiling:
        lines.append(
            f"% matmul: achieved GFLOP/s of the device's {ceiling.matmul_size}² matmul in the dtype the entry"
            f" computes in ({_matmuls(ceiling)}); % BW: bytes every primitive reads and writes, unfused "
            f"(an upper bound), over an in-place update of {ceiling.copy_bytes // 2**20} MB "
            f"({ceiling.bandwidth_gbs[0]:.1f} GB/s)"
        )
    if any(r.peak_host_since_start for r in results):
        lines.append("peak RSS: the process's peak since it started (no per-entry reset on this OS)")
    lines.append("final metric: mean over seeds of the last 10% of iterations")
    return lines


def render(*renderables: Any, width: int = 80) -> str:
    """Plain text (no colour codes) of rich renderables and strings."""
    from rich.console import Console

    buffer = io.StringIO()
    console = Console(file=buffer, width=width, highlight=False, color_system=None, soft_wrap=False)
    for item in renderables:
        if isinstance(item, str):
            console.print(item, soft_wrap=True, markup=False)
        else:
            console.print(item)
    return "\n".join(line.rstrip() for line in buffer.getvalue().splitlines()) + "\n"


# ------------------------------------------------------------------- chart


def plot_rates(results: list[Result], changes: dict[str, Change], path: Path, title: str) -> Path:
    """A horizontal bar per entry of its median rate (log scale), min-max as
    an error bar, the previous run's median as a black tick, an entry its
    speed test found SLOWER than the baseline in red; one panel per unit. Written as a PNG with the Agg renderer."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    units = [u for u in (ENV_STEPS, SIMULATIONS, UPDATES) if any(r.unit == u for r in results)]
    units += sorted({r.unit for r in results} - set(units))
    groups = [[r for r in results if r.unit == unit] for unit in units]
    height = 1.2 + sum(0.35 * len(g) + 0.8 for g in groups)
    figure = Figure(figsize=(10, height), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(len(groups), 1, squeeze=False, height_ratios=[len(g) + 1 for g in groups])[:, 0]
    for axis, unit, group in zip(axes, units, groups, strict=True):
        y = list(range(len(group)))
        medians = [r.rate[0] for r in group]
        errors = [[r.rate[0] - r.rate[1] for r in group], [r.rate[2] - r.rate[0] for r in group]]
        colours = ["tab:red" if slower(r) else "tab:blue" for r in group]
        axis.barh(y, medians, xerr=errors, color=colours, capsize=2)
        for i, r in enumerate(group):
            axis.annotate(f"  {si(r.rate[0])}", (r.rate[2], i), va="center", fontsize="x-small")
        before = [(i, changes[r.name].previous_rate) for i, r in enumerate(group) if r.name in changes]
        before = [(i, rate) for i, rate in before if rate]
        if before:
            axis.plot(
                [b for _, b in before], [i for i, _ in before], "k|", markersize=16, markeredgewidth=2, label="last run"
            )
            axis.legend(loc="lower right", fontsize="small")
        axis.set_yticks(y, [r.name for r in group], fontsize="small")
        axis.invert_yaxis()
        axis.set_xscale("log")
        # Bars on a log axis start at its left edge: put it well below the
        # smallest rate, so that lengths are comparable.
        axis.set_xlim(left=min(r.rate[1] for r in group) / 5, right=max(r.rate[2] for r in group) * 3)
        axis.set_xlabel(unit)
        axis.grid(axis="x", which="both", alpha=0.3)
    figure.suptitle(title, fontsize="medium")
    path = Path(path)
    figure.savefig(path, dpi=100)
    return path
