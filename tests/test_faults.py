"""Tracking store faults, against real stores: a real `mlflow server` on
127.0.0.1 that goes away in the middle of a run (and comes back for `harness
sync`), and several `harness run` processes writing to one store at once.
The processes run in the background while the session does other tests."""

from __future__ import annotations

import copy
import functools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from mlflow.tracking import MlflowClient
from support import TINY_SPEC, MlflowServer, at_session_end, background_result, run_cli, write_spec

from harness import cli
from harness.record.journal import Journal, unpack

METRICS = ("loss", "policy_loss", "value_loss", "entropy", "grad_norm", "episode_return")
# Concurrent runs check that every point reaches the store, not learning:
# the tiny spec, made cheaper still (a small network, 32 env steps an iteration).
FAULT_SPEC = copy.deepcopy(TINY_SPEC) | {
    "budget": {"env_steps": 80 * 4 * 8},
    "hyperparameters": {"num_envs": 4, "num_steps": 8},
    "network": {"kind": "mlp", "hidden_sizes": [16]},
}
STEPS = 4 * 8  # env steps per iteration


def _harness(*argv: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "harness", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(Path(cli.__file__).resolve().parents[2]), os.environ.get("PYTHONPATH")])
            ),
        },
    )


def _check_complete(
    client: MlflowClient, experiment: str, iterations: int, steps: int, runs: int, window: int = 1
) -> None:
    """Every run FINISHED, every per-iteration metric whole (a point per
    `window` iterations), each step once."""
    found = client.search_runs([client.get_experiment_by_name(experiment).experiment_id], max_results=1000)
    parents = [r for r in found if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in found if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == runs and len(children) == 2 * runs
    assert {r.info.status for r in found} == {"FINISHED"}
    for parent in parents:
        assert "final_episode_return" in parent.data.metrics and "sps" in parent.data.metrics
        assert {a.path for a in client.list_artifacts(parent.info.run_id)} >= {"spec.yaml", "results.json"}
    for child in children:
        for name in METRICS:
            history = [m.step for m in client.get_metric_history(child.info.run_id, name)]
            ends = sorted({min(i, iterations) for i in range(window, iterations + window, window)})
            assert sorted(history) == [i * steps for i in ends], (child.info.run_id, name)


def _concurrent(tmp: Path, uri: str, name: str, processes: int) -> dict:
    """`processes` `harness run`s of FAULT_SPEC at once into the store `uri`."""
    spec = write_spec(tmp, copy.deepcopy(FAULT_SPEC) | {"name": name})
    procs = [
        _harness(
            *("run", str(spec), "--tracking-uri", uri, "--live-metrics", "--no-progress"),
            *("--checkpoint-dir", str(tmp / "checkpoints")),
            cwd=tmp,
        )
        for _ in range(processes)
    ]
    ended = [(proc.communicate(timeout=600)[1], proc.returncode) for proc in procs]
    return {"uri": uri, "name": name, "processes": processes, "ended": ended}


# The session's tiny spec: its chunks take long enough for the server to go
# away while metrics are still on their way.
AWAY_ITERATIONS, AWAY_STEPS = 400, 16 * 32


def _entries_in(root: Path, name: str) -> int:
    """The journal entries that `name` (the journal, or uploaded.json) of
    the one run directory under `root` says there are, 0 before it exists."""
    found = list(root.glob(f"*/{name}"))
    if not found:
        return 0
    if name == "uploaded.json":
        return json.loads(found[0].read_text())["seq"]
    return found[0].read_text().count("\n")


def _server_goes_away(tmp: Path, server: MlflowServer) -> dict[str, dict]:
    """Two runs into `server` that lose it in the middle of training (killed)
    and go on to their end; then the server comes back, nothing synced yet.
    With live metrics (`away`) the server goes once a few chunks reached it
    (the metric writer process loses it); without (`away_at_end`), once a
    few chunks were trained (the run writes its metrics itself when
    training ends). Both run at once: one crash, one restart."""
    runs = {}
    for key, live in (("away", True), ("away_at_end", False)):
        folder = tmp / key
        folder.mkdir()
        data = copy.deepcopy(TINY_SPEC) | {"name": "server_goes_away" + ("" if live else "_at_end")}
        data["budget"] = {"env_steps": AWAY_ITERATIONS * AWAY_STEPS}
        spec, root = write_spec(folder, data), folder / "checkpoints"
        proc = _harness(
            *("run", str(spec), "--tracking-uri", server.uri, "--no-progress", "--checkpoint-dir", str(root)),
            *(["--live-metrics"] if live else []),
            cwd=folder,
        )
        runs[key] = (data["name"], proc, root, "uploaded.json" if live else "journal.jsonl")
    out = {}
    try:
        deadline = time.monotonic() + 240
        while any(_entries_in(root, reached) < 3 for _, _, root, reached in runs.values()):
            for key, (_, proc, _, _) in runs.items():
                assert proc.poll() is None, (key, proc.communicate())
            assert time.monotonic() < deadline, "no metric reached the server, or no chunk was trained"
            time.sleep(0.1)
        server.stop(crash=True)
        for key, (name, proc, root, _) in runs.items():
            _, err = proc.communicate(timeout=300)
            (run_dir,) = [p.parent for p in root.glob("*/run.json")]
            journal = Journal(run_dir)
            out[key] = {
                "name": name,
                "code": proc.returncode,
                "err": " ".join(err.split()),
                "root": root,
                "run_dir": run_dir,
                # What the run left before anything is synced.
                "logged_through": journal.logged_through(),
                "pending": bool(journal.pending()),
                "status": json.loads((run_dir / "run.json").read_text())["status"],
            }
    finally:
        for _, proc, _, _ in runs.values():
            proc.kill()
    server.start()  # the same port and store
    return out


def run_faults(tmp_path_factory) -> dict:
    """The module's subprocess work, done in the background (conftest's
    BACKGROUND) beside the in-process tests: concurrent runs into a SQLite
    store and into a server of the module's own, then that server going
    away mid-run and coming back. Its tests judge what was left."""
    tmp = tmp_path_factory.mktemp("faults")
    for folder in ("server", "sqlite", "server-runs", "away"):
        (tmp / folder).mkdir()
    server = MlflowServer(tmp / "server").start()
    at_session_end(functools.partial(server.stop, crash=True))
    return {
        "sqlite": _concurrent(tmp / "sqlite", f"sqlite:///{tmp / 'sqlite' / 'shared.db'}", "concurrent_sqlite", 3),
        "server": _concurrent(tmp / "server-runs", server.uri, "concurrent_server", 2),
        **_server_goes_away(tmp / "away", server),
        "mlflow_server": server,
    }


BACKGROUND = {"fault_runs": run_faults}


@pytest.fixture(scope="module")
def fault_runs():
    return background_result("fault_runs")


@pytest.mark.parametrize("store", ["sqlite", "server"])
def test_concurrent_runs_into_one_store_all_complete(fault_runs, store):
    """`harness run` processes at once, streaming metrics into one store: a
    SQLite file none of them finds (so all three create it), or a local
    server (two clients; the server serialises what they send); the same
    experiment, created by whichever comes first."""
    found = fault_runs[store]
    for err, code in found["ended"]:
        assert code == 0, err
        assert "locked" not in err and "Traceback" not in err, err
    _check_complete(MlflowClient(tracking_uri=found["uri"]), found["name"], 80, STEPS, runs=found["processes"])


@pytest.mark.parametrize("away", ["away", "away_at_end"])
def test_server_going_away_mid_run_loses_nothing(fault_runs, away):
    """Metrics written while training (`--live-metrics`) by the metric
    writer process, or at training's end by the run itself (the default on
    a CPU): what the store did not get is journaled, and synced later."""
    away, server = fault_runs[away], fault_runs["mlflow_server"]
    err, root, run_dir = away["err"], away["root"], away["run_dir"]
    # It trained to the end, but the record is incomplete until synced.
    assert away["code"] == cli.EXIT_INCOMPLETE == 3, err
    assert "Traceback" not in err
    run_id = run_dir.name
    assert "could not be reached" in err and f"harness sync {run_id}" in err
    assert away["logged_through"] == AWAY_ITERATIONS, "training went on to the end"
    assert away["pending"], "what the server did not get is left in the journal"
    assert away["status"] == "FINISHED"

    # The server came back (same port, same store); harness sync uploads the rest.
    journal = Journal(run_dir)
    code, out, err = run_cli("sync", run_id, "--checkpoint-dir", str(root))
    assert code == 0, err
    assert f"run {run_id}:" in out and "uploaded" in out
    assert not Journal(run_dir).pending() and not (run_dir / "pending.json").exists()
    client = MlflowClient(tracking_uri=server.uri)
    # 400 iterations, at most 320 points: a point per 2 (harness.record.windows).
    _check_complete(client, away["name"], AWAY_ITERATIONS, AWAY_STEPS, runs=1, window=2)
    # Values too: each point is the mean of its window of what the journal holds.
    info = json.loads((run_dir / "run.json").read_text())
    child = info["child_run_ids"]["1"]
    stored = {m.step: m.value for m in client.get_metric_history(child, "loss")}
    rows = np.concatenate([unpack(e["metrics"]["loss"]) for e in journal.entries if e["kind"] == "iterations"])
    for k in range(0, AWAY_ITERATIONS, 2):
        assert stored[(k + 2) * AWAY_STEPS] == pytest.approx(float(rows[k : k + 2, 1].astype(np.float64).mean()))
    # A second sync has nothing left to do.
    code, out, err = run_cli("sync", "--checkpoint-dir", str(root), "--tracking-uri", server.uri)
    assert code == 0 and "nothing to sync" in out, out + err
