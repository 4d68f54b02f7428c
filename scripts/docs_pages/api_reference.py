"""docs/reference/algorithms.md: a mkdocstrings directive per public module
of `algorithms/`; their docstrings render when the site is built."""

from __future__ import annotations

from docs_pages import ROOT
from docs_pages.common import header


def is_package(module: str) -> bool:
    return (ROOT.joinpath(*module.split(".")) / "__init__.py").exists()


def algorithm_modules() -> list[str]:
    """The public modules of algorithms/, packages before their modules."""
    names = []
    for path in sorted((ROOT / "algorithms").rglob("*.py")):
        relative = path.relative_to(ROOT).with_suffix("")
        parts = list(relative.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        elif parts[-1].startswith("_"):
            continue
        names.append(".".join(parts))

    def order(name: str) -> tuple[str, bool, str]:
        parts = name.split(".")
        group = parts[1] if len(parts) > 1 and (ROOT / "algorithms" / parts[1]).is_dir() else ""
        return group, not is_package(name), name

    return sorted(names, key=order)


def algorithms_reference() -> str:
    out = [header("the modules of algorithms/"), "# Python API: `algorithms`\n\n"]
    out.append(
        "The training pipelines, rendered from their docstrings (mkdocstrings). Nothing in `algorithms/` "
        "imports the harness; a spec's `hyperparameters:` section is the config model of its algorithm "
        "(see the [spec reference](spec.md)).\n\n"
    )
    for name in algorithm_modules():
        # A package's docstring only: what it re-exports is documented in its modules.
        out.append(f"::: {name}\n" + ("    options:\n      members: false\n" if is_package(name) else "") + "\n")
    return "".join(out).rstrip("\n") + "\n"
