"""Pure-JAX training pipelines. Importing this package registers them."""

from algorithms import alphazero, ppo, reinforce  # noqa: F401  (importing registers them)
from algorithms.base import Algorithm, Environment, TimeStep, registry

__all__ = ["Algorithm", "Environment", "TimeStep", "registry"]
