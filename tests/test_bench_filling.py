"""The bench's device-filling sizes (benchmarks/machinery/filling.py) and
the peers' checkouts (benchmarks/machinery/peer_checkouts.py): where a size
is read from, the probe that finds one, and how `--against NAME` finds a
peer cloned by `nox -s peers`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from benchmarks.machinery import filling, peer_checkouts
from harness.run import scaling

ROOT = Path(__file__).resolve().parent.parent


def _record(path: Path, rates: dict[int, float]) -> None:
    points = [{"size": size, "env_steps_per_second": rate} for size, rate in rates.items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"axis": "envs", "points": points}))


def test_machine_names_match_the_records_of_their_class():
    cpu = {"platform": "cpu", "device_kind": "cpu", "cpu_model": "AMD EPYC"}
    assert filling.machine(cpu).startswith("cpu-amd-epyc-") and filling.machine(cpu).endswith("core")
    h100 = {"platform": "gpu", "device_kind": "NVIDIA H100 80GB HBM3"}
    assert filling.machine(h100) == "gpu-nvidia-h100-80gb-hbm3"


def test_a_record_gives_its_saturation_and_a_shorter_machine_name_matches(tmp_path):
    _record(tmp_path / "gpu-nvidia-h100-ppo_x-envs.json", {16: 1e6, 64: 3e6, 256: 3.2e6, 1024: 3.1e6})
    _record(tmp_path / "gpu-nvidia-h200-ppo_x-envs.json", {16: 1.0})
    fill = filling.recorded([tmp_path], "gpu-nvidia-h100-80gb-hbm3", "ppo_x")
    assert (fill.size, fill.saturated) == (64, True)  # the smallest within 10% of the best
    assert fill.point is None and fill.source.endswith("gpu-nvidia-h100-ppo_x-envs.json")
    assert filling.recorded([tmp_path], "gpu-nvidia-h100-80gb-hbm3", "ppo_y") is None
    assert filling.recorded([tmp_path], "gpu-nvidia-h10", "ppo_x") is None  # a prefix of a name is no match
    _record(tmp_path / "cpu-amd-epyc-2core-ppo_x-envs.json", {16: 1.0, 64: 2.0})
    still = filling.recorded([tmp_path], "cpu-amd-epyc-2core", "ppo_x")
    assert (still.size, still.saturated) == (64, False)  # the largest size is the best: a lower bound
    _record(tmp_path / "cpu-amd-epyc-2core-ppo_z-envs.json", {16: 1.0})
    assert not filling.recorded([tmp_path], "cpu-amd-epyc-2core", "ppo_z").saturated  # one size: unknown


def test_harness_scale_s_record_gives_the_bench_the_size_harness_scale_names(tmp_path):
    """One rule: 90.5k is within 10% of the best (100k), so both name 64,
    from a record written here as `harness scale` documents its format."""
    rates = {16: 50e3, 64: 90.5e3, 256: 100e3, 1024: 99e3}
    document = {
        "axis": "envs",
        "sizes": list(rates),
        "points": [{"size": size, "env_steps_per_second": rate, "seconds": 1.0} for size, rate in rates.items()],
        "stopped": None,
        "saturation": 64,
    }
    (tmp_path / "cpu-x-ppo_cartpole-envs.json").write_text(json.dumps(document))
    fill = filling.recorded([tmp_path], "cpu-x", "ppo_cartpole")
    assert (fill.size, fill.saturated) == (64, True)
    points = scaling.recorded_points(document)
    assert [p.size for p in points] == [16, 64, 256, 1024]
    assert scaling.record("envs", list(rates), points, None)["saturation"] == 64
    assert "saturates at envs=64" in scaling.describe_saturation(points, "envs")


def test_the_probe_climbs_until_its_time_is_spent_and_leaves_a_record(tmp_path):
    data = yaml.safe_load((ROOT / "experiments" / "reinforce_cartpole.yaml").read_text())
    data.update(seeds=[0], budget={"env_steps": 40 * 4 * 64})
    data["hyperparameters"]["num_envs"] = 4
    data["logging"] = {"interval": 4}
    data.pop("claims")
    spec = tmp_path / "tiny.yaml"
    spec.write_text(yaml.safe_dump(data))
    record = tmp_path / "scale" / "cpu-x-tiny-envs.json"
    fill = filling.probe(spec, seconds=0.0, ceiling_gflops=None, record=record)
    # No time: the first size only, measured, which is then the size.
    assert fill.size == 4 and fill.source == "probe" and fill.point.size == 4
    assert fill.point.env_steps_per_second > 0 and len(fill.point.rates) == 2
    written = json.loads(record.read_text())
    assert written["saturation"] == 4 and "probe's 0 s" in written["stopped"]["reason"]
    assert written["stopped"]["kind"] == "time"
    # The next session on this machine reads the probe's record.
    again = filling.recorded([tmp_path / "scale"], "cpu-x", "tiny")
    assert again.size == 4 and again.point is None
    # Its time ran out while nothing said the throughput stopped growing: a
    # later probe goes on from it, with no time, measuring nothing...
    (first,) = filling.unfinished(record)
    filling.probe(spec, seconds=0.0, ceiling_gflops=None, record=record)
    assert filling.unfinished(record) == [first]
    # ... with time for a size, at the size after its last.
    fill = filling.probe(spec, seconds=1.3 * first.seconds, ceiling_gflops=None, record=record)
    points = scaling.recorded_points(json.loads(record.read_text()))
    assert points[0] == first and points[1].size == 16 and fill.point is not None
    # A ladder that ended for another reason (here: the spec refused the next
    # size), or a record from before stops had kinds, is not gone on from.
    for stopped in ({"size": 64, "reason": "does not fit the spec", "kind": "refused"}, {"size": 64, "reason": "x"}):
        record.write_text(json.dumps({**json.loads(record.read_text()), "stopped": stopped}))
        assert filling.unfinished(record) == []


def test_against_a_peer_name_finds_its_checkout_in_the_peers_folder(tmp_path):
    (tmp_path / ".peers" / "purejaxrl").mkdir(parents=True)
    assert peer_checkouts.resolve("purejaxrl", tmp_path) == [tmp_path / ".peers" / "purejaxrl"]
    assert peer_checkouts.resolve("some/path", tmp_path) == [Path("some/path")]
    with pytest.raises(peer_checkouts.MissingCheckout, match=r"--against all: no checkout of xland-minigrid, pgx"):
        peer_checkouts.resolve("all", tmp_path)
    with pytest.raises(peer_checkouts.MissingCheckout, match=r"`nox -s peers` clones the peers there"):
        peer_checkouts.resolve("pgx", tmp_path)


def test_nox_peers_clones_each_peer_at_its_commit_from_a_mirror(tmp_path):
    """`nox -s peers -- --from DIR` with a local git repository standing in
    for PureJaxRL's: cloned into .peers/ and checked out at the pinned commit."""
    mirror = tmp_path / "mirrors" / "purejaxrl"
    mirror.mkdir(parents=True)
    git = ["git", "-C", str(mirror), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(mirror)], check=True)
    (mirror / "ppo.py").write_text("# first\n")
    (mirror / "purejaxrl").mkdir()
    (mirror / "purejaxrl" / "ppo.py").write_text("# the entries' file\n")
    (mirror / "docs").mkdir()
    (mirror / "docs" / "big.md").write_text("not imported\n")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    pinned = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    (mirror / "ppo.py").write_text("# later\n")
    subprocess.run([*git, "commit", "-qam", "later"], check=True)
    commands = peer_checkouts.clone_commands("purejaxrl", tmp_path / "repo", str(tmp_path / "mirrors"))
    assert commands[0][:2] == ["git", "clone"] and commands[-1][-1] == peer_checkouts.CHECKOUTS["purejaxrl"].commit
    commands[-1][-1] = pinned  # the stand-in's commit for the real one
    for command in commands:
        subprocess.run(command, check=True)
    checkout = tmp_path / "repo" / ".peers" / "purejaxrl"
    assert (checkout / "ppo.py").read_text() == "# first\n"
    # Only the folders the entries import (and the root's files).
    assert (checkout / "purejaxrl" / "ppo.py").exists() and not (checkout / "docs").exists()
    # Run again over an existing checkout: no second clone.
    assert all(c[:2] == ["git", "-C"] for c in peer_checkouts.clone_commands("purejaxrl", tmp_path / "repo"))
