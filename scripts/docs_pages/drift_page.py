"""docs/results/jax-versions.md: what another JAX line changes, from the
reports of `harness drift` committed in results/drift/ and the CPU compile
studies (`scripts/compile-study`) in results/compile/."""

from __future__ import annotations

import json
from pathlib import Path

from docs_pages import ROOT
from docs_pages.common import header, table
from harness.judge import drift

PAGE = "docs/results/jax-versions.md"


def load_reports() -> list[tuple[Path, dict]]:
    """The committed reports, those over the most specs first."""
    reports = [(p, json.loads(p.read_text())) for p in sorted((ROOT / "results" / "drift").glob("*.json"))]
    return sorted(reports, key=lambda report: -len(report[1]["specs"]))


def load_compile_studies() -> list[tuple[Path, list[dict]]]:
    """The committed `scripts/compile-study` records of CPU lines."""
    return [(p, json.loads(p.read_text())) for p in sorted((ROOT / "results" / "compile").glob("cpu-*.json"))]


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


STAGES = ("init", "chunk", "evaluate")


def _failed(row: dict) -> list[str]:
    """The columns of a process that did not finish: the programs it
    compiled, `> N` where its time ran out, or its error."""
    if "timeout_s" not in row or row.get("stage") not in STAGES:
        return [row["error"], "", "", "", ""]
    at = STAGES.index(row["stage"])
    return [*(["done"] * at), f"> {row['timeout_s']}", *(["-"] * (len(STAGES) - at - 1)), "-", "-"]


def compile_section(path: Path, rows: list[dict]) -> str:
    """One compile study over several JAX lines: each (line, spec,
    setting)'s compile seconds per program, its steady-state chunk time, and
    a hash of its metrics' bits."""
    lines = sorted({row["jax"] for row in rows}, key=lambda v: tuple(int(part) for part in v.split(".")))
    body = []
    for line in lines:
        for row in (r for r in rows if r["jax"] == line):
            if "error" in row:
                body.append([line, row.get("spec", "-"), row["setting"], row.get("threefry", "-"), *_failed(row)])
                continue
            body.append(
                [
                    line,
                    row["spec"],
                    row["setting"],
                    row.get("threefry", "-"),
                    _seconds(row["init_s"]),
                    _seconds(row["compile_s"]),
                    _seconds(row.get("eval_compile_s")),
                    f"{row['chunk_s']:.2f}",
                    f"`{row['metrics_sha256'][:8]}`",
                ]
            )
    return (
        "## AlphaZero's compile on each JAX line\n\n"
        f"From `{path.relative_to(ROOT)}` (`scripts/compile-study SPEC --iterations N --settings ...`, one process "
        "per line, spec and setting; tic-tac-toe cut to 16 iterations, Othello to 4, each in 4 chunks). Seconds "
        "to compile the initial state, one training chunk and the evaluation; the steady-state seconds per "
        "chunk; and the start of a hash of every chunk's metrics and the evaluation's: rows with the same hash "
        "computed the same bits. "
        "*default*: no XLA flag; *optimize-for-size*: "
        "`XLA_FLAGS=--xla_backend_extra_options=xla_cpu_optimize_for_size`; *rolled-threefry*: JAX's threefry "
        "hash lowered as JAX's own CPU loop. *threefry*: how the row's programs lowered that hash, straight-line "
        "(one fused kernel a draw) or rolled (JAX's loop): the harness lowers it straight-line on jaxlib 0.10 and "
        "rolled on newer lines (`harness/run/lowering.py`), with the same bits either way. A process that runs "
        "past its time is shown with the program it was compiling (`> N` seconds).\n\n"
        + table(
            ["jax", "spec", "setting", "threefry", "init s", "chunk s", "evaluation s", "s per chunk", "bits"],
            body,
            ["l", "l", "l", "l", "r", "r", "r", "r", "l"],
        )
        + "\n"
    )


def drift_page(reports: list[tuple[Path, dict]], studies: list[tuple[Path, list[dict]]] = ()) -> str:
    out = [header("results/drift/*.json and results/compile/cpu-*.json"), "# JAX versions\n\n"]
    out.append(
        "What moving the harness's packages to another JAX line changes, spec by spec, on one machine: each "
        "report is `harness drift` (see [Devices](../guides/devices.md#what-an-upgrade-changes-harness-drift)) "
        "run with the two lines' environments, or with one of them and the same environment with an XLA flag set "
        "(the side's label names the flag). *bits*: whether the two sides' curves are identical; "
        "*verdict*: the newer side's run judged against the older's as `harness reproduce` judges (statistical "
        "where the versions differ); *claims*: the spec's claims judged on the newer side's run (a report cut "
        "short drops them); the ratios are the newer side's median over the older's, with the "
        "round-by-round range of the speed ratio. A report cut to a few iterations per spec answers speed, "
        "compile time and bits; its returns are too short to judge, so its verdict is given only where the bits "
        "are identical (an exact PASS).\n\n"
    )
    if not reports:
        out.append("No report is committed yet.\n")
    for path, document in reports:
        machine = document["settings"].get("machine")
        count = len(document["specs"])
        title = f"{document['newer']} against {document['older']}: {count} spec{'s' * (count != 1)}"
        out.append(f"## {title}, {document['settings']['budget']}" + (f", on {machine}" if machine else "") + "\n\n")
        out.append(f"From `{path.relative_to(ROOT)}`.\n\n")
        out.append(drift.to_markdown(document) + "\n")
    for path, rows in studies:
        out.append(compile_section(path, rows))
    return "".join(out)
