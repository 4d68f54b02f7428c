"""Devices: steps per second against the device layout, and what the mesh
itself costs at one device.

The benchmark spec ppo_cartpole (16 seeds) is trained on the plain one-device
program and on `seed x data` meshes: seeds vmapped on one device against
seeds sharded over 4, and one seed's env batch split over 2 and 4 devices.
On a CPU-only machine the 4 devices are simulated
(`--xla_force_host_platform_device_count=4`) and share the host's cores, so
the figures show what the sharding costs, not extra compute; on a machine
with 4 or more accelerators they are real devices.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

import jax
import pytest

from benchmarks.machinery import measure
from benchmarks.machinery.children import child_env
from benchmarks.machinery.paths import BENCH_SPECS
from harness.run.ceiling import spread

# With simulated devices the entries measure what sharding costs on the
# same cores, at about 6 minutes of this CPU: they run with --full only,
# so that the default suite (what a user runs first) stays under 10 minutes.
# With 4 or more accelerators they are part of the default suite.
SIMULATED = jax.default_backend() == "cpu" or jax.device_count() < 4
pytestmark = [pytest.mark.full_only] if SIMULATED else []

ROOT = Path(__file__).resolve().parent.parent
SPEC = BENCH_SPECS / "ppo_cartpole.yaml"
LAYOUTS = ["plain", "1x1", "4x1", "1x2", "1x4", "2x2"]
ROUNDS = 3  # training runs per layout; each gives 5 timed chunks


def run_layouts(layouts: list[str], rounds: int) -> dict:
    """`benchmarks/device_layouts.py` in a subprocess, with 4 simulated CPU
    devices unless this machine has 4 accelerators."""
    env = child_env()
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    if jax.default_backend() == "cpu" or jax.device_count() < 4:
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=4".strip()
        env["JAX_PLATFORMS"] = "cpu"
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "device_layouts.py"), str(SPEC), str(rounds), *layouts],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        cwd=ROOT,
    )
    if out.returncode != 0:
        raise RuntimeError(f"device_layouts.py failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout)


def chunk_rates(measured: dict) -> list[float]:
    """Env steps per second of each timed chunk of one layout's runs."""
    return [measured["env_steps_per_chunk"] / s for s in measured["chunk_seconds"]]


def layout_result(name: str, layout: str, measured: dict, devices: dict, **extra) -> measure.Result:
    rates = chunk_rates(measured)
    count = 1 if layout == "plain" else math.prod(int(n) for n in layout.split("x"))
    return measure.Result(
        name=name,
        kind="spec",
        config={
            "spec": "bench_ppo_cartpole",
            "layout": layout,
            "devices": count,
            "simulated": devices["platform"] == "cpu" and devices["count"] >= 4,
            "rounds": ROUNDS,
        },
        unit=measure.ENV_STEPS,
        rate=spread(rates),
        repeats=len(rates),
        compile_seconds=statistics.median(measured["compile_seconds"]),
        iteration="one training iteration of one seed",
        note=f"{'plain jit' if layout == 'plain' else 'mesh seed x data = ' + layout}, "
        f"{statistics.median(rates) / count:,.0f} env steps/s per device",
        extra=extra,
    )


@pytest.mark.parametrize("layout", LAYOUTS)
def test_device_layout(entry, layout):
    out = {}

    def run():
        out["data"] = run_layouts([layout], ROUNDS)

    entry.benchmark.pedantic(run, rounds=1, iterations=1)
    entry.record(layout_result(entry.name, layout, out["data"][layout], out["data"]["_devices"]))


def test_mesh_overhead_at_one_device(entry):
    """The 1-device mesh against the plain jitted program, interleaved in
    one process: what shard_map costs by itself (aim: within 3%)."""
    out = {}

    def run():
        out["data"] = run_layouts(["plain", "1x1"], ROUNDS)

    entry.benchmark.pedantic(run, rounds=1, iterations=1)
    data = out["data"]
    plain, mesh = (statistics.median(chunk_rates(data[layout])) for layout in ("plain", "1x1"))
    result = layout_result(
        entry.name, "1x1", data["1x1"], data["_devices"], plain_sps=plain, mesh_over_plain=mesh / plain
    )
    result.note = f"1-device mesh at {mesh / plain:.1%} of plain jit ({mesh:,.0f} vs {plain:,.0f} env steps/s)"
    entry.record(result)
