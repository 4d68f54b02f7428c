"""AlphaZero throughput: self-play moves (frames) per second including the
training step, search simulations per second, and training updates per second.

The configuration is the one the public pgx AlphaZero example is quoted at
on a 2-core CPU (about 300 frames/s, training included): connect_four, 256
games in parallel, 64 moves per iteration, 32 Gumbel simulations, a 2-block
32-channel ResNet, 4 updates of 4096 per iteration.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import pytest
from conftest import report

from algorithms import alphazero
from algorithms.networks import make_az_network
from harness import build, runner
from harness import spec as S

ANCHOR = {
    "name": "bench_alphazero_connect_four",
    "algorithm": "alphazero",
    "env": {"suite": "pgx", "id": "connect_four"},
    "seeds": [0],
    "budget": {"env_steps": 256 * 64},
    "network": {"kind": "resnet", "num_blocks": 2, "num_channels": 32},
    "hyperparameters": {
        "num_envs": 256,
        "collection_steps": 64,
        "num_simulations": 32,
        "capacity": 64,
        "warmup_iterations": 0,
        "train_steps": 4,
        "train_batch_size": 4096,
        "evaluation": {"games": 32, "pool_size": 4},
    },
    "logging": {"interval": 1},
}


@pytest.fixture(scope="module")
def anchor():
    plan = build.build(S.parse(ANCHOR))
    state, init_compile = runner.init_state(plan.algorithm, plan.spec.seeds)
    chunk, chunk_compile = runner.compile_chunk(plan.algorithm.step, 1, state)
    return plan, state, chunk, init_compile + chunk_compile


def test_alphazero_iteration(benchmark, anchor):
    plan, state, chunk, compile_seconds = anchor
    holder = {"state": state}

    def call():
        holder["state"], metrics = chunk(holder["state"])
        jax.block_until_ready((holder["state"], metrics))

    call()  # warm-up
    benchmark.pedantic(call, rounds=3, iterations=1, warmup_rounds=0)
    hp = plan.spec.hyperparameters
    frames = plan.env_steps_per_iteration
    median = benchmark.stats.stats.median
    benchmark.extra_info.update(
        frames_per_second=frames / median,
        simulations_per_second=frames * hp.num_simulations / median,
        updates_per_second=hp.train_steps / median,
        compile_seconds=compile_seconds,
        device=jax.devices()[0].device_kind,
    )
    anchor_state["state"] = holder["state"]
    report(
        "alphazero connect_four iteration (256 games x 64 moves, 32 sims, 4 x 4096 updates)",
        f"{frames / median:,.0f} frames/s (min {frames / benchmark.stats.stats.max:,.0f}, "
        f"max {frames / benchmark.stats.stats.min:,.0f}), {frames * hp.num_simulations / median:,.0f} "
        f"simulations/s, {hp.train_steps / median:.2f} updates/s; compile {compile_seconds:.1f} s "
        "(pgx's example: ~300 frames/s on a 2-core CPU)",
    )


anchor_state: dict = {}


def test_alphazero_evaluation(benchmark, anchor):
    plan, state, _, _ = anchor
    state = anchor_state.get("state", state)
    start = time.perf_counter()
    evaluate = jax.jit(jax.vmap(plan.algorithm.evaluate)).lower(state).compile()
    compile_seconds = time.perf_counter() - start

    def call():
        jax.block_until_ready(evaluate(state))

    call()
    benchmark.pedantic(call, rounds=3, iterations=1)
    games = plan.spec.hyperparameters.evaluation.games * (2 + plan.spec.hyperparameters.evaluation.pool_size)
    report(
        "alphazero connect_four evaluation (random, greedy, 4 pool members x 32 games)",
        f"{benchmark.stats.stats.median:.2f} s per evaluation ({games} games), compile {compile_seconds:.1f} s",
    )


def test_mcts_search(benchmark):
    """One Gumbel MuZero search over 256 connect_four positions."""
    plan = build.build(S.parse(ANCHOR))
    hp = plan.spec.hyperparameters
    net = make_az_network(plan.spec.network, plan.env.num_actions, plan.env.observation_shape)
    params = net.init(jax.random.key(0), jnp.zeros(plan.env.observation_shape))
    search = jax.jit(alphazero.make_search(hp, plan.env, net), static_argnames="explore")
    games = alphazero.start_games(plan.env, jax.random.key(1), hp.num_envs)

    def call():
        jax.block_until_ready(search(params, jax.random.key(2), games, jnp.zeros(()), explore=True))

    call()
    benchmark.pedantic(call, rounds=10, iterations=1)
    median = benchmark.stats.stats.median
    sims = hp.num_envs * hp.num_simulations
    benchmark.extra_info.update(simulations_per_second=sims / median)
    report(
        "mcts search (256 connect_four positions, 32 Gumbel simulations)",
        f"{sims / median:,.0f} simulations/s ({median * 1e3:.0f} ms per search)",
    )
