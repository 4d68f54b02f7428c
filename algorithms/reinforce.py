"""REINFORCE with an optional learned baseline, importance-weighted.

After rlplay's REINFORCE: rollout fragments of T steps over B envs,
discounted returns G_t = r_t + gamma G_{t+1}, and the surrogate

    loss = - mean_t [ rho_t (G_t - b_t) log pi(a_t | s_t) ]
           - C_entropy H(pi(. | s_t)) + C_value (G_t - V(s_t))^2 / 2,

where rho_t = min(pi(a_t|s_t) / mu(a_t|s_t), c_rho) weighs each action by
how much more the current policy pi likes it than the behaviour policy mu
that collected it. On the first pass over a fragment pi = mu and rho = 1;
with `update_epochs > 1` later passes are off-policy and the clip matters.

With a baseline, b_t = V(s_t) (no gradient through it into the policy) and
each fragment is bootstrapped with V(s_T); without one, b_t = 0 and returns
stop at the fragment's end, as in rlplay. A time-limit truncation ends the
return like a termination.

`config` is any object with the attributes of the spec's `hyperparameters`
(num_envs, num_steps, gamma, baseline, value_coef, entropy_coef, c_rho,
update_epochs, num_minibatches, normalize_advantages).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from algorithms import base
from algorithms.networks import make_policy, unroll
from algorithms.returns import discounted_returns
from algorithms.rollout import (
    ActorState,
    Fragment,
    bootstrap_value,
    collect,
    entropy_of,
    gather,
    init_actor,
    log_prob_of,
    minibatch_indices,
)


class ReinforceState(NamedTuple):
    params: Any
    opt_state: Any
    actor: ActorState
    key: jax.Array
    iteration: jax.Array  # [] int32


def updates_per_step(config: Any) -> int:
    return config.update_epochs * config.num_minibatches


def env_steps_per_step(config: Any) -> int:
    return config.num_envs * config.num_steps


def make_reinforce(
    config: Any,
    env: base.Environment,
    *,
    network: Any,
    optimizer: optax.GradientTransformation,
    axis_name: str | None = None,
) -> base.Algorithm:
    """Build REINFORCE for `env`.

    Args:
      config: the hyperparameters (see the module docstring).
      env: an unbatched, auto-resetting environment with discrete actions.
      network: the spec's network section (feed-forward or recurrent).
      optimizer: the optax transformation (clipping and schedule included).
      axis_name: when set, gradients are averaged over this named axis, so the
        same step runs data-parallel under `shard_map`.
    """
    policy = make_policy(network, env.num_actions, env.observation_shape)

    def init(key: jax.Array) -> ReinforceState:
        key, net_key, env_key = jax.random.split(key, 3)
        actor = init_actor(env, policy, env_key, config.num_envs)
        params = policy.init(net_key, actor.timestep.observation[0])
        return ReinforceState(params, optimizer.init(params), actor, key, jnp.zeros((), jnp.int32))

    def loss_fn(params, batch: Fragment, carry: jax.Array, returns: jax.Array):
        logits, value = unroll(policy, params, carry, batch.observation, batch.reset)
        log_pi_a, log_pi = log_prob_of(logits, batch.legal_action_mask, batch.action)
        rho = jnp.exp(jax.lax.stop_gradient(log_pi_a) - batch.log_prob)
        if config.c_rho is not None:
            rho = jnp.minimum(rho, config.c_rho)
        advantage = returns - jax.lax.stop_gradient(value) if config.baseline else returns
        if config.normalize_advantages:
            advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
        policy_loss = -(rho * advantage * log_pi_a).mean()
        entropy = entropy_of(log_pi, batch.legal_action_mask).mean()
        value_loss = 0.5 * jnp.square(value - returns).mean() if config.baseline else jnp.zeros(())
        loss = policy_loss - config.entropy_coef * entropy + config.value_coef * value_loss
        return loss, dict(
            loss=loss, policy_loss=policy_loss, value_loss=value_loss, entropy=entropy, importance_weight=rho.mean()
        )

    def update(carry, minibatch):
        params, opt_state = carry
        grads, aux = jax.grad(loss_fn, has_aux=True)(params, *minibatch)
        if axis_name is not None:
            grads = jax.lax.pmean(grads, axis_name)
        aux = dict(aux, grad_norm=optax.global_norm(grads))
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), aux

    def step(state: ReinforceState) -> tuple[ReinforceState, base.Metrics]:
        key, rollout_key, epoch_key = jax.random.split(state.key, 3)
        start_carry = state.actor.carry
        actor, data = collect(env, policy, state.params, state.actor, rollout_key, config.num_steps)
        if config.baseline:
            bootstrap = bootstrap_value(policy, state.params, actor)
        else:
            bootstrap = jnp.zeros((config.num_envs,), jnp.float32)
        discount = config.gamma * (1.0 - data.done.astype(jnp.float32))
        returns = jax.vmap(discounted_returns, in_axes=(1, 1, 0), out_axes=1)(data.reward, discount, bootstrap)

        def epoch(carry, key):
            # Minibatches split the envs (axis 1 of the fragment, 0 of the
            # carry), so each keeps whole fragments and its memory.
            index = minibatch_indices(key, config.num_envs, config.num_minibatches)
            batches = (gather(data, index, 1), gather(start_carry, index, 0), gather(returns, index, 1))
            return jax.lax.scan(update, carry, batches)

        (params, opt_state), aux = jax.lax.scan(
            epoch, (state.params, state.opt_state), jax.random.split(epoch_key, config.update_epochs)
        )
        metrics = {name: value.mean() for name, value in aux.items()}
        metrics["episode_return"] = actor.episodes.last_return
        metrics["episode_length"] = actor.episodes.last_length
        return ReinforceState(params, opt_state, actor, key, state.iteration + 1), metrics

    return base.Algorithm(init=init, step=step, env_steps_per_step=env_steps_per_step(config))


base.register(
    "reinforce",
    base.Registration(
        make=make_reinforce,
        updates_per_step=updates_per_step,
        env_steps_per_step=env_steps_per_step,
        check_env=base.single_agent_discrete("reinforce"),
    ),
)
