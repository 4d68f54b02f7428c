"""The repository's folders that the entries read their specs from."""

from pathlib import Path

from harness.judge import references

ROOT = Path(__file__).resolve().parent.parent.parent
BENCH_SPECS = ROOT / "benchmarks" / "specs"
PUBLISHED_SPECS = ROOT / references.PUBLISHED
