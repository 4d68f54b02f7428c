"""Evaluation rollouts of an on-policy algorithm: whole episodes on envs of
their own, apart from training.

`evaluate(state)` plays `episodes` episodes from fresh resets under the
current parameters (and observation statistics, frozen), acting greedily
(the most likely legal action; a Gaussian's mean) or by sampling the policy, and reports their mean return and length as
`eval_return` and `eval_length`. Its keys come from the training key folded
with a constant of its own, and the state comes back unchanged, so training
is bit-identical with evaluation on or off. Under `axis_name` each shard
plays its part of the episodes (the same keys an episode gets on one
device) and the figures are means over all of them, gathered in one order,
so they do not depend on the number of devices.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from algorithms import base, normalization, parallel
from algorithms.networks import Policy

EVALUATION_STREAM = 0x0E7A1  # folded into the training key: evaluation's own keys


def make_evaluate(env: base.Environment, policy: Policy, spec: Any, axis_name: str | None = None):
    """`evaluate(state) -> (state, {eval_return, eval_length})` for a state
    with `params`, `key` and `actor` (rollout.OnPolicyState); `spec` has `episodes`,
    `policy` ("greedy" or "sample") and `max_steps` (the most steps an
    episode is played for; one that has not ended by then counts as it is)."""
    num = spec.episodes

    def evaluate(state):
        reset_key, loop_key = jax.random.split(jax.random.fold_in(state.key, EVALUATION_STREAM))
        env_state, timestep = jax.vmap(env.reset)(parallel.split(reset_key, num, axis_name))
        local = parallel.local_count(num, axis_name)
        zeros = jnp.zeros(local, jnp.float32)
        init = (env_state, timestep, policy.initial_carry((local,)), jnp.ones(local, bool), zeros, zeros)
        init = (*init, jnp.zeros(local, bool), jnp.int32(0), loop_key)

        def body(carry):
            env_state, ts, memory, reset, total, length, done, t, key = carry
            key, action_key, step_key = jax.random.split(key, 3)
            observation = normalization.observe(state.actor.normalizer, ts.observation)
            memory, head, _ = policy.apply(state.params, memory, observation, reset)
            if spec.policy == "greedy":
                action = policy.distribution.mode(head, ts.legal_action_mask)
            else:
                action = policy.distribution.sample(action_key, head, ts.legal_action_mask, axis_name)
            env_state, ts = jax.vmap(env.step)(env_state, action, parallel.split(step_key, num, axis_name))
            total = total + jnp.where(done, 0.0, ts.reward[:, 0])
            length = length + jnp.where(done, 0.0, 1.0)
            ended = ts.terminated | ts.truncated
            return env_state, ts, memory, ended, total, length, done | ended, t + 1, key

        def cond(carry):
            done, t = carry[6], carry[7]
            # Every shard runs the same number of steps (the loop holds collectives).
            all_done = parallel.psum(jnp.sum(~done), axis_name) == 0
            return ~all_done & (t < spec.max_steps)

        total, length = jax.lax.while_loop(cond, body, init)[4:6]
        total, length = parallel.all_gather((total, length), axis_name)
        return state, {"eval_return": total.mean(), "eval_length": length.mean()}

    return evaluate
