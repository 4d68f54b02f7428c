"""docs/performance.md and docs/img/performance.svg: the bench records of
results/bench/*.json, a table per machine and the rates across machines."""

from __future__ import annotations

import json
import math
import statistics
import typing
from pathlib import Path
from typing import Any

from docs_pages import ROOT
from docs_pages.common import drawing, header, seconds, short, svg, table, when
from docs_pages.scaling import ScaleCurve, scaling_section
from harness.console import si
from harness.judge import references


class Bench(typing.NamedTuple):
    path: Path
    data: dict[str, Any]

    @property
    def harness(self) -> dict[str, Any]:
        return self.data.get("harness") or {}

    @property
    def label(self) -> str:
        fingerprint = self.harness.get("fingerprint") or {}
        device = references.device_class(fingerprint) if fingerprint else self.path.stem
        cpu = (self.data.get("machine_info") or {}).get("cpu") or {}
        model = fingerprint.get("cpu_model") or cpu.get("brand_raw")
        label = f"{device} ({model}, {cpu.get('count')} cores)" if device == "cpu" and model else device
        names = list(self.entries())
        # A record of the side-by-side entries alone (`-k against`): the same machine, another run.
        return f"{label}, side by side" if names and all(n.startswith("against_") for n in names) else label

    def entries(self) -> dict[str, dict[str, Any]]:
        out = {}
        for benchmark in self.data.get("benchmarks", []):
            entry = (benchmark.get("extra_info") or {}).get("harness")
            if entry:
                out[entry["name"]] = entry
        return out


def load_benches() -> list[Bench]:
    return [Bench(p, json.loads(p.read_text())) for p in sorted((ROOT / "results" / "bench").glob("*.json"))]


def ceiling_text(ceiling: dict[str, Any]) -> str:
    """The bench's device ceiling; each figure's first value is its median."""

    def figure(value: float) -> str:
        return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"

    parts = []
    if ceiling.get("matmul_gflops"):
        parts.append(f"{figure(ceiling['matmul_gflops'][0])} GFLOP/s float32")
    if ceiling.get("matmul_bf16_gflops"):
        parts.append(f"{figure(ceiling['matmul_bf16_gflops'][0])} GFLOP/s bfloat16")
    size = f" on {ceiling['matmul_size']}² matmuls" if ceiling.get("matmul_size") else ""
    text = ", ".join(parts) + size
    if ceiling.get("bandwidth_gbs"):
        text += f"; {figure(ceiling['bandwidth_gbs'][0])} GB/s memory bandwidth"
    return text


def rate(entry: dict[str, Any]) -> float:
    return entry["rate"][0]


def performance_plot(benches: list[Bench]) -> bytes:
    names: dict[str, str] = {}
    for bench in benches:
        for name, entry in bench.entries().items():
            names.setdefault(name, entry["unit"])
    units = list(dict.fromkeys(names.values()))
    groups = [[n for n, u in names.items() if u == unit] for unit in units]
    colours = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown"]
    height = 1.0 + sum(0.25 * len(g) * len(benches) + 0.7 for g in groups)
    with drawing(8.0, height) as figure:
        axes = figure.subplots(len(groups), 1, squeeze=False, height_ratios=[len(g) + 1 for g in groups])[:, 0]
        width = 0.8 / len(benches)
        for axis, unit, group in zip(axes, units, groups, strict=True):
            lowest = math.inf
            for b, bench in enumerate(benches):
                entries = bench.entries()
                ys = [i + (b - (len(benches) - 1) / 2) * width for i, n in enumerate(group) if n in entries]
                values = [rate(entries[n]) for n in group if n in entries]
                lowest = min([lowest, *values])
                axis.barh(ys, values, height=width, color=colours[b % len(colours)], label=bench.label)
            axis.set_yticks(range(len(group)), group)
            axis.invert_yaxis()
            axis.set_xscale("log")
            axis.set_xlim(left=lowest / 5)
            axis.set_xlabel(f"{unit} (median over repeats, log scale)")
            axis.grid(axis="x", which="both", alpha=0.3)
        handles, labels = axes[0].get_legend_handles_labels()
        figure.legend(handles, labels, loc="outside lower center", ncols=len(benches), frameon=False)
        figure.suptitle("bench: median rates", fontsize="medium")
        return svg(figure)


def _matmul_share(entry: dict[str, Any], ceiling: dict[str, Any]) -> str:
    gflops = entry.get("gflops_per_second")
    key = "matmul_bf16_gflops" if entry.get("compute_dtype") == "bfloat16" else "matmul_gflops"
    if gflops is None or not ceiling.get(key):
        return "-"
    return f"{100 * gflops / ceiling[key][0]:.2g}%"


def workloads_section(bench: Bench) -> str:
    """Each workload at the size that fills this machine (`filled[...]`),
    its share of the matmul ceiling, and the small configuration beside it
    (`spec[<workload>-1seed]`)."""
    entries = bench.entries()
    filled = {name[len("filled[") : -1]: e for name, e in entries.items() if name.startswith("filled[")}
    if not filled:
        return ""
    ceiling = bench.harness.get("ceiling") or {}
    rows = []
    for workload, entry in filled.items():
        small = entries.get(f"spec[{workload}-1seed]")
        fill = (entry.get("extra") or {}).get("fill") or {}
        size = f"{entry['config'].get('num_envs')} x {entry['config'].get('seeds')}"
        rows.append(
            [
                f"`{workload}`",
                size + ("" if fill.get("saturated", True) else " (still growing)"),
                f"{si(rate(entry))}",
                _matmul_share(entry, ceiling),
                "-" if small is None else si(rate(small)),
                "-" if small is None else f"{rate(entry) / rate(small):.3g}x",
            ]
        )
    return (
        "Each workload at the size that fills this machine (`filled[...]`: the published spec, its seeds, "
        "at the envs per seed where its throughput stops growing), against the small configuration "
        "of the same env and algorithm (`spec[...-1seed]`: the benchmark spec, one seed, whose network, "
        "search or rollout may differ from the published spec's, so that a step's work may too). Env steps/s; "
        "% matmul: the counted FLOPs at that rate over the machine's matmul ceiling.\n\n"
        + table(
            ["Workload", "Envs x seeds", "Filled", "% matmul", "Small (1 seed)", "Filled / small"],
            rows,
            ["l", "r", "r", "r", "r", "r"],
        )
        + "\n"
    )


def peers_section(bench: Bench) -> str:
    """The side-by-side entries (`against_*`) of this machine: each peer's
    rate and the project's at the peer's configuration, on this device."""
    rows = []
    for name, entry in bench.entries().items():
        extra = entry.get("extra") or {}
        if not name.startswith("against_") or "ratio" not in extra:
            continue
        peer = statistics.median(extra["peer_rates"])
        low, high = (
            min(extra["our_rates"]) / max(extra["peer_rates"]),
            max(extra["our_rates"]) / min(extra["peer_rates"]),
        )
        rows.append([f"`{name}`", si(rate(entry)), si(peer), f"{extra['ratio']:.2f}x", f"{low:.2f}-{high:.2f}"])
    if not rows:
        return ""
    return (
        "Side by side with the peers on this machine (`--against`): each peer's own training code and the "
        "project's at the peer's configuration, alternating in one process. Env steps/s, medians; ratio: "
        "the project's over the peer's, with its range over the rounds.\n\n"
        + table(["Entry", "Project", "Peer", "Ratio", "Range"], rows, ["l", "r", "r", "r", "r"])
        + "\n"
    )


def performance(benches: list[Bench], curves: list[ScaleCurve]) -> str:
    out = [header("results/bench/*.json and results/scale/*.json"), "# Performance\n\n"]
    out.append(
        "The bench (`nox -s bench`, `benchmarks/`) measures the harness's parts, each entry a rate over all "
        "seeds: each workload at the size that fills the machine, and the env steps, searches and training "
        "iterations per second of small fixed configurations. "
        f"These are its records in `results/bench/`, {len(benches)} machines. Rate: the median over "
        "repeats, with the slowest and fastest; compile: seconds to compile the entry's program; GFLOP/s: "
        "achieved, from the program's counted FLOPs per call.\n\n"
        "![Median rates of the bench entries on each machine](img/performance.svg)\n\n"
    )
    for bench in benches:
        data, harness_info = bench.data, bench.harness
        commit = (harness_info.get("git") or {}).get("commit") or (data.get("commit_info") or {}).get("id")
        dirty = (harness_info.get("git") or {}).get("dirty")
        cpu = (data.get("machine_info") or {}).get("cpu") or {}
        versions = harness_info.get("versions") or {}
        out.append(f"## {bench.label}\n\n")
        facts = [
            ["record", f"`results/bench/{bench.path.name}`"],
            ["date", when(data.get("datetime"))],
            ["commit", f"`{short(commit)}`" + (" (uncommitted changes)" if dirty == "true" else "")],
            ["device", references.device_class(harness_info.get("fingerprint") or {})],
            ["CPU", f"{cpu.get('brand_raw', '-')}, {cpu.get('count', '-')} cores"],
            ["versions", ", ".join(f"{k} {versions[k]}" for k in ("python", "jax", "jaxlib") if k in versions)],
        ]
        if harness_info.get("ceiling"):
            facts.append(["device ceiling (medians)", ceiling_text(harness_info["ceiling"])])
        if harness_info.get("wall_seconds") is not None:
            facts.append(
                ["bench session", f"{harness_info.get('mode', '')} mode, {seconds(harness_info['wall_seconds'])} wall"]
            )
        out.append(table(["", ""], facts) + "\n")
        rows = []
        for name, entry in bench.entries().items():
            low, high = entry["rate"][1], entry["rate"][2]
            gflops = entry.get("gflops_per_second")
            rows.append(
                [
                    f"`{name}`",
                    f"{si(rate(entry))} {entry['unit']}",
                    f"{si(low)}-{si(high)}",
                    seconds(entry.get("compile_seconds")),
                    "-" if gflops is None else f"{gflops:,.1f}",
                ]
            )
        out.append(table(["Entry", "Rate (median)", "Min-max", "Compile", "GFLOP/s"], rows, ["l", "r", "r", "r", "r"]))
        out.append("\n")
        out.append(workloads_section(bench))
        out.append(peers_section(bench))
    if len(benches) > 1:
        base = benches[0]
        shared = [n for n in base.entries() if sum(n in b.entries() for b in benches) > 1]
        out.append("## Across machines\n\n")
        out.append(
            f"Median rates of the entries measured on several machines, and each one's ratio to "
            f"{base.label}. A ratio marked * compares different configurations of the entry "
            "(their config hashes differ).\n\n"
        )
        rows = []
        for name in shared:
            first = base.entries()[name]
            row = [f"`{name}`", first["unit"], si(rate(first))]
            for bench in benches[1:]:
                entry = bench.entries().get(name)
                if entry is None:
                    row += ["-", "-"]
                    continue
                mark = "" if entry.get("config_hash") == first.get("config_hash") else " *"
                row += [si(rate(entry)), f"{rate(entry) / rate(first):.3g}x{mark}"]
            rows.append(row)
        head = ["Entry", "Unit", base.label]
        for bench in benches[1:]:
            head += [bench.label, "ratio"]
        out.append(table(head, rows, ["l", "l"] + ["r"] * (len(head) - 2)))
    return "".join(out).rstrip("\n") + "\n\n" + scaling_section(curves)
