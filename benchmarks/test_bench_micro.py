"""Micro-benchmarks of the jitted parts: env steps per suite, one MCTS
search, one PPO learning phase, one full iteration of each algorithm.

Each is compiled ahead of time (timed apart), called once untimed, then timed
by pytest-benchmark over several rounds, every call waited for with
`block_until_ready`. The sizes come from the benchmark specs in
benchmarks/specs/, so a micro-benchmark times a part of a spec entry.
"""

from __future__ import annotations

import statistics
import time

import jax
import jax.numpy as jnp
import pytest

import algorithms
from algorithms import alphazero, ppo
from algorithms.alphazero.networks import make_az_network
from algorithms.base import random_step
from benchmarks.machinery import counting, measure
from benchmarks.machinery.paths import BENCH_SPECS, PUBLISHED_SPECS
from harness import build, envs
from harness import experiment_spec as spec_module
from harness.run import determinism, runner
from harness.run.flops import count_jaxpr, xla_flops


def bench_plan(name: str, seeds=(0,), network: dict | None = None, **hyperparameters) -> build.Plan:
    """A benchmark spec at `seeds`, with some hyperparameters (and `network` keys) replaced."""
    data = spec_module.canonical(spec_module.load(BENCH_SPECS / f"{name}.yaml"))
    data["seeds"] = list(seeds)
    data["hyperparameters"].update(hyperparameters)
    data["network"] = {**data.get("network", {}), **(network or {})}
    return build.build(spec_module.parse(data, f"{name} (benchmark)"))


def compile_timed(fn, *args, **jit_options):
    """`fn` jitted and compiled for `args`, the seconds that took (trace,
    lower and compile), and a function that counts its FLOPs: from the same
    trace, which jit keeps, rather than tracing `fn` a second time."""
    jitted = jax.jit(fn, **jit_options)
    start = time.perf_counter()
    compiled = jitted.lower(*args).compile()
    seconds = time.perf_counter() - start
    return compiled, seconds, lambda: count_jaxpr(jitted.trace(*args).jaxpr)


# An entry's timed rounds take about this long at most: a call slower than
# TIMED_SECONDS / rounds gets fewer rounds, never under MIN_ROUNDS.
TIMED_SECONDS = 8.0
MIN_ROUNDS = 3


def timed_rounds(entry, call, rounds: int) -> list[float]:
    """pytest-benchmark's rounds of `call` (after one untimed call): `rounds`,
    or fewer where the calls are long (TIMED_SECONDS); each call ends with
    `block_until_ready`. Against a baseline (`--baseline`), the rounds its
    speed test asks for."""

    def waited():
        jax.block_until_ready(call())

    start = time.perf_counter()
    waited()
    first = time.perf_counter() - start
    rounds = max(MIN_ROUNDS, min(rounds, int(TIMED_SECONDS / max(first, 1e-9))))
    return entry.timed_calls(waited, rounds)


# ------------------------------------------------------------------- envs

ENVS = [
    ("gymnax", "CartPole-v1", {}),
    ("gymnax", "Breakout-MinAtar", {}),
    ("gymnax", "Pendulum-v1", {}),
    ("jumanji", "Game2048-v1", {}),
    ("pgx", "connect_four", {}),
    ("xminigrid", "MiniGrid-Empty-6x6", {}),
    ("brax", "inverted_pendulum", {"backend": "positional"}),
]
NUM_ENVS, NUM_STEPS = 4096, 32


@pytest.mark.parametrize("suite,env_id,kwargs", ENVS, ids=[f"{s}-{e}" for s, e, _ in ENVS])
def test_env_step(entry, suite, env_id, kwargs):
    """4096 envs of one suite stepped 32 times with uniformly random (legal)
    actions, through the harness's adapter (auto-reset included)."""
    env, info = envs.make(suite, env_id, kwargs)

    def steps(env_state, timestep, key):
        def one(carry, key):
            env_state, timestep = carry
            _, env_state, timestep = random_step(env, env_state, timestep, key)
            return (env_state, timestep), timestep.reward[:, 0].sum()

        (env_state, timestep), rewards = jax.lax.scan(one, (env_state, timestep), jax.random.split(key, NUM_STEPS))
        return env_state, timestep, rewards.sum()

    with measure.HostPeak() as memory:
        env_state, timestep = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.key(0), NUM_ENVS))
        compiled, compile_seconds, counted = compile_timed(
            steps, env_state, timestep, jax.random.key(1), donate_argnums=(0, 1)
        )
        count = counted()
        holder = {"state": (env_state, timestep), "key": jax.random.key(2)}

        def call():
            holder["key"], key = jax.random.split(holder["key"])
            env_state, timestep, total = compiled(*holder["state"], key)
            holder["state"] = (env_state, timestep)
            return total

        seconds = timed_rounds(entry, call, rounds=10)
    entry.record(
        measure.micro_result(
            entry.name,
            {
                "suite": suite,
                "env_id": env_id,
                "env_version": info.env_version,
                "num_envs": NUM_ENVS,
                "steps": NUM_STEPS,
            },
            seconds,
            work_per_call=NUM_ENVS * NUM_STEPS,
            unit=measure.ENV_STEPS,
            iteration=f"one call: {NUM_STEPS} steps of {NUM_ENVS} envs",
            compile_seconds=compile_seconds,
            count=count,
            xla_flops_per_call=xla_flops(compiled),
            memory=memory,
            device=entry.bench.device,
        )
    )


# ------------------------------------------------------------------- MCTS

SEARCH_POSITIONS = 256


def searching(plan: build.Plan, seeds: int | None):
    """`(net, params, games, one_search)` for a search micro-benchmark: the
    spec's network, its parameters, `num_envs` games and
    `one_search(params, key, games)` (self-play's search, noise on), for
    one seed (`seeds` None) or for `seeds` seeds vmapped as a run vmaps
    them."""
    hp = plan.spec.hyperparameters
    net = make_az_network(plan.spec.network, plan.env.num_actions, plan.env.observation_shape)
    search = alphazero.make_search(hp, plan.env, net)

    def init(key):
        return net.init(key, jnp.zeros(plan.env.observation_shape))

    def start(key):
        return alphazero.start_games(plan.env, key, hp.num_envs)

    def one_seed(params, key, games):
        return search(params, jax.random.split(key, hp.num_envs), games, jnp.zeros(()), explore=True)

    if seeds is None:
        return net, jax.jit(init)(jax.random.key(0)), jax.jit(start)(jax.random.key(1)), one_seed

    def one_search(params, key, games):
        keys = jax.random.split(key, (seeds, hp.num_envs))
        return jax.vmap(lambda p, k, g: search(p, k, g, jnp.zeros(()), explore=True))(params, keys, games)

    params = jax.jit(jax.vmap(init))(jax.random.split(jax.random.key(0), seeds))
    games = jax.jit(jax.vmap(start))(jax.random.split(jax.random.key(1), seeds))
    return net, params, games, one_search


def test_mcts_search(entry):
    """One Gumbel MuZero search (benchmark connect_four spec: 32
    simulations, ResNet 2 x 32) over 256 positions."""
    plan = bench_plan("alphazero_connect_four", num_envs=SEARCH_POSITIONS)
    hp = plan.spec.hyperparameters
    with measure.HostPeak() as memory:
        _, params, games, one_search = searching(plan, seeds=None)
        compiled, compile_seconds, counted = compile_timed(one_search, params, jax.random.key(2), games)
        count = counted()
        seconds = timed_rounds(entry, lambda: compiled(params, jax.random.key(2), games), rounds=8)
    simulations = hp.num_envs * hp.num_simulations
    entry.record(
        measure.micro_result(
            entry.name,
            {
                "spec_name": plan.spec.name,
                "positions": hp.num_envs,
                "simulations": hp.num_simulations,
                "search": hp.search,
                "network": spec_module.canonical(plan.spec)["network"],
            },
            seconds,
            work_per_call=simulations,
            unit=measure.SIMULATIONS,
            iteration=f"one search over {hp.num_envs} positions",
            compile_seconds=compile_seconds,
            count=count,
            xla_flops_per_call=xla_flops(compiled),
            memory=memory,
            device=entry.bench.device,
        )
    )


SMALL_GAME_SEEDS = 4


@pytest.mark.parametrize("tree_search", ["mctx", "batched"])
def test_mcts_search_small_game(entry, tree_search):
    """One self-play move's search at the published tic-tac-toe spec's size
    (64 Gumbel simulations, MLP 128 x 128, 128 games x 4 seeds vmapped as a
    run vmaps them), with mctx's search or the batched one; beside it, the
    network alone on the same positions, (simulations + 1) times: the rate
    the search would reach if the tree and the game cost nothing."""
    spec = spec_module.load(PUBLISHED_SPECS / "alphazero_tic_tac_toe.yaml")
    data = spec_module.canonical(spec)
    data["hyperparameters"]["tree_search"] = tree_search
    plan = build.build(spec_module.parse(data, "alphazero_tic_tac_toe (benchmark)"))
    hp = plan.spec.hyperparameters
    seeds = SMALL_GAME_SEEDS
    with measure.HostPeak() as memory:
        net, params, games, one_search = searching(plan, seeds)
        compiled, compile_seconds, _ = compile_timed(one_search, params, jax.random.key(2), games)
        observations = games.timestep.observation
        network, _, _ = compile_timed(jax.vmap(net.apply), params, observations)
        jax.block_until_ready(network(params, observations))
        network_seconds = []
        for _ in range(20):
            started = time.perf_counter()
            jax.block_until_ready(network(params, observations))
            network_seconds.append(time.perf_counter() - started)
        seconds = timed_rounds(entry, lambda: compiled(params, jax.random.key(2), games), rounds=5)
    positions = seeds * hp.num_envs
    simulations = positions * hp.num_simulations
    # A search of S simulations evaluates the network S + 1 times per
    # position (the root, then each new node).
    network_bound = positions / statistics.median(network_seconds) * hp.num_simulations / (hp.num_simulations + 1)
    search_rate = simulations / statistics.median(seconds)
    entry.record(
        measure.micro_result(
            entry.name,
            {
                "spec_name": plan.spec.name,
                "tree_search": tree_search,
                "positions": positions,
                "simulations": hp.num_simulations,
                "network": spec_module.canonical(plan.spec)["network"],
                # The network alone on the same positions: what the search's
                # rate would be if the tree and the game cost nothing.
                "network_bound_simulations_per_second": network_bound,
                "fraction_of_network_bound": search_rate / network_bound,
            },
            seconds,
            work_per_call=simulations,
            unit=measure.SIMULATIONS,
            iteration=f"one search over {positions} positions ({seeds} seeds vmapped)",
            compile_seconds=compile_seconds,
            xla_flops_per_call=xla_flops(compiled),
            memory=memory,
            device=entry.bench.device,
        )
    )


# -------------------------------------------------------------- PPO update


# `minigrid` and `minigrid-conv` are one pair: the recurrent grid agent's
# update (whole env fragments) with the grid encoder differentiated by JAX's
# rules and as native-layout convolutions (`network: {conv_gradient: conv}`).
UPDATES = [
    ("cartpole", "ppo_cartpole", {}),
    ("game2048", "ppo_game2048", {}),
    ("minigrid", "ppo_minigrid_empty_6x6", {}),
    ("minigrid-conv", "ppo_minigrid_empty_6x6", {"conv_gradient": "conv"}),
]


@pytest.fixture(scope="module")
def fragments() -> dict:
    """The update entries' fragments by spec: a pair's networks differ in their gradient alone."""
    return {}


@pytest.mark.parametrize("spec_name,network", [pytest.param(*u[1:], id=u[0]) for u in UPDATES])
def test_ppo_update(entry, fragments, spec_name, network):
    """PPO's learning stage of one iteration (`ppo.make_stages(...).learn`,
    the code `step` runs): `update_epochs` passes, each drawing its shuffled
    minibatches and taking `num_minibatches` gradient steps, on a fragment
    the initial policy collected (one for a pair), with its GAE advantages
    (a recurrent policy's minibatches are whole env fragments, replayed from
    the memory at their start)."""
    plan = bench_plan(spec_name, network=network)
    hp, env = plan.spec.hyperparameters, plan.env
    updates = hp.update_epochs * hp.num_minibatches
    size = hp.num_envs * hp.num_steps
    optimizer = build.make_optimizer(plan.spec.optimizer, plan.num_iterations * updates)
    _, stages = ppo.make_stages(hp, env, network=plan.spec.network, optimizer=optimizer)
    with measure.HostPeak() as memory:
        if spec_name not in fragments:
            state = jax.jit(plan.algorithm.init)(jax.random.key(0))

            @jax.jit
            def collected(state, key):
                actor, fragment = stages.collect(state, key)
                return actor, stages.targets(state.params, actor, fragment)

            fragments[spec_name] = (state, *collected(state, jax.random.key(1)))
        state, actor, batch = fragments[spec_name]
        keys = jax.random.split(jax.random.key(2))
        args = (state, actor, batch, state.actor.carry, *keys)
        compiled, compile_seconds, counted = compile_timed(stages.learn, *args)
        count = counted()
        seconds = timed_rounds(entry, lambda: compiled(*args), rounds=10)
    entry.record(
        measure.micro_result(
            entry.name,
            {
                "spec_name": plan.spec.name,
                "updates": updates,
                "minibatch_steps": size // hp.num_minibatches,
                "network": spec_module.canonical(plan.spec)["network"],
            },
            seconds,
            work_per_call=updates,
            unit=measure.UPDATES,
            iteration=f"one call: {updates} updates of {size // hp.num_minibatches} steps",
            compile_seconds=compile_seconds,
            count=count,
            xla_flops_per_call=xla_flops(compiled),
            memory=memory,
            device=entry.bench.device,
        )
    )


# --------------------------------------------------------------- iteration

# `ppo-deterministic` is `ppo` compiled with XLA's deterministic ops (the
# compile option of `--deterministic`): the pair measures what determinism
# costs on the device the bench runs on; the option acts on GPUs only, so a
# CPU's bench leaves it out (`off_cpu`).
ITERATIONS = [
    ("reinforce", "reinforce_cartpole", 10, False),
    ("ppo", "ppo_cartpole", 10, False),
    ("ppo-deterministic", "ppo_cartpole", 10, True),
    ("alphazero", "alphazero_tic_tac_toe", 5, False),
]


@pytest.mark.parametrize(
    "spec_name,rounds,deterministic",
    [pytest.param(*i[1:], id=i[0], marks=[pytest.mark.off_cpu] if i[3] else []) for i in ITERATIONS],
)
def test_iteration(entry, spec_name, rounds, deterministic):
    """One full training iteration (collect, then learn) of one seed, the
    runner's program with a chunk of one iteration."""
    plan = bench_plan(spec_name)
    with measure.HostPeak() as memory:
        state, init_seconds = runner.init_state(plan.algorithm, plan.spec.seeds)
        options = determinism.COMPILER_OPTIONS if deterministic else None
        programs = counting.keeping_traces()
        compiled, chunk_seconds = runner.compile_chunk(
            plan.algorithm.step, 1, state, programs=programs, compiler_options=options
        )
        count = counting.per_iteration(programs, 1, plan.algorithm.step, None, state)
        holder = {"state": state}

        def call():
            holder["state"], metrics = compiled(holder["state"])
            return metrics

        seconds = timed_rounds(entry, call, rounds=rounds)
    hp = plan.spec.hyperparameters
    registration = algorithms.registry[plan.spec.algorithm]
    entry.record(
        measure.micro_result(
            entry.name,
            {"spec_name": plan.spec.name, "spec_hash": plan.spec_hash, "seeds": 1, "deterministic": deterministic},
            seconds,
            work_per_call=plan.env_steps_per_iteration,
            unit=measure.ENV_STEPS,
            iteration="one training iteration of one seed",
            compile_seconds=init_seconds + chunk_seconds,
            count=count,
            xla_flops_per_call=xla_flops(compiled),
            memory=memory,
            device=entry.bench.device,
            simulations_per_call=plan.env_steps_per_iteration * hp.num_simulations
            if plan.spec.algorithm == "alphazero"
            else None,
            updates_per_call=registration.updates_per_step(hp),
        )
    )
