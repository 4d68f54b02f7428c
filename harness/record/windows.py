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
invocation, a run that was stopped included), at the step of its last row.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

DEFAULT_POINTS = 320
MIN_PREFIX, MAX_PREFIX = "window_min/", "window_max/"


def window_for(iterations: int, points: int | None) -> int:
    """Iterations per logged point for a run of `iterations` shown in at
    most `points` points (None or 0: every iteration)."""
    if not points or iterations <= points:
        return 1
    return math.ceil(iterations / points)


class Windows:
    """Journal entries in, metric-writer entries out (see the module)."""

    def __init__(self) -> None:
        # Per scope (a sweep's runs, or the seeds' columns): the rows of the
        # open window, by metric name, and each row's iteration and steps.
        self._open: dict[tuple, dict[str, Any]] = {}
        self._seq: int | None = None

    def add(self, entry: dict[str, Any]) -> list[dict[str, Any]]:
        self._seq = entry.get("seq", self._seq)
        if entry.get("kind", "iterations") == "iterations" and entry.get("window", 1) > 1:
            out = self._rows(entry)
        else:
            out = [{k: v for k, v in entry.items() if k != "seq"}]
        return self._release(out)

    def flush(self) -> list[dict[str, Any]]:
        """The open windows, partial, as entries."""
        out = [self._close(scope) for scope in list(self._open)]
        return self._release([e for e in out if e is not None])

    def _release(self, out: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if out and not self._open and self._seq is not None:
            out[-1]["seq"] = self._seq  # every entry so far reaches the store with this one
        return out

    def _rows(self, entry: dict[str, Any]) -> list[dict[str, Any]]:
        scope = tuple(entry.get("runs", ()))
        window, last, first, steps = entry["window"], entry["last"], entry["first"], entry["steps"]
        names = list(entry["metrics"])
        points: list[dict[str, Any]] = []
        for k in range(len(entry["metrics"][names[0]])):
            held = self._open.setdefault(scope, {"rows": {n: [] for n in names}, "at": 0, "entry": entry})
            for name in names:
                held["rows"][name].append(entry["metrics"][name][k])
            held["at"] = (first + k) * steps
            if (first + k) % window == 0 or first + k >= last:
                points.append(self._close(scope))
        return _merged(points)

    def _close(self, scope: tuple) -> dict[str, Any] | None:
        held = self._open.pop(scope, None)
        if held is None or not held["rows"]:
            return None
        metrics: dict[str, list] = {}
        for name, rows in held["rows"].items():
            mean, low, high = _summary(rows)
            metrics[name] = [mean]
            metrics[MIN_PREFIX + name] = [low]
            metrics[MAX_PREFIX + name] = [high]
        source = held["entry"]
        point = {"kind": "iterations", "at": [held["at"]], "metrics": metrics}
        if "runs" in source:
            point["runs"] = source["runs"]
        return point


def _summary(rows: list[list[float]]) -> tuple[list[float], list[float], list[float]]:
    """Per column: the mean, min and max over `rows`, NaN where a column has
    only NaN."""
    import numpy as np

    values = np.asarray(rows, dtype=np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return (
            np.nanmean(values, axis=0).tolist(),
            np.nanmin(values, axis=0).tolist(),
            np.nanmax(values, axis=0).tolist(),
        )


def _merged(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive points of one entry as one entry (one writer job)."""
    if not points:
        return []
    merged = {**points[0], "at": [], "metrics": {name: [] for name in points[0]["metrics"]}}
    for point in points:
        merged["at"].extend(point["at"])
        for name, values in point["metrics"].items():
            merged["metrics"][name].extend(values)
    return [merged]
