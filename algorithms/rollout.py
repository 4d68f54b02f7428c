"""What the on-policy algorithms share: their state, rollout collection (T
steps of B auto-resetting envs under a possibly recurrent policy, under
`lax.scan`), minibatching, and the gradient update. How they register, and
the batch shapes a spec may ask of them, are in
`algorithms.on_policy_registration`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from algorithms import base, normalization, parallel
from algorithms.base import Environment, TimeStep
from algorithms.config import OnPolicyConfig
from algorithms.episodes import EpisodeStats, finish_episode_stats, init_episode_stats, step_episode_stats
from algorithms.evaluation import make_evaluate
from algorithms.layers import ROW_STABLE_WIDTH
from algorithms.networks import Policy
from algorithms.normalization import Normalizer
from algorithms.shuffle import order as shuffle_order


class ActorState(NamedTuple):
    env_state: Any  # [B, ...]
    timestep: TimeStep  # [B, ...] what the envs show now
    carry: jax.Array  # [B, H] the policy's memory (H = 0 for feed-forward)
    reset: jax.Array  # [B] the current observation starts an episode
    episodes: EpisodeStats
    # Running observation and reward statistics (algorithms.normalization);
    # None when the spec normalises neither.
    normalizer: Normalizer | None = None


class OnPolicyState(NamedTuple):
    params: Any
    opt_state: Any
    actor: ActorState
    key: jax.Array
    iteration: jax.Array  # [] int32


def make_update(
    loss_fn: Callable, optimizer: optax.GradientTransformation, axis_name: str | None, shards: int | None = None
) -> Callable:
    """One optimizer step on a minibatch, for `lax.scan`: carry (params,
    opt_state), input the minibatch (the loss's arguments after params).
    Gradients are averaged over `axis_name` when it is set. With `shards`,
    the minibatch comes as this device's logical shards (a leading `[L / D]`
    axis): the gradient and metrics of each are taken one after another and
    averaged in shard order (`parallel.fold_mean`), the same on any layout."""

    def gradient(params, minibatch):
        if shards is None:
            grads, aux = jax.grad(loss_fn, has_aux=True)(params, *minibatch)
            return parallel.pmean(grads, axis_name), aux

        def one(carry, part):
            return carry, jax.grad(loss_fn, has_aux=True)(params, *part)

        _, parts = parallel.opaque_scan(one, (), minibatch)
        return parallel.fold_mean(parts, axis_name)

    def update(carry, minibatch):
        params, opt_state = carry
        grads, aux = gradient(params, minibatch)
        aux = dict(aux, grad_norm=optax.global_norm(grads))
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), aux

    return update


class Stages(NamedTuple):
    """One on-policy iteration, stage by stage: `make_algorithm`'s `step`
    composes them in this order, and the micro-benchmarks time them one by
    one (the code that trains, not a copy of it)."""

    # (state, key) -> (actor after the rollout, fragment [T, B, ...])
    collect: Callable[[OnPolicyState, jax.Array], tuple[ActorState, Fragment]]
    # (params, actor, fragment) -> the learning batch (the fragment with its
    # returns or advantages), gathered over the data axis: every shard sees
    # the global batch
    targets: Callable[[Any, ActorState, Fragment], Any]
    # (batch, memory at the fragment's start [B, H], key) -> one epoch's
    # minibatches, stacked [num_minibatches, ...]: this shard's part of each
    minibatches: Callable[[Any, jax.Array, jax.Array], Any]
    # (state, actor, batch, memory at the start, next key, epoch key) ->
    # (next state, the iteration's metrics): `update_epochs` passes of the
    # gradient update over freshly drawn minibatches
    learn: Callable[..., tuple[OnPolicyState, dict[str, jax.Array]]]


def make_stages(
    env: Environment,
    policy: Policy,
    config: Any,
    update: Callable,
    targets: Callable,
    minibatches: Callable,
    axis_name: str | None = None,
    shards: int | None = None,
) -> Stages:
    """The stages of an on-policy algorithm from what sets it apart: its
    `targets`, its `minibatches` and its gradient `update` (`make_update`,
    made with the same `shards`)."""

    def collect_stage(state: OnPolicyState, key: jax.Array) -> tuple[ActorState, Fragment]:
        return collect(env, policy, state.params, state.actor, key, config.num_steps, axis_name, shards, config.gamma)

    scan = jax.lax.scan if shards is None else parallel.opaque_scan

    def learn_stage(state, actor, batch, start_carry, next_key, epoch_key):
        def epoch(carry, key):
            return scan(update, carry, minibatches(batch, start_carry, key))

        (params, opt_state), aux = scan(
            epoch, (state.params, state.opt_state), jax.random.split(epoch_key, config.update_epochs)
        )
        metrics = {name: value.mean() for name, value in aux.items()}
        if shards is None:  # else every device has the same already (make_update)
            metrics = parallel.pmean(metrics, axis_name)
        metrics["episode_return"] = actor.episodes.last_return
        metrics["episode_length"] = actor.episodes.last_length
        return OnPolicyState(params, opt_state, actor, next_key, state.iteration + 1), metrics

    return Stages(collect_stage, targets, minibatches, learn_stage)


def make_algorithm(
    env: Environment,
    policy: Policy,
    config: Any,
    optimizer: optax.GradientTransformation,
    stages: Stages,
    axis_name: str | None = None,
) -> base.Algorithm:
    """`init` (this shard's part of `num_envs` envs, fresh parameters), a
    `step` that runs the stages: collect, targets, then learn, and, when
    `config.evaluation` is set, evaluation rollouts (algorithms.evaluation)."""

    def init(key: jax.Array) -> OnPolicyState:
        key, net_key, env_key = jax.random.split(key, 3)
        actor = init_actor(env, policy, env_key, config.num_envs, axis_name, config)
        params = policy.init(net_key, actor.timestep.observation[0])
        return OnPolicyState(params, optimizer.init(params), actor, key, jnp.zeros((), jnp.int32))

    def step(state: OnPolicyState) -> tuple[OnPolicyState, base.Metrics]:
        key, rollout_key, epoch_key = jax.random.split(state.key, 3)
        actor, fragment = stages.collect(state, rollout_key)
        batch = stages.targets(state.params, actor, fragment)
        start_carry = parallel.all_gather(state.actor.carry, axis_name)
        return stages.learn(state, actor, batch, start_carry, key, epoch_key)

    spec = getattr(config, "evaluation", None)
    evaluate = None if spec is None else make_evaluate(env, policy, spec, axis_name)
    return base.Algorithm(init=init, step=step, evaluate=evaluate, map_seeds=policy.map_seeds)


class Fragment(NamedTuple):
    """T steps of B envs; index t is the decision at step t."""

    observation: jax.Array  # [T, B, *obs] what the policy saw (normalised, if the spec says so)
    legal_action_mask: jax.Array  # [T, B, A]
    reset: jax.Array  # [T, B] observation t starts an episode (memory is cleared)
    action: jax.Array  # [T, B] discrete, [T, B, A] continuous (the unclipped sample)
    log_prob: jax.Array  # [T, B] log mu(a_t | x_t) of the behaviour policy
    value: jax.Array  # [T, B] V(x_t) at collection time
    reward: jax.Array  # [T, B] to learn from (scaled, if the spec normalises rewards)
    done: jax.Array  # [T, B] transition t ended its episode (terminated or truncated)


def init_actor(
    env: Environment, policy: Policy, key: jax.Array, num_envs: int, axis_name: str | None = None, config: Any = None
) -> ActorState:
    """This shard's part of `num_envs` envs (env i reset with key i of
    `split(key, num_envs)`), and the normalisation statistics the config's
    `normalize_observations` and `normalize_rewards` ask for, having seen
    the first observations."""
    env_state, timestep = jax.vmap(env.reset)(parallel.split(key, num_envs, axis_name))
    local = parallel.local_count(num_envs, axis_name)
    observations = getattr(config, "normalize_observations", False)
    rewards = getattr(config, "normalize_rewards", False)
    normalizer = None
    if observations or rewards:
        normalizer = normalization.init(env.observation_shape, local, observations, rewards)
        normalizer = normalization.see_observations(normalizer, timestep.observation, axis_name)
    return ActorState(
        env_state=env_state,
        timestep=timestep,
        carry=policy.initial_carry((local,)),
        reset=jnp.ones((local,), bool),
        episodes=init_episode_stats(local),
        normalizer=normalizer,
    )


def collect(
    env: Environment,
    policy: Policy,
    params: Any,
    actor: ActorState,
    key: jax.Array,
    num_steps: int,
    axis_name: str | None = None,
    shards: int | None = None,
    gamma: Any = 1.0,
) -> tuple[ActorState, Fragment]:
    """Step the B envs `num_steps` times with actions sampled from the policy.

    Rewards are player 0's: the on-policy algorithms here are single-agent.
    Under `axis_name`, `actor` holds this shard's envs of B; with `shards`,
    episode figures are summed per logical shard (see `algorithms.episodes`).
    The actor's normaliser, if any, sees every step (rewards discounted by
    `gamma`).
    """
    num_envs = actor.reset.shape[0] * parallel.size(axis_name)
    local_shards = 1 if shards is None else parallel.local_shards(shards, axis_name)

    dist = policy.distribution

    def step(actor: ActorState, key):
        action_key, env_key = jax.random.split(key)
        ts = actor.timestep
        observation = normalization.observe(actor.normalizer, ts.observation)
        carry, head, value = policy.apply(params, actor.carry, observation, actor.reset)
        action = dist.sample(action_key, head, ts.legal_action_mask, axis_name)
        log_prob = dist.log_prob(head, ts.legal_action_mask, action)
        env_keys = parallel.split(env_key, num_envs, axis_name)
        env_state, next_ts = jax.vmap(env.step)(actor.env_state, action, env_keys)
        reward = next_ts.reward[:, 0]
        done = next_ts.terminated | next_ts.truncated
        normalizer = normalization.see_observations(actor.normalizer, next_ts.observation, axis_name)
        normalizer, learn_reward = normalization.see_rewards(normalizer, reward, done, gamma, axis_name)
        fragment = Fragment(observation, ts.legal_action_mask, actor.reset, action, log_prob, value, learn_reward, done)
        episodes, ended = step_episode_stats(actor.episodes, reward, done, local_shards)
        return ActorState(env_state, next_ts, carry, done, episodes, normalizer), (fragment, ended)

    actor, (fragment, ended) = jax.lax.scan(step, actor, jax.random.split(key, num_steps))
    return actor._replace(episodes=finish_episode_stats(actor.episodes, ended, axis_name, shards is not None)), fragment


def bootstrap_value(policy: Policy, params: Any, actor: ActorState) -> jax.Array:
    """V(x_T) of the observation after the fragment, `[B]`."""
    observation = normalization.observe(actor.normalizer, actor.timestep.observation)
    _, _, value = policy.apply(params, actor.carry, observation, actor.reset)
    return value


def minibatch_indices(key: jax.Array, size: int, config: OnPolicyConfig) -> jax.Array:
    """A random split of `range(size)` into `config.num_minibatches` equal
    minibatches, `[n, size // n]`, in the order `config.shuffle` draws
    (`algorithms.shuffle.order`)."""
    n = config.num_minibatches
    return shuffle_order(key, size, config.shuffle).reshape(n, size // n)


def shard_minibatches(tree: Any, axis_name: str | None, axis: int = 1) -> Any:
    """This shard's part of each minibatch (`[n, m] -> [n, m / D]` along
    `axis`): the minibatches are drawn from the global batch, and each shard
    computes the gradient of its part of them."""
    return jax.tree.map(lambda x: parallel.local_slice(x, axis_name, axis=axis), tree)


def logical_shards(tree: Any, shards: int, axis_name: str | None, axis: int) -> Any:
    """This device's part of global minibatches `[n, ..., m, ...]` (rows
    along `axis`, `shard_minibatches`) as its L / D logical shards of
    `m / L` rows each: `[n, L / D, ..., m / L, ...]` (exact layouts)."""
    local = parallel.local_shards(shards, axis_name)

    def split(x: jax.Array) -> jax.Array:
        x = parallel.local_slice(x, axis_name, axis=axis)
        x = x.reshape(*x.shape[:axis], local, x.shape[axis] // local, *x.shape[axis + 1 :])
        return jnp.moveaxis(x, axis, 1)

    return jax.tree.map(split, tree)


def standardized(x: jax.Array, axes: tuple[int, ...]) -> jax.Array:
    """`x` less its mean, over its standard deviation, along `axes` (each
    minibatch's advantages on exact layouts): a product with the reciprocal,
    not a division by a broadcast, which XLA rewrites in some programs only
    (see `algorithms.optimizers`)."""
    mean, std = x.mean(axes, keepdims=True), x.std(axes, keepdims=True)
    return (x - mean) * (1.0 / (std + 1e-8))


def align_for(shards: int | None) -> int:
    """How wide dense layers compute (`layers.Dense`): row-stable on exact layouts."""
    return 1 if shards is None else ROW_STABLE_WIDTH


def gather(tree: Any, indices: jax.Array, axis: int) -> Any:
    """Each minibatch of `indices` (`[n, m]`) taken along `axis`, stacked on a
    new leading axis: a leaf `[..., size, ...]` becomes `[n, ..., m, ...]`."""
    return jax.tree.map(lambda x: jnp.moveaxis(jnp.take(x, indices, axis=axis), axis, 0), tree)
