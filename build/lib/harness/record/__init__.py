"""MLflow and what protects it: tracking (the store's client, a run's tags
and artifacts, the feed to the metric writer), the metric writer, the metric
journal, the store's locks, and run directories. Imports no JAX, so the
metric writer and `harness sync` start fast and run anywhere."""
