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

The hyperparameters are `ReinforceConfig`, a spec's `hyperparameters:`
section when `algorithm: reinforce` (the normalisation options are
`algorithms.normalization`'s).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax
from pydantic import Field

from algorithms import base, parallel
from algorithms.config import NetworkConfig, OnPolicyConfig
from algorithms.networks import make_policy, unroll
from algorithms.on_policy_registration import register
from algorithms.returns import discounted_returns
from algorithms.rollout import (
    ActorState,
    Fragment,
    align_for,
    bootstrap_value,
    gather,
    logical_shards,
    make_algorithm,
    make_stages,
    make_update,
    minibatch_indices,
    shard_minibatches,
    standardized,
)


class ReinforceConfig(OnPolicyConfig):
    """REINFORCE's hyperparameters (the spec's `hyperparameters:`)."""

    num_envs: int = Field(default=16, gt=0, description="B: envs stepped in parallel per seed")
    num_steps: int = Field(default=32, gt=0, description="T: steps per rollout fragment")
    gamma: float = Field(default=0.99, ge=0, le=1, description="discount factor")
    baseline: bool = Field(default=True, description="learn a value baseline and bootstrap fragments with it")
    value_coef: float = Field(default=0.5, ge=0, description="weight of the baseline's value loss")
    entropy_coef: float = Field(default=0.01, ge=0, description="weight of the entropy bonus")
    c_rho: float | None = Field(default=None, gt=0, description="clip of the importance weights; null: no clip")
    update_epochs: int = Field(default=1, gt=0, description="passes over each fragment")
    num_minibatches: int = Field(default=1, gt=0, description="minibatches per pass, split over envs")
    normalize_advantages: bool = Field(
        default=False, description="advantages (returns, without a baseline) standardised per minibatch"
    )


def make_reinforce(
    config: ReinforceConfig,
    env: base.Environment,
    *,
    network: NetworkConfig,
    optimizer: optax.GradientTransformation,
    axis_name: str | None = None,
    shards: int | None = None,
) -> base.Algorithm:
    """Build REINFORCE for `env`.

    Args:
      config: the hyperparameters (see the module docstring).
      env: an unbatched, auto-resetting environment (discrete actions, or
        continuous ones with a diagonal Gaussian policy).
      network: the spec's network section (feed-forward or recurrent).
      optimizer: the optax transformation (clipping and schedule included).
      axis_name: when set, gradients are averaged over this named axis, so the
        same step runs data-parallel under `shard_map`.
      shards: when set, an exact layout of that many logical shards, as PPO's
        (`ppo.make_ppo`); advantages are then normalised only without a
        baseline (`exact_config`), over each whole minibatch of returns.
    """
    policy = make_policy(network, env.num_actions, env.observation_shape, align_for(shards), env.discrete_actions)

    def loss_fn(params, batch: Fragment, carry: jax.Array, returns: jax.Array):
        logits, value = unroll(policy, params, carry, batch.observation, batch.reset)
        log_pi_a, entropy = policy.distribution.log_prob_entropy(logits, batch.legal_action_mask, batch.action)
        rho = jnp.exp(jax.lax.stop_gradient(log_pi_a) - batch.log_prob)
        if config.c_rho is not None:
            rho = jnp.minimum(rho, config.c_rho)
        advantage = returns - jax.lax.stop_gradient(value) if config.baseline else returns
        if config.normalize_advantages and shards is None:  # else normalised in exact_minibatches
            mean, std = parallel.mean_std(advantage, axis_name)
            advantage = (advantage - mean) / (std + 1e-8)
        policy_loss = -(rho * advantage * log_pi_a).mean()
        entropy = entropy.mean()
        value_loss = 0.5 * jnp.square(value - returns).mean() if config.baseline else jnp.zeros(())
        loss = policy_loss - config.entropy_coef * entropy + config.value_coef * value_loss
        return loss, dict(
            loss=loss, policy_loss=policy_loss, value_loss=value_loss, entropy=entropy, importance_weight=rho.mean()
        )

    def targets(params: Any, actor: ActorState, data: Fragment) -> tuple[Fragment, jax.Array]:
        if config.baseline:
            bootstrap = bootstrap_value(policy, params, actor)
        else:
            bootstrap = jnp.zeros(actor.reset.shape, jnp.float32)
        discount = config.gamma * (1.0 - data.done.astype(jnp.float32))
        returns = jax.vmap(discounted_returns, in_axes=(1, 1, 0), out_axes=1)(data.reward, discount, bootstrap)
        # Every shard sees the global batch; each takes the gradient of its
        # part of every minibatch, and gradients are averaged over the axis.
        return parallel.all_gather((data, returns), axis_name, axis=1)

    def exact_minibatches(batch: tuple[Fragment, jax.Array], start_carry: jax.Array, key: jax.Array):
        # Every device has the global batch: whole minibatches ([n, T, m]),
        # returns normalised over each, then this device's logical shards.
        data, returns = batch
        index = minibatch_indices(key, config.num_envs, config)
        data, returns = gather(data, index, 1), gather(returns, index, 1)
        if config.normalize_advantages:  # no baseline (exact_config): the advantages are the returns
            returns = standardized(returns, (1, 2))
        data, returns = logical_shards((data, returns), shards, axis_name, 2)
        return data, logical_shards(gather(start_carry, index, 0), shards, axis_name, 1), returns

    def minibatches(batch: tuple[Fragment, jax.Array], start_carry: jax.Array, key: jax.Array):
        # Minibatches split the envs (axis 1 of the fragment, 0 of the
        # carry), so each keeps whole fragments and its memory.
        if shards is not None:
            return exact_minibatches(batch, start_carry, key)
        data, returns = batch
        index = minibatch_indices(key, config.num_envs, config)
        index = shard_minibatches(index, axis_name)
        return gather(data, index, 1), gather(start_carry, index, 0), gather(returns, index, 1)

    update = make_update(loss_fn, optimizer, axis_name, shards)
    stages = make_stages(env, policy, config, update, targets, minibatches, axis_name, shards)
    return make_algorithm(env, policy, config, optimizer, stages, axis_name)


def exact_config(config: ReinforceConfig) -> base.Problem | None:
    """Exact layouts compute each logical shard's loss on its own, so they
    cannot normalise advantages that depend on the parameters being updated
    (the returns less the baseline's values) over a whole minibatch."""
    if config.baseline and config.normalize_advantages:
        return "hyperparameters.normalize_advantages", (
            "exact layouts (devices.shards) of reinforce normalise advantages only without a baseline"
            " (set baseline: false, or normalize_advantages: false)"
        )
    return None


register(
    "reinforce",
    ReinforceConfig,
    make_reinforce,
    steps_in_minibatches=False,
    numeric=("gamma", "value_coef", "entropy_coef", "c_rho"),
    exact=True,
    exact_config=exact_config,
)
