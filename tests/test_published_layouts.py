"""Every published spec starts on every layout the documentation names:
`harness validate`, then what `harness run SPEC OPTIONS` does before its
first chunk (the plan, the claims check, and for one spec of each algorithm
and network kind the first chunk traced and lowered), on one device, on 2
and 4 (simulated) devices, with a seed axis, with `--host-devices cores`
and on an exact layout (tests/published_layouts.py, in subprocesses; its
docstring says what is done once where doing it again checks nothing
more). A spec added to experiments/ is covered without editing this file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from published_layouts import HOST_DEVICES_SPECS, LAYOUTS, LOWERED, kind, on_layout, published, published_specs
from support import background_result, device_env

from harness import experiment_spec as S

ROOT = Path(__file__).resolve().parent.parent
SPECS = published()
# Layouts of several devices run with 4 simulated CPU devices; the CPU split
# into cores is left to the harness, as a user's `--host-devices cores` is.
SIMULATED = [layout for layout in LAYOUTS if layout != "host_devices_cores"]


def _check(layouts: list[str], device_count: int | None) -> list[dict]:
    out = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "published_layouts.py"), *layouts],
        env=device_env(device_count),
        capture_output=True,
        text=True,
        timeout=1800,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def run_published_layouts(tmp_path_factory) -> dict[tuple[str, str], dict]:
    del tmp_path_factory
    lines = _check(SIMULATED, 4) + _check(["host_devices_cores"], None)
    return {(line["spec"], line["options"]): line for line in lines}


BACKGROUND = {"published_layouts": run_published_layouts}


@pytest.fixture(scope="module")
def published_layouts():
    return background_result("published_layouts")


def _seeds(path: Path) -> int:
    return len(published_specs()[path].seeds)


# The network kinds that take exact layouts (devices.shards), and those that
# are refused one (pinned: a change that refuses or accepts one more fails).
EXACT_ACCEPTED = {"mlp", "gru", "item_set"}
EXACT_REFUSED = {"resnet", "grid_gru"}


def _refused(path: Path, layout: str) -> bool:
    """Whether `harness run` must refuse the spec on `layout`: a seed axis
    that does not divide its seeds, or an exact layout of a network without
    one."""
    if layout == "seed_axis_2x2":
        return _seeds(path) % 2 == 1
    if layout == "exact_4_shards":
        network = kind(published_specs()[path])[1]
        assert network in EXACT_ACCEPTED | EXACT_REFUSED, f"{path.stem}: network {network} is in neither set"
        return network in EXACT_REFUSED
    return False


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_harness_validate_accepts_every_published_spec(published_layouts, path):
    line = published_layouts[(path.stem, "one_device")]
    assert line["status"] == "ok", line.get("traceback", line.get("message"))
    assert line["spec_hash"] == S.spec_hash(published_specs()[path])


CHECKED = [(path, layout) for layout in LAYOUTS for path in SPECS if path in on_layout(layout)]


@pytest.mark.parametrize("path, layout", CHECKED, ids=[f"{p.stem}-{layout}" for p, layout in CHECKED])
def test_every_published_spec_starts_on_every_layout(published_layouts, path, layout):
    line = published_layouts[(path.stem, layout)]
    assert line["status"] != "crashed", line.get("traceback", line["message"])
    if _refused(path, layout):
        assert line["status"] == "refused", line
        key = "devices.seed_axis" if layout == "seed_axis_2x2" else "exact layouts (devices.shards)"
        assert key in line["message"], line["message"]
        return
    assert line["status"] == "ok", line["message"]
    expected = {
        "one_device": "plain",
        "devices_2": "seed=1,data=2",
        "devices_4": "seed=1,data=4",
        "seed_axis_2x2": "seed=2,data=2",
        "exact_4_shards": "seed=1,data=2",
    }
    if layout in expected:
        assert line["layout"] == expected[layout]
    else:  # the seeds over as many host devices as this CPU's cores allow
        assert line["layout"].endswith(",data=1") or line["layout"] == "plain"


def test_one_spec_of_each_algorithm_and_network_kind_is_lowered_on_every_layout(published_layouts):
    outcomes = published_layouts
    assert not any(line.get("lowered") for (_, lay), line in outcomes.items() if lay not in LOWERED)
    for layout in LOWERED:
        lowered = {kind(published_specs()[ROOT / "experiments" / f"{spec}.yaml"]) for (spec, lay), line in outcomes.items()
                   if lay == layout and line.get("lowered")}  # fmt: skip
        # Every kind with a spec that the layout takes (by the rules above,
        # not by what the run did) is lowered there once.
        expected = {kind(published_specs()[p]) for p in on_layout(layout) if not _refused(p, layout)}
        assert lowered == expected, layout
    # The layouts not lowered are seed_axis_2x2's program less its seed axis
    # (published_layouts' docstring): it lowers every kind.
    every_kind = {kind(loaded) for loaded in published_specs().values()}
    assert {kind(published_specs()[ROOT / "experiments" / f"{spec}.yaml"]) for (spec, lay), line in outcomes.items()
            if lay == "seed_axis_2x2" and line.get("lowered")} == every_kind  # fmt: skip


def test_host_devices_runs_one_spec_of_each_algorithm_the_chosen_ones_included():
    chosen = {published_specs()[p].algorithm: p.stem for p in on_layout("host_devices_cores")}
    assert set(chosen) == {loaded.algorithm for loaded in published_specs().values()}
    for algorithm, name in HOST_DEVICES_SPECS.items():
        assert chosen[algorithm] == name, f"HOST_DEVICES_SPECS names {name}, not a published {algorithm} spec"
