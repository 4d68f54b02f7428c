"""The gymnax suite (classic control, MinAtar, bsuite, misc) behind the one
`Environment` interface. gymnax's own `step` resets on termination or
truncation, so the adapter only reshapes what it returns; a continuous
env's actions are clipped to its action space's bounds."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from algorithms.base import Environment, TimeStep
from harness import deferred_imports
from harness.envs.errors import no_such_env
from harness.envs.helpers import clip_to_bounds, library_version, single_agent_timestep
from harness.types import EnvInfo


def make(env_id: str, kwargs: dict[str, Any]) -> tuple[Environment, EnvInfo]:
    """The adapter for gymnax's `env_id`, made with `kwargs`; its version is
    the id's `-vN` suffix, where it has one."""
    deferred_imports.defer(deferred_imports.GYMNAX_DRAWING)
    import gymnax
    from gymnax.environments import spaces

    if env_id not in gymnax.registered_envs:
        raise no_such_env("gymnax", env_id, list(gymnax.registered_envs))
    env, params = gymnax.make(env_id, **kwargs)
    action_space = env.action_space(params)
    discrete = isinstance(action_space, spaces.Discrete)
    num_actions = int(action_space.n) if discrete else int(jnp.prod(jnp.array(action_space.shape)))
    obs_shape = tuple(env.observation_space(params).shape)

    def timestep(obs, reward, terminated, truncated) -> TimeStep:
        observation = jnp.asarray(obs, jnp.float32).reshape(obs_shape)
        return single_agent_timestep(observation, num_actions, reward, terminated, truncated)

    def reset(key):
        obs, state = env.reset(key, params)
        return state, timestep(obs, 0.0, False, False)

    bounds = None
    if not discrete:
        shape = tuple(action_space.shape)
        bounds = tuple(
            np.broadcast_to(np.asarray(b, np.float32), shape).reshape(-1) for b in (action_space.low, action_space.high)
        )
    to_env = None if discrete else clip_to_bounds(*bounds, shape)

    def step(state, action, key):
        if to_env is not None:
            action = to_env(action)
        # gymnax's own `step` resets on termination or truncation.
        obs, state, reward, terminated, truncated, _ = env.step(key, state, action, params)
        return state, timestep(obs, reward, terminated, truncated)

    version = env_id.rsplit("-", 1)[-1] if "-v" in env_id else None
    return (
        Environment(reset, step, obs_shape, num_actions, 1, discrete, bounds),
        EnvInfo("gymnax", env_id, library_version("gymnax"), version),
    )
