"""Env wrappers, which a spec lists in `env.wrappers`: each turns an
`Environment` into another whose time steps it changes (and, where the
observation grows, whose `observation_shape` it updates)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from algorithms.base import Environment, TimeStep


def _map_timesteps(env: Environment, fn: Callable[[TimeStep], TimeStep]) -> Environment:
    """`env` with `fn` applied to every time step it returns."""

    def reset(key):
        state, timestep = env.reset(key)
        return state, fn(timestep)

    def step(state, action, key):
        state, timestep = env.step(state, action, key)
        return state, fn(timestep)

    return env._replace(reset=reset, step=step, search_step=_map_search_step(env, lambda ts, action: fn(ts)))


def _map_search_step(env: Environment, fn: Callable[[TimeStep, jax.Array], TimeStep]):
    """`env.search_step` with `fn(timestep, action)` applied to what it
    returns (None where the env has none): a wrapper changes the time steps
    a tree search sees as it changes the others."""
    if env.search_step is None:
        return None

    def search_step(state, action):
        state, timestep = env.search_step(state, action)
        return state, fn(timestep, action)

    return search_step


def mask_observation(env: Environment, indices: tuple[int, ...]) -> Environment:
    """Zero the flattened observation's entries at `indices` (a partially
    observed variant, e.g. CartPole without its velocities)."""
    size = int(np.prod(env.observation_shape))
    bad = [i for i in indices if not 0 <= i < size]
    if bad:
        raise ValueError(f"indices {bad} are outside the observation (size {size})")
    keep = np.ones(size, np.float32)
    keep[list(indices)] = 0.0
    keep = keep.reshape(env.observation_shape)

    def masked(timestep: TimeStep) -> TimeStep:
        return timestep._replace(observation=timestep.observation * keep)

    return _map_timesteps(env, masked)


def observe_legal_actions(env: Environment) -> Environment:
    """Append the legal-action mask, as 0/1 floats, to a flat observation."""
    if not env.discrete_actions:
        raise ValueError("observe_legal_actions needs discrete actions")
    if len(env.observation_shape) != 1:
        raise ValueError(
            f"observe_legal_actions needs a flat observation; this env's has shape {list(env.observation_shape)}"
        )

    def observed(timestep: TimeStep) -> TimeStep:
        mask = timestep.legal_action_mask.astype(timestep.observation.dtype)
        return timestep._replace(observation=jnp.concatenate([timestep.observation, mask], axis=-1))

    return _map_timesteps(env, observed)._replace(observation_shape=(env.observation_shape[0] + env.num_actions,))


def observe_previous_action_reward(env: Environment) -> Environment:
    """Append the previous action and reward to the observation, broadcast
    over its leading axes (`[..., C] -> [..., C + 2]`: on every tile of a
    grid): what the agent did and got on the step that led here; 0 and 0
    after the first reset, and carried across auto-resets, as in the
    xland-minigrid PPO baseline."""
    if not env.discrete_actions or env.num_players != 1:
        raise ValueError("observe_previous_action_reward needs discrete actions and one player")
    shape = env.observation_shape

    def extend(timestep: TimeStep, action: jax.Array, reward: jax.Array) -> TimeStep:
        extra = jnp.broadcast_to(jnp.stack([jnp.asarray(action, jnp.float32), reward]), (*shape[:-1], 2))
        return timestep._replace(observation=jnp.concatenate([timestep.observation, extra], axis=-1))

    def reset(key):
        state, timestep = env.reset(key)
        return state, extend(timestep, 0, jnp.float32(0.0))

    def stepped(timestep: TimeStep, action: jax.Array) -> TimeStep:
        return extend(timestep, action, timestep.reward[0])

    def step(state, action, key):
        state, timestep = env.step(state, action, key)
        return state, stepped(timestep, action)

    return env._replace(
        reset=reset,
        step=step,
        search_step=_map_search_step(env, stepped),
        observation_shape=(*shape[:-1], shape[-1] + 2),
    )


def apply_wrappers(env: Environment, wrappers: tuple[Any, ...]) -> Environment:
    """`env` with `wrappers` (spec wrapper models, `harness.experiment_spec.sections`)
    applied in order, the first innermost. Raises `ValueError` for a wrapper
    that does not fit the env."""
    for wrapper in wrappers:
        if wrapper.name == "mask_observation":
            env = mask_observation(env, tuple(wrapper.indices))
        elif wrapper.name == "observe_legal_actions":
            env = observe_legal_actions(env)
        elif wrapper.name == "observe_previous_action_reward":
            env = observe_previous_action_reward(env)
    return env
