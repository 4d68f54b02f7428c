"""The device programs on a mesh (harness.run.devices): no array of size 0
crosses into or out of a device's program. jaxlib 0.11.2's SPMD partitioner
crashes (a segmentation fault while compiling) on one, and every
feed-forward policy has one: its empty recurrent carry.

On one device JAX inlines the device program, so the check runs on 2
simulated devices, in a process of its own (`python
tests/test_mesh_programs.py` prints what it found as JSON)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

# A tensor type with an axis of size 0, in StableHLO's text: tensor<1x8x0xf32>.
EMPTY_TENSOR = re.compile(r"tensor<(?:\d+x)*0x")
# The lines that open a device program and declare what crosses into and out
# of it: Shardy's manual computation, or GSPMD's shard conversions.
REGION = re.compile(r"manual_computation|FullToShard|ShardToFull")


def _programs() -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np

    from harness.run import devices
    from harness.types import Layout

    mesh = devices.make_mesh(Layout(1, 2))

    def step(state):  # one device's step: the empty carry passed on, a metric per seed
        params = state["params"] * 2.0
        return {"carry": state["carry"] + 1.0, "params": params}, {"loss": params.sum(-1)}

    def init(seeds):
        return {"carry": jnp.zeros((seeds.shape[0], 8, 0)), "seed": seeds * 2}

    # [seeds, data, ...], as the runner lays out a seed-batched state.
    state = {"carry": jnp.zeros((2, 2, 8, 0)), "params": jnp.arange(12.0).reshape(2, 2, 3)}
    inputs = devices.per_run(np.asarray([3, 4], dtype=np.uint32), mesh)
    chunk = jax.jit(devices.on_mesh(step, mesh, metrics_axis=0))
    start = jax.jit(devices.init_on_mesh(init, mesh))
    out = {}
    for name, program, args in (("chunk", chunk, state), ("init", start, inputs)):
        region = [line for line in program.lower(args).as_text().splitlines() if REGION.search(line)]
        result = jax.tree.map(np.asarray, program(args))
        out[name] = {
            "region": region,
            "crossing_empty": [line for line in region if EMPTY_TENSOR.search(line)],
            "shapes": jax.tree.map(lambda x: list(x.shape), result),
            "values": jax.tree.map(lambda x: x.tolist(), result),
        }
    return out


def test_an_empty_leaf_stays_out_of_the_device_program_and_comes_back_whole():
    from support import device_env

    found = json.loads(
        subprocess.run(
            [sys.executable, str(Path(__file__))], env=device_env(2), capture_output=True, text=True, check=True
        ).stdout
    )
    chunk, init = found["chunk"], found["init"]
    for program in (chunk, init):
        assert program["region"], "no device program found in the lowered text"
        assert not program["crossing_empty"], program["crossing_empty"]
    (state, metrics) = chunk["shapes"]
    assert state == {"carry": [2, 2, 8, 0], "params": [2, 2, 3]} and metrics == {"loss": [2, 2]}
    assert chunk["values"][0]["params"] == [
        [[2.0 * (6 * s + 3 * d + k) for k in range(3)] for d in range(2)] for s in range(2)
    ]
    assert init["shapes"] == {"carry": [2, 2, 8, 0], "seed": [2, 2]}
    assert init["values"]["seed"] == [[6, 6], [8, 8]]


if __name__ == "__main__":
    json.dump(_programs(), sys.stdout)
