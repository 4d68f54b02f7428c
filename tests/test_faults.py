"""Tracking store faults, against real stores: a real `mlflow server` on
127.0.0.1 that goes away in the middle of a run (and comes back for `harness
sync`), and several `harness run` processes writing to one store at once."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import TINY_SPEC, run_cli, train, write_spec
from mlflow.tracking import MlflowClient

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


@pytest.fixture(scope="module", autouse=True)
def _compiled():
    """The spec's programs compiled once here, into the session's persistent
    compilation cache, so that the `harness run` processes load them rather
    than each compile them at once on the same cores."""
    data = copy.deepcopy(FAULT_SPEC)
    data["budget"] = {"env_steps": data["logging"]["interval"] * STEPS}
    train(data)


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
                filter(None, [str(Path(cli.__file__).resolve().parent.parent), os.environ.get("PYTHONPATH")])
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


@pytest.mark.parametrize("store", ["sqlite", "server"])
def test_concurrent_runs_into_one_store_all_complete(tmp_path, store, server):
    """Three `harness run` processes at once, streaming metrics into one
    store: a SQLite file none of them finds (so all three create it), or a
    local server; the same experiment, created by whichever comes first."""
    if store == "server":
        uri = server.uri
        name = "concurrent_server"
    else:
        uri = f"sqlite:///{tmp_path / 'shared.db'}"
        name = "concurrent_sqlite"
    data = copy.deepcopy(FAULT_SPEC) | {"name": name}
    spec = write_spec(tmp_path, data)
    procs = [
        _harness(
            *("run", str(spec), "--tracking-uri", uri, "--live-metrics", "--no-progress"),
            *("--checkpoint-dir", str(tmp_path / "checkpoints")),
            cwd=tmp_path,
        )
        for _ in range(3)
    ]
    outputs = [proc.communicate(timeout=600) for proc in procs]
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        assert "locked" not in err and "Traceback" not in err, err
    _check_complete(MlflowClient(tracking_uri=uri), name, 80, STEPS, runs=3)


def test_server_going_away_mid_run_loses_nothing(tmp_path, server):
    # The session's tiny spec (compiled already): its chunks take long enough
    # for the server to go away while metrics are still on their way.
    data = copy.deepcopy(TINY_SPEC) | {"name": "server_goes_away"}
    iterations, steps = 400, 16 * 32
    data["budget"] = {"env_steps": iterations * steps}
    spec = write_spec(tmp_path, data)
    root = tmp_path / "checkpoints"
    proc = _harness(
        *("run", str(spec), "--tracking-uri", server.uri, "--live-metrics", "--no-progress"),
        *("--checkpoint-dir", str(root)),
        cwd=tmp_path,
    )
    try:
        # Once a chunk reached the server, it goes away.
        deadline = time.monotonic() + 240
        while (
            not list(root.glob("*/uploaded.json"))
            or json.loads(next(root.glob("*/uploaded.json")).read_text())["seq"] < 3
        ):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no metric reached the server"
            time.sleep(0.1)
        server.stop(crash=True)
        out, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
    err = " ".join(err.split())
    # It trained to the end, but the record is incomplete until synced.
    assert proc.returncode == cli.EXIT_INCOMPLETE == 3, err
    assert "Traceback" not in err
    (run_dir,) = [p.parent for p in root.glob("*/run.json")]
    run_id = run_dir.name
    assert "could not be reached" in err and f"harness sync {run_id}" in err
    journal = Journal(run_dir)
    assert journal.logged_through() == iterations, "training went on to the end"
    assert journal.pending(), "what the server did not get is left in the journal"
    assert json.loads((run_dir / "run.json").read_text())["status"] == "FINISHED"

    # The server comes back (same port, same store); harness sync uploads the rest.
    server.start()
    try:
        code, out, err = run_cli("sync", run_id, "--checkpoint-dir", str(root))
        assert code == 0, err
        assert f"run {run_id}:" in out and "uploaded" in out
        assert not journal.__class__(run_dir).pending() and not (run_dir / "pending.json").exists()
        client = MlflowClient(tracking_uri=server.uri)
        # 400 iterations, at most 320 points: a point per 2 (harness.record.windows).
        _check_complete(client, data["name"], iterations, steps, runs=1, window=2)
        # Values too: each point is the mean of its window of what the journal holds.
        info = json.loads((run_dir / "run.json").read_text())
        child = info["child_run_ids"]["1"]
        stored = {m.step: m.value for m in client.get_metric_history(child, "loss")}
        rows = np.concatenate([unpack(e["metrics"]["loss"]) for e in journal.entries if e["kind"] == "iterations"])
        for k in range(0, iterations, 2):
            assert stored[(k + 2) * steps] == pytest.approx(float(rows[k : k + 2, 1].astype(np.float64).mean()))
        # A second sync has nothing left to do.
        code, out, err = run_cli("sync", "--checkpoint-dir", str(root), "--tracking-uri", server.uri)
        assert code == 0 and "nothing to sync" in out, out + err
    finally:
        if server.proc is None:  # the session's server: left running
            server.start()
