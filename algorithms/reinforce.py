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
from algorithms.networks import make_actor_critic, masked_logits
from algorithms.returns import discounted_returns


class EpisodeStats(NamedTuple):
    running_return: jax.Array  # [B] return of each env's current episode
    running_length: jax.Array  # [B] steps of each env's current episode
    last_return: jax.Array  # [] mean return of the episodes that ended last
    last_length: jax.Array  # []


class ReinforceState(NamedTuple):
    params: Any
    opt_state: Any
    env_state: Any  # [B, ...]
    timestep: base.TimeStep  # [B, ...]
    episodes: EpisodeStats
    key: jax.Array
    iteration: jax.Array  # [] int32


class Transition(NamedTuple):
    observation: jax.Array  # [T, B, *obs]
    legal_action_mask: jax.Array  # [T, B, A]
    action: jax.Array  # [T, B]
    behaviour_log_prob: jax.Array  # [T, B]
    reward: jax.Array  # [T, B]
    done: jax.Array  # [T, B]


def update_episode_stats(stats: EpisodeStats, reward: jax.Array, done: jax.Array) -> EpisodeStats:
    """Accumulate one step of B envs; an ended episode's figures replace the
    last ones (averaged over the envs whose episodes ended at this step)."""
    episode_return = stats.running_return + reward
    episode_length = stats.running_length + 1
    ended = done.sum()
    any_ended = ended > 0
    mean_return = jnp.where(done, episode_return, 0.0).sum() / jnp.maximum(ended, 1)
    mean_length = jnp.where(done, episode_length, 0).sum() / jnp.maximum(ended, 1)
    return EpisodeStats(
        running_return=jnp.where(done, 0.0, episode_return),
        running_length=jnp.where(done, 0, episode_length),
        last_return=jnp.where(any_ended, mean_return, stats.last_return),
        last_length=jnp.where(any_ended, mean_length.astype(jnp.float32), stats.last_length),
    )


def init_episode_stats(num_envs: int) -> EpisodeStats:
    return EpisodeStats(
        running_return=jnp.zeros((num_envs,), jnp.float32),
        running_length=jnp.zeros((num_envs,), jnp.int32),
        last_return=jnp.zeros((), jnp.float32),
        last_length=jnp.zeros((), jnp.float32),
    )


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
      network: the spec's network section.
      optimizer: the optax transformation (clipping and schedule included).
      axis_name: when set, gradients are averaged over this named axis, so the
        same step runs data-parallel under `shard_map`.
    """
    net = make_actor_critic(network, env.num_actions, env.observation_shape)
    num_envs, num_steps = config.num_envs, config.num_steps
    minibatch_envs = num_envs // config.num_minibatches

    def init(key: jax.Array) -> ReinforceState:
        key, net_key, env_key = jax.random.split(key, 3)
        env_state, timestep = jax.vmap(env.reset)(jax.random.split(env_key, num_envs))
        params = net.init(net_key, timestep.observation[0])
        return ReinforceState(
            params=params,
            opt_state=optimizer.init(params),
            env_state=env_state,
            timestep=timestep,
            episodes=init_episode_stats(num_envs),
            key=key,
            iteration=jnp.zeros((), jnp.int32),
        )

    def act(carry, _):
        params, env_state, timestep, episodes, key = carry
        key, action_key, env_key = jax.random.split(key, 3)
        logits, _ = net.apply(params, timestep.observation)
        logits = masked_logits(logits, timestep.legal_action_mask)
        action = jax.random.categorical(action_key, logits)
        log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], -1)[:, 0]
        env_state, next_timestep = jax.vmap(env.step)(env_state, action, jax.random.split(env_key, num_envs))
        reward = next_timestep.reward[:, 0]
        done = next_timestep.terminated | next_timestep.truncated
        transition = Transition(
            observation=timestep.observation,
            legal_action_mask=timestep.legal_action_mask,
            action=action,
            behaviour_log_prob=log_prob,
            reward=reward,
            done=done,
        )
        episodes = update_episode_stats(episodes, reward, done)
        return (params, env_state, next_timestep, episodes, key), transition

    def loss_fn(params, batch: Transition, returns: jax.Array):
        logits, value = net.apply(params, batch.observation)
        logits = masked_logits(logits, batch.legal_action_mask)
        log_pi = jax.nn.log_softmax(logits)
        log_pi_a = jnp.take_along_axis(log_pi, batch.action[..., None], -1)[..., 0]
        rho = jnp.exp(jax.lax.stop_gradient(log_pi_a) - batch.behaviour_log_prob)
        if config.c_rho is not None:
            rho = jnp.minimum(rho, config.c_rho)
        advantage = returns - jax.lax.stop_gradient(value) if config.baseline else returns
        if config.normalize_advantages:
            advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
        policy_loss = -(rho * advantage * log_pi_a).mean()
        # Masked actions have probability exactly 0; where() keeps 0 * min-logit out.
        entropy = -jnp.where(batch.legal_action_mask, jnp.exp(log_pi) * log_pi, 0.0).sum(-1).mean()
        value_loss = 0.5 * jnp.square(value - returns).mean() if config.baseline else jnp.zeros(())
        loss = policy_loss - config.entropy_coef * entropy + config.value_coef * value_loss
        return loss, dict(
            loss=loss, policy_loss=policy_loss, value_loss=value_loss, entropy=entropy, importance_weight=rho.mean()
        )

    def update(carry, minibatch):
        params, opt_state = carry
        batch, returns = minibatch
        grads, aux = jax.grad(loss_fn, has_aux=True)(params, batch, returns)
        if axis_name is not None:
            grads = jax.lax.pmean(grads, axis_name)
        aux = dict(aux, grad_norm=optax.global_norm(grads))
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), aux

    def epoch(carry, key):
        params, opt_state, data, returns = carry
        # Minibatches split the envs, so each keeps whole fragments.
        order = jax.random.permutation(key, num_envs)

        def split(x):
            x = jnp.take(x, order, axis=1)
            return jnp.swapaxes(x.reshape(x.shape[0], config.num_minibatches, minibatch_envs, *x.shape[2:]), 0, 1)

        minibatches = jax.tree.map(split, (data, returns))
        (params, opt_state), aux = jax.lax.scan(update, (params, opt_state), minibatches)
        return (params, opt_state, data, returns), aux

    def step(state: ReinforceState) -> tuple[ReinforceState, base.Metrics]:
        (params, env_state, timestep, episodes, key), data = jax.lax.scan(
            act,
            (state.params, state.env_state, state.timestep, state.episodes, state.key),
            length=num_steps,
        )
        if config.baseline:
            _, bootstrap = net.apply(params, timestep.observation)
        else:
            bootstrap = jnp.zeros((num_envs,), jnp.float32)
        discount = config.gamma * (1.0 - data.done.astype(jnp.float32))
        returns = jax.vmap(discounted_returns, in_axes=(1, 1, 0), out_axes=1)(data.reward, discount, bootstrap)

        key, epoch_key = jax.random.split(key)
        (params, opt_state, _, _), aux = jax.lax.scan(
            epoch,
            (params, state.opt_state, data, returns),
            jax.random.split(epoch_key, config.update_epochs),
        )
        metrics = {name: value.mean() for name, value in aux.items()}
        metrics["episode_return"] = episodes.last_return
        metrics["episode_length"] = episodes.last_length
        new_state = ReinforceState(
            params=params,
            opt_state=opt_state,
            env_state=env_state,
            timestep=timestep,
            episodes=episodes,
            key=key,
            iteration=state.iteration + 1,
        )
        return new_state, metrics

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
