"""The house's rule: imports only point down, and no modules import each
other. Read from the source (no imports run), so a new arrow upwards fails
here before it becomes a circle at import time.

Imports under `if TYPE_CHECKING:` count too: an annotation that needs an
upward import is the same arrow, and a circle through one hides a design
that knows its caller.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Top to bottom; a module may import its own layer or a lower one. The first
# prefix that matches a module gives its layer.
LAYERS = (
    ("harness.cli", "harness.__main__"),
    ("harness.sessions",),
    ("harness.sweep",),
    ("harness.build",),
    ("harness.run",),
    ("harness.judge",),
    ("harness.envs",),
    ("harness.experiment_spec", "harness.plan"),
    ("harness.record",),
    ("harness.types", "harness.console", "harness.deferred_imports", "harness.jax_build", "harness.exit_codes"),
    ("harness.stats",),
    ("algorithms",),
)


def modules() -> dict[str, Path]:
    found = {}
    for package in ("harness", "algorithms"):
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _imports(tree: ast.Module):
    """Every import node, those under `if TYPE_CHECKING:` included."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node


def import_graph() -> dict[str, set[str]]:
    """Module -> the project's modules it imports (a `from package import
    module` counts as importing that module)."""
    known = modules()
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in _imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                candidates = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                # `from package import module` imports the module; a name
                # that is not a module is the package's (or module's) own.
                modules_named = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in known]
                candidates = modules_named + ([base] if len(modules_named) < len(node.names) else [])
            for candidate in candidates:
                while candidate and candidate not in known:
                    candidate = candidate.rpartition(".")[0]
                if candidate and candidate != name and not name.startswith(f"{candidate}."):
                    targets.add(candidate)
        graph[name] = targets
    return graph


def layer(module: str) -> int:
    if module == "harness":  # the package's __init__: its version and start time
        return len(LAYERS) - 2
    for rank, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(f"{p}.") for p in prefixes):
            return rank
    raise AssertionError(f"{module} is in no layer of tests/test_layers.py: place it")


def upward_arrows(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{a} -> {b}" for a, targets in graph.items() for b in targets if layer(b) < layer(a))


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_module_has_a_layer():
    for module in modules():
        layer(module)


def test_no_import_runs_back_up():
    assert upward_arrows(import_graph()) == []


def test_no_modules_import_each_other():
    assert cycles(import_graph()) == []


def test_algorithms_never_import_the_harness():
    graph = import_graph()
    assert [
        f"{a} -> {b}" for a in graph if a.startswith("algorithms") for b in graph[a] if b.startswith("harness")
    ] == []


FOLDERS = ("harness", "algorithms", "benchmarks", "scripts", "tests")


def test_no_file_is_over_400_lines():
    """One concept per file: none in the five folders of code over 400 lines."""
    files = [path for folder in FOLDERS for path in (ROOT / folder).rglob("*.py")]
    long = {str(p.relative_to(ROOT)): n for p in files if (n := len(p.read_text().splitlines())) > 400}
    assert long == {}
