"""One environment interface (`algorithms.base.Environment`) over gymnax,
jumanji, pgx, xminigrid (harness/envs_xminigrid.py) and brax
(harness/envs_brax.py).

Each adapter is a pair of pure functions, `reset(key)` and
`step(state, action, key)`, with auto-reset: a step that ends an episode
reports its reward and end flags, and returns the next episode's first
observation. Every adapter also reports the library's version and, where the
env has one, the env's own version, so that results record exactly what ran.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from algorithms.base import Environment, TimeStep
from harness import deferred_imports
from harness.knapsack_optimum import knapsack_optimum
from harness.types import EnvInfo  # noqa: F401  (part of this module's interface)

SUITES = ("gymnax", "jumanji", "pgx", "xminigrid", "brax")


class EnvKwargsError(ValueError):
    """A bad `env.kwargs` entry; `key` is its spec key."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(message)


class UnknownEnvError(ValueError):
    """The suite has no env of that id; the message lists what it has."""


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


def _version(package: str) -> str:
    return importlib.metadata.version(package)


def _closest(name: str, options: list[str]) -> str:
    import difflib

    hint = difflib.get_close_matches(name, options, n=1)
    suffix = f" (did you mean {hint[0]!r}?)" if hint else ""
    return f"{suffix}; available: {', '.join(sorted(options))}"


# --------------------------------------------------------------------- gymnax


def _make_gymnax(env_id: str, kwargs: dict[str, Any]) -> tuple[Environment, EnvInfo]:
    deferred_imports.defer(deferred_imports.GYMNAX_DRAWING)
    import gymnax
    from gymnax.environments import spaces

    if env_id not in gymnax.registered_envs:
        raise UnknownEnvError(f"gymnax has no env {env_id!r}" + _closest(env_id, list(gymnax.registered_envs)))
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
        EnvInfo("gymnax", env_id, _version("gymnax"), version),
    )


# -------------------------------------------------------------------- jumanji


def _flatten_observation(observation: Any) -> jax.Array:
    """Every array of a jumanji observation but its action mask, as one
    float32 vector (or the one array as it is, when there is only one)."""
    leaves = [
        jnp.asarray(leaf, jnp.float32)
        for path, leaf in jax.tree_util.tree_flatten_with_path(observation)[0]
        if "action_mask" not in jax.tree_util.keystr(path)
    ]
    if len(leaves) == 1:
        return leaves[0]
    return jnp.concatenate([leaf.reshape(-1) for leaf in leaves])


def _make_jumanji(env_id: str, kwargs: dict[str, Any]) -> tuple[Environment, EnvInfo]:
    import jumanji
    from jumanji import specs
    from jumanji.environments import Knapsack
    from jumanji.types import StepType

    registered = sorted(jumanji.registered_environments())
    if env_id not in registered:
        raise UnknownEnvError(f"jumanji has no env {env_id!r}" + _closest(env_id, registered))
    env = jumanji.make(env_id, **kwargs)
    action_spec = env.action_spec
    discrete = isinstance(action_spec, specs.DiscreteArray)
    if discrete:
        num_actions = int(action_spec.num_values)
    else:
        num_actions = int(jnp.prod(jnp.array(action_spec.shape)))
    _, first = jax.eval_shape(env.reset, jax.random.key(0))
    obs_shape = tuple(jax.eval_shape(_flatten_observation, first.observation).shape)

    def timestep(ts) -> TimeStep:
        mask = getattr(ts.observation, "action_mask", None)
        if mask is None or mask.shape != (num_actions,):
            mask = jnp.ones((num_actions,), bool)
        last = ts.step_type == StepType.LAST
        # jumanji ends an episode with discount 0 on termination and keeps
        # discount 1 when it only hit a time limit.
        terminated = last & (ts.discount == 0)
        return TimeStep(
            observation=_flatten_observation(ts.observation),
            legal_action_mask=jnp.asarray(mask, bool),
            reward=jnp.asarray(ts.reward, jnp.float32).reshape(1),
            terminated=terminated,
            truncated=last & ~terminated,
            current_player=jnp.zeros((), jnp.int32),
        )

    def reset(key):
        state, ts = env.reset(key)
        return state, timestep(ts)

    def step(state, action, key):
        next_state, ts = env.step(state, action)
        reset_state, reset_ts = env.reset(key)
        out = timestep(ts)
        restart = timestep(reset_ts)
        done = out.terminated | out.truncated
        state = select_tree(done, reset_state, next_state)
        return state, out._replace(
            observation=jnp.where(done, restart.observation, out.observation),
            legal_action_mask=jnp.where(done, restart.legal_action_mask, out.legal_action_mask),
        )

    optimum = None
    if isinstance(env, Knapsack):

        def optimum(state):
            return knapsack_optimum(state.weights, state.values, state.remaining_budget)

    version = env_id.rsplit("-", 1)[-1]
    return (
        Environment(reset, step, obs_shape, num_actions, 1, discrete, optimum=optimum),
        EnvInfo("jumanji", env_id, _version("jumanji"), version),
    )


# ------------------------------------------------------------------------ pgx


def _make_pgx(env_id: str, kwargs: dict[str, Any]) -> tuple[Environment, EnvInfo]:
    import pgx

    available = list(pgx.available_envs())
    if env_id not in available:
        raise UnknownEnvError(f"pgx has no env {env_id!r}" + _closest(env_id, available))
    env = pgx.make(env_id, **kwargs)

    def timestep(state, reward, terminated, truncated) -> TimeStep:
        return TimeStep(
            observation=jnp.asarray(state.observation, jnp.float32),
            legal_action_mask=state.legal_action_mask,
            reward=jnp.asarray(reward, jnp.float32),
            terminated=jnp.asarray(terminated, bool),
            truncated=jnp.asarray(truncated, bool) & ~jnp.asarray(terminated, bool),
            current_player=jnp.asarray(state.current_player, jnp.int32),
        )

    def reset(key):
        state = env.init(key)
        return state, timestep(state, jnp.zeros_like(state.rewards), False, False)

    def step(state, action, key):
        key_step, key_reset = jax.random.split(key)
        state = env.step(state, action, key_step)
        done = state.terminated | state.truncated
        out = timestep(state, state.rewards, state.terminated, state.truncated)
        restart = env.init(key_reset)
        state = select_tree(done, restart, state)
        return state, out._replace(
            observation=jnp.where(done, restart.observation.astype(jnp.float32), out.observation),
            legal_action_mask=jnp.where(done, restart.legal_action_mask, out.legal_action_mask),
            current_player=jnp.where(done, restart.current_player, out.current_player),
        )

    return (
        Environment(reset, step, tuple(env.observation_shape), int(env.num_actions), int(env.num_players), True),
        EnvInfo("pgx", env_id, _version("pgx"), str(env.version)),
    )


# ------------------------------------------------------------------ xminigrid


def _make_xminigrid(env_id: str, kwargs: dict[str, Any]) -> tuple[Environment, EnvInfo]:
    from harness import envs_xminigrid

    available = envs_xminigrid.registered()
    if env_id not in available:
        raise UnknownEnvError(f"xminigrid has no env {env_id!r}" + _closest(env_id, available))
    env, version = envs_xminigrid.make_xminigrid(env_id, kwargs)
    return env, EnvInfo("xminigrid", env_id, _version("xminigrid"), version)


# ----------------------------------------------------------------------- brax


def _make_brax(env_id: str, kwargs: dict[str, Any]) -> tuple[Environment, EnvInfo]:
    from harness import envs_brax

    available = envs_brax.registered()
    if env_id not in available:
        raise UnknownEnvError(f"brax has no env {env_id!r}" + _closest(env_id, available))
    env, library_version, version = envs_brax.make_brax(env_id, kwargs)
    return env, EnvInfo("brax", env_id, library_version, version)


_MAKERS: dict[str, Callable[[str, dict[str, Any]], tuple[Environment, EnvInfo]]] = {
    "gymnax": _make_gymnax,
    "jumanji": _make_jumanji,
    "pgx": _make_pgx,
    "xminigrid": _make_xminigrid,
    "brax": _make_brax,
}


def _map_timesteps(env: Environment, fn: Callable[[TimeStep], TimeStep]) -> Environment:
    """`env` with `fn` applied to every time step it returns."""

    def reset(key):
        state, timestep = env.reset(key)
        return state, fn(timestep)

    def step(state, action, key):
        state, timestep = env.step(state, action, key)
        return state, fn(timestep)

    return env._replace(reset=reset, step=step)


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

    def step(state, action, key):
        state, timestep = env.step(state, action, key)
        return state, extend(timestep, action, timestep.reward[0])

    return env._replace(reset=reset, step=step, observation_shape=(*shape[:-1], shape[-1] + 2))


def make(
    suite: str, env_id: str, kwargs: dict[str, Any] | None = None, wrappers: tuple[Any, ...] = ()
) -> tuple[Environment, EnvInfo]:
    """Build the adapter for `suite`/`env_id`, then apply `wrappers` (spec
    wrapper models, in order). Raises `UnknownEnvError` for an unknown env and
    `ValueError` for a wrapper that does not fit it."""
    if suite not in _MAKERS:
        raise UnknownEnvError(f"unknown env suite {suite!r}; available: {', '.join(SUITES)}")
    env, info = _MAKERS[suite](env_id, dict(kwargs or {}))
    for wrapper in wrappers:
        if wrapper.name == "mask_observation":
            env = mask_observation(env, tuple(wrapper.indices))
        elif wrapper.name == "observe_legal_actions":
            env = observe_legal_actions(env)
        elif wrapper.name == "observe_previous_action_reward":
            env = observe_previous_action_reward(env)
    return env, info
