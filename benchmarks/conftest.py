"""Benchmark fixtures and the report printed at the end of `nox -s bench`."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SPECS = {name: ROOT / "experiments" / f"{name}.yaml" for name in ("reinforce_cartpole", "ppo_cartpole")}
BENCH_DIR = ROOT / ".bench"


@pytest.fixture(scope="session")
def bench_dir() -> Path:
    BENCH_DIR.mkdir(exist_ok=True)
    return BENCH_DIR


_REPORT: list[tuple[str, str]] = []


def report(entry: str, figures: str) -> None:
    """Add a line to the table printed at the end of the session."""
    _REPORT.append((entry, figures))


def pytest_terminal_summary(terminalreporter) -> None:
    if not _REPORT:
        return
    import jax

    device = jax.devices()[0]
    terminalreporter.section(f"harness benchmarks on {device.platform} ({device.device_kind} x {jax.device_count()})")
    width = max(len(entry) for entry, _ in _REPORT)
    for entry, figures in _REPORT:
        terminalreporter.write_line(f"{entry:<{width}}  {figures}")
