"""Each peer's training as the bench's side-by-side entries time it
(benchmarks/test_bench_against.py): compiled ahead under JAX's own lowering,
as the peer runs on its own, and returned as `(call, compile_seconds,
env_steps_per_call)`, where `call()` is one timed call of a few training
iterations."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp

from benchmarks.machinery import peers
from harness.run import lowering


def purejaxrl(make_train, config: dict, num_seeds: int, iterations: int):
    """PureJaxRL's `make_train(config)`: its whole jitted `train` with
    `iterations` updates, vmapped over `num_seeds` seeds as its README does."""
    config = dict(config, TOTAL_TIMESTEPS=iterations * config["NUM_ENVS"] * config["NUM_STEPS"])
    train = make_train(config)
    # PureJaxRL resolves its updates into the config it is given.
    updates = config.get("NUM_UPDATES", config["TOTAL_TIMESTEPS"] // config["NUM_STEPS"] // config["NUM_ENVS"])
    steps = updates * config["NUM_STEPS"] * config["NUM_ENVS"] * num_seeds
    keys = jax.random.split(jax.random.PRNGKey(30), num_seeds)
    fn, args = (jax.jit(train), (keys[0],)) if num_seeds == 1 else (jax.jit(jax.vmap(train)), (keys,))
    start = time.perf_counter()
    # The peer as it runs on its own, but for its seed-vmapped initial QRs,
    # which deadlocked XLA:CPU's thread pool (peers.one_qr_at_a_time).
    with lowering.jax_default_threefry(), peers.one_qr_at_a_time():
        compiled = fn.lower(*args).compile()
    compile_seconds = time.perf_counter() - start
    return lambda: compiled(*args)["metrics"], compile_seconds, steps


def xminigrid(module, iterations: int):
    """xland-minigrid's `train_single_task.py`: its `pmap`ped `train` with
    `iterations` updates, on one device."""
    from flax.jax_utils import replicate

    # Its config divides num_envs and total_timesteps by the process's
    # local devices (the bench's host devices split the CPU), while it runs
    # here on one: both are given per device times their count, so that the
    # one device steps the configuration's envs.
    config = dict(peers.XMINIGRID_SINGLE_TASK, seed=30)
    split = jax.local_device_count()
    config["total_timesteps"] = iterations * config["num_envs"] * config["num_steps"] * split
    config["num_envs"] *= split
    config = module.TrainConfig(**config)
    rng, env, env_params, init_hstate, train_state = module.make_states(config)
    devices = jax.local_devices()[:1]
    steps = config.num_updates * config.num_steps * config.num_envs_per_device * len(devices)
    args = (jax.random.split(rng, 1), replicate(train_state, devices), replicate(init_hstate, devices))
    start = time.perf_counter()
    with lowering.jax_default_threefry():  # the peer as it runs on its own
        compiled = module.make_train(env, env_params, config).lower(*args).compile()
    compile_seconds = time.perf_counter() - start
    return lambda: compiled(*args)["loss_info"], compile_seconds, steps


def pgx(module, iterations: int):
    """pgx's AlphaZero example: one call is `iterations` iterations of its
    `__main__` loop, as that loop runs them (self-play, loss inputs, to the
    host, shuffled there, one `train` call per update of
    `training_batch_size` with its losses read back), without the loop's
    evaluation, checkpoints and logging; its three jitted functions are
    compiled ahead, under JAX's own lowering."""
    config, env, n = module.config, module.env, module.num_devices
    dummy = jax.vmap(env.init)(jax.random.split(jax.random.PRNGKey(0), 2))
    model = module.forward.init(jax.random.PRNGKey(0), dummy.observation)
    opt_state = module.optimizer.init(params=model[0])
    model, opt_state = jax.tree.map(lambda x: jnp.stack([x] * n), (model, opt_state))
    keys = jax.random.split(jax.random.PRNGKey(0), n)
    data = jax.eval_shape(module.selfplay, model, keys)
    samples = jax.eval_shape(module.compute_loss_input, data)
    minibatch = jax.tree.map(
        lambda x: jax.ShapeDtypeStruct((n, config.training_batch_size // n, *x.shape[3:]), x.dtype), samples
    )
    start = time.perf_counter()
    with lowering.jax_default_threefry():  # the peer as it runs on its own
        selfplay = module.selfplay.lower(model, keys).compile()
        loss_input = module.compute_loss_input.lower(data).compile()
        train = module.train.lower(model, opt_state, minibatch).compile()
    compile_seconds = time.perf_counter() - start

    def one_iteration(model, opt_state, key):
        key, subkey = jax.random.split(key)
        samples = jax.device_get(loss_input(selfplay(model, jax.random.split(subkey, n))))
        samples = jax.tree.map(lambda x: x.reshape((-1, *x.shape[3:])), samples)
        key, subkey = jax.random.split(key)
        order = jax.random.permutation(subkey, jnp.arange(samples.obs.shape[0]))
        samples = jax.tree.map(lambda x: x[order], samples)
        updates = samples.obs.shape[0] // config.training_batch_size
        minibatches = jax.tree.map(lambda x: x.reshape((updates, n, -1) + x.shape[1:]), samples)
        for i in range(updates):
            minibatch = jax.tree.map(lambda x, i=i: x[i], minibatches)
            model, opt_state, policy_loss, value_loss = train(model, opt_state, minibatch)
            policy_loss.mean().item(), value_loss.mean().item()
        return model, opt_state, key

    holder = {"run": (model, opt_state, jax.random.PRNGKey(config.seed))}

    def call():
        for _ in range(iterations):
            holder["run"] = one_iteration(*holder["run"])
        return holder["run"][0]

    with lowering.jax_default_threefry():  # its host-side draws compile on first use
        jax.block_until_ready(call())
    # Frames per iteration as the example counts them: its games per device
    # on each of its devices, for its moves per self-play.
    steps = iterations * (config.selfplay_batch_size // n) * n * config.max_num_steps
    return call, compile_seconds, steps
