"""The benchmark suite (`nox -s bench`): its entries (`test_bench_*.py`) and,
in `machinery/`, what they run under. A package, so that the entries and the
tests import the machinery as `benchmarks.machinery`; it is not installed
with the harness (pyproject's packages are `harness*` and `algorithms*`)."""
