"""The run directory of one `harness run` invocation, and where they live.

Every `harness run` gets a run directory, `<checkpoint root>/<parent run id>/`:

    run.json        the MLflow runs (parent, one per seed), store URI, spec
                    name and hash, status; what `--resume` and `harness sync`
                    read
    spec.yaml       the resolved spec the state belongs to
    journal.jsonl   every chunk's metrics, as logged (harness.record.journal)
    state/<iteration>/   orbax checkpoints (harness.run.checkpoint), newest `keep`

The checkpoint root is `checkpoints/` beside the MLflow store (beside the
SQLite file or the file store; in the working directory for a server), or
`--checkpoint-dir`. Nothing here imports JAX.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from harness.record.journal import write_json
from harness.record.store import sqlite_path

RUN_FILE = "run.json"
SPEC_FILE = "spec.yaml"
STATE_DIR = "state"
FORMAT = 1


class CheckpointError(RuntimeError):
    """A checkpoint or run directory cannot be used; a user-facing message."""


def default_root(uri: str) -> Path:
    """`checkpoints/` beside the MLflow store: beside the SQLite file or
    the file store's folder; in the working directory for a server."""
    parsed = urlparse(uri)
    if parsed.scheme == "sqlite":
        database = sqlite_path(uri)
        if database is not None:
            return database.parent / "checkpoints"
    elif parsed.scheme in ("", "file"):
        return Path(parsed.path or uri).parent / "checkpoints"
    return Path("checkpoints")


class RunDirectory:
    """The directory of one `harness run` invocation (see the module doc)."""

    def __init__(self, path: Path):
        self.path = Path(path)

    @classmethod
    def create(
        cls,
        root: Path,
        *,
        parent_id: str,
        child_ids: dict[int, str],
        experiment_id: str,
        uri: str,
        spec_name: str,
        spec_hash: str,
        spec_yaml: str,
    ) -> RunDirectory:
        path = Path(root) / parent_id
        try:
            path.mkdir(parents=True, exist_ok=False)
            (path / SPEC_FILE).write_text(spec_yaml)
        except OSError as error:
            raise CheckpointError(f"cannot create the run directory {path}: {error}") from None
        directory = cls(path)
        directory.write(
            {
                "format": FORMAT,
                "parent_run_id": parent_id,
                "child_run_ids": {str(seed): run_id for seed, run_id in child_ids.items()},
                "experiment_id": experiment_id,
                "tracking_uri": uri,
                "spec_name": spec_name,
                "spec_hash": spec_hash,
                "created": datetime.now(UTC).isoformat(),
                "status": "RUNNING",
                "resumes": [],
            }
        )
        return directory

    @property
    def info(self) -> dict[str, Any]:
        try:
            return json.loads((self.path / RUN_FILE).read_text())
        except (OSError, ValueError) as error:
            raise CheckpointError(f"{self.path / RUN_FILE} cannot be read: {error}") from None

    def write(self, info: dict[str, Any]) -> None:
        write_json(self.path / RUN_FILE, info, indent=2)

    def update(self, **fields: Any) -> None:
        self.write({**self.info, **fields})

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def state_dir(self) -> Path:
        return self.path / STATE_DIR

    @property
    def spec_yaml(self) -> str:
        return (self.path / SPEC_FILE).read_text()


def check_store_and_status(directory: RunDirectory, uri: str) -> None:
    """Refuse to resume a run logged to another store, or one that finished."""
    info = directory.info
    if info.get("tracking_uri") != uri:
        raise CheckpointError(
            f"run {directory.run_id} is logged to {info.get('tracking_uri')!r}, not {uri!r};"
            f" pass --tracking-uri {info.get('tracking_uri')}"
        )
    if info.get("status") == "FINISHED":
        raise CheckpointError(f"run {directory.run_id} finished; nothing to resume")


def run_directories(root: Path) -> list[RunDirectory]:
    """Every run directory under `root`, oldest first."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = [RunDirectory(p.parent) for p in root.glob(f"*/{RUN_FILE}")]
    return sorted(found, key=lambda d: d.info.get("created", ""))


def find_run(root: Path, run_id: str | None, spec_name: str) -> RunDirectory:
    """The run directory to resume: `run_id`'s (a seed's run id stands for
    its parent), or the newest of `spec_name` that did not finish."""
    directories = run_directories(root)
    if run_id is not None:
        for directory in directories:
            info = directory.info
            if run_id == directory.run_id or run_id in info.get("child_run_ids", {}).values():
                return directory
        raise CheckpointError(f"no run directory of run {run_id!r} under {root} (give --checkpoint-dir?)")
    mine = [d for d in directories if d.info.get("spec_name") == spec_name]
    if not mine:
        raise CheckpointError(f"no run of spec {spec_name!r} to resume under {root} (give --checkpoint-dir?)")
    open_runs = [d for d in mine if d.info.get("status") != "FINISHED"]
    if not open_runs:
        raise CheckpointError(
            f"the runs of spec {spec_name!r} under {root} all finished (the last: {mine[-1].run_id}); nothing to resume"
        )
    return open_runs[-1]


def saved_iterations(state_dir: Path) -> list[int]:
    """The iterations of the finished checkpoints in `state_dir` (orbax
    writes into a temporary folder and renames it when done)."""
    state_dir = Path(state_dir)
    if not state_dir.is_dir():
        return []
    return sorted(int(p.name) for p in state_dir.iterdir() if p.is_dir() and p.name.isdigit())
