"""Reference points that need no training: the uniformly random policy."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from algorithms.base import Environment, random_step


def random_policy_return(
    env: Environment, seed: int, *, num_envs: int = 64, num_steps: int = 2000, max_steps: int = 32_000
) -> dict:
    """Mean return (player 0) of the episodes a uniformly random legal policy
    completes in `num_steps` steps of `num_envs` envs. Where no episode ends
    in that many (MinAtar's Freeway lasts 2,500 steps), the rollout doubles
    until one does or `max_steps` is passed; then the mean is None."""

    def step(carry, key):
        state, ts, running, total, count = carry
        _, state, ts = random_step(env, state, ts, key)
        running = running + ts.reward[:, 0]
        done = ts.terminated | ts.truncated
        total = total + jnp.where(done, running, 0.0).sum()
        count = count + done.sum()
        return (state, ts, jnp.where(done, 0.0, running), total, count), None

    @jax.jit
    def rollout(key):
        reset_key, key = jax.random.split(key)
        state, ts = jax.vmap(env.reset)(jax.random.split(reset_key, num_envs))
        carry = (state, ts, jnp.zeros(num_envs), jnp.zeros(()), jnp.zeros((), jnp.int32))
        (_, _, _, total, count), _ = jax.lax.scan(step, carry, jax.random.split(key, num_steps))
        return total, count

    total, count = jax.device_get(rollout(jax.random.key(seed)))
    if not count and 2 * num_steps <= max_steps:
        return random_policy_return(env, seed, num_envs=num_envs, num_steps=2 * num_steps, max_steps=max_steps)
    return {
        "episodes": int(count),
        "mean_return": float(total / count) if count else None,
        "num_envs": num_envs,
        "num_steps": num_steps,
        "seed": seed,
    }


def random_policy_summary(env: Environment, seeds: tuple[int, ...], **kwargs) -> dict:
    per_seed = [random_policy_return(env, seed, **kwargs) for seed in seeds]
    means = [r["mean_return"] for r in per_seed if r["mean_return"] is not None]
    return {
        "mean_return": float(np.mean(means)) if means else None,
        "per_seed": {str(r["seed"]): r["mean_return"] for r in per_seed},
        "episodes": int(sum(r["episodes"] for r in per_seed)),
        "method": f"uniformly random legal actions, {kwargs.get('num_envs', 64)} envs x "
        f"{max(r['num_steps'] for r in per_seed)} steps per seed, completed episodes only",
    }
