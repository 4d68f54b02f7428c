"""What an exact layout costs (`devices: {shards: L}`, issue 19): the PPO,
REINFORCE and AlphaZero (tic-tac-toe) benchmark specs on one device, plain program, with and
without logical shards, alternating in one process (`exact_layout_overhead[...]`; `--full`
only). The rate is the exact layout's steady env steps/s; the note gives
the slowdown of the medians against the default layout."""

from __future__ import annotations

import statistics

import pytest

from benchmarks.machinery import measure
from benchmarks.machinery.paths import BENCH_SPECS
from harness import build
from harness import experiment_spec as spec_module
from harness.run import runner
from harness.run.ceiling import spread

pytestmark = pytest.mark.full_only

SHARDS = 4  # PPO's 4 envs, one per shard (REINFORCE's 16, four); two or more per device
ROUNDS = 3
CHUNK, CHUNKS = 10, 6


def _plan(name: str, seeds: int, shards: int | None) -> build.Plan:
    loaded = spec_module.load(BENCH_SPECS / f"{name}.yaml")
    data = spec_module.canonical(loaded)
    data["seeds"] = list(range(seeds))
    data["logging"] = {"interval": CHUNK}
    data["budget"] = {"env_steps": CHUNK * CHUNKS * build.build(loaded).env_steps_per_iteration}
    data["devices"] = {"shards": shards}
    return build.build(spec_module.parse(data))


CASES = [(name, seeds) for name in ("ppo_cartpole", "reinforce_cartpole") for seeds in (1, 16)]
CASES.append(("alphazero_tic_tac_toe", 1))


@pytest.mark.parametrize(
    "name, seeds", CASES, ids=[f"{name}-{seeds}seed{'s' if seeds > 1 else ''}" for name, seeds in CASES]
)
def test_exact_layout_overhead(entry, name, seeds):
    plans = {shards: _plan(name, seeds, shards) for shards in (None, SHARDS)}
    rates: dict[int | None, list[float]] = {None: [], SHARDS: []}

    def train(shards: int | None) -> None:
        plan = plans[shards]
        result = runner.run(plan.algorithm, plan.spec.seeds, plan.num_iterations, CHUNK)
        rates[shards].append(result.sps)

    def one_round():
        order = (None, SHARDS) if len(rates[None]) % 2 == 0 else (SHARDS, None)
        for shards in order:
            train(shards)

    entry.benchmark.pedantic(one_round, rounds=ROUNDS, iterations=1, warmup_rounds=0)
    default, exact = statistics.median(rates[None]), statistics.median(rates[SHARDS])
    entry.record(
        measure.Result(
            name=entry.name,
            kind="micro",
            config={"spec_hash": plans[SHARDS].spec_hash, "seeds": seeds, "shards": SHARDS, "chunk_iterations": CHUNK},
            unit=measure.ENV_STEPS,
            rate=spread(rates[SHARDS]),
            repeats=len(rates[SHARDS]),
            note=f"shards {SHARDS}: {100 * (1 - exact / default):+.1f}% slower than the default layout"
            f" ({default:,.0f} steps/s), medians of {ROUNDS} alternating runs",
            extra={"sps_default": rates[None], "sps_exact": rates[SHARDS]},
        )
    )
