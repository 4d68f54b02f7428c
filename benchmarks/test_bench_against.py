"""Side by side with a peer's code, `nox -s bench -- --against PATH`: the
project's PPO and PureJaxRL's `ppo.py` (from the checkout at PATH, see
benchmarks/machinery/peers.py) at PureJaxRL's own CartPole configuration (4 envs x
128 steps, 4 epochs x 4 minibatches, 64x64 tanh MLP), the published
`ppo_cartpole` spec being that configuration, and at its MinAtar
configuration on Breakout-MinAtar (64 envs x 128 steps, 4 epochs x 8
minibatches, 64x64 relu MLP over the flattened grid), the published
`ppo_minatar_breakout` spec; and PureJaxRL's `ppo_continuous_action.py` on
Brax inverted_pendulum (backend positional, 256 envs x 10 steps, 4 epochs x
32 minibatches, tanh 256x256, observation and reward normalisation), the
published `ppo_brax_inverted_pendulum` spec. With an xland-minigrid checkout:
its `training/train_single_task.py` and the project's PPO with the same
recurrent grid agent at the configuration in
benchmarks/specs/against/ppo_minigrid_single_task.yaml (MiniGrid-Empty-6x6,
512 envs x 16 steps, GRU 256, one epoch of 16 minibatches). With a pgx
checkout: its AlphaZero example (`examples/alphazero/train.py`) and the
project's AlphaZero at the configuration in
benchmarks/specs/against/alphazero_connect_four_pgx.yaml (connect_four, 256
games x 64 moves per iteration, 32 Gumbel simulations, ResNet 2 x 32, 4
updates of 4,096), in frames (moves) per second over self-play and training.

Both are compiled ahead, then timed alternately in one process, the order
switching every round so that machine noise hits both alike, round after
round until the speed test (harness.stats.speed: is the project slower than
the peer by 10%, or not?) decides or its cap: one timed call
is a few training iterations of every seed (the peer: its whole jitted
`train` with that many updates, PureJaxRL's vmapped over the seeds as its
README does, xland-minigrid's `pmap`ped over the one device; the project:
one runner chunk of that many iterations). The headline rate is the
project's; the note gives the ratio (the median round's, its interval), the
verdict and the peer's rate.
"""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time

import jax
import pytest

from benchmarks.machinery import measure, peer_runs, peers
from benchmarks.machinery.paths import BENCH_SPECS, PUBLISHED_SPECS
from harness import build
from harness import experiment_spec as spec_module
from harness.run import runner
from harness.run.ceiling import spread

# name -> (published spec, PureJaxRL's file and configuration, iterations
# per timed call: 64 x 512 = 32,768 env steps per seed on CartPole, 8 x
# 8,192 = 65,536 on MinAtar, 16 x 2,560 = 40,960 on Brax)
CASES = {
    "cartpole": ("ppo_cartpole", "ppo", peers.PUREJAXRL_PPO_CARTPOLE, 64),
    "minatar_breakout": ("ppo_minatar_breakout", "ppo", peers.PUREJAXRL_PPO_MINATAR, 8),
    "brax_inverted_pendulum": (
        "ppo_brax_inverted_pendulum",
        "ppo_continuous_action",
        peers.PUREJAXRL_PPO_BRAX_INVERTED_PENDULUM,
        16,
    ),
}


# The project's layouts over the CPU's cores (the bench's host devices):
# the seeds spread over them, or one seed's envs (data-parallel).
SEEDS_OVER_CORES = {"host_devices": "cores"}
ENVS_OVER_CORES = {"host_devices": "cores", "count": "all"}


def _ours(
    spec_path,
    num_seeds: int,
    iterations: int,
    devices: dict | None = None,
    hyperparameters: dict | None = None,
    network: dict | None = None,
):
    """The project's side: one runner chunk of `iterations` per call, the
    seeds vmapped on one device, or on the layout `devices` asks for; the
    spec's `hyperparameters` and `network` changed by those given."""
    loaded = spec_module.load(spec_path).model_copy(update={"seeds": tuple(range(num_seeds))})
    for section, changes in (("hyperparameters", hyperparameters), ("network", network)):
        if changes:
            loaded = loaded.model_copy(update={section: getattr(loaded, section).model_copy(update=changes)})
    if devices is not None:
        loaded = build.with_devices(loaded, devices)
    plan = build.build(loaded)
    if devices is not None and plan.layout is None:
        pytest.skip(f"no host devices to spread {num_seeds} seed(s) over: this CPU has one core")
    state, init_seconds = runner.init_state(plan.algorithm, plan.spec.seeds, plan.mesh)
    chunk, chunk_seconds = runner.compile_chunk(plan.algorithm.step, iterations, state, plan.mesh)
    holder = {"state": state}

    def call():
        holder["state"], metrics = chunk(holder["state"])
        return metrics

    return plan, call, init_seconds + chunk_seconds


_PYTEST: dict = {}


@pytest.fixture(autouse=True)
def _capture_manager(pytestconfig):
    """pytest's capture manager, for `_within`'s message on a hung call."""
    _PYTEST["capture"] = pytestconfig.pluginmanager.getplugin("capturemanager")


# A call still running after this many times its warm-up's time (or the
# first calls after WARM_UP_DEADLINE seconds) is taken as hung.
HUNG_FACTOR = 20
WARM_UP_DEADLINE = 300.0


def _within(seconds: float, what: str, fn) -> float:
    """Seconds that `fn()` took, blocked until ready. XLA:CPU can deadlock
    its own thread pool (seen with PureJaxRL's 16 seed-vmapped programs on 2
    cores, now and then on a repeated call, with or without the project's
    program in the process); a blocked call cannot be cancelled, so past the
    deadline the process ends with a message saying which call hung instead
    of waiting for ever."""

    def hung():
        if (capture := _PYTEST.get("capture")) is not None:
            capture.suspend_global_capture(in_=False)  # else the message dies with pytest's captured output
        sys.stderr.write(
            f"\nbench: {what} did not finish within {seconds:.0f} s; taken as an XLA:CPU thread-pool deadlock."
            " The bench stops here (exit 4); run this entry again or leave it out with -k.\n"
        )
        sys.stderr.flush()
        os._exit(4)

    watchdog = threading.Timer(seconds, hung)
    watchdog.daemon = True
    watchdog.start()
    try:
        start = time.perf_counter()
        jax.block_until_ready(fn())
        return time.perf_counter() - start
    finally:
        watchdog.cancel()


def _side_by_side(
    entry, plan, ours, our_compile, peer, peer_compile, peer_steps, num_seeds, iterations, peer_name, config
):
    from benchmarks.machinery.compat import speed  # here: a baseline's bench (--baseline REV) collects this file too

    steps = iterations * plan.env_steps_per_iteration * num_seeds
    peers.same_work(entry.name, peer_name, steps, peer_steps)
    our_rates: list[float] = []
    peer_rates: list[float] = []
    # Warm-up calls, untimed, one after the other; their times set each
    # side's deadline (`_within`).
    sides = []
    for fn, rates, name in ((ours, our_rates, "the project's"), (peer, peer_rates, f"{peer_name}'s")):
        what = f"{entry.name}: {name} call"
        deadline = max(60.0, HUNG_FACTOR * _within(WARM_UP_DEADLINE, what, fn))
        sides.append((fn, rates, what, deadline))

    def one_round(index: int) -> tuple[float, float]:
        # The peer is the baseline: it goes first in even rounds (speed.first).
        for fn, rates, what, deadline in reversed(sides) if speed.first(index) == "baseline" else sides:
            rates.append(steps / _within(deadline, what, fn))  # the same on both sides: peers.same_work
        return peer_rates[-1], our_rates[-1]

    test = entry.bench.speed_test()
    out = {}

    def rounds():
        out["verdict"], _ = speed.run_rounds(one_round, test, rates=True)

    with measure.HostPeak() as memory:
        entry.benchmark.pedantic(rounds, rounds=1, iterations=1, warmup_rounds=0)
    verdict = out["verdict"]
    ratio = statistics.median(our_rates) / statistics.median(peer_rates)
    entry.record(
        measure.Result(
            name=entry.name,
            kind="micro",
            config={**measure.plan_config(plan, num_seeds), "iterations_per_call": iterations, **config},
            unit=measure.ENV_STEPS,
            rate=spread(our_rates),
            repeats=len(our_rates),
            compile_seconds=our_compile,
            peak_host_bytes=memory.bytes,
            peak_host_since_start=memory.since_start,
            note=f"{verdict.label()} against {peer_name} ({statistics.median(peer_rates):,.0f} steps/s)",
            extra={
                "peer_rates": peer_rates,
                "our_rates": our_rates,
                "ratio": ratio,
                "peer_compile_seconds": peer_compile,
                "speed": verdict.as_dict(),
            },
        )
    )


@pytest.mark.against("purejaxrl")
@pytest.mark.parametrize(
    "case, num_seeds, cores, shuffle",
    [
        ("cartpole", 1, False, "permutation"),
        ("cartpole", 1, False, "feistel"),
        ("cartpole", 16, False, "permutation"),
        ("cartpole", 16, True, "permutation"),
        ("minatar_breakout", 1, False, "permutation"),
        ("minatar_breakout", 1, False, "feistel"),
        ("minatar_breakout", 4, False, "permutation"),
        ("minatar_breakout", 4, True, "permutation"),
        ("brax_inverted_pendulum", 1, False, "permutation"),
        ("brax_inverted_pendulum", 1, False, "feistel"),
        ("brax_inverted_pendulum", 2, True, "permutation"),
    ],
    ids=[
        "1seed",
        "1seed-feistel",
        "16seeds",
        "16seeds-cores",
        "minatar_breakout-1seed",
        "minatar_breakout-1seed-feistel",
        "minatar_breakout-4seeds",
        "minatar_breakout-4seeds-cores",
        "brax_inverted_pendulum-1seed",
        "brax_inverted_pendulum-1seed-feistel",
        "brax_inverted_pendulum-2seeds-cores",
    ],
)
def test_against_purejaxrl_ppo(entry, bench, case, num_seeds, cores, shuffle):
    """The `-cores` entries run the project's seeds spread over the CPU's
    cores, the peer's vmapped on one device as its README runs them; the
    `-feistel` entries draw the project's minibatches without a sort
    (`hyperparameters.shuffle: feistel`), the peer's as always."""
    spec_name, peer_file, config, iterations = CASES[case]
    make_train = peers.load_purejaxrl_ppo(bench.against["purejaxrl"], peer_file)
    devices = SEEDS_OVER_CORES if cores else None
    ours = _ours(PUBLISHED_SPECS / f"{spec_name}.yaml", num_seeds, iterations, devices, {"shuffle": shuffle})
    peer = peer_runs.purejaxrl(make_train, config, num_seeds, iterations)
    _side_by_side(entry, *ours, *peer, num_seeds, iterations, "PureJaxRL", {"peer": f"purejaxrl/{peer_file}.py"})


@pytest.mark.against("purejaxrl")
@pytest.mark.parametrize("case", ["cartpole", "minatar_breakout"], ids=["filled", "minatar_breakout-filled"])
def test_against_purejaxrl_ppo_filled(entry, bench, case):
    """Both sides at the size that fills this device: the published spec's
    seeds (PureJaxRL's vmapped, as its README runs them) and the envs per
    seed of the workload's `filled[...]` entry (`bench.fill`), PureJaxRL's
    `NUM_ENVS` set to the same; about as many env steps per call as the
    small entry's, at least one iteration."""
    spec_name, peer_file, config, iterations = CASES[case]
    fill = bench.fill(spec_name)
    num_seeds = len(spec_module.load(PUBLISHED_SPECS / f"{spec_name}.yaml").seeds)
    iterations = max(1, iterations * config["NUM_ENVS"] // (fill.size * num_seeds))
    make_train = peers.load_purejaxrl_ppo(bench.against["purejaxrl"], peer_file)
    ours = _ours(PUBLISHED_SPECS / f"{spec_name}.yaml", num_seeds, iterations, None, {"num_envs": fill.size})
    peer = peer_runs.purejaxrl(make_train, dict(config, NUM_ENVS=fill.size), num_seeds, iterations)
    _side_by_side(
        entry, *ours, *peer, num_seeds, iterations, "PureJaxRL",
        {"peer": f"purejaxrl/{peer_file}.py", "num_envs": fill.size, "fill": fill.source},
    )  # fmt: skip


@pytest.mark.against("xland-minigrid")
def test_against_xminigrid_ppo(entry, bench):
    """`against_xminigrid_ppo`: 2 iterations (16,384 env steps) per call."""
    module = peers.load_xminigrid_single_task(bench.against["xland-minigrid"])
    ours = _ours(BENCH_SPECS / "against" / "ppo_minigrid_single_task.yaml", 1, 2)
    peer = peer_runs.xminigrid(module, 2)
    _side_by_side(entry, *ours, *peer, 1, 2, "xland-minigrid", {"peer": "xland-minigrid/training/train_single_task.py"})


# The project's network: pgx's (batch norm, the bench spec's), or the
# published specs' (layer norm), which computes each position's statistics
# at every evaluation in search where batch norm scales and shifts.
NORMALIZATIONS = pytest.mark.parametrize("normalization", ["batch", "layer"], ids=["batch_norm", "layer_norm"])


def _against_pgx(entry, bench, cores: bool, normalization: str) -> None:
    module = peers.load_pgx_alphazero(
        bench.against["pgx"], peers.PGX_ALPHAZERO_CONNECT_FOUR, devices=None if cores else 1
    )
    ours = _ours(
        BENCH_SPECS / "against" / "alphazero_connect_four_pgx.yaml", 1, 1, ENVS_OVER_CORES if cores else None,
        network={"normalization": normalization},
    )  # fmt: skip
    peer = peer_runs.pgx(module, 1)
    _side_by_side(
        entry, *ours, *peer, 1, 1, "pgx's AlphaZero example",
        {"peer": "pgx/examples/alphazero/train.py", "normalization": normalization},
    )  # fmt: skip


@pytest.mark.against("pgx")
@NORMALIZATIONS
def test_against_pgx_alphazero(entry, bench, normalization):
    """`against_pgx_alphazero`: 1 iteration (256 games x 64 moves = 16,384
    frames, then 4 updates of 4,096) per call, both on one device."""
    _against_pgx(entry, bench, False, normalization)


@pytest.mark.against("pgx")
@NORMALIZATIONS
def test_against_pgx_alphazero_cores(entry, bench, normalization):
    """`against_pgx_alphazero_cores`: the same, both on every host device:
    pgx's example `pmap`s over them (as it does on its own in a process that
    has them), the project's seed is data-parallel over them."""
    _against_pgx(entry, bench, True, normalization)
