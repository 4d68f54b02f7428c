"""AlphaZero's training (`make_alphazero`'s update): `train_steps`
minibatches of `train_batch_size` moves drawn uniformly from those that have
value targets; loss = policy cross-entropy against the search policy +
`value_coef` * value MSE + `l2_coef` * L2. On an exact layout each
minibatch's gradient is taken one logical shard after another and the parts
added in shard order, so the bits do not depend on the number of devices."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import optax

from algorithms import parallel
from algorithms.alphazero.buffer import Buffer, buffer_sample
from algorithms.alphazero.config import AlphaZeroConfig
from algorithms.alphazero.state import trainable, with_stats


def l2_of(params) -> jax.Array:
    return 0.5 * sum(jnp.sum(p**2) for p in jax.tree.leaves(params))


def make_loss(config: AlphaZeroConfig, train_net, axis_name: str | None) -> Callable:
    """`loss(params, batch_stats, observation, policy, value, weight, total,
    with_l2=True)`: this shard's part of the minibatch's loss, sums over its
    draws divided by the weight `total` of all of them, so that the shards'
    losses (and gradients) add up to the minibatch's (with its share of the
    L2 term, unless not `with_l2`); with its figures and the network's
    batch statistics' new running averages (None without batch norm)."""

    def loss(params, batch_stats, observation, policy, value, weight, total, with_l2=True):
        (logits, predicted), updated = train_net.apply(
            with_stats(params, batch_stats), observation, mutable=["batch_stats"]
        )
        batch_stats = updated.get("batch_stats")
        policy_loss = jnp.sum(weight * optax.softmax_cross_entropy(logits, policy)) / total
        value_loss = jnp.sum(weight * (predicted - value) ** 2) / total
        loss = policy_loss + config.value_coef * value_loss
        if with_l2:
            l2 = l2_of(params)
            if parallel.size(axis_name) > 1:
                l2 = l2 / parallel.size(axis_name)
            loss = loss + config.l2_coef * l2
        return loss, ({"loss": loss, "policy_loss": policy_loss, "value_loss": value_loss}, batch_stats)

    return loss


def make_gradient(config: AlphaZeroConfig, loss: Callable, axis_name: str | None, shards: int | None) -> Callable:
    """`gradient(params, batch_stats, batch, total)`: the minibatch's
    gradient and loss figures, the same on every device, and the new
    averages of the batch statistics (batch norm's are over the devices
    already; None on an exact layout, whose networks have none)."""

    def summed(params, batch_stats, batch, total):
        grads, (aux, batch_stats) = jax.grad(loss, has_aux=True)(params, batch_stats, *batch, total)
        return (*parallel.psum((grads, aux), axis_name), batch_stats)

    def by_shards(params, batch_stats, batch, total):
        # This device's draws as its logical shards, one after another, added
        # in shard order over all devices; the L2 term once, after.
        local = parallel.local_shards(shards, axis_name)
        parts = jax.tree.map(lambda x: x.reshape(local, x.shape[0] // local, *x.shape[1:]), batch)

        def one(carry, part):
            grads, (aux, _) = jax.grad(lambda *a: loss(*a, with_l2=False), has_aux=True)(params, None, *part, total)
            return carry, (grads, aux)

        _, parts = parallel.opaque_scan(one, (), parts)
        grads, aux = parallel.fold_sum(parts, axis_name)
        grads = jax.tree.map(lambda g, p: g + config.l2_coef * p, grads, params)
        return grads, dict(aux, loss=aux["loss"] + config.l2_coef * l2_of(params)), None

    return summed if shards is None else by_shards


def make_train(
    config: AlphaZeroConfig,
    train_net,
    optimizer: optax.GradientTransformation,
    axis_name: str | None,
    shards: int | None,
) -> Callable:
    """`train(params, opt_state, buffer, key, apply)`: `train_steps`
    updates, each on a minibatch drawn from `buffer`; before warm-up ends
    (`apply` false) the loss is measured but not applied. Returns the new
    parameters and optimizer state and the updates' mean figures."""
    gradient = make_gradient(config, make_loss(config, train_net, axis_name), axis_name, shards)

    def update(buffer: Buffer, apply: jax.Array, carry, key):
        params, opt_state = carry
        batch = buffer_sample(buffer, key, config.train_batch_size, axis_name)
        total = jnp.maximum(parallel.psum(batch[-1].sum(), axis_name), 1.0)  # a count: exact
        weights, batch_stats = trainable(params)
        grads, aux, batch_stats = gradient(weights, batch_stats, batch, total)
        aux = dict(aux, grad_norm=optax.global_norm(grads))
        updates, new_opt_state = optimizer.update(grads, opt_state, weights)
        new = (with_stats(optax.apply_updates(weights, updates), batch_stats), new_opt_state)
        # Warm-up: measured, not applied.
        return jax.tree.map(lambda n, o: jnp.where(apply, n, o), new, (params, opt_state)), aux

    def train(params, opt_state, buffer: Buffer, key: jax.Array, apply: jax.Array):
        keys = jax.random.split(key, config.train_steps)
        (params, opt_state), aux = jax.lax.scan(
            lambda carry, key: update(buffer, apply, carry, key), (params, opt_state), keys
        )
        return params, opt_state, jax.tree.map(jnp.mean, aux)

    return train
