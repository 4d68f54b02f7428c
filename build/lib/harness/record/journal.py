"""The metric journal: every chunk's metrics, kept on local disk beside the
checkpoints, whatever happens to the MLflow store.

`journal.jsonl` in a run directory holds one JSON document per line, with a
sequence number and a kind: `{"seq": n, "kind": "iterations" | "evaluation",
"first": i, "steps": s, "metrics": {name: packed [iterations, seeds]}}`, each
metric's array packed as its raw bytes (`pack`: base64, with dtype and shape:
the bits that were computed, at a cost per chunk that does not depend on
number formatting; journals of older versions hold nested lists, which
`unpack` reads too). It is appended to by the training process before the
chunk is handed to the metric writer (harness.record.windows turns it into
the writer's entries); the writer records in `uploaded.json` the last
sequence number that reached the store.
What lies past it is uploaded by `harness sync` (harness.record.sync), which
also delivers the end-of-run calls (summary metrics, artifacts, tags,
statuses) that a dead server refused, kept in `pending.json`.

On resume, the journal gives the metrics before the checkpoint (for the
results) and tells which recomputed chunks were logged already.

No JAX here: the metric writer and `harness sync` import this module.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

JOURNAL_FILE = "journal.jsonl"
UPLOADED_FILE = "uploaded.json"
PENDING_FILE = "pending.json"


def write_json(path: Path, data: Any, indent: int | None = None) -> None:
    """Atomically: a reader sees the old or the new file, never half of one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, allow_nan=True, indent=indent) + "\n")
    os.replace(tmp, path)


def pack(values: Any) -> dict[str, Any]:
    """An array as JSON: its raw bytes (base64), dtype and shape."""
    array = np.ascontiguousarray(values)
    return {"dtype": array.dtype.str, "shape": list(array.shape), "b64": base64.b64encode(array.tobytes()).decode()}


def unpack(value: Any, dtype: str = "float32") -> np.ndarray:
    """A packed array (or, from an older journal, nested lists of `dtype`)."""
    if isinstance(value, dict):
        return np.frombuffer(base64.b64decode(value["b64"]), dtype=value["dtype"]).reshape(value["shape"]).copy()
    return np.asarray(value, dtype=dtype)


def rows(value: Any) -> int:
    """How many iterations a metric of an entry holds, packed or not."""
    return value["shape"][0] if isinstance(value, dict) else len(value)


def entry_arrays(entry: dict[str, Any]) -> dict[str, np.ndarray]:
    """An entry's metrics as arrays of the dtypes they were computed in."""
    dtypes = entry.get("dtypes", {})
    return {name: unpack(value, dtypes.get(name, "float32")) for name, value in entry["metrics"].items()}


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
        metrics: dict[str, Any],
        extra: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Add one chunk's metrics (arrays, `[iterations, seeds]`; and `extra`
        keys, e.g. its MLflow window); returns the entry (with its `seq`)."""
        entry = {
            "seq": len(self._entries) + 1,
            "kind": kind,
            "first": first,
            "steps": steps,
            "metrics": {name: pack(values) for name, values in metrics.items()},
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
            e["first"] + rows(next(iter(e["metrics"].values()))) - 1
            for e in self._scoped()
            if e["kind"] == "iterations"
        ]
        return max(ends, default=0)

    def chunks(self, through: int) -> list[tuple[int, dict[str, Any], dict[str, Any]]]:
        """(first iteration, per-iteration metrics `[K, seeds]`, evaluation
        after the chunk `[seeds]`) of each chunk that ended at or before
        iteration `through`, in order, as numpy arrays of the logged dtypes
        (so the values are the bits that were computed)."""
        entries = self._scoped()
        evaluations = {e["first"]: e for e in entries if e["kind"] == "evaluation"}
        out, seen = [], set()
        for e in entries:
            if e["kind"] != "iterations" or e["first"] in seen:
                continue
            last = e["first"] + rows(next(iter(e["metrics"].values()))) - 1
            if last <= through:
                seen.add(e["first"])
                after = evaluations.get(last)
                evaluation = {k: v[0] for k, v in entry_arrays(after).items()} if after is not None else {}
                out.append((e["first"], entry_arrays(e), evaluation))
        return sorted(out, key=lambda chunk: chunk[0])

    # ------------------------------------------------------------ uploads

    def uploaded(self) -> int:
        try:
            return int(json.loads((self.directory / UPLOADED_FILE).read_text())["seq"])
        except (OSError, ValueError, KeyError):
            return 0

    def pending(self) -> list[dict[str, Any]]:
        """The entries the store has not got yet (for harness sync)."""
        done = self.uploaded()
        return [e for e in self._entries if e["seq"] > done]

    def in_store(self) -> list[dict[str, Any]]:
        """The entries the store has got (a resumed run's open windows
        are taken up from them)."""
        done = self.uploaded()
        return [e for e in self._entries if e["seq"] <= done]


def mark_uploaded(directory: Path, seq: int) -> None:
    write_json(Path(directory) / UPLOADED_FILE, {"seq": seq})


# ------------------------------------------------- end-of-run calls deferred


def read_pending(directory: Path) -> dict[str, Any]:
    try:
        return json.loads((Path(directory) / PENDING_FILE).read_text())
    except (OSError, ValueError):
        return {}


def add_pending(directory: Path, kind: str, run_id: str, values: dict[str, Any]) -> None:
    """Keep an MLflow call the store refused: kind is metrics, artifacts
    (texts by name), files (paths by name), tags or status (values
    {"status": ...})."""
    pending = read_pending(directory)
    pending.setdefault(kind, {}).setdefault(run_id, {}).update(values)
    write_json(Path(directory) / PENDING_FILE, pending)
