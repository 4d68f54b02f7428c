"""A benchmarking and reproducibility harness for reinforcement learning in JAX."""

__version__ = "0.1.0"
