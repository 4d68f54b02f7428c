"""The bench's run history: each run saved per device, and its comparison
with the last run on the same device (the table and chart that show it:
benchmarks.machinery.report; the MLflow runs: benchmarks.machinery.mlflow_log).

A stored run cannot be interleaved with this one, so the comparison with it
is a ratio to read, never a verdict: two runs of one commit on a shared
2-core machine moved 23 of 35 entries by more than 10% (+12% to +76%) when
a neighbour loaded one core during the first. A verdict on speed comes from
rounds run side by side in one session: `--baseline REV`
(benchmarks.machinery.lockstep, harness.stats.speed).

A bench run is saved as a pytest-benchmark JSON document (its `benchmarks`
list, each entry's `benchmarks.machinery.measure.Result` in
`extra_info["harness"]`) with a `harness` section holding the device
fingerprint, versions, git state and device ceiling. Documents are kept
under `<bench dir>/history/<device key>/`, where the device key is a hash of
the device fingerprint without the host name: pytest-benchmark's own
storage is keyed by OS and Python only, which would put a GPU run and a CPU
run of the same machine side by side.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

from harness.run import host_devices
from harness.run.ceiling import Ceiling

FORMAT = 1


def device_key(fingerprint: dict[str, str]) -> str:
    """A short hash of the device fingerprint, host name left out: the same
    hardware, device count, XLA flags and PRNG settings give the same key.
    The mesh is left out too: an entry runs on one device, or says its
    layout; and so is a CPU's split into host devices (the bench makes one
    per core), which is no other hardware."""
    kept = {k: v for k, v in fingerprint.items() if k not in ("host", "mesh", "devices_used")}
    if kept.get("platform") == "cpu":
        kept = {k: v for k, v in kept.items() if k not in ("device_count", "local_device_count")}
        kept["xla_flags"] = host_devices.without_flag(kept.get("xla_flags", ""))
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()[:16]


def history_dir(bench_dir: Path, key: str) -> Path:
    return Path(bench_dir) / "history" / key


def save_run(bench_dir: Path, document: dict[str, Any]) -> Path:
    """Write a run's document to its device's history; returns the path."""
    info = document["harness"]
    directory = history_dir(bench_dir, info["device_key"])
    directory.mkdir(parents=True, exist_ok=True)
    stamp = info["started"].replace("-", "").replace(":", "").split(".")[0]
    path = directory / f"{stamp}_{info['session'][:8]}.json"
    path.write_text(json.dumps(document, indent=2, default=str) + "\n")
    return path


def load_runs(directory: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The saved documents in `directory`, oldest first, and a note for each
    file that could not be read (it is skipped)."""
    runs, notes = [], []
    for path in sorted(Path(directory).glob("*.json")) if Path(directory).is_dir() else []:
        try:
            document = json.loads(path.read_text())
            document["harness"]["started"]  # noqa: B018  (a saved run has one)
        except (OSError, ValueError, KeyError, TypeError) as error:
            notes.append(f"skipped {path}: not a saved bench run ({error})")
            continue
        runs.append(document)
    runs.sort(key=lambda d: d["harness"]["started"])
    return runs, notes


def entries(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The `Result` records (as dicts) of a saved document."""
    return [b["extra_info"]["harness"] for b in document.get("benchmarks", []) if "harness" in b.get("extra_info", {})]


def previous_entries(runs: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """For each entry name, its record in the latest of `runs` that has it
    (a run of a few entries with `-k` does not hide the others' last
    figures), with that run's start time under `started`."""
    latest: dict[str, dict[str, Any]] = {}
    for document in sorted(runs, key=lambda d: d["harness"]["started"]):
        for record in entries(document):
            latest[record["name"]] = {**record, "started": document["harness"]["started"]}
    return latest


class Change(NamedTuple):
    status: str  # "new", "config changed" or "compared"
    ratio: float | None = None  # current median rate / previous median rate
    previous_rate: float | None = None
    previous_started: str | None = None

    def label(self) -> str:
        return self.status if self.ratio is None else f"{100 * (self.ratio - 1):+.1f}%"


def compare(current: Iterable[dict[str, Any]], previous: dict[str, dict[str, Any]]) -> dict[str, Change]:
    """Each current entry against its previous record (`previous_entries`):
    the ratio of the median rates (higher is faster). An entry whose config
    (spec hash, seeds, sizes) changed is not compared."""
    changes = {}
    for record in current:
        before = previous.get(record["name"])
        if before is None:
            changes[record["name"]] = Change("new")
            continue
        if before.get("config_hash") != record.get("config_hash"):
            changes[record["name"]] = Change("config changed", None, before["rate"][0], before.get("started"))
            continue
        ratio = record["rate"][0] / before["rate"][0]
        changes[record["name"]] = Change("compared", ratio, before["rate"][0], before.get("started"))
    return changes


def ceiling_change(current: Ceiling | None, previous: dict[str, Any] | None) -> str | None:
    """How the device ceiling moved since the last run on this device: when
    it moved with the entries, the machine (its load, its clocks) changed,
    not only the code."""
    if current is None or not previous:
        return None
    before = Ceiling.from_dict(previous)
    if (before.matmul_size, before.copy_bytes) != (current.matmul_size, current.copy_bytes):
        return (
            f"device ceiling: measured at other sizes than the last run on this device ({before.matmul_size}²,"
            f" {before.copy_bytes // 2**20} MB then), so not compared"
        )
    matmul = current.matmul_gflops[0] / before.matmul_gflops[0] - 1
    bandwidth = current.bandwidth_gbs[0] / before.bandwidth_gbs[0] - 1
    return (
        f"device ceiling against the last run on this device: matmul {100 * matmul:+.0f}%, "
        f"bandwidth {100 * bandwidth:+.0f}% (when it moved too, the machine changed, not only the code)"
    )
