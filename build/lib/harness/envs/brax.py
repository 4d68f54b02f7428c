"""Brax's named envs (`ant`, `halfcheetah`, `hopper`, `inverted_pendulum`,
...) behind the one `Environment` interface.

`env.kwargs` takes `backend` (`generalized`, `positional`, `spring` or
`mjx`; Brax's default is `generalized`), recorded with the run as the env's
version, and `episode_length` (the time limit, 1000 by default, as in Brax's
training wrappers); the rest goes to the env's constructor. Actions are
clipped to [-1, 1], the range Brax's envs scale to their actuators'. An
episode ends when Brax says it is done (terminated) or at the time limit
(truncated), and the env then resets from the step's key: a fresh random
start, where Brax's own auto-reset wrapper replays the first one.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from algorithms.base import Environment, TimeStep
from harness.envs.errors import EnvKwargsError, no_such_env
from harness.envs.helpers import library_version
from harness.types import EnvInfo

BACKENDS = ("generalized", "positional", "spring", "mjx")
DEFAULT_EPISODE_LENGTH = 1000


class BraxState(NamedTuple):
    inner: Any  # brax.envs.State
    steps: jax.Array  # [] int32, steps into the current episode


def _brax_envs() -> Any:
    # mujoco's mjx prints a line for each optional GPU module it cannot import.
    with contextlib.redirect_stdout(io.StringIO()):
        from brax import envs
    return envs


def registered() -> list[str]:
    """Every env name Brax registers, sorted."""
    return sorted(_brax_envs()._envs)


def make(env_id: str, kwargs: dict[str, Any]) -> tuple[Environment, EnvInfo]:
    """The adapter for Brax's `env_id`, with `kwargs` as the module docstring
    says; its version is its backend."""
    available = registered()
    if env_id not in available:
        raise no_such_env("brax", env_id, available)
    kwargs = dict(kwargs)
    backend = kwargs.pop("backend", "generalized")
    if backend not in BACKENDS:
        raise EnvKwargsError("env.kwargs.backend", f"brax has no backend {backend!r}; available: {', '.join(BACKENDS)}")
    episode_length = kwargs.pop("episode_length", DEFAULT_EPISODE_LENGTH)
    if not isinstance(episode_length, int) or isinstance(episode_length, bool) or episode_length < 1:
        raise EnvKwargsError("env.kwargs.episode_length", f"must be a positive integer, not {episode_length!r}")
    import warnings

    with warnings.catch_warnings():  # Brax warns that it is in maintenance mode, on every env made
        warnings.simplefilter("ignore", UserWarning)
        env = _brax_envs().get_environment(env_id, backend=backend, **kwargs)
    num_actions = int(env.action_size)
    obs_shape = (int(env.observation_size),)
    bounds = (-np.ones(num_actions, np.float32), np.ones(num_actions, np.float32))

    def timestep(inner: Any, terminated: jax.Array, truncated: jax.Array) -> TimeStep:
        return TimeStep(
            observation=jnp.asarray(inner.obs, jnp.float32).reshape(obs_shape),
            legal_action_mask=jnp.ones((num_actions,), bool),
            reward=jnp.asarray(inner.reward, jnp.float32).reshape(1),
            terminated=terminated,
            truncated=truncated & ~terminated,
            current_player=jnp.zeros((), jnp.int32),
        )

    def reset(key):
        inner = env.reset(key)
        false = jnp.zeros((), bool)
        return BraxState(inner, jnp.zeros((), jnp.int32)), timestep(inner, false, false)

    def step(state: BraxState, action: jax.Array, key: jax.Array):
        inner = env.step(state.inner, jnp.clip(action.reshape(num_actions), *bounds))
        steps = state.steps + 1
        terminated = inner.done > 0
        out = timestep(inner, terminated, steps >= episode_length)
        done = out.terminated | out.truncated
        fresh, first = reset(key)
        state = jax.tree.map(lambda a, b: jnp.where(done, a, b), fresh, BraxState(inner, steps))
        return state, out._replace(observation=jnp.where(done, first.observation, out.observation))

    environment = Environment(reset, step, obs_shape, num_actions, 1, False, bounds)
    return environment, EnvInfo("brax", env_id, library_version("brax"), f"backend={backend}")
