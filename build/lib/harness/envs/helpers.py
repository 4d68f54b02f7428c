"""What the suites' adapters share: picking between two pytrees, a
one-player time step, clipping a continuous action, a library's version."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from algorithms.base import TimeStep


def select_tree(pred: jax.Array, on_true: Any, on_false: Any) -> Any:
    """`on_true` where `pred`, else `on_false`, leaf by leaf."""
    return jax.tree.map(lambda a, b: jnp.where(pred, a, b), on_true, on_false)


def single_agent_timestep(observation, num_actions: int, reward, terminated, truncated) -> TimeStep:
    """A one-player time step with every action legal; truncation only
    where the episode did not also terminate."""
    return TimeStep(
        observation=observation,
        legal_action_mask=jnp.ones((num_actions,), bool),
        reward=jnp.asarray(reward, jnp.float32).reshape(1),
        terminated=jnp.asarray(terminated, bool),
        truncated=jnp.asarray(truncated, bool) & ~jnp.asarray(terminated, bool),
        current_player=jnp.zeros((), jnp.int32),
    )


def clip_to_bounds(low: np.ndarray, high: np.ndarray, shape: tuple[int, ...]) -> Callable[[jax.Array], jax.Array]:
    """What a continuous env is sent of a policy's action `[A]`: clipped to
    the bounds `[A]` and reshaped to the env's action shape (the policy's
    Gaussian sample is unbounded; its log-probability is of the unclipped
    sample)."""

    def to_env(action: jax.Array) -> jax.Array:
        return jnp.clip(action.reshape(low.shape), low, high).reshape(shape)

    return to_env


def library_version(package: str) -> str:
    """The installed version of the distribution `package` (e.g. "gymnax")."""
    return importlib.metadata.version(package)
