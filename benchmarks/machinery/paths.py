"""The repository's folders that the entries read their specs from."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
BENCH_SPECS = ROOT / "benchmarks" / "specs"
PUBLISHED_SPECS = ROOT / "experiments"
