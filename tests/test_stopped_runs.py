"""Runs that stop early keep a good checkpoint: a NaN metric stops the run
FAILED with the last good state saved; Ctrl-C or a scheduler's SIGTERM to
`harness run` writes a final checkpoint, marks the runs KILLED and exits
with the shell's code (the signal at every moment of a command:
test_signals)."""

from __future__ import annotations

import copy
import os
import signal
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from mlflow.tracking import MlflowClient
from support import TINY_SPEC, background_result, new_store, start_harness, wait_for_training, write_spec

from harness import build
from harness import experiment_spec as S
from harness.record import rundir
from harness.record.journal import Journal
from harness.run import runner
from harness.sessions import run as session

# ---------------------------------------------------------------------- NaN


def _nan_after(algorithm, iteration: int):
    """The algorithm with its loss NaN from `iteration` on (a counter in the state)."""

    def init(key):
        return algorithm.init(key), jnp.int32(0)

    def step(state):
        inner, count = state
        inner, metrics = algorithm.step(inner)
        count = count + 1
        metrics = {**metrics, "loss": jnp.where(count >= iteration, jnp.nan, metrics["loss"])}
        return (inner, count), metrics

    return algorithm._replace(init=init, step=step)


def test_nan_stops_the_run_failed_and_keeps_the_last_good_checkpoint(tmp_path, capsys):
    data = copy.deepcopy(TINY_SPEC) | {"logging": {"interval": 5}, "checkpoint": {"every": 5, "keep": 10}}
    data["name"] = "ckpt_nan"
    plan = build.build(S.parse(data))
    plan = plan._replace(algorithm=_nan_after(plan.algorithm, 13))
    uri = new_store(tmp_path)
    with pytest.raises(runner.NonFiniteMetricError) as raised:
        session.train_and_log(plan, uri, session.RunOptions(progress=False, checkpoint_dir=tmp_path / "c"))
    assert raised.value.metric == "loss" and raised.value.iteration == 13
    assert "metric 'loss' is nan at iteration 13" in str(raised.value)
    (directory,) = rundir.run_directories(tmp_path / "c")
    steps = rundir.saved_iterations(directory.state_dir)
    # Chunks end at 5, 10, 15: the state after 15 has the NaN and is not saved.
    assert steps == [5, 10]
    assert not list(directory.state_dir.glob("*tmp*"))
    err = " ".join(capsys.readouterr().err.split())
    assert f"the last checkpoint is at iteration 10 ({directory.state_dir})" in err
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("ckpt_nan").experiment_id])
    assert {r.info.status for r in runs} == {"FAILED"} and len(runs) == 3
    assert all("metric 'loss' is nan at iteration 13" in r.data.tags["error"] for r in runs)
    assert directory.info["status"] == "FAILED"


def test_a_signal_noted_before_a_nan_stop_is_not_swallowed(tmp_path, monkeypatch):
    """SIGINT noted during the chunk whose metrics are NaN: the command
    still exits 130 with its runs KILLED, and says what else failed."""
    from support import run_cli

    from harness.cli.commands import run as run_command

    def signalled_nan(*args, **kwargs):
        plan = load_plan(*args, **kwargs)
        algorithm = _nan_after(plan.algorithm, 13)

        def step(state):
            jax.debug.callback(lambda count: count == 13 and os.kill(os.getpid(), signal.SIGINT), state[1] + 1)
            return algorithm.step(state)

        return plan._replace(algorithm=algorithm._replace(step=step))

    load_plan = run_command.load_plan
    monkeypatch.setattr(run_command, "load_plan", signalled_nan)
    data = copy.deepcopy(TINY_SPEC) | {"logging": {"interval": 5}, "checkpoint": {"every": 5, "keep": 10}}
    data["name"] = "nan_signalled"
    uri = new_store(tmp_path)
    path = write_spec(tmp_path, data)
    code, _, err = run_cli("run", str(path), "--tracking-uri", uri, "--no-progress", "--checkpoint-dir", str(tmp_path))
    err = " ".join(err.split())
    assert code == 130, err
    assert "interrupted (SIGINT)" in err and "it also failed: metric 'loss' is nan at iteration 13" in err
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("nan_signalled").experiment_id])
    assert len(runs) == 3 and {r.info.status for r in runs} == {"KILLED"}


# ------------------------------------------------------------------ signals


SIGNALS = {"ctrl-c": signal.SIGINT, "sigterm": signal.SIGTERM}


def _signalled(tmp: Path, signum: signal.Signals) -> dict:
    """`harness run` of the tiny spec, sent `signum` once it has trained."""
    data = copy.deepcopy(TINY_SPEC)
    data["budget"]["env_steps"] = 10**9  # far more than the test waits for
    data["checkpoint"] = {"every": 1000, "keep": 2}
    path = write_spec(tmp, data)
    uri = new_store(tmp)
    proc = start_harness("run", str(path), "--tracking-uri", uri, "--no-progress")
    root = tmp / "checkpoints"
    try:
        wait_for_training(root, [proc], timeout=240)
        proc.send_signal(signum)
        output = proc.communicate(timeout=120)[0]
    finally:
        proc.kill()
    return {"data": data, "uri": uri, "root": root, "output": output, "code": proc.returncode}


def run_signalled(tmp_path_factory) -> dict[str, dict]:
    """Each signal's run, in the background (conftest's BACKGROUND) while
    the session does other tests: subprocesses that mostly wait."""
    return {name: _signalled(tmp_path_factory.mktemp(name), signum) for name, signum in SIGNALS.items()}


BACKGROUND = {"signalled": run_signalled}


@pytest.fixture(scope="module")
def signalled():
    return background_result("signalled")


@pytest.mark.parametrize("which, code", [("ctrl-c", 130), ("sigterm", 143)])
def test_a_signal_checkpoints_marks_runs_killed_and_exits(signalled, which, code):
    """Ctrl-C and a scheduler's SIGTERM stop `harness run` between chunks:
    a final checkpoint, KILLED runs, the shell's exit code, no traceback."""
    run = signalled[which]
    output, data = run["output"], run["data"]
    name = SIGNALS[which].name
    assert run["code"] == code, output
    assert "Traceback" not in output and f"interrupted ({name})" in output
    (directory,) = rundir.run_directories(run["root"])
    journaled = Journal(directory.path).logged_through()
    steps = rundir.saved_iterations(directory.state_dir)
    assert journaled >= 20 and steps == [journaled], "the final checkpoint is the last logged iteration"
    assert f"--resume {directory.run_id}" in " ".join(output.split())
    client = MlflowClient(tracking_uri=run["uri"])
    runs = client.search_runs([client.get_experiment_by_name(data["name"]).experiment_id])
    assert len(runs) == 3 and {r.info.status for r in runs} == {"KILLED"}
    assert {r.data.tags["error"] for r in runs} == {f"interrupted ({name})"}
    # What was trained before the interrupt reached the store: with a budget
    # this long, a curve's points are windows of many iterations
    # (harness.record.windows), and the open one is logged at the last.
    child = next(r for r in runs if r.data.tags.get("seed") == "0")
    history = client.get_metric_history(child.info.run_id, "loss")
    steps_per_iteration = data["hyperparameters"]["num_envs"] * data["hyperparameters"]["num_steps"]
    assert max(m.step for m in history) == journaled * steps_per_iteration
    assert client.get_metric_history(child.info.run_id, "window_max/loss")
    assert directory.info["status"] == "KILLED"
