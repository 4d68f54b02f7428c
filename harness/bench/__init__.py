"""The benchmark suite's machinery: measurements, FLOP counting, the report,
and the pytest plugin that `benchmarks/` runs under."""
