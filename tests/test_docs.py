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


def _is_module(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except (ModuleNotFoundError, ValueError):
        return False


def _returned_codes(module_name: str, function: str, seen: set | None = None) -> set[int]:
    """The exit codes a function can return, read from its source: `EXIT_*`
    names and `exit_codes.EXIT_*` attributes, int literals, `exit_codes.of_verdict(...)`
    (0, 1 or 4), and, through every call it returns, the codes of the
    function called (this module's own, or one imported by name or module)."""
    import ast
    import importlib
    import inspect

    from harness import exit_codes
    from harness.cli import exits
    from harness.stats import verdict

    seen = set() if seen is None else seen
    if (module_name, function) in seen:
        return set()
    seen.add((module_name, function))
    module = importlib.import_module(module_name)
    tree = ast.parse(Path(module.__file__).read_text())
    names: dict[str, tuple[str, str | None]] = {}  # a name in the module -> (module, function or None)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                target = f"{node.module}.{alias.name}"
                is_module = target.startswith("harness") and _is_module(target)
                names[alias.asname or alias.name] = (target, None) if is_module else (node.module, alias.name)
    defined = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function]
    assert len(defined) == 1, (module_name, function)
    (found,) = defined
    codes: set[int] = set()
    for ret in (n for n in ast.walk(found) if isinstance(n, ast.Return) and n.value is not None):
        for node in ast.walk(ret.value):
            if isinstance(node, ast.Constant) and type(node.value) is int:
                codes.add(node.value)
            elif isinstance(node, ast.Name) and node.id.startswith("EXIT_"):
                codes.add(getattr(exits, node.id))
            elif isinstance(node, ast.Attribute) and node.attr.startswith("EXIT_"):
                codes.add(getattr(exit_codes, node.attr))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "of_verdict":
                codes |= {exit_codes.of_verdict(word) for word in verdict.OUTCOMES}
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                if any(isinstance(n, ast.FunctionDef) and n.name == node.func.id for n in tree.body):
                    codes |= _returned_codes(module_name, node.func.id, seen)
                elif node.func.id in names and names[node.func.id][1] is not None:
                    called = getattr(importlib.import_module(names[node.func.id][0]), names[node.func.id][1], None)
                    if inspect.isfunction(called):
                        codes |= _returned_codes(called.__module__, called.__name__, seen)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = node.func.value
                if isinstance(owner, ast.Name) and names.get(owner.id, ("", ""))[1] is None and owner.id in names:
                    target = names[owner.id][0]
                    called = getattr(importlib.import_module(target), node.func.attr, None)
                    if inspect.isfunction(called):
                        codes |= _returned_codes(called.__module__, called.__name__, seen)
    return codes


def test_each_command_s_documented_exit_codes_are_the_ones_it_returns():
    """The command table's exit codes (the exit-codes page's) are exactly
    those its handler can return, followed through every call it returns:
    none returned and left out, none listed and never returned."""
    from harness import cli

    for command in cli.TABLE:
        returned = _returned_codes(command.handler.__module__, command.handler.__name__) - {0, 2}
        returned |= {cli.EXIT_FAILED} if command.trains else set()  # a NaN stops it (dispatch.main)
        assert returned == set(command.exits), (command.name, returned, set(command.exits))


def test_the_guides_name_the_gating_metrics_and_statistics_the_code_uses():
    """What the reproduce guide says gates a verdict without a test claim,
    and the statistics it lists for a test, are the code's own lists."""
    import re

    from harness.experiment_spec.claims import GATING_STATISTICS
    from harness.judge.reproduce import LEARNING_METRICS

    guide = " ".join((ROOT / "docs" / "guides" / "reproduce.md").read_text().split())
    (metrics,) = re.findall(r"learning metrics' intervals overlapping \(([^)]*)\)", guide)
    assert re.findall(r"`(\w+)`", metrics) == list(LEARNING_METRICS)
    (listed,) = re.findall(r"# a test: ([^\n]*?)(?:\s{2,}|$)", (ROOT / "docs/guides/reproduce.md").read_text(), re.M)
    assert re.findall(r"\b(mean|fraction_\w+)\b", listed) == list(GATING_STATISTICS)
