"""The site around the generated pages: docs/index.md, the landing page, and
the results part of mkdocs.yml's nav, between its BEGIN/END comments."""

from __future__ import annotations

from docs_pages import ROOT
from docs_pages.common import codes, header
from docs_pages.performance import Bench
from docs_pages.results_pages import Reference
from docs_pages.spec_fields import literal_choices
from harness import experiment_spec as S

MKDOCS = "mkdocs.yml"
NAV_BEGIN = "# BEGIN results pages"
NAV_END = "# END results pages"


def landing(specs: dict[str, list[Reference]], benches: list[Bench]) -> str:
    names = list(S.spec_models())
    suites = literal_choices(S.EnvSpec.model_fields["suite"].annotation)
    out = [header("the registry of algorithms, results/ and results/bench/"), "# rl-harness\n\n"]
    out.append(
        "A benchmarking and reproducibility harness for reinforcement learning in JAX. An experiment is a "
        f"YAML spec: an environment from {', '.join(suites[:-1])} or {suites[-1]}, an algorithm "
        f"({codes(names)}), its hyperparameters and seeds. `harness run` trains "
        "every seed in one jitted program and logs the curves, speed and machine to MLflow; "
        "`harness publish` keeps a run as the spec's reference, and `harness reproduce` runs the spec "
        "again and judges the new run against it: bit for bit on the same device and versions, "
        "statistically elsewhere.\n\n"
    )
    out.append(
        "- [Getting started](getting-started.md): install, run a spec, read the results.\n"
        "- Guides: [writing specs](guides/specs.md), [sweeps](guides/sweeps.md), "
        "[devices](guides/devices.md), [reproducing a result](guides/reproduce.md) and more.\n"
        "- Reference: [every spec key](reference/spec.md), [the command line](reference/cli.md), "
        "[exit codes](reference/exit-codes.md), [the Python API](reference/algorithms.md).\n"
        f"- [Results](results/index.md): the {len(specs)} published specs, their claims and curves.\n"
        f"- [Performance](performance.md): the bench on {len(benches)} machines.\n"
        "- [Design notes](design.md).\n"
    )
    return "".join(out)


def mkdocs_config(specs: dict[str, list[Reference]]) -> str:
    text = (ROOT / MKDOCS).read_text()
    lines = text.splitlines(keepends=True)
    begin = next(i for i, line in enumerate(lines) if line.strip().startswith(NAV_BEGIN))
    end = next(i for i, line in enumerate(lines) if line.strip().startswith(NAV_END))
    indent = lines[begin][: len(lines[begin]) - len(lines[begin].lstrip())]
    pages = [f"{indent}- {stem}: results/{stem}.md\n" for stem in specs]
    return "".join(lines[: begin + 1] + pages + lines[end:])
