"""The generated pages of the documentation site (mkdocs.yml, docs/).

    python scripts/docs_pages              # (re)write every generated page
    python scripts/docs_pages --check      # exit 1, naming them, if any page is stale
    python scripts/docs_pages --out DIR    # write (or --check) under DIR instead of the repository
    python scripts/docs_pages --undocumented   # the spec keys that have no description

The pages come from the code and the records, never from typed figures:

- docs/reference/spec.md: every spec key, from the pydantic models of
  `harness.experiment_spec.spec_models()` (types, defaults, bounds, descriptions) and
  whether it is in the spec hash (probed through `harness.experiment_spec.canonical`);
  modules `spec_fields`, `hash_probe`, `spec_reference`;
- docs/reference/cli.md: every command and option, from the argparse parser
  of `harness.cli.table`; module `cli_reference`;
- docs/reference/exit-codes.md: the `EXIT_*` constants of `harness.cli` and the command table;
  module `exit_codes`;
- docs/reference/algorithms.md: mkdocstrings directives for the modules of
  `algorithms/` (their docstrings render when the site is built); module
  `api_reference`;
- docs/results/: a table of the published references (results/*.json), a
  page per published spec and its curves as SVG (docs/results/img/); module
  `results_pages`;
- docs/performance.md and docs/img/performance.svg: the bench records in
  results/bench/*.json (module `performance`), and the scaling curves of
  results/scale/*.json with docs/img/scale-*.svg (module `scaling`);
- docs/index.md, the landing page, and the results part of mkdocs.yml's nav
  (between its BEGIN/END comments); module `site`.

Same inputs, same bytes: tables are sorted, numbers formatted explicitly, and
the SVGs made with a fixed hash salt, no date and text left as text
(`common`). `__main__` is the command line: it writes or checks the files.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # harness and algorithms, without installing the project
