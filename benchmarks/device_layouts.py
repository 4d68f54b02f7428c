"""Train one benchmark spec on several device layouts and print, as JSON,
each layout's steady-state chunk seconds: `python benchmarks/device_layouts.py
SPEC ROUNDS LAYOUT...`, LAYOUT `plain` (plain jit on one device) or
`SEEDxDATA` (a mesh). Started by test_bench_devices.py, in a subprocess when
the devices must be simulated (XLA_FLAGS is read when JAX starts).

Layouts are run in turn, `ROUNDS` times each, interleaved, so that a change
in the machine's load touches all of them alike."""

from __future__ import annotations

import json
import sys


def main(path: str, rounds: int, layouts: list[str]) -> None:
    import jax

    from harness import build
    from harness import experiment_spec as S
    from harness.run import runner

    loaded = S.load(path)
    plans = {layout: build.build_on(loaded, layout, path) for layout in layouts}
    out = {layout: {"chunk_seconds": [], "compile_seconds": []} for layout in layouts}
    for _ in range(rounds):
        for layout, plan in plans.items():
            result = runner.run(
                plan.algorithm, plan.spec.seeds, plan.num_iterations, plan.spec.logging.interval, mesh=plan.mesh
            )
            # The first chunk of a run is its warm-up (see benchmarks.machinery.measure).
            out[layout]["chunk_seconds"] += result.chunk_seconds[1:]
            out[layout]["compile_seconds"].append(result.compile_seconds)
            out[layout]["env_steps_per_chunk"] = (
                plan.spec.logging.interval * plan.env_steps_per_iteration * len(plan.spec.seeds)
            )
    out["_devices"] = {"platform": jax.devices()[0].platform, "count": jax.device_count()}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3:])
