"""At most a fixed number of points per curve in MLflow, whatever the run's
length: consecutive iterations are brought together in windows, each logged
as one point (the window's mean, at the step of its last iteration) with the
window's extremes beside it (`window_min/<metric>`, `window_max/<metric>`).

Writing a value to MLflow's store costs about 60 us of CPU here, so a run
that logged every iteration of every seed would spend time on writing in
proportion to its length. MLflow's UI draws at most 320 points of a series
anyway (DEFAULT_POINTS); every iteration stays in the run directory's
journal, and the run's results are computed from the arrays themselves.

The window is fixed for the whole run (`window_for`): iteration i belongs to
window ceil(i / w), so a run resumed mid-window continues the same grid.
Journal entries carry `window` and `last` (the run's last iteration) when
w > 1; `Windows` turns such entries into entries of the metric writer's
protocol with explicit steps (`at`). An entry's `seq` (what reached the
store, for harness sync) is passed on only once none of its rows wait in an
open window. A partial window is logged by `flush` (at the end of every
invocation, a run that was stopped included), at the step of its last row;
a resumed run takes its rows up again (`resume`), so the window's point is
the same as an uninterrupted run's, and the partial one stays as one extra
point at the step where the run stopped.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from harness.record.journal import entry_arrays, rows

DEFAULT_POINTS = 320
MIN_PREFIX, MAX_PREFIX = "window_min/", "window_max/"


def window_for(iterations: int, points: int | None) -> int:
    """Iterations per logged point for a run of `iterations` shown in at
    most `points` points (None or 0: every iteration)."""
    if not points or iterations <= points:
        return 1
    return math.ceil(iterations / points)


class Windows:
    """Journal entries in, metric-writer entries (nested lists) out (see the
    module). Metrics may come packed (harness.record.journal), as arrays or
    as nested lists."""

    def __init__(self) -> None:
        # Per scope (a sweep's runs, or the seeds' columns): the rows of the
        # open window, by metric name, the step of its last row, and the
        # entry they came from.
        self._open: dict[tuple, dict[str, Any]] = {}
        self._seq: int | None = None

    def add(self, entry: dict[str, Any]) -> list[dict[str, Any]]:
        self._seq = entry.get("seq", self._seq)
        metrics = entry_arrays(entry)
        if entry.get("kind", "iterations") == "iterations" and entry.get("window", 1) > 1:
            out = self._rows(entry, metrics)
        else:
            kept = {k: v for k, v in entry.items() if k not in ("seq", "dtypes", "metrics")}
            out = [{**kept, "metrics": {name: values.tolist() for name, values in metrics.items()}}]
        return self._release(out)

    def resume(self, entries: list[dict[str, Any]]) -> None:
        """Take up the windows a resumed run left open: `entries` are its
        journal's, in order, all of them in the store already; the rows of
        the windows that none of them closed are held again (nothing is
        logged), so that the first point after the resume is the mean of
        all its window's rows, as in a run that was never stopped."""
        for entry in still_open(entries):
            self._rows(entry, entry_arrays(entry))

    def flush(self) -> list[dict[str, Any]]:
        """The open windows, partial, as entries."""
        out = [self._close(scope) for scope in list(self._open)]
        return self._release(coalesce(out))

    def _release(self, out: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if out and not self._open and self._seq is not None:
            out[-1]["seq"] = self._seq  # every entry so far reaches the store with this one
        return out

    def _rows(self, entry: dict[str, Any], metrics: dict[str, Any]) -> list[dict[str, Any]]:
        scope = tuple(entry.get("runs", ()))
        window, last, first, steps = entry["window"], entry["last"], entry["first"], entry["steps"]
        count = len(next(iter(metrics.values())))
        points, start = [], 0
        for k in range(count):
            closes = (first + k) % window == 0 or first + k >= last
            if closes or k == count - 1:  # rows start..k go into the open window
                held = self._open.setdefault(scope, {"rows": {name: [] for name in metrics}, "entry": entry})
                for name, values in metrics.items():
                    held["rows"][name].append(values[start : k + 1])
                held["at"] = (first + k) * steps
                start = k + 1
            if closes:
                points.append(self._close(scope))
        return coalesce(points)

    def _close(self, scope: tuple) -> dict[str, Any]:
        held = self._open.pop(scope)
        metrics: dict[str, list] = {}
        for name, parts in held["rows"].items():
            mean, low, high = _summary(parts)
            metrics[name], metrics[MIN_PREFIX + name], metrics[MAX_PREFIX + name] = [mean], [low], [high]
        point = {"at": [held["at"]], "metrics": metrics}
        if "runs" in held["entry"]:
            point["runs"] = held["entry"]["runs"]
        return point


def still_open(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Of journal `entries` (in order), the windowed iteration entries after
    the last one of their scope that ended on a window's last row: those
    whose rows may sit in a window that is still open."""
    out, closed = [], set()
    for entry in reversed(entries):
        if entry.get("kind", "iterations") != "iterations" or entry.get("window", 1) <= 1:
            continue
        scope = tuple(entry.get("runs", ()))
        if scope in closed:
            continue
        end = entry["first"] + rows(next(iter(entry["metrics"].values()))) - 1
        if end % entry["window"] == 0 or end >= entry["last"]:
            closed.add(scope)
        else:
            out.append(entry)
    return out[::-1]


def _summary(parts: list[np.ndarray]) -> tuple[list[float], list[float], list[float]]:
    """Per column: the mean, min and max over the rows of `parts`, NaN
    where a column has only NaN."""
    values = np.concatenate(parts, axis=0).astype(np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return (
            np.nanmean(values, axis=0).tolist(),
            np.nanmin(values, axis=0).tolist(),
            np.nanmax(values, axis=0).tolist(),
        )


def steps_of(entry: dict[str, Any]) -> list[int]:
    """The step of each row of a writer entry: its window's (`at`), else
    iteration i's, i * steps."""
    rows = len(next(iter(entry["metrics"].values()), []))
    return entry.get("at") or [(entry["first"] + k) * entry["steps"] for k in range(rows)]


def coalesce(entries: list[dict]) -> list[dict]:
    """Entries that arrived together as few: those of the same runs and
    metric names joined into one (each MLflow call costs milliseconds of
    its own, whatever it holds). Order and steps are kept; the batch's last
    `seq` goes with its last entry, so it is marked only when all are in."""
    groups: dict[tuple, dict] = {}
    seq = None
    for entry in entries:
        seq = entry.get("seq", seq)
        at = steps_of(entry)
        key = (tuple(entry.get("runs", ())), tuple(entry["metrics"]))
        if key not in groups:
            groups[key] = {"at": [], "metrics": {name: [] for name in entry["metrics"]}}
            if "runs" in entry:
                groups[key]["runs"] = entry["runs"]
        groups[key]["at"].extend(at)
        for name, values in entry["metrics"].items():
            groups[key]["metrics"][name].extend(values)
    out = list(groups.values())
    if out and seq is not None:
        out[-1]["seq"] = seq
    return out
