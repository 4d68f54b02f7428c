"""MLflow and what protects it: tracking, the metric writer, the metric
journal, the store's locks, and run directories. Imports no JAX, so the
metric writer and `harness sync` start fast and run anywhere."""
