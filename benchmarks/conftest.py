"""Benchmark fixtures: the published REINFORCE spec, compiled once per seed count."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REINFORCE_SPEC = ROOT / "experiments" / "reinforce_cartpole.yaml"
BENCH_DIR = ROOT / ".bench"


@pytest.fixture(scope="session")
def bench_dir() -> Path:
    BENCH_DIR.mkdir(exist_ok=True)
    return BENCH_DIR
