"""Pure-JAX training pipelines. Importing this package registers them."""

from algorithms import reinforce  # noqa: F401  (registers "reinforce")
from algorithms.base import Algorithm, Environment, TimeStep, registry

__all__ = ["Algorithm", "Environment", "TimeStep", "registry"]
