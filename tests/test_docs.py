"""The documentation site: its generated pages are those the code and the
records make today (scripts/docs_pages/), and it builds with
`mkdocs build --strict` (no broken link, no page left out of the nav, no
docstring mkdocstrings cannot read)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GENERATOR = ROOT / "scripts" / "docs_pages"  # a folder with __main__.py
# Folders whose every file the generator writes: a file there that it no
# longer writes (a spec no longer published) is stale too.
OWNED = ("docs/results/*.md", "docs/results/img/*.svg", "docs/img/scale-*.svg")


def test_generated_pages_are_current(tmp_path):
    subprocess.run([sys.executable, str(GENERATOR), "--out", str(tmp_path)], cwd=ROOT, check=True, timeout=300)
    generated = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert generated, "the generator wrote nothing"
    stale = [
        path
        for path in generated
        if not (ROOT / path).is_file() or (ROOT / path).read_bytes() != (tmp_path / path).read_bytes()
    ]
    left = sorted({str(p.relative_to(ROOT)) for pattern in OWNED for p in ROOT.glob(pattern)} - set(generated))
    assert not stale and not left, (
        "generated documentation pages are stale; run `python scripts/docs_pages` and commit them:\n  "
        + "\n  ".join(stale + [f"{path} (no longer generated: delete it)" for path in left])
    )


def test_site_builds_strict(tmp_path):
    site = tmp_path / "site"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "-d",
            str(site),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr}"
    assert (site / "index.html").is_file()
    assert (site / "reference" / "spec" / "index.html").is_file()


def test_each_command_s_documented_exit_codes_are_the_ones_it_returns():
    """The exit-codes page's table of each command lists every EXIT_* code
    its `cmd_<name>` returns, and a command for every one the parser has."""
    import ast

    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from docs_pages.exit_codes import COMMAND_EXITS
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    from harness import cli

    assert list(COMMAND_EXITS) == list(cli.COMMANDS)
    tree = ast.parse((ROOT / "harness" / "cli.py").read_text())
    for function in tree.body:
        if isinstance(function, ast.FunctionDef) and function.name.startswith("cmd_"):
            returned = {
                getattr(cli, node.id)
                for ret in ast.walk(function)
                if isinstance(ret, ast.Return) and ret.value is not None
                for node in ast.walk(ret.value)
                if isinstance(node, ast.Name) and node.id.startswith("EXIT_")
            }
            documented = {0, 2, 130, 143} | set(COMMAND_EXITS[function.name.removeprefix("cmd_")])
            assert returned <= documented, (function.name, returned - documented)


def test_the_guides_name_the_gating_metrics_and_statistics_the_code_uses():
    """What the reproduce guide says gates a verdict without a test claim,
    and the statistics it lists for a test, are the code's own lists."""
    import re

    from harness.judge.reproduce import LEARNING_METRICS
    from harness.spec_claims import GATING_STATISTICS

    guide = " ".join((ROOT / "docs" / "guides" / "reproduce.md").read_text().split())
    (metrics,) = re.findall(r"learning metrics' intervals overlapping \(([^)]*)\)", guide)
    assert re.findall(r"`(\w+)`", metrics) == list(LEARNING_METRICS)
    (listed,) = re.findall(r"# a test: ([^\n]*?)(?:\s{2,}|$)", (ROOT / "docs/guides/reproduce.md").read_text(), re.M)
    assert re.findall(r"\b(mean|fraction_\w+)\b", listed) == list(GATING_STATISTICS)
