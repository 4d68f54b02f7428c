"""Training a plan: the runner (jitted chunks, and the host's loop over
them in harness.run.chunk_loop), the device mesh and a multi-process job,
checkpoints, interrupts, the compilation cache, progress, profiling,
provenance and the device ceiling. The sessions that train and record
(run, sweep, reproduce) are one layer up, in harness.sessions."""
