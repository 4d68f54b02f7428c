"""Running observation and reward normalisation for the on-policy
algorithms, as the single-file JAX implementations do it for continuous
control, with the statistics carried in the actor's state (so checkpoints
keep them and a resume continues them).

- Observations: a running mean and variance over every observation the envs
  emitted (reset included), updated each step with the whole batch before the
  policy sees it; the policy acts on `(x - mean) / sqrt(var + 1e-8)`, clipped
  to [-10, 10]. The rollout stores what the policy saw, so the losses take
  the same inputs.
- Rewards: each env's discounted return so far, `R <- gamma R + r` (zeroed
  when an episode ends), and a running variance of those returns; rewards
  are divided by `sqrt(var + 1e-8)` and clipped to [-10, 10] for learning
  only (episode returns stay in the env's units).

Statistics are updated from the global batch, gathered over `axis_name`, so
every device holds the same statistics and they do not depend on how many
devices share the envs. A part that is off is `None`: no leaves, nothing
computed, and a state of the same structure as without normalisation.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from algorithms import parallel

EPSILON = 1e-8
CLIP = 10.0
INITIAL_COUNT = 1e-4  # a prior of mean 0, variance 1 that the first batch outweighs


class Moments(NamedTuple):
    mean: jax.Array
    var: jax.Array
    count: jax.Array  # [] float32, samples seen (plus the prior's)


class Normalizer(NamedTuple):
    observation: Moments | None  # over observations [*obs]
    returns: Moments | None  # over discounted returns []
    discounted_return: jax.Array | None  # [B] this shard's envs' return so far


def init_moments(shape: tuple[int, ...]) -> Moments:
    return Moments(jnp.zeros(shape, jnp.float32), jnp.ones(shape, jnp.float32), jnp.float32(INITIAL_COUNT))


def init(observation_shape: tuple[int, ...], local_envs: int, observations: bool, rewards: bool) -> Normalizer:
    return Normalizer(
        observation=init_moments(observation_shape) if observations else None,
        returns=init_moments(()) if rewards else None,
        discounted_return=jnp.zeros((local_envs,), jnp.float32) if rewards else None,
    )


def update_moments(moments: Moments, batch: jax.Array) -> Moments:
    """Merge a batch `[N, ...]` into the running moments (Chan et al.'s
    parallel variance)."""
    n = jnp.float32(batch.shape[0])
    batch_mean, batch_var = batch.mean(0), batch.var(0)
    total = moments.count + n
    delta = batch_mean - moments.mean
    mean = moments.mean + delta * (n / total)
    m2 = moments.var * moments.count + batch_var * n + jnp.square(delta) * (moments.count * n / total)
    return Moments(mean, m2 / total, total)


def scale(moments: Moments, x: jax.Array, center: bool) -> jax.Array:
    centred = x - moments.mean if center else x
    return jnp.clip(centred / jnp.sqrt(moments.var + EPSILON), -CLIP, CLIP)


def observe(normalizer: Normalizer | None, observation: jax.Array) -> jax.Array:
    """What the policy sees of raw observations `[..., *obs]`."""
    if normalizer is None or normalizer.observation is None:
        return observation
    return scale(normalizer.observation, observation, center=True)


def see_observations(normalizer: Normalizer | None, observation: jax.Array, axis_name: str | None) -> Normalizer | None:
    """Update the observation statistics with this shard's `[B, *obs]`, gathered."""
    if normalizer is None or normalizer.observation is None:
        return normalizer
    batch = parallel.all_gather(observation, axis_name)
    return normalizer._replace(observation=update_moments(normalizer.observation, batch))


def see_rewards(
    normalizer: Normalizer | None, reward: jax.Array, done: jax.Array, gamma: jax.Array | float, axis_name: str | None
) -> tuple[Normalizer | None, jax.Array]:
    """Update the return statistics with this step's rewards `[B]` and ends
    `[B]`; the rewards to learn from."""
    if normalizer is None or normalizer.returns is None:
        return normalizer, reward
    discounted = normalizer.discounted_return * gamma + reward
    returns = update_moments(normalizer.returns, parallel.all_gather(discounted, axis_name))
    normalizer = normalizer._replace(returns=returns, discounted_return=jnp.where(done, 0.0, discounted))
    return normalizer, scale(returns, reward, center=False)
