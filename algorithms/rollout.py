"""What the on-policy algorithms share: their state, rollout collection (T
steps of B auto-resetting envs under a possibly recurrent policy, under
`lax.scan`), minibatching, and the gradient update."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from algorithms import base, parallel
from algorithms.base import Environment, TimeStep
from algorithms.episodes import EpisodeStats, finish_episode_stats, init_episode_stats, step_episode_stats
from algorithms.networks import Policy, masked_logits


class ActorState(NamedTuple):
    env_state: Any  # [B, ...]
    timestep: TimeStep  # [B, ...] what the envs show now
    carry: jax.Array  # [B, H] the policy's memory (H = 0 for feed-forward)
    reset: jax.Array  # [B] the current observation starts an episode
    episodes: EpisodeStats


class OnPolicyState(NamedTuple):
    params: Any
    opt_state: Any
    actor: ActorState
    key: jax.Array
    iteration: jax.Array  # [] int32


def updates_per_step(config: Any) -> int:
    return config.update_epochs * config.num_minibatches


def env_steps_per_step(config: Any) -> int:
    return config.num_envs * config.num_steps


def batch_check(steps_in_minibatches: bool) -> Callable[[Any, Any, int], base.Problem | None]:
    """Minibatches divide the rollout, and each of D data-parallel shards
    gets whole envs and an equal part of every minibatch. Minibatches are of
    single steps when `steps_in_minibatches` (PPO with a feed-forward
    policy), else of whole env fragments."""

    def check(config: Any, network: Any, shards: int) -> base.Problem | None:
        flat = steps_in_minibatches and network.kind != "gru"
        if flat and (config.num_envs * config.num_steps) % config.num_minibatches:
            return "num_minibatches", (
                f"num_envs * num_steps ({config.num_envs * config.num_steps}) does not divide into"
                f" num_minibatches ({config.num_minibatches})"
            )
        if not flat and config.num_envs % config.num_minibatches:
            whole = "; a gru policy's minibatches are whole envs" if network.kind == "gru" else ""
            return "num_minibatches", (
                f"num_envs ({config.num_envs}) does not divide into num_minibatches ({config.num_minibatches}){whole}"
            )
        if config.num_envs % shards:
            return "num_envs", f"num_envs ({config.num_envs}) does not split over {shards} data-parallel devices"
        size = config.num_envs * (config.num_steps if flat else 1) // config.num_minibatches
        if size % shards:
            unit = "steps" if flat else "envs"
            return "num_minibatches", f"a minibatch of {size} {unit} does not split over {shards} data-parallel devices"
        return None

    return check


def register(name: str, make: Callable[..., base.Algorithm], *, steps_in_minibatches: bool) -> None:
    """Register an on-policy algorithm: single-agent, discrete actions, and
    `update_epochs x num_minibatches` updates of `num_envs x num_steps` steps."""
    base.register(
        name,
        base.Registration(
            factory=make,
            updates_per_step=updates_per_step,
            env_steps_per_step=env_steps_per_step,
            check_env=base.single_agent_discrete(name),
            check=batch_check(steps_in_minibatches),
        ),
    )


def make_update(loss_fn: Callable, optimizer: optax.GradientTransformation, axis_name: str | None) -> Callable:
    """One optimizer step on a minibatch, for `lax.scan`: carry (params,
    opt_state), input the minibatch (the loss's arguments after params).
    Gradients are averaged over `axis_name` when it is set."""

    def update(carry, minibatch):
        params, opt_state = carry
        grads, aux = jax.grad(loss_fn, has_aux=True)(params, *minibatch)
        grads = parallel.pmean(grads, axis_name)
        aux = dict(aux, grad_norm=optax.global_norm(grads))
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), aux

    return update


def learn(
    update: Callable,
    state: OnPolicyState,
    actor: ActorState,
    next_key: jax.Array,
    epoch_key: jax.Array,
    num_epochs: int,
    minibatches_for: Callable[[jax.Array], Any],
    axis_name: str | None = None,
) -> tuple[OnPolicyState, dict[str, jax.Array]]:
    """`num_epochs` passes of `update` over the minibatches that
    `minibatches_for(key)` draws for each epoch; returns the next state (with
    `actor` after the rollout and `next_key`) and the iteration's metrics,
    averaged over updates (and over the shards of `axis_name`)."""

    def epoch(carry, key):
        return jax.lax.scan(update, carry, minibatches_for(key))

    (params, opt_state), aux = jax.lax.scan(
        epoch, (state.params, state.opt_state), jax.random.split(epoch_key, num_epochs)
    )
    metrics = parallel.pmean({name: value.mean() for name, value in aux.items()}, axis_name)
    metrics["episode_return"] = actor.episodes.last_return
    metrics["episode_length"] = actor.episodes.last_length
    return OnPolicyState(params, opt_state, actor, next_key, state.iteration + 1), metrics


class Fragment(NamedTuple):
    """T steps of B envs; index t is the decision at step t."""

    observation: jax.Array  # [T, B, *obs]
    legal_action_mask: jax.Array  # [T, B, A]
    reset: jax.Array  # [T, B] observation t starts an episode (memory is cleared)
    action: jax.Array  # [T, B]
    log_prob: jax.Array  # [T, B] log mu(a_t | x_t) of the behaviour policy
    value: jax.Array  # [T, B] V(x_t) at collection time
    reward: jax.Array  # [T, B]
    done: jax.Array  # [T, B] transition t ended its episode (terminated or truncated)


def init_actor(
    env: Environment, policy: Policy, key: jax.Array, num_envs: int, axis_name: str | None = None
) -> ActorState:
    """This shard's part of `num_envs` envs (env i reset with key i of `split(key, num_envs)`)."""
    env_state, timestep = jax.vmap(env.reset)(parallel.split(key, num_envs, axis_name))
    local = parallel.local_count(num_envs, axis_name)
    return ActorState(
        env_state=env_state,
        timestep=timestep,
        carry=policy.initial_carry((local,)),
        reset=jnp.ones((local,), bool),
        episodes=init_episode_stats(local),
    )


def log_prob_of(logits: jax.Array, legal_action_mask: jax.Array, action: jax.Array) -> tuple[jax.Array, jax.Array]:
    """log pi(a|x) of the taken actions and the masked log-probabilities."""
    log_pi = jax.nn.log_softmax(masked_logits(logits, legal_action_mask))
    return jnp.take_along_axis(log_pi, action[..., None], -1)[..., 0], log_pi


def entropy_of(log_pi: jax.Array, legal_action_mask: jax.Array) -> jax.Array:
    # Masked actions have probability exactly 0; where() keeps 0 * min-logit out.
    return -jnp.where(legal_action_mask, jnp.exp(log_pi) * log_pi, 0.0).sum(-1)


def collect(
    env: Environment,
    policy: Policy,
    params: Any,
    actor: ActorState,
    key: jax.Array,
    num_steps: int,
    axis_name: str | None = None,
) -> tuple[ActorState, Fragment]:
    """Step the B envs `num_steps` times with actions sampled from the policy.

    Rewards are player 0's: the on-policy algorithms here are single-agent.
    Under `axis_name`, `actor` holds this shard's envs of B.
    """
    num_envs = actor.reset.shape[0] * parallel.size(axis_name)

    def step(actor: ActorState, key):
        action_key, env_key = jax.random.split(key)
        ts = actor.timestep
        carry, logits, value = policy.apply(params, actor.carry, ts.observation, actor.reset)
        action = parallel.categorical(action_key, masked_logits(logits, ts.legal_action_mask), axis_name)
        log_prob, _ = log_prob_of(logits, ts.legal_action_mask, action)
        env_keys = parallel.split(env_key, num_envs, axis_name)
        env_state, next_ts = jax.vmap(env.step)(actor.env_state, action, env_keys)
        reward = next_ts.reward[:, 0]
        done = next_ts.terminated | next_ts.truncated
        fragment = Fragment(ts.observation, ts.legal_action_mask, actor.reset, action, log_prob, value, reward, done)
        episodes, ended = step_episode_stats(actor.episodes, reward, done)
        return ActorState(env_state, next_ts, carry, done, episodes), (fragment, ended)

    actor, (fragment, ended) = jax.lax.scan(step, actor, jax.random.split(key, num_steps))
    return actor._replace(episodes=finish_episode_stats(actor.episodes, ended, axis_name)), fragment


def bootstrap_value(policy: Policy, params: Any, actor: ActorState) -> jax.Array:
    """V(x_T) of the observation after the fragment, `[B]`."""
    _, _, value = policy.apply(params, actor.carry, actor.timestep.observation, actor.reset)
    return value


def minibatch_indices(key: jax.Array, size: int, num_minibatches: int) -> jax.Array:
    """A random split of `range(size)` into equal minibatches, `[n, size // n]`."""
    return jax.random.permutation(key, size).reshape(num_minibatches, size // num_minibatches)


def shard_minibatches(index: jax.Array, axis_name: str | None) -> jax.Array:
    """This shard's part of each minibatch (`[n, m] -> [n, m / D]`): the
    minibatches are drawn from the global batch, and each shard computes the
    gradient of its part of them."""
    return parallel.local_slice(index, axis_name, axis=1)


def gather(tree: Any, indices: jax.Array, axis: int) -> Any:
    """Each minibatch of `indices` (`[n, m]`) taken along `axis`, stacked on a
    new leading axis: a leaf `[..., size, ...]` becomes `[n, ..., m, ...]`."""
    return jax.tree.map(lambda x: jnp.moveaxis(jnp.take(x, indices, axis=axis), axis, 0), tree)
