"""The fixtures the entries take: the session (`bench`), the device's
ceiling measured once per session, and `entry`, through which an entry
records its result under its name."""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest

from benchmarks.machinery.session import KEY, BenchSession


def entry_name(item: pytest.Item) -> str:
    """An entry's name in the table, MLflow and the JSON: its test's name without `test_`."""
    return item.name.removeprefix("test_")


@pytest.fixture(scope="session")
def bench(request: pytest.FixtureRequest) -> BenchSession:
    return request.config.stash[KEY]


@pytest.fixture(scope="session", autouse=True)
def device_ceiling(bench: BenchSession):
    """The device's matmul GFLOP/s and bandwidth, measured once per session
    (not by a baseline's bench in lockstep: it would run beside the
    candidate's first entry)."""
    from harness.run.ceiling import measure_ceiling

    if not bench.following:
        bench.ceiling = measure_ceiling(bench.device)
    return bench.ceiling


class Entry(NamedTuple):
    name: str  # the entry's name in the table, MLflow and the JSON
    bench: BenchSession
    benchmark: Any

    def record(self, result) -> None:
        self.bench.record(self.benchmark, result)

    def timed_calls(self, call, rounds: int) -> list[float]:
        """The seconds of `rounds` timed calls of `call` (which waits for the
        device), as pytest-benchmark's rounds; against a baseline
        (`--baseline`), of the rounds in lockstep with it that its speed test
        asks for (benchmarks.machinery.lockstep)."""
        if self.bench.lockstep is None:
            self.benchmark.pedantic(call, rounds=rounds, iterations=1, warmup_rounds=0)
            return list(self.benchmark.stats.stats.data)
        out: dict = {}

        def lockstep() -> None:
            out["seconds"] = self.bench.lockstep_rounds(self.name, call, rounds)

        self.benchmark.pedantic(lockstep, rounds=1, iterations=1, warmup_rounds=0)
        return out["seconds"]


@pytest.fixture
def entry(request: pytest.FixtureRequest, bench: BenchSession, benchmark):
    name = entry_name(request.node)
    if bench.following and not bench.lockstep.arrive(name):
        pytest.skip("not compared with the candidate's bench")
    leading = bench.lockstep is not None and not bench.following
    if leading:
        bench.lockstep.turn(name)
    yield Entry(name, bench, benchmark)
    if leading:
        bench.lockstep.release(name)
