"""The jumanji suite (combinatorial problems and puzzles: Knapsack, Snake,
Game2048, ...) behind the one `Environment` interface, with auto-reset.

An observation is every array of jumanji's observation but its action mask,
flattened into one float32 vector (or the one array as it is). The legal
actions are the observation's `action_mask` where it has one of the right
shape, else every action. Knapsack's adapter also gives the exact optimum of
an instance (harness/envs/jumanji_knapsack.py), for its optimality gap.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from algorithms.base import Environment, TimeStep
from harness.envs.errors import no_such_env
from harness.envs.helpers import library_version, select_tree
from harness.envs.jumanji_knapsack import knapsack_optimum
from harness.types import EnvInfo


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


def make(env_id: str, kwargs: dict[str, Any]) -> tuple[Environment, EnvInfo]:
    """The adapter for jumanji's `env_id`, made with `kwargs`; its version is
    the id's `-vN` suffix."""
    import jumanji
    from jumanji import specs
    from jumanji.environments import Knapsack
    from jumanji.types import StepType

    registered = sorted(jumanji.registered_environments())
    if env_id not in registered:
        raise no_such_env("jumanji", env_id, registered)
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
        EnvInfo("jumanji", env_id, library_version("jumanji"), version),
    )
