"""The benchmark suite's machinery: measurements (`measure`), the report
(`report`, over the run `history`) and its MLflow runs (`mlflow_log`), the
pytest plugin that `benchmarks/` runs under (`plugin`, with what its options
select in `selection`, the session that collects and reports in `session`,
and its `fixtures`), peers' code from local checkouts for side-by-side
entries (`peers`, with `peer_configs`, `peer_imports` and `peer_shims`; what
one timed call of each runs: `peer_runs`), and the repository's folders
(`paths`).

It stays out of the installed `harness` package: the plugin imports pytest,
and the peers' loader patches stand-in modules into `sys.modules`, neither
of which a `harness` command should ever load. FLOP counting and the device
ceiling, which are general measurement, are `harness.run.flops` and
`harness.run.ceiling`."""
