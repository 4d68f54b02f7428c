"""A benchmarking and reproducibility harness for reinforcement learning in JAX."""

import time

__version__ = "0.1.0"

# When the harness was first imported: the start of a `harness` command, for
# the start-up time in its record.
STARTED = time.perf_counter()
