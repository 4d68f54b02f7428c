"""The command line: `python scripts/docs_pages [--check] [--out DIR]
[--undocumented]` writes, or checks, every generated page (see the
package's docstring)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if not __package__:
    # Run as `python scripts/docs_pages`: Python put this folder first on the
    # path, where its modules would shadow others (`site`); import it as the
    # package it is instead.
    PACKAGE = Path(__file__).resolve().parent
    sys.path = [p for p in sys.path if Path(p or ".").resolve() != PACKAGE]
    sys.path.insert(0, str(PACKAGE.parent))

import docs_pages  # noqa: E402
from docs_pages import ROOT  # noqa: E402
from docs_pages.api_reference import algorithms_reference  # noqa: E402
from docs_pages.cli_reference import cli_reference  # noqa: E402
from docs_pages.common import SCRIPT  # noqa: E402
from docs_pages.drift_page import PAGE as DRIFT_PAGE  # noqa: E402
from docs_pages.drift_page import drift_page, load_compile_studies, load_reports  # noqa: E402
from docs_pages.exit_codes import exit_codes  # noqa: E402
from docs_pages.performance import load_benches, performance, performance_plot  # noqa: E402
from docs_pages.readme import README, readme  # noqa: E402
from docs_pages.results_pages import curves_plot, published, results_index, spec_page  # noqa: E402
from docs_pages.scaling import curve_plot, load_curves  # noqa: E402
from docs_pages.site import MKDOCS, landing, mkdocs_config  # noqa: E402
from docs_pages.spec_reference import spec_reference  # noqa: E402
from docs_pages.verdicts_page import PAGE as VERDICTS_PAGE  # noqa: E402
from docs_pages.verdicts_page import load_records, verdicts_page  # noqa: E402

# Generated files that a stale run may have left behind (a spec no longer
# published): anything matching these that this run does not write.
OWNED = ("docs/results/*.md", "docs/results/img/*.svg", "docs/img/scale-*.svg")


def pages() -> tuple[dict[str, bytes], list[str]]:
    """Every generated file, by path from the repository root; and the spec
    keys without a description."""
    specs = published()
    benches = load_benches()
    curves = load_curves()
    spec_text, undocumented = spec_reference()
    out: dict[str, bytes] = {
        MKDOCS: mkdocs_config(specs).encode(),
        README: readme(specs).encode(),
        "docs/index.md": landing(specs, benches).encode(),
        "docs/reference/spec.md": spec_text.encode(),
        "docs/reference/cli.md": cli_reference().encode(),
        "docs/reference/exit-codes.md": exit_codes().encode(),
        "docs/reference/algorithms.md": algorithms_reference().encode(),
        "docs/results/index.md": results_index(specs).encode(),
        "docs/performance.md": performance(benches, curves).encode(),
        "docs/img/performance.svg": performance_plot(benches),
        DRIFT_PAGE: drift_page(load_reports(), load_compile_studies()).encode(),
        VERDICTS_PAGE: verdicts_page(load_records()).encode(),
    }
    for stem, refs in specs.items():
        out[f"docs/results/{stem}.md"] = spec_page(stem, refs).encode()
        for ref in refs:
            out[f"docs/results/img/{ref.image}"] = curves_plot(ref)
    for curve in curves:
        if curve.points:
            out[f"docs/img/{curve.image}"] = curve_plot(curve)
    return out, undocumented


def orphans(base: Path, generated: dict[str, bytes]) -> list[str]:
    """Files under `base` in the generated folders that this run does not write."""
    found = {str(p.relative_to(base)) for pattern in OWNED for p in base.glob(pattern)}
    return sorted(found - set(generated))


def differs(target: Path, content: bytes) -> bool:
    return not target.exists() or target.read_bytes() != content


def stale(base: Path, generated: dict[str, bytes]) -> list[str]:
    out = [path for path, content in generated.items() if differs(base / path, content)]
    return sorted(out) + [f"{p} (no longer generated)" for p in orphans(base, generated)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=f"python {SCRIPT}",
        description=docs_pages.__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", type=Path, default=ROOT, help="the folder to write into (default: the repository)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 naming the pages that differ")
    parser.add_argument("--undocumented", action="store_true", help="list the spec keys without a description")
    args = parser.parse_args(argv)
    generated, undocumented = pages()
    if args.undocumented:
        print("\n".join(undocumented))
        return 0
    base = args.out.resolve()
    if args.check:
        found = stale(base, generated)
        if found:
            print(f"stale generated pages (run `python {SCRIPT}`):", file=sys.stderr)
            for path in found:
                print(f"  {path}", file=sys.stderr)
            return 1
        return 0
    for path, content in generated.items():
        target = base / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if differs(target, content):
            target.write_bytes(content)
    for path in orphans(base, generated):
        (base / path).unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
