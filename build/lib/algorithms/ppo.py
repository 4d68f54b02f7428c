"""PPO with a clipped surrogate objective (Schulman et al. 2017).

One iteration: a rollout of `num_steps` over `num_envs` envs, advantages by
GAE(lambda) (V-trace with ratios of 1, see `returns.vtrace_gae`), then
`update_epochs` passes of `num_minibatches` shuffled minibatches minimising

    L = -min(r A, clip(r, 1 - eps, 1 + eps) A) + c_v L_V - c_H H(pi),

with r = pi(a|x) / pi_old(a|x), advantages normalised per minibatch, and the
value loss optionally clipped around the old values. A feed-forward policy
shuffles single steps; a recurrent one (`network: {kind: gru}`) shuffles
whole env fragments and replays them from the memory they started with.

The hyperparameters are `PPOConfig`, a spec's `hyperparameters:` section
when `algorithm: ppo`. `reward_scale` multiplies rewards for learning only (values and advantages); reported
episode returns stay in the env's own units. Continuous actions take a
diagonal Gaussian policy (`algorithms.distributions`); the normalisation
options are `algorithms.normalization`'s.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from pydantic import Field

from algorithms import base, parallel
from algorithms.config import NetworkConfig, OnPolicyConfig
from algorithms.networks import Policy, make_policy, unroll
from algorithms.on_policy_registration import register
from algorithms.returns import vtrace_gae
from algorithms.rollout import (
    ActorState,
    Fragment,
    Stages,
    align_for,
    bootstrap_value,
    gather,
    logical_shards,
    make_algorithm,
    make_update,
    minibatch_indices,
    shard_minibatches,
    standardized,
)
from algorithms.rollout import make_stages as make_stages_of


class PPOConfig(OnPolicyConfig):
    """PPO's hyperparameters (the spec's `hyperparameters:`)."""

    num_envs: int = Field(default=4, gt=0, description="envs stepped in parallel per seed")
    num_steps: int = Field(default=128, gt=0, description="steps per env per rollout")
    gamma: float = Field(default=0.99, ge=0, le=1, description="discount factor")
    gae_lambda: float = Field(default=0.95, ge=0, le=1, description="GAE's lambda")
    clip_eps: float = Field(default=0.2, gt=0, description="the clipped objective's ratio bound")
    clip_value: bool = Field(default=True, description="clip the value loss around the old values")
    value_coef: float = Field(default=0.5, ge=0, description="weight of the value loss")
    entropy_coef: float = Field(default=0.01, ge=0, description="weight of the entropy bonus")
    update_epochs: int = Field(default=4, gt=0, description="passes over each rollout")
    num_minibatches: int = Field(default=4, gt=0, description="minibatches per pass")
    normalize_advantages: bool = Field(default=True, description="advantages standardised per minibatch")
    reward_scale: float = Field(default=1.0, gt=0, description="rewards are multiplied by this for learning only")


class Batch(NamedTuple):
    fragment: Fragment  # [T, B, ...] or, feed-forward, [T * B, ...] shuffled
    advantage: jax.Array
    target: jax.Array


def make_loss(config: PPOConfig, policy: Any, axis_name: str | None = None, normalized: bool = False):
    """The PPO loss of one minibatch, `loss_fn(params, batch, carry) -> (loss,
    metrics)`: `batch` holds `[M, ...]` steps (feed-forward) or `[T, M, ...]`
    env fragments replayed from the memory `carry` (`[M, H]`, recurrent).
    Under `axis_name` it is this shard's part of the minibatch, and advantages
    are normalised with the whole minibatch's statistics (unless `normalized`:
    the minibatches come with them normalised already)."""

    def loss_fn(params, batch: Batch, carry: jax.Array):
        data = batch.fragment
        if policy.recurrent:
            logits, value = unroll(policy, params, carry, data.observation, data.reset)
        else:
            _, logits, value = policy.apply(params, carry, data.observation, data.reset)
        log_pi_a, entropy = policy.distribution.log_prob_entropy(logits, data.legal_action_mask, data.action)
        log_ratio = log_pi_a - data.log_prob
        ratio = jnp.exp(log_ratio)
        advantage = batch.advantage
        if config.normalize_advantages and not normalized:
            mean, std = parallel.mean_std(advantage, axis_name)
            advantage = (advantage - mean) / (std + 1e-8)
        clipped = jnp.clip(ratio, 1.0 - config.clip_eps, 1.0 + config.clip_eps)
        policy_loss = -jnp.minimum(ratio * advantage, clipped * advantage).mean()
        value_error = jnp.square(value - batch.target)
        if config.clip_value:
            value_clipped = data.value + jnp.clip(value - data.value, -config.clip_eps, config.clip_eps)
            value_error = jnp.maximum(value_error, jnp.square(value_clipped - batch.target))
        value_loss = 0.5 * value_error.mean()
        entropy = entropy.mean()
        loss = policy_loss + config.value_coef * value_loss - config.entropy_coef * entropy
        return loss, dict(
            loss=loss,
            policy_loss=policy_loss,
            value_loss=value_loss,
            entropy=entropy,
            approx_kl=((ratio - 1.0) - log_ratio).mean(),
            clip_fraction=(jnp.abs(ratio - 1.0) > config.clip_eps).mean(),
        )

    return loss_fn


def make_stages(
    config: PPOConfig,
    env: base.Environment,
    *,
    network: NetworkConfig,
    optimizer: optax.GradientTransformation,
    axis_name: str | None = None,
    shards: int | None = None,
) -> tuple[Policy, Stages]:
    """PPO's policy network and the stages of its iteration (see `make_ppo`):
    targets are GAE advantages and value targets; minibatches are single
    steps (feed-forward) or whole env fragments (recurrent)."""
    policy = make_policy(network, env.num_actions, env.observation_shape, align_for(shards), env.discrete_actions)
    num_envs, num_steps = config.num_envs, config.num_steps
    loss = make_loss(config, policy, axis_name, normalized=shards is not None)
    update = make_update(loss, optimizer, axis_name, shards)

    def targets(params: Any, actor: ActorState, data: Fragment) -> Batch:
        bootstrap = bootstrap_value(policy, params, actor)
        discount = config.gamma * (1.0 - data.done.astype(jnp.float32))
        gae = jax.vmap(lambda r, d, v, b: vtrace_gae(r, d, v, b, lambda_=config.gae_lambda), (1, 1, 1, 0), 1)
        advantages = gae(config.reward_scale * data.reward, discount, data.value, bootstrap)
        # Every shard sees the global batch ([T, num_envs]); see make_ppo.
        return parallel.all_gather(Batch(data, advantages.advantage, advantages.target), axis_name, axis=1)

    def exact_minibatches(batch: Batch, start_carry: jax.Array, key: jax.Array):
        # Each minibatch's advantages normalised over the whole of it (every
        # device has the global batch), then this device's logical shards.
        if policy.recurrent:
            index = minibatch_indices(key, num_envs, config)
            batch = gather(batch, index, 1)  # [n, T, m, ...]
            axes = (1, 2)
            carry = logical_shards(gather(start_carry, index, 0), shards, axis_name, 1)
        else:
            flat = jax.tree.map(lambda x: x.reshape(num_steps * num_envs, *x.shape[2:]), batch)
            batch = gather(flat, minibatch_indices(key, num_steps * num_envs, config), 0)
            axes = (1,)
            local = parallel.local_shards(shards, axis_name)
            carry = jnp.zeros((config.num_minibatches, local, batch.target.shape[1] // shards, 0))
        if config.normalize_advantages:
            batch = batch._replace(advantage=standardized(batch.advantage, axes))
        return logical_shards(batch, shards, axis_name, axes[-1]), carry

    def minibatches(batch: Batch, start_carry: jax.Array, key: jax.Array):
        if shards is not None:
            return exact_minibatches(batch, start_carry, key)
        if policy.recurrent:
            # Whole env fragments, replayed from the memory they started with.
            index = shard_minibatches(minibatch_indices(key, num_envs, config), axis_name)
            return gather(batch, index, 1), gather(start_carry, index, 0)
        flat = jax.tree.map(lambda x: x.reshape(num_steps * num_envs, *x.shape[2:]), batch)
        index = minibatch_indices(key, num_steps * num_envs, config)
        index = shard_minibatches(index, axis_name)
        return gather(flat, index, 0), jnp.zeros((config.num_minibatches, index.shape[1], 0))

    return policy, make_stages_of(env, policy, config, update, targets, minibatches, axis_name, shards)


def make_ppo(
    config: PPOConfig,
    env: base.Environment,
    *,
    network: NetworkConfig,
    optimizer: optax.GradientTransformation,
    axis_name: str | None = None,
    shards: int | None = None,
) -> base.Algorithm:
    """Build PPO for `env` (one agent; discrete actions, or continuous ones
    with a diagonal Gaussian policy).

    Args:
      config: the hyperparameters (see the module docstring).
      env: an unbatched, auto-resetting environment.
      network: the spec's network section (`mlp` or `gru`).
      optimizer: the optax transformation (clipping and schedule included).
      axis_name: when set, the envs are sharded over this named axis: each
        shard collects its envs, minibatches are drawn from the gathered
        global batch, each shard takes the gradient of its part of them and
        gradients are averaged over the axis.
      shards: when set, an exact layout of that many logical shards
        (`rollout.make_update`), at least two per device of `axis_name`: the
        same bits on any such number of devices and off the mesh; the
        network's layers then compute row-stable widths (`layers.Dense`)
        and the optimizer should be `algorithms.optimizers`' forms.

    The state (`rollout.OnPolicyState`), for one seed, with B = num_envs / D
    envs on this shard of D: parameters and optimizer state (replicated),
    the actor (B env states and time steps, [B, H] policy memory, [B] reset
    flags and episode figures), the key and the iteration count.
    """
    policy, stages = make_stages(config, env, network=network, optimizer=optimizer, axis_name=axis_name, shards=shards)
    return make_algorithm(env, policy, config, optimizer, stages, axis_name)


register(
    "ppo",
    PPOConfig,
    make_ppo,
    steps_in_minibatches=True,
    numeric=("gamma", "gae_lambda", "clip_eps", "value_coef", "entropy_coef", "reward_scale"),
    exact=True,
)
