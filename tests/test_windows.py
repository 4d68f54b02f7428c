"""At most N points per curve in MLflow (harness.record.windows): windows of
iterations, each logged as its mean at the step of its last iteration, with
its min and max beside it; every iteration stays in the journal."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support import new_store

from harness.record import iterations, journal, tracking, windows
from harness.record.journal import Journal
from harness.types import ChunkMetrics


def test_window_for():
    assert windows.window_for(976, 320) == 4
    assert windows.window_for(320, 320) == 1
    assert windows.window_for(97_600, 320) == 305
    assert windows.window_for(97_600, 0) == 1 and windows.window_for(10, None) == 1


def _entry(seq, first, rows, window=4, last=10, **extra):
    values = np.arange(first, first + rows, dtype=float)[:, None] * [1.0, 10.0]  # 2 seed columns
    return {
        "seq": seq,
        "kind": "iterations",
        "first": first,
        "steps": 100,
        "metrics": {"loss": values.tolist()},
        "window": window,
        "last": last,
        **extra,
    }


def test_windows_cover_every_iteration_once_and_release_seq_when_nothing_waits():
    w = windows.Windows()
    # Iterations 1-3: window 1 (1-4) still open, nothing released.
    assert w.add(_entry(1, 1, 3)) == []
    # An evaluation after it passes through, without a seq: rows still wait.
    (evaluation,) = w.add({"seq": 2, "kind": "evaluation", "first": 3, "steps": 100, "metrics": {"r": [[1, 2]]}})
    assert "seq" not in evaluation and evaluation["metrics"] == {"r": [[1, 2]]}
    # Iterations 4-8 close windows 1-4 and 5-8: released with seq 3.
    (out,) = w.add(_entry(3, 4, 5))
    assert out["at"] == [400, 800] and out["seq"] == 3
    assert out["metrics"]["loss"] == [[2.5, 25.0], [6.5, 65.0]]
    assert out["metrics"]["window_min/loss"] == [[1.0, 10.0], [5.0, 50.0]]
    assert out["metrics"]["window_max/loss"] == [[4.0, 40.0], [8.0, 80.0]]
    # The run's last iteration (10) closes a partial window.
    (out,) = w.add(_entry(4, 9, 2))
    assert out["at"] == [1000] and out["metrics"]["loss"] == [[9.5, 95.0]] and out["seq"] == 4
    assert w.flush() == []


def test_a_stopped_run_flushes_its_partial_window_and_a_resumed_one_keeps_the_grid():
    w = windows.Windows()
    (out,) = w.add(_entry(1, 1, 6, last=12))
    assert out["at"] == [400] and "seq" not in out  # iterations 5-6 wait
    (partial,) = w.flush()  # the invocation ends (e.g. Ctrl-C) after iteration 6
    assert partial["at"] == [600] and partial["metrics"]["loss"] == [[5.5, 55.0]] and partial["seq"] == 1
    resumed = windows.Windows()  # the next invocation goes on from iteration 7
    (out,) = resumed.add(_entry(2, 7, 6, last=12))
    assert out["at"] == [800, 1200] and out["metrics"]["loss"] == [[7.5, 75.0], [10.5, 105.0]]


def test_entries_without_a_window_pass_through_as_lists():
    w = windows.Windows()
    entry = _entry(5, 1, 3)
    del entry["window"], entry["last"]
    packed = {**entry, "metrics": {"loss": journal.pack(np.asarray(entry["metrics"]["loss"], np.float32))}}
    for given in (entry, packed):
        (out,) = w.add(given)
        assert out == entry  # lists, seq released


def test_nan_rows_are_left_out_of_a_window():
    w = windows.Windows()
    entry = _entry(1, 1, 4)
    entry["metrics"]["loss"][0] = [float("nan"), float("nan")]
    (out,) = w.add(entry)
    assert out["metrics"]["loss"] == [[3.0, 30.0]]


def test_a_long_run_logs_at_most_the_points_asked_for(tmp_path):
    """Through a real store and the metric writer: 50 iterations in chunks
    of 7, at most 8 points per curve, every iteration in the journal."""
    run_journal = Journal(tmp_path / "run")
    run_journal.directory.mkdir()
    tracker = tracking.Tracking(new_store(tmp_path), "windows")
    tracker.start("windows-test", {}, {}, (0, 1))
    tracker.attach(run_journal)
    window = windows.window_for(50, 8)
    values = np.arange(1, 51, dtype=np.float32)[:, None] * np.array([1, -1], dtype=np.float32)
    with tracker:
        for first in range(1, 51, 7):
            rows = values[first - 1 : min(first + 6, 50)]
            tracker.log_chunk(ChunkMetrics(first, {"loss": rows}), 10, window, 50)
    client = tracker.client
    run = tracker.child_ids[0]
    history = sorted(client.get_metric_history(run, "loss"), key=lambda m: m.step)
    assert window == 7 and len(history) == 8
    assert [m.step for m in history] == [70, 140, 210, 280, 350, 420, 490, 500]
    assert [m.value for m in history] == pytest.approx([4, 11, 18, 25, 32, 39, 46, 50])
    low = sorted(client.get_metric_history(run, "window_min/loss"), key=lambda m: m.step)
    assert [m.value for m in low][:2] == [1, 8]
    high = sorted(client.get_metric_history(tracker.child_ids[1], "window_max/loss"), key=lambda m: m.step)
    assert [m.value for m in high][:2] == [-1, -8]
    logged = np.concatenate([journal.unpack(e["metrics"]["loss"]) for e in run_journal.entries])
    assert (logged == values).all(), "every iteration is journaled, bit for bit"
    assert json.loads((run_journal.directory / "uploaded.json").read_text())["seq"] == len(run_journal.entries)


def test_the_iterations_file_keeps_every_iteration_and_evaluation(tmp_path):
    metrics = {"loss": np.arange(12, dtype=np.float32).reshape(6, 2) / 3}
    evaluation = {"eval_return": np.array([[1.5, 2.5], [3.5, 4.5]], dtype=np.float32)}
    path = iterations.write(tmp_path / iterations.FILE, metrics, [7, 9], 100, evaluation, (3, 6))
    table = iterations.read(path)
    assert table["iteration"].tolist() == [1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6]
    assert table["seed"].tolist() == [7, 9] * 6 and table["env_steps"][-1] == 600
    assert table["loss"].dtype == np.float32 and (table["loss"] == metrics["loss"].reshape(-1)).all()
    assert np.isnan(table["eval_return"][:4]).all()
    assert table["eval_return"][[4, 5, 10, 11]].tolist() == [1.5, 2.5, 3.5, 4.5]


def test_entries_that_arrive_together_are_written_as_few():
    """The metric writer joins what is waiting (each MLflow call has a cost
    of its own): entries of the same runs and metrics become one, steps
    kept, and the last seq rides on the last entry."""
    from harness.record.windows import coalesce

    entries = [
        {"seq": 1, "first": 1, "steps": 10, "metrics": {"loss": [[1, 2], [3, 4]]}},
        {"seq": 2, "first": 2, "steps": 10, "metrics": {"r": [[5, 6]]}},
        {"seq": 3, "at": [40], "metrics": {"loss": [[7, 8]]}},
    ]
    loss, evaluation = coalesce(entries)
    assert loss == {"at": [10, 20, 40], "metrics": {"loss": [[1, 2], [3, 4], [7, 8]]}}
    assert evaluation == {"at": [20], "metrics": {"r": [[5, 6]]}, "seq": 3}
