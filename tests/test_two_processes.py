"""Devices: a real two-process job (`harness run` as two processes with 2
simulated devices each) trains the one-process job's bits, stops together
on an interrupt, and stops every process when process 0 cannot start."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from support import (
    background_result,
    device_env,
    free_port,
    new_store,
    start_harness,
    wait_for_training,
    write_spec,
)

from harness.record import rundir
from harness.record.journal import Journal

ITERATIONS = 24

MULTI_SPEC = {
    "name": "two_process",
    "algorithm": "ppo",
    "env": {"suite": "gymnax", "id": "CartPole-v1"},
    "seeds": [0, 1],
    "budget": {"env_steps": ITERATIONS * 8 * 16},
    "hyperparameters": {"num_envs": 8, "num_steps": 16, "num_minibatches": 2},
    "logging": {"interval": 2},
    "checkpoint": {"every": 4, "keep": 2},
    # Every device along data, on an exact layout (two logical shards per
    # device): the job gives one process's bits, whatever holds the shards.
    "devices": {"count": "all", "shards": 8},
}


class Job:
    """`harness run` of MULTI_SPEC as two processes with 2 simulated devices
    each, or as one process with 4."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.path = write_spec(tmp, MULTI_SPEC)
        self.uri = new_store(tmp, "job.db")
        self.root = tmp / "checkpoints"

    def launch(self, *args: str, devices_per_process: int) -> subprocess.Popen:
        return start_harness(
            "run", str(self.path), "--no-progress", *args, env=device_env(devices_per_process), cwd=self.tmp
        )

    def two_processes(self, *args: str, main_args: tuple[str, ...] = ()) -> list[subprocess.Popen]:
        """The job, logging to job.db and writing job.json (or, with
        `main_args`, process 0 run with those instead)."""
        port = free_port()
        logs = ("--tracking-uri", self.uri, "--results-out", str(self.tmp / "job.json"))
        return [
            self.launch(
                *("--coordinator", f"127.0.0.1:{port}", "--num-processes", "2", "--process-id", str(i)),
                *args,
                *((main_args or logs) if i == 0 else ()),
                devices_per_process=2,
            )
            for i in range(2)
        ]


def _finish(processes: list[subprocess.Popen]) -> tuple[list[int], str]:
    outputs = [p.communicate(timeout=600)[0] for p in processes]
    # Without the Gloo transport's connection chatter.
    return [p.returncode for p in processes], "\n\n".join(
        "\n".join(line for line in o.splitlines() if not line.startswith("[Gloo]")) for o in outputs
    )


def run_two_process_job(tmp_path_factory) -> Job:
    """The job interrupted by a SIGTERM to process 1 (not the one that logs
    and writes checkpoints), then resumed (logging system metrics too); and
    one process with 4 devices, uninterrupted."""
    job = Job(tmp_path_factory.mktemp("two-process"))
    first = job.two_processes()
    try:
        wait_for_training(job.root, first)
        # Stopped, process 1 holds the job at its next collective, so the
        # signal lands well before the end of training however fast it is.
        first[1].send_signal(signal.SIGSTOP)
        first[1].send_signal(signal.SIGTERM)
        first[1].send_signal(signal.SIGCONT)
        job.interrupted = _finish(first)
    finally:
        for p in first:
            p.kill()
    (directory,) = rundir.run_directories(job.root)
    job.directory = directory
    job.journaled = Journal(directory.path).logged_through()
    job.steps = rundir.saved_iterations(directory.state_dir)
    client = MlflowClient(tracking_uri=job.uri)
    job.interrupted_status = {
        r.info.run_id: r.info.status for r in client.search_runs([directory.info["experiment_id"]])
    }
    job.resumed = _finish(job.two_processes("--resume", "--system-metrics-interval", "0.2"))
    alone = job.launch(
        "--tracking-uri",
        new_store(job.tmp, "alone.db"),
        "--results-out",
        str(job.tmp / "alone.json"),
        devices_per_process=4,
    )
    job.alone = _finish([alone])
    return job


@pytest.fixture(scope="module")
def two_process_job():
    return background_result("two_process_job")


# Subprocess work started when the session starts (support.background).
BACKGROUND = {"two_process_job": run_two_process_job}


def test_an_interrupt_of_one_process_stops_the_job_with_a_final_checkpoint(two_process_job):
    job = two_process_job
    codes, output = job.interrupted
    assert codes == [143, 143], output[-6000:]
    assert "Traceback" not in output
    # Both stopped after the same chunk: process 0 saved the state of every
    # process's devices after the last logged iteration.
    assert 0 < job.journaled < ITERATIONS and job.steps[-1] == job.journaled, (job.steps, job.journaled)
    assert all(step % 4 == 0 for step in job.steps[:-1])
    assert set(job.interrupted_status.values()) == {"KILLED"} and len(job.interrupted_status) == 3


def _histories(uri: str, names) -> dict[tuple[str, str], list[tuple[int, float]]]:
    """Every point of the per-iteration metrics `names` in a store's seed
    runs: (seed, metric) -> [(step, value)]."""
    client = MlflowClient(tracking_uri=uri)
    out = {}
    for run in client.search_runs([e.experiment_id for e in client.search_experiments()]):
        if "seed" not in run.data.tags:
            continue
        for name in names:
            history = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, name))
            out[run.data.tags["seed"], name] = history
    return out


def test_two_processes_train_one_spec_together(two_process_job):
    """Two local processes with 2 simulated devices each join one job on
    127.0.0.1 and give the bits of one process with 4 devices (an exact
    layout), interrupted and resumed too; only process 0 logs, as one
    parent run."""
    job = two_process_job
    codes, output = job.resumed
    assert codes == [0, 0], output[-6000:]
    resumed = f"resuming run {job.directory.run_id} from the checkpoint at iteration {job.journaled}"
    assert resumed in " ".join(job.resumed[1].split())
    codes, output = job.alone
    assert codes == [0], output[-6000:]

    job_record = json.loads((job.tmp / "job.json").read_text())
    alone_record = json.loads((job.tmp / "alone.json").read_text())
    assert job_record["curves"] == alone_record["curves"]
    assert job_record["fingerprint"]["process_count"] == "2"
    assert job_record["fingerprint"]["device_count"] == "4"
    assert job_record["fingerprint"]["local_device_count"] == "2"
    assert job_record["fingerprint"]["mesh"] == alone_record["fingerprint"]["mesh"] == "seed=1,data=4"
    assert job_record["per_seed_final"] == alone_record["per_seed_final"]
    # Every point of every metric in MLflow, not only the record's curves.
    names = list(alone_record["curves"]["metrics"])
    resumed = _histories(job.uri, names)
    alone = _histories(f"sqlite:///{job.tmp / 'alone.db'}", names)
    assert len(alone) == 2 * len(names)
    assert all(len(points) == ITERATIONS for points in alone.values())
    assert resumed == alone

    client = MlflowClient(tracking_uri=job.uri)
    runs = client.search_runs([job.directory.info["experiment_id"]])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parents) == 1 and len(runs) == 3  # one parent, a child per seed
    assert parents[0].info.run_id == job.directory.run_id
    tags = parents[0].data.tags
    assert tags["device.process_count"] == "2"
    assert tags["device.mesh"] == "seed=1,data=4"
    assert tags["resumed"] == "1"
    assert {r.info.status for r in runs} == {"FINISHED"}
    # Every iteration logged once, through the interrupt.
    child = next(r for r in runs if r.data.tags.get("seed") == "0")
    assert len(client.get_metric_history(child.info.run_id, "loss")) == ITERATIONS
    # Per-device speed is logged with the rest.
    assert parents[0].data.metrics["sps_per_device"] == pytest.approx(parents[0].data.metrics["sps"] / 4)
    # Each process logs its system metrics on the one parent, under its node id.
    metrics = parents[0].data.metrics
    for process in ("process_0", "process_1"):
        assert f"system/{process}/cpu_utilization_percentage" in metrics, sorted(metrics)


def test_a_job_whose_process_0_cannot_start_stops_every_process(tmp_path):
    """Process 0 cannot reach its MLflow store: it says so, and process 1,
    waiting for it to start training, stops with its message instead of
    waiting for ever."""
    job = Job(tmp_path)
    unreachable = f"http://127.0.0.1:{free_port()}"
    processes = job.two_processes(main_args=("--tracking-uri", unreachable))
    codes, output = _finish(processes)
    assert codes == [2, 2], output
    assert "Traceback" not in output
    flat = " ".join(output.split())
    assert f"error: cannot use the MLflow tracking store '{unreachable}'" in flat
    assert "error: process 0 of the job stopped before training (TrackingError: cannot use the MLflow" in flat
