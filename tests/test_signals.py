"""A stop signal at any moment of a command ends it with 128 + the signal
(130 for Ctrl-C, 143 for SIGTERM) and says what it left: while starting,
compiling or training (runs KILLED), during the last chunk or while the
records are written (the work finishes, runs FINISHED, the exit is still
130), between two programs of a command (the next does not start).

The signal is raised in this process at the moment named, through the
command's own hooks (a chunk's sink, the programs' compile, the records'
writing), so that the moment is exact rather than timed."""

from __future__ import annotations

import copy
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from support import TINY_SPEC, new_store, run_cli, write_spec

from harness.cli.commands import run as run_command
from harness.cli.commands import sweep as sweep_command
from harness.record import tracking
from harness.run import runner, scaling
from harness.sessions.training import TrainingSession

ROOT = Path(__file__).resolve().parent.parent
# The tiny spec: 80 iterations in chunks of 20; while chunk 3 is handed to
# the sink, chunk 4, the last, runs.
LAST_CHUNK_SINK = 60


@pytest.fixture(autouse=True)
def _main_thread():
    # A signal raised here is handled by the command only in the main thread.
    assert threading.current_thread() is threading.main_thread()


def _statuses(uri: str, name: str) -> set[str]:
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(name)
    return {run.info.status for run in client.search_runs([experiment.experiment_id])}


def _signal_at_chunk(monkeypatch, last_iteration: int, signum: int = signal.SIGINT) -> None:
    """Raise `signum` when the chunk ending at `last_iteration` reaches the sink."""
    made = run_command.run_options

    def with_hook(args, **extra):
        def on_chunk(chunk):
            if chunk.last_iteration == last_iteration:
                signal.raise_signal(signum)

        return made(args, on_chunk=on_chunk, **extra)

    for command in (run_command, sweep_command):  # the options both commands train with
        monkeypatch.setattr(command, "run_options", with_hook)


def _signal_before(monkeypatch, owner, name: str, signum: int = signal.SIGINT) -> None:
    real = getattr(owner, name)

    def signalled(*args, **kwargs):
        signal.raise_signal(signum)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, signalled)


def _run(tmp_path: Path, *extra: str) -> tuple[int, str, str]:
    path = write_spec(tmp_path, copy.deepcopy(TINY_SPEC))
    uri = new_store(tmp_path)
    code, _, err = run_cli("run", str(path), "--tracking-uri", uri, "--no-progress", *extra)
    return code, err, uri


def test_a_signal_while_compiling_stops_before_training(tmp_path, monkeypatch):
    _signal_before(monkeypatch, runner, "compile_programs")
    code, err, uri = _run(tmp_path)
    assert code == 130, err
    assert "interrupted (SIGINT) before its work finished" in err
    assert _statuses(uri, "tiny_reinforce") == {"KILLED"}


def test_a_signal_while_the_runs_are_created_ends_every_one(tmp_path, monkeypatch):
    """The store has made a seed's run but the harness has not yet kept its
    id: the creation finishes first, then the command stops with each run
    KILLED, none left RUNNING."""
    made = []
    real = tracking.Tracking._create

    def signal_after_the_first_seed_run(self, name, tags):
        made.append(real(self, name, tags))
        if len(made) == 2:  # the parent's, then seed 0's
            signal.raise_signal(signal.SIGINT)
        return made[-1]

    monkeypatch.setattr(tracking.Tracking, "_create", signal_after_the_first_seed_run)
    code, err, uri = _run(tmp_path)
    assert code == 130, err
    assert len(made) == 1 + len(TINY_SPEC["seeds"])
    assert _statuses(uri, "tiny_reinforce") == {"KILLED"}


def test_a_signal_during_a_chunk_stops_after_it(tmp_path, monkeypatch):
    _signal_at_chunk(monkeypatch, 20, signal.SIGTERM)
    code, err, uri = _run(tmp_path)
    assert code == 143, err
    assert "before its work finished" in err
    assert "continue with: harness run SPEC --resume" in err
    assert _statuses(uri, "tiny_reinforce") == {"KILLED"}


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_a_signal_during_the_last_chunk_is_not_swallowed(tmp_path, monkeypatch, signum):
    _signal_at_chunk(monkeypatch, LAST_CHUNK_SINK, signum)
    code, err, uri = _run(tmp_path)
    assert code == 128 + signum, err
    name = signal.Signals(signum).name
    assert f"interrupted ({name}) after its work had finished: its runs are complete and recorded" in err
    assert _statuses(uri, "tiny_reinforce") == {"FINISHED"}


def test_a_signal_while_the_records_are_written_lets_them_finish(tmp_path, monkeypatch):
    _signal_before(monkeypatch, TrainingSession, "log_results")
    results = tmp_path / "results.json"
    code, err, uri = _run(tmp_path, "--results-out", str(results))
    assert code == 130, err
    assert "after its work had finished" in err
    assert _statuses(uri, "tiny_reinforce") == {"FINISHED"}
    assert results.exists(), "the command's own writing finishes too"


def test_a_sweep_signalled_during_its_last_chunk_exits_130(tmp_path, monkeypatch):
    _signal_at_chunk(monkeypatch, LAST_CHUNK_SINK)
    path = write_spec(tmp_path, copy.deepcopy(TINY_SPEC))
    uri = new_store(tmp_path)
    code, _, err = run_cli(
        "sweep", str(path), "--set", "optimizer.learning_rate=0.001,0.003", "--tracking-uri", uri, "--no-progress"
    )
    assert code == 130, err
    assert "after its work had finished" in err
    assert _statuses(uri, "tiny_reinforce") == {"FINISHED"}


def _scale(tmp_path: Path) -> tuple[int, str, str]:
    path = write_spec(tmp_path, copy.deepcopy(TINY_SPEC))
    uri = new_store(tmp_path)
    code, _, err = run_cli(
        *("scale", str(path), "--sizes", "4,8", "--chunk-iterations", "2", "--timed-chunks", "1"),
        *("--no-ceiling", "--tracking-uri", uri, "--out", str(tmp_path / "scale.png")),
    )
    return code, err, uri


def test_a_scale_signalled_between_sizes_measures_no_more(tmp_path, monkeypatch):
    measured = []
    real = scaling.measure

    def first_then_signal(*args, **kwargs):
        point = real(*args, **kwargs)
        measured.append(point)
        if len(measured) == 1:
            signal.raise_signal(signal.SIGINT)
        return point

    monkeypatch.setattr(scaling, "measure", first_then_signal)
    code, err, uri = _scale(tmp_path)
    assert code == 130, err
    assert len(measured) == 1, "the next size does not start"
    assert "before its work finished" in err
    assert _statuses(uri, "tiny_reinforce") >= {"KILLED"}


# The `harness` command's entry point, with SIGINT raised at an exact moment
# of its start-up: as the harness's own modules begin to be imported, after
# the entry point's handler is in place.
SIGNAL_WHILE_IMPORTING = """
import importlib.abc, signal, sys

class SignalOnImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "harness.cli.dispatch":
            sys.meta_path.remove(self)
            signal.raise_signal(signal.SIGINT)
        return None

sys.meta_path.insert(0, SignalOnImport())
sys.argv = ["harness", *sys.argv[1:]]
from harness.cli.launch import console
console()
"""


def test_a_signal_while_starting_ends_with_one_line(tmp_path):
    """Ctrl-C while the harness and JAX are imported: exit 130, no traceback."""
    path = write_spec(tmp_path, copy.deepcopy(TINY_SPEC))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [sys.executable, "-c", SIGNAL_WHILE_IMPORTING, "validate", str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 130, (proc.stdout, proc.stderr)
    assert proc.stderr == "interrupted (SIGINT) while starting: nothing was run\n", proc.stderr
