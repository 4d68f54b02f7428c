"""MLflow: what a run writes can be read back with MlflowClient, and runs end
FINISHED, FAILED or KILLED, never RUNNING."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from mlflow.tracking import MlflowClient
from support import new_store, write_spec

from harness import cli
from harness import experiment_spec as S
from harness.record import iterations, store, tracking
from harness.run import provenance
from harness.run.runner import ChunkMetrics


@pytest.fixture(scope="module")
def logged_run(tmp_path_factory):
    """The tiny spec run once through `harness run` into a fresh SQLite store."""
    from support import TINY_SPEC

    tmp = tmp_path_factory.mktemp("tracked")
    path = write_spec(tmp, TINY_SPEC)
    uri = new_store(tmp)
    out = tmp / "results.json"
    code = cli.main(["run", str(path), "--tracking-uri", uri, "--no-progress", "--results-out", str(out)])
    assert code == 0
    return S.load(path), MlflowClient(tracking_uri=uri), json.loads(out.read_text()), path, uri


def _runs(client, spec):
    experiment = client.get_experiment_by_name(spec.experiment_name)
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    return parents, children


def test_parent_run_per_invocation_and_child_run_per_seed(logged_run):
    spec, client, *_ = logged_run
    parents, children = _runs(client, spec)
    assert len(parents) == 1 and len(children) == len(spec.seeds)
    parent = parents[0]
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parent.info.run_id}
    assert sorted(int(c.data.tags["seed"]) for c in children) == list(spec.seeds)
    assert {r.info.status for r in parents + children} == {"FINISHED"}


def test_params_are_the_flattened_resolved_spec(logged_run):
    spec, client, *_ = logged_run
    parents, children = _runs(client, spec)
    expected = S.flatten(S.canonical(spec))
    assert {k: v for k, v in parents[0].data.params.items()} == expected
    child = children[0]
    assert child.data.params["seed"] == child.data.tags["seed"]
    assert child.data.params["hyperparameters.num_envs"] == "16"


def test_tags_record_hash_git_versions_and_devices(logged_run):
    spec, client, *_ = logged_run
    parents, children = _runs(client, spec)
    for run in parents + children:
        tags = run.data.tags
        assert tags["spec_hash"] == S.spec_hash(spec)
        assert tags["git.commit"] == provenance.git_state()["commit"]
        assert tags["git.dirty"] in ("true", "false", "unknown")
        for package in ("python", "jax", "jaxlib", "flax", "optax", "pgx", "jumanji", "gymnax", "mctx", "mlflow"):
            assert tags[f"version.{package}"], package
        assert tags["device.platform"] == "cpu"
        assert int(tags["device.device_count"]) >= 1
        assert "device.xla_flags" in tags and tags["device.prng_impl"]
        assert tags["device.jax_threefry_partitionable"] in ("true", "false")
        assert tags["env.library_version"] and tags["env.version"] == "v1"


def test_metrics_are_curves_over_env_steps(logged_run):
    spec, client, record, *_ = logged_run
    _, children = _runs(client, spec)
    steps_per_iteration = 16 * 32
    for child in children:
        for name in ("loss", "policy_loss", "value_loss", "entropy", "grad_norm", "episode_return"):
            history = client.get_metric_history(child.info.run_id, name)
            assert [m.step for m in sorted(history, key=lambda m: m.step)] == [
                i * steps_per_iteration for i in range(1, 81)
            ], name
        seed = child.data.tags["seed"]
        final = record["per_seed_final"][seed]["episode_return"]
        assert child.data.metrics["final_episode_return"] == pytest.approx(final)
    parent = _runs(client, spec)[0][0]
    assert parent.data.metrics["sps"] > 0 and parent.data.metrics["compile_seconds"] > 0


def test_artifacts_hold_the_resolved_spec_and_results(logged_run, tmp_path):
    spec, client, record, *_ = logged_run
    parent = _runs(client, spec)[0][0]
    names = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"spec.yaml", "results.json"} <= names
    spec_file = client.download_artifacts(parent.info.run_id, "spec.yaml", str(tmp_path))
    assert S.spec_hash(S.load(spec_file)) == S.spec_hash(spec)
    results_file = client.download_artifacts(parent.info.run_id, "results.json", str(tmp_path))
    logged = json.loads(Path(results_file).read_text())
    assert logged["spec_hash"] == S.spec_hash(spec)
    assert logged["final"] == record["final"]
    assert set(logged["per_seed_final"]) == {str(s) for s in spec.seeds}
    assert len(logged["curves"]["env_steps"]) == 20
    # Every iteration of every seed, in the dtypes computed: the record's
    # curve points are rows of it.
    table = iterations.read(Path(client.download_artifacts(parent.info.run_id, iterations.FILE, str(tmp_path))))
    seeds = len(spec.seeds)
    assert len(table["iteration"]) == logged["iterations"] * seeds
    assert table["episode_return"].dtype == np.float32
    for k, steps in enumerate(logged["curves"]["env_steps"]):
        rows = np.flatnonzero(table["env_steps"] == steps)
        assert list(table["seed"][rows]) == list(spec.seeds)
        point = [logged["curves"]["metrics"]["loss"][str(s)][k] for s in spec.seeds]
        assert table["loss"][rows].tolist() == pytest.approx(point, rel=1e-6)


def test_publish_writes_the_reference_from_the_finished_run(logged_run, tmp_path, capsys):
    spec, client, record, path, uri = logged_run
    out = tmp_path / "reference.json"
    code = cli.main(["publish", str(path), "--tracking-uri", uri, "--out", str(out), "--random-baseline"])
    assert code == 0, capsys.readouterr().err
    reference = json.loads(out.read_text())
    parent = _runs(client, spec)[0][0]
    assert reference["mlflow_run_id"] == parent.info.run_id
    assert reference["spec_hash"] == S.spec_hash(spec)
    assert reference["final"] == record["final"]
    # A random CartPole policy lasts about 22 steps.
    assert 15 < reference["baselines"]["random_policy"]["mean_return"] < 30


def test_publish_without_a_finished_run_is_refused(tmp_path, capsys, tiny_spec_data):
    tiny_spec_data["name"] = "never_run"
    path = write_spec(tmp_path, tiny_spec_data)
    code = cli.main(["publish", str(path), "--tracking-uri", new_store(tmp_path, "empty.db")])
    err = capsys.readouterr().err
    assert code == 2 and "no finished run" in err and "Traceback" not in err


def _tracked(tmp_path, seeds=(0, 1)):
    tracker = tracking.Tracking(new_store(tmp_path), "statuses")
    tracker.start("status-test", {"a": "1"}, {"spec_hash": "x"}, seeds)
    return tracker


@pytest.mark.parametrize(
    "raised,status", [(RuntimeError("boom"), "FAILED"), (KeyboardInterrupt(), "KILLED")], ids=["crash", "ctrl-c"]
)
def test_runs_end_failed_or_killed_with_the_error(tmp_path, raised, status):
    tracker = _tracked(tmp_path)
    with pytest.raises(type(raised)), tracker:
        tracker.log_chunk(ChunkMetrics(1, {"loss": np.ones((3, 2))}), 10)
        raise raised
    client = tracker.client
    runs = client.search_runs([tracker.experiment_id])
    assert len(runs) == 3 and {r.info.status for r in runs} == {status}
    assert all(r.data.tags["error"] for r in runs)
    child = next(r for r in runs if r.data.tags.get("seed") == "0")
    assert [m.step for m in client.get_metric_history(child.info.run_id, "loss")] == [10, 20, 30]


def test_unusable_tracking_store_is_reported_before_any_compile(tmp_path, capsys, tiny_spec_data):
    path = write_spec(tmp_path, tiny_spec_data)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    code = cli.main(["run", str(path), "--tracking-uri", f"sqlite:///{blocker}/x/mlflow.db", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "cannot use the MLflow tracking store" in err and "Traceback" not in err


def test_an_unknown_parent_run_is_reported_before_any_compile(tmp_path, capsys, tiny_spec_data):
    path = write_spec(tmp_path, tiny_spec_data)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    code = cli.main(["run", str(path), "--tracking-uri", uri, "--no-progress", "--parent-run", "0123abcd"])
    err = capsys.readouterr().err
    assert code == 2 and "--parent-run 0123abcd: no such run in" in err and "Traceback" not in err, err
    client = MlflowClient(tracking_uri=uri)
    assert client.get_experiment_by_name(tiny_spec_data["name"]) is None  # nothing half-written


def test_mlflow_telemetry_is_off_unless_the_user_turns_it_on():
    """MLflow imported after the harness has set it up starts no telemetry
    thread (one that gives up deletes an environment variable under the
    main thread's feet); MLFLOW_DISABLE_TELEMETRY=false stays the user's
    (whether MLflow then starts it is MLflow's call: it stays off under CI)."""
    code = (
        "import os\n"
        "from harness.record import client\n"
        "client.quiet_mlflow()\n"
        "from mlflow.telemetry.client import get_telemetry_client\n"
        "print(os.environ['MLFLOW_DISABLE_TELEMETRY'], get_telemetry_client() is None)"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_DISABLE_TELEMETRY", "PYTEST_CURRENT_TEST")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.split() == ["true", "True"], out.stderr
    given = {**env, "MLFLOW_DISABLE_TELEMETRY": "false"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=given)
    assert out.stdout.split()[0] == "false", out.stderr


# An outside client creating a SQLite store, held after its first table
# (its schema half made, no lock kept: SQLite commits each CREATE TABLE)
# until the file named by argv[3] exists.
_HELD_CREATOR = """
import pathlib, sys, time
import sqlalchemy
from mlflow.tracking import MlflowClient

held, go = pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])

@sqlalchemy.event.listens_for(sqlalchemy.engine.Engine, "after_cursor_execute")
def hold(conn, cursor, statement, *args):
    if statement.lstrip().upper().startswith("CREATE TABLE") and not held.exists():
        held.touch()
        deadline = time.monotonic() + 60
        while not go.exists() and time.monotonic() < deadline:
            time.sleep(0.01)

MlflowClient(sys.argv[1]).search_experiments()
"""


def test_a_store_another_client_is_making_at_the_same_moment_is_opened(tmp_path, monkeypatch):
    """`mlflow ui` or a user's own client creating a fresh SQLite store does
    not take the harness's lock; the harness's open, meeting the half-made
    schema, waits for it (never making the tables itself, which would fail
    the other client) instead of refusing the store."""
    uri = f"sqlite:///{tmp_path / 'store.db'}"
    held, go = tmp_path / "held", tmp_path / "go"
    outside = subprocess.Popen(
        [sys.executable, "-c", _HELD_CREATOR, uri, str(held), str(go)], stderr=subprocess.PIPE, text=True
    )
    opened_while_held = []
    first_open = store._first_open
    monkeypatch.setattr(store, "_first_open", lambda uri: opened_while_held.append(not go.exists()) or first_open(uri))
    release = threading.Timer(2.0, go.touch)  # the creator goes on while the harness waits
    try:
        deadline = time.monotonic() + 120
        while not held.exists():
            assert outside.poll() is None and time.monotonic() < deadline, outside.stderr.read()
            time.sleep(0.01)
        release.start()
        client = store.open_client(uri)
        assert client.create_experiment("opened") and client.get_experiment_by_name("opened")
    finally:
        release.cancel()
        go.touch()
        _, err = outside.communicate(timeout=120)
    assert outside.returncode == 0, err
    assert opened_while_held and not any(opened_while_held), "the harness opened the half-made store"


@pytest.mark.parametrize(
    "raised, status, name",
    [(None, "FINISHED", "reproduce · running"), (KeyboardInterrupt, "KILLED", "reproduce · running · interrupted"),
     (RuntimeError, "FAILED", "reproduce · running")],
    ids=["finished", "interrupted", "failed"],
)  # fmt: skip
def test_a_commands_one_run_ends_on_every_way_out(tmp_path, raised, status, name):
    """harness.record.command_run: the run an adaptive reproduction or a
    drift report nests its runs under ends FINISHED, KILLED (its name
    saying it was interrupted) or FAILED, in a real store."""
    from harness.record.command_run import command_run

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with contextlib.suppress(KeyboardInterrupt, RuntimeError):
        with command_run(uri, "tiny", "reproduce · running", {"harness.kind": "reproduce"}) as (client, run_id):
            nested = client.create_run(client.get_run(run_id).info.experiment_id, tags={"mlflow.parentRunId": run_id})
            if raised is not None:
                raise raised()
    run = MlflowClient(tracking_uri=uri).get_run(run_id)
    assert (run.info.status, run.info.run_name) == (status, name)
    assert nested.data.tags["mlflow.parentRunId"] == run_id
