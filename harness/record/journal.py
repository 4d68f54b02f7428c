"""The metric journal: every chunk's metrics, kept on local disk beside the
checkpoints, whatever happens to the MLflow store.

`journal.jsonl` in a run directory holds one JSON document per line, in the
metric writer's format (`harness.record.metric_writer`) with a sequence number and a
kind: `{"seq": n, "kind": "iterations" | "evaluation", "first": i, "steps": s,
"metrics": {name: [[value per seed] per iteration]}}`. It is appended to by
the training process before the chunk is handed to the writer; the writer
records in `uploaded.json` the last sequence number that reached the store.
What lies past it is uploaded by `harness sync` (harness.record.sync), which
also delivers the end-of-run calls (summary metrics, artifacts, tags,
statuses) that a dead server refused, kept in `pending.json`.

On resume, the journal gives the metrics before the checkpoint (for the
results) and tells which recomputed chunks were logged already.

No JAX here: the metric writer and `harness sync` import this module.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

JOURNAL_FILE = "journal.jsonl"
UPLOADED_FILE = "uploaded.json"
PENDING_FILE = "pending.json"


def write_json(path: Path, data: Any, indent: int | None = None) -> None:
    """Atomically: a reader sees the old or the new file, never half of one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, allow_nan=True, indent=indent) + "\n")
    os.replace(tmp, path)


class Journal:
    """The journal of a run directory. A sweep trains its programs in turn
    and sets `scope` for each (`{"group": g, "runs": [run id per column]}`):
    entries then carry it (the metric writer and `harness sync` send an
    entry's columns to its `runs`), and `chunks` and `logged_through` read
    only that group's entries."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self.path = self.directory / JOURNAL_FILE
        self._entries = self._read()
        self._file = None
        self.scope: dict[str, Any] | None = None

    def _read(self) -> list[dict[str, Any]]:
        """The complete entries; a torn last line (a crash mid-write) is cut off."""
        if not self.path.exists():
            return []
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1
        if end < len(data):
            with self.path.open("r+b") as f:
                f.truncate(end)
        entries = []
        for line in data[:end].splitlines():
            try:
                entries.append(json.loads(line))
            except ValueError:
                break
        return entries

    @property
    def entries(self) -> list[dict[str, Any]]:
        return list(self._entries)

    def _scoped(self) -> list[dict[str, Any]]:
        if self.scope is None:
            return self._entries
        return [e for e in self._entries if e.get("group") == self.scope["group"]]

    def append(
        self,
        kind: str,
        first: int,
        steps: int,
        metrics: dict[str, list],
        dtypes: dict[str, str],
        extra: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Add one chunk's metrics (and `extra` keys, e.g. its MLflow window);
        returns the entry (with its `seq`)."""
        entry = {
            "seq": len(self._entries) + 1,
            "kind": kind,
            "first": first,
            "steps": steps,
            "metrics": metrics,
            "dtypes": dtypes,
            **(extra or {}),
            **(self.scope or {}),
        }
        if self._file is None:
            self._file = self.path.open("a")
        self._file.write(json.dumps(entry, allow_nan=True) + "\n")
        self._file.flush()
        self._entries.append(entry)
        return entry

    def close(self) -> None:
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            self._file = None

    def logged_through(self) -> int:
        """The last iteration whose metrics are in the journal (0: none)."""
        ends = [
            e["first"] + len(next(iter(e["metrics"].values()))) - 1 for e in self._scoped() if e["kind"] == "iterations"
        ]
        return max(ends, default=0)

    def chunks(self, through: int) -> list[tuple[int, dict[str, Any], dict[str, Any]]]:
        """(first iteration, per-iteration metrics `[K, seeds]`, evaluation
        after the chunk `[seeds]`) of each chunk that ended at or before
        iteration `through`, in order, as numpy arrays of the logged dtypes
        (so the values are the bits that were computed)."""
        import numpy as np

        def arrays(entry: dict[str, Any]) -> dict[str, Any]:
            dtypes = entry.get("dtypes", {})
            return {k: np.asarray(v, dtype=dtypes.get(k, "float32")) for k, v in entry["metrics"].items()}

        entries = self._scoped()
        evaluations = {e["first"]: e for e in entries if e["kind"] == "evaluation"}
        out, seen = [], set()
        for e in entries:
            if e["kind"] != "iterations" or e["first"] in seen:
                continue
            last = e["first"] + len(next(iter(e["metrics"].values()))) - 1
            if last <= through:
                seen.add(e["first"])
                evaluation = {k: v[0] for k, v in arrays(evaluations[last]).items()} if last in evaluations else {}
                out.append((e["first"], arrays(e), evaluation))
        return sorted(out, key=lambda chunk: chunk[0])

    # ------------------------------------------------------------ uploads

    def uploaded(self) -> int:
        try:
            return int(json.loads((self.directory / UPLOADED_FILE).read_text())["seq"])
        except (OSError, ValueError, KeyError):
            return 0

    def pending(self) -> list[dict[str, Any]]:
        done = self.uploaded()
        return [e for e in self._entries if e["seq"] > done]


def mark_uploaded(directory: Path, seq: int) -> None:
    write_json(Path(directory) / UPLOADED_FILE, {"seq": seq})


# ------------------------------------------------- end-of-run calls deferred


def read_pending(directory: Path) -> dict[str, Any]:
    try:
        return json.loads((Path(directory) / PENDING_FILE).read_text())
    except (OSError, ValueError):
        return {}


def add_pending(directory: Path, kind: str, run_id: str, values: dict[str, Any]) -> None:
    """Keep an MLflow call the store refused: kind is metrics, artifacts,
    tags or status (values {"status": ...})."""
    pending = read_pending(directory)
    pending.setdefault(kind, {}).setdefault(run_id, {}).update(values)
    write_json(Path(directory) / PENDING_FILE, pending)
