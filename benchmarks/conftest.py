"""The entries of `nox -s bench` use the harness's benchmark plugin
(harness/bench/plugin.py: options, fixtures, the report); the paths here are
the repository's."""

from pathlib import Path

from harness.bench.plugin import *  # noqa: F403  (pytest finds hooks and fixtures by name here)

ROOT = Path(__file__).resolve().parent.parent
BENCH_SPECS = ROOT / "benchmarks" / "specs"
PUBLISHED_SPECS = ROOT / "experiments"
