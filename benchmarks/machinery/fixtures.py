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
    """The device's matmul GFLOP/s and bandwidth, measured once per session."""
    from harness.run.ceiling import measure_ceiling

    bench.ceiling = measure_ceiling(bench.device)
    return bench.ceiling


class Entry(NamedTuple):
    name: str  # the entry's name in the table, MLflow and the JSON
    bench: BenchSession
    benchmark: Any

    def record(self, result) -> None:
        self.bench.record(self.benchmark, result)


@pytest.fixture
def entry(request: pytest.FixtureRequest, bench: BenchSession, benchmark) -> Entry:
    return Entry(entry_name(request.node), bench, benchmark)
