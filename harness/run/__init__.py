"""Training a plan: the runner (jitted chunks), the device mesh and a
multi-process job, checkpoints, the run session (train, record, resume),
progress, results and provenance."""
