"""Every published spec on every layout the documentation names, up to its
first chunk: `python tests/published_layouts.py LAYOUT...` prints, as JSON
lines, what `harness run SPEC OPTIONS` does with each spec in experiments/
before it trains (on one device: `harness validate SPEC`): the plan (the command line's device options applied and
checked), the claims check, and for one spec of each algorithm and network
kind, the first chunk's program traced and lowered (not compiled).

Two kinds of work are done once where doing them again checks nothing
more. The metric names (the claims check) are traced once per spec, exact
or not, mesh or not: no data axis's size decides them. The first chunk is
not lowered on `devices_2` and `devices_4`: their programs are
`seed_axis_2x2`'s without its seed axis (an axis of one device is no
axis, algorithms.parallel) and with 2 or 4 data devices instead of 2, the
same collectives over other per-device sizes (build checks that the sizes
divide); `seed_axis_2x2` lowers every kind (the suite checks that each
has a spec it takes). And `--host-devices cores` runs one spec of each
algorithm, the quickest to trace (`HOST_DEVICES_SPECS`): on a CPU of a few
cores it is a seed axis over host devices, which `seed_axis_2x2` checks for
every spec, and what it adds, the split of the host, is the same for every
spec of an algorithm.

Started by tests/test_published.py in subprocesses: the layouts of several
devices with 4 simulated CPU devices (XLA_FLAGS set before JAX starts), and
`--host-devices cores` without any, as a user runs it (the harness splits
the CPU itself). Each line is one (spec, layout): `ok`, or `refused` with
the user error `harness run` prints (a layout the spec cannot take, such as
a seed axis that does not divide its seeds), or `crashed` with the
exception: the test accepts no crash.
"""

from __future__ import annotations

import functools
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# Command-line options of each layout, as the docs write them.
LAYOUTS = {
    "one_device": [],
    "devices_2": ["--devices", "2"],
    "devices_4": ["--devices", "4"],
    "seed_axis_2x2": ["--devices", "4", "--seed-axis", "2"],
    "host_devices_cores": ["--host-devices", "cores"],
    # An exact layout (devices.shards, a spec key): 4 shards on 2 data devices.
    "exact_4_shards": ["--devices", "2"],
}
SPEC_KEYS = {"exact_4_shards": {"shards": 4}}
# The layouts whose first chunk is lowered (see the module's docstring).
LOWERED = [layout for layout in LAYOUTS if layout not in ("devices_2", "devices_4")]
# The spec of each algorithm that `--host-devices cores` runs: the first in
# `on_layout`'s order, except where another traces in a fraction of its
# time (Connect Four's evaluation plays its ladder: 37 s here, against 6 s
# for tic-tac-toe's).
HOST_DEVICES_SPECS = {"alphazero": "alphazero_tic_tac_toe"}


# The metric names traced so far, by spec: the names are the keys of the
# dicts its step and evaluation return, which no layout changes (shard_map
# runs the same per-device function; an exact layout's shards split the same
# step). The claims check on every other layout uses the names found on one
# device instead of tracing again under the mesh; the step's trace under
# each layout's mesh is checked where its first chunk is lowered.
_TRACED: dict[str, set[str]] = {}
_current: list = [None]


def _remember_traces() -> None:
    from harness.run import tracing

    trace = tracing.metric_names

    def metric_names(algorithm, layout, numbers=None):
        if _current[0] not in _TRACED:
            _TRACED[_current[0]] = trace(algorithm, layout, numbers)
        return _TRACED[_current[0]]

    tracing.metric_names = metric_names


def published() -> list[Path]:
    return sorted((ROOT / "experiments").glob("*.yaml"))


@functools.cache
def published_specs() -> dict[Path, Any]:
    """Every published spec, loaded once per process: the test module asks
    `on_layout` for each of its hundred parameters while pytest collects,
    and reads the specs again in its tests."""
    from harness import experiment_spec as spec

    return {path: spec.load(path) for path in published()}


def on_layout(layout: str) -> list[Path]:
    """The published specs checked on `layout`, in the order `main` visits
    them (gymnax's first): all of them, except on `host_devices_cores` one
    spec of each algorithm (`HOST_DEVICES_SPECS`, else its first)."""
    loaded = published_specs()
    ordered = sorted(loaded, key=lambda p: (loaded[p].env.suite != "gymnax", p.stem))
    if layout != "host_devices_cores":
        return ordered
    first: dict[str, Path] = {}
    for path in sorted(ordered, key=lambda p: p.stem != HOST_DEVICES_SPECS.get(loaded[p].algorithm)):
        first.setdefault(loaded[path].algorithm, path)
    return [p for p in ordered if p in first.values()]


def kind(loaded) -> tuple[str, str]:
    """The algorithm and network kind: one spec of each is lowered."""
    network = getattr(loaded, "network", None)
    return loaded.algorithm, str(getattr(network, "kind", "default"))


def validate(path: Path) -> dict:
    """`harness validate SPEC`: its exit code and the spec hash it prints.
    It does what `harness run SPEC` does on one device before training:
    the plan and the claims check."""
    import contextlib
    import io

    from harness import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["validate", str(path)])
    if code:
        return {"status": "refused", "message": err.getvalue()}
    printed = [line for line in out.getvalue().splitlines() if line.startswith("# spec_hash: ")]
    return {"spec_hash": printed[0].removeprefix("# spec_hash: ") if printed else None}


def check(path: Path, layout: str, lower: bool) -> dict:
    from harness import build
    from harness import experiment_spec as spec
    from harness.cli import options as cli_options
    from harness.cli.table import parser
    from harness.run import runner

    loaded = spec.load(path)
    _current[0] = path.stem
    if layout == "one_device":
        out = validate(path)
        if out.get("status") == "refused":
            return out
        plan = build.build(loaded, str(path))
    else:
        args = parser().parse_args(["run", str(path), *LAYOUTS[layout]])
        if layout in SPEC_KEYS:
            loaded = loaded.model_copy(update={"devices": loaded.devices.model_copy(update=SPEC_KEYS[layout])})
        # What `harness run` does before it trains: the plan with the command
        # line's devices, and the claims check (harness.cli.options.load_plan).
        plan = cli_options.plan_of(loaded, str(path), spec.key_lines(path.read_text()), args)
        out = {}
    out.update(status="ok", layout=plan.layout.describe() if plan.layout else "plain", lowered=False)
    if lower:
        chunk = min(plan.spec.logging.interval, plan.num_iterations)
        runner.lower_first_chunk(plan.algorithm, plan.spec.seeds, chunk, plan.mesh)
        out["lowered"] = True
    return out


def main(layouts: list[str]) -> None:
    from harness import cli
    from harness import experiment_spec as spec

    _remember_traces()
    lowered_kinds: dict[str, set] = {layout: set() for layout in layouts}
    checked = {layout: on_layout(layout) for layout in layouts}
    # gymnax's specs first: the kind they share with others is lowered on
    # them, the fastest to trace.
    for path in on_layout("one_device"):
        loaded = spec.load(path)
        for layout in (layout for layout in layouts if path in checked[layout]):
            lower = layout in LOWERED and kind(loaded) not in lowered_kinds[layout]
            start = time.perf_counter()
            line = {"spec": path.stem, "options": layout}
            try:
                line.update(check(path, layout, lower))
                if line.get("lowered"):
                    lowered_kinds[layout].add(kind(loaded))
            except cli.USER_ERRORS as error:
                line.update(status="refused", message=str(error))
            except Exception as error:  # noqa: BLE001  (reported: the test names it)
                line.update(status="crashed", message=f"{type(error).__name__}: {error}"[:2000])
                line["traceback"] = traceback.format_exc()[-3000:]
            line["seconds"] = round(time.perf_counter() - start, 2)
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or list(LAYOUTS))
