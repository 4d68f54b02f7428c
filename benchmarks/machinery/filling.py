"""The size at which a workload fills the device, for the `filled[...]`
entries: a published spec trained with its seeds at the number of envs per
seed where its throughput stops growing on this machine.

That size comes from the machine's record in `results/scale/` (what
`harness scale` writes, `<machine>-<spec>-envs.json`), else from a record an
earlier bench session's probe left in the bench folder, else from a probe
now: the spec at its own envs, then 4, 16, ... times as many, until the
throughput has stopped growing or the probe's time is spent. A probe whose
time ran out while the throughput still grew is taken up where it stopped
by the next session's (on a GPU each size's compile takes seconds, so one
session's share of `--fill-seconds` may climb only a step or two). The rules are
`harness scale`'s (harness.run.scaling: the saturation size, when the
ladder ends, the record), so a record gives both the same size. The probe's
record is kept in `<bench dir>/scale/` for the next session on this machine
(copy it to `results/scale/` to publish it).
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any, NamedTuple

from harness.run import scaling

AXIS = "envs"
GROWTH = 4  # the probe's ladder: the spec's envs times 1, 4, 16, ...
LARGEST = 1 << 16  # envs per seed the probe never passes


class Fill(NamedTuple):
    size: int  # envs per seed
    source: str  # where the size comes from: a record's path, or "probe"
    saturated: bool  # False: the throughput still grew at the largest size tried (a lower bound)
    point: scaling.SizePoint | None  # measured at `size` in this session (the probe's), else None
    ladder: list[dict[str, Any]]  # the record's or probe's points: size and env steps/s


def machine(fingerprint: dict[str, str]) -> str:
    """The machine's name in `results/scale/` file names: a CPU by its model
    and core count (`cpu-amd-epyc-2core`), an accelerator by its device
    class (`gpu-nvidia-h100-80gb-hbm3`). A record's name may stop short of
    the whole class (`gpu-nvidia-h100` matches it)."""
    from harness.judge import references

    if fingerprint.get("platform") == "cpu":
        name = f"cpu {fingerprint.get('cpu_model') or fingerprint.get('cpu', '')} {os.cpu_count()}core"
    else:
        name = references.device_class(fingerprint)
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _saturation(points: list[scaling.SizePoint]) -> tuple[int, bool]:
    """`harness scale`'s saturation size, and whether the throughput grew no
    more at the larger sizes (False while it still grows at the largest size,
    or only one was measured)."""
    return scaling.saturation(points).size, len(points) > 1 and not scaling.still_growing(points)


def _ladder(points: list[scaling.SizePoint]) -> list[dict[str, Any]]:
    return [{"size": p.size, "env_steps_per_second": p.env_steps_per_second} for p in points]


def record_path(folder: Path, machine_name: str, stem: str) -> Path:
    """The scale record of `machine_name` and spec `stem` in `folder`:
    `<machine>-<spec>-envs.json` (`harness scale`'s and the probe's)."""
    return Path(folder) / f"{machine_name}-{stem}-{AXIS}.json"


def recorded(folders: list[Path], machine_name: str, stem: str) -> Fill | None:
    """The saturation size in the first record of this machine and spec
    found in `folders` (the envs axis): a record's machine may stop short of
    the whole name (`gpu-nvidia-h100` for `gpu-nvidia-h100-80gb-hbm3`)."""
    suffix = record_path(Path(), "", stem).name  # "-<spec>-envs.json"
    for folder in folders:
        for path in sorted(Path(folder).glob(f"*{suffix}")):
            prefix = path.name.removesuffix(suffix)
            if machine_name != prefix and not machine_name.startswith(prefix + "-"):
                continue
            points = scaling.recorded_points(json.loads(path.read_text()))
            if points:
                size, saturated = _saturation(points)
                return Fill(size, str(path), saturated, None, _ladder(points))
    return None


def plan_at(spec_path: Path, size: int):
    """The spec at `spec_path` built with `size` envs per seed (the same
    iterations: its budget grows with the envs)."""
    import yaml

    from harness import build
    from harness import experiment_spec as spec_module

    data = yaml.safe_load(Path(spec_path).read_text())
    return build.build(spec_module.parse(scaling.resized(data, AXIS, size), source=str(spec_path)), str(spec_path))


def unfinished(record: Path) -> list[scaling.SizePoint]:
    """The points of an earlier probe's `record` whose time ran out while
    the throughput still grew (to go on from); [] for none."""
    try:
        document = json.loads(record.read_text())
    except (OSError, ValueError):
        return []
    points = scaling.recorded_points(document)
    stop = scaling.recorded_stop(document)
    if not points or _saturation(points)[1] or stop is None or stop.kind != "time":
        return []
    return points


def probe(spec_path: Path, seconds: float, ceiling_gflops: float | None, record: Path) -> Fill:
    """Climb the ladder for the spec at `spec_path` until the throughput
    stops growing, a size fails (out of memory) or `seconds` would pass;
    write the points to `record` in `harness scale`'s format. An unfinished
    probe's record there is gone on from, at the size after its last."""
    from harness import experiment_spec as spec_module

    own = spec_module.load(spec_path).hyperparameters.num_envs
    ladder = [own * GROWTH**i for i in range(32) if own * GROWTH**i <= LARGEST]
    started = time.perf_counter()
    points: list[scaling.SizePoint] = unfinished(record)
    sizes = [size for size in ladder if not points or size > points[-1].size]
    limit_name = f"the probe's {seconds:.0f} s"

    def stop_after(following: int | None, elapsed: float) -> scaling.Stop | None:
        return scaling.stop_after(
            points, following, until_flat=True, elapsed=elapsed, limit=seconds, limit_name=limit_name
        )

    stopped = stop_after(sizes[0] if sizes else None, 0.0)  # a record gone on from: time for its next size?
    if stopped is not None:
        sizes = []

    def plan_for(size: int):
        return plan_at(spec_path, size)

    def measure_one(plan):
        chunk = scaling.chunk_iterations(plan, points[-1] if points else None)
        return scaling.measure(plan, chunk, scaling.TIMED_CHUNKS, ceiling_gflops)

    for found in scaling.climb(sizes, plan_for, measure_one, (spec_module.SpecError, ValueError)):
        if isinstance(found, scaling.Stop):
            stopped = found
            break
        points.append(found)
        following = next((size for size in sizes if size > found.size), None)
        stopped = stop_after(following, time.perf_counter() - started)
        if stopped is not None:
            break
    if not points:
        raise RuntimeError(f"{spec_path}: no size of the probe ran ({stopped.reason if stopped else 'none tried'})")
    size, saturated = _saturation(points)
    record.parent.mkdir(parents=True, exist_ok=True)
    document = scaling.record(
        AXIS, ladder, points, stopped, made_by="the bench's probe (benchmarks/machinery/filling.py)"
    )
    record.write_text(json.dumps(document, indent=1) + "\n")
    point = next(p for p in points if p.size == size)
    return Fill(size, "probe", saturated, point, _ladder(points))
