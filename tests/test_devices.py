"""Devices: the mesh layout's checks, the same curves on 1, 2 and 4
(simulated CPU) devices for every algorithm, and a real two-process job.

Simulated devices need XLA_FLAGS before JAX starts, so the multi-device runs
happen in subprocesses."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from device_runs import LAYOUTS
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

from harness import build, cli
from harness import spec as S
from harness.record import rundir
from harness.record.journal import Journal
from harness.run import devices

ROOT = Path(__file__).resolve().parent.parent
# Relative difference allowed between layouts: float reductions (psum,
# all-gather then mean) add in another order. Metrics that pass through
# zero (a policy loss with normalised advantages) are compared at an
# absolute 1e-6 instead.
RTOL, ATOL = 1e-5, 1e-6


# ------------------------------------------------------------ invariance


def run_layouts(tmp_path_factory) -> dict:
    """Every algorithm's tiny spec on the plain path and on meshes of 1, 2
    and 4 devices (data-parallel, and seeds split as well)."""
    del tmp_path_factory
    out = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "device_runs.py")],
        env=device_env(4),
        capture_output=True,
        text=True,
        # About 11 minutes alone on a 2-core CPU, compiles mostly; beside the
        # rest of the suite on the other core it has run past 15.
        timeout=1800,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def layouts_run():
    return background_result("layouts_run")


def _differences(curves: dict[str, list], reference: dict[str, list]) -> list[str]:
    assert curves.keys() == reference.keys()
    bad = []
    for name in reference:
        a, b = np.asarray(curves[name]), np.asarray(reference[name])
        if not np.allclose(a, b, rtol=RTOL, atol=ATOL):
            rel = np.abs(a - b) / np.maximum(np.abs(b), ATOL / RTOL)
            bad.append(f"{name}: max relative difference {rel.max():.2e}")
    return bad


@pytest.mark.parametrize(
    "algorithm, layout",
    [
        (name, layout)
        for name, layouts in LAYOUTS.items()
        for layout in layouts
        if layout not in ("plain", "1x1") and "_exact" not in name
    ],
)
def test_same_curves_on_1_2_and_4_devices(layouts_run, algorithm, layout):
    runs = layouts_run[algorithm]
    reference = runs["1x1"]
    assert len(next(iter(reference.values()))) >= 4  # iterations were run
    assert _differences(runs[layout], reference) == []


def test_one_device_mesh_matches_the_plain_program(layouts_run):
    """A one-device mesh computes what plain jit does, bit for bit: an axis of
    one device is no axis (`algorithms.parallel`). Two programs compiled
    apart, so also a re-run. (AlphaZero's and REINFORCE's plain programs
    are checked against 4 devices, bit for bit, on the exact layouts.)"""
    runs = layouts_run["ppo"]
    assert _differences(runs["1x1"], runs["plain"]) == []
    assert runs["1x1"] == runs["plain"]


def test_knapsack_with_mctx_s_search_runs_on_a_mesh(layouts_run):
    """The published Knapsack spec's search (mctx's) with ranked rewards
    and the set network, on a one-device mesh: every figure finite, games
    finished by the last iteration pack something, the ranked-reward
    threshold is tracked, and no evaluation packing beats its optimum."""
    run = {name: np.asarray(values) for name, values in layouts_run["alphazero_knapsack"]["1x1"].items()}
    assert {"episode_return", "ranked_threshold", "loss", "eval/eval_optimum"} <= set(run)
    assert len(run["loss"]) == 4 and all(np.isfinite(values).all() for values in run.values())
    assert np.all(run["games_finished"][-1] > 0) and np.all(run["episode_return"][-1] > 0)
    assert np.all(run["eval/eval_optimum"] >= run["eval/eval_return"] - 1e-6)
    assert not np.array_equal(run["loss"][:, 0], run["loss"][:, 1])


def _same_bits_on_every_layout(runs: dict[str, dict], iterations: int) -> dict[str, list]:
    """Every layout's curves (`iterations` of them) are the plain program's,
    bit for bit, and its seeds differ; returns the plain program's curves."""
    reference = runs["plain"]
    assert len(reference["loss"]) == iterations
    for layout, curves in runs.items():
        assert curves == reference, layout
    loss = np.asarray(reference["loss"])
    assert not np.array_equal(loss[:, 0], loss[:, 1])
    return reference


@pytest.mark.parametrize("algorithm", ["ppo_exact", "ppo_gru_exact", "reinforce_exact", "reinforce_exact_normalized"])
def test_exact_layouts_train_the_same_bits_on_1_and_4_devices(layouts_run, algorithm):
    """`devices.shards`: whole runs (64 iterations, each of several
    minibatch updates, gradient clipping and an annealed learning rate),
    every metric of every iteration bit-identical on the plain program (8
    logical shards on one device) and on a mesh of 4 data-parallel devices
    (2 shards each). Each layout is a program compiled apart, most of this
    test's time."""
    reference = _same_bits_on_every_layout(layouts_run[algorithm], 64)
    # Not a run that stands still: it learns.
    assert np.mean(reference["episode_length"][-8:]) > np.mean(reference["episode_length"][:8])


@pytest.mark.parametrize("algorithm", ["alphazero_exact", "alphazero_knapsack_exact"])
def test_alphazero_exact_layouts_train_the_same_bits(layouts_run, algorithm):
    """AlphaZero on an exact layout: self-play, training and evaluation,
    every metric of every iteration (32) bit-identical on the plain program
    (8 logical shards on one device) and on 4 data devices (2 each), with
    the batched search: tic-tac-toe with an MLP, and Knapsack with the set
    network and ranked rewards, whose returns are real numbers."""
    reference = _same_bits_on_every_layout(layouts_run[algorithm], 32)
    assert any(name.startswith("eval/") for name in reference)


def test_seeds_differ_from_each_other(layouts_run):
    """The check above would pass for a layout that ran one seed twice."""
    loss = np.asarray(layouts_run["ppo"]["2x2"]["loss"])
    assert not np.allclose(loss[:, 0], loss[:, 1])


def test_single_player_knapsack_with_ranked_rewards(layouts_run):
    """AlphaZero on jumanji's Knapsack (one player, ranked rewards, the set
    network), as the exact layouts trained it (32 iterations), judged
    against each evaluation instance's optimum."""
    run = {name: np.asarray(values) for name, values in layouts_run["alphazero_knapsack_exact"]["plain"].items()}
    assert {"episode_return", "ranked_threshold"} <= set(run)
    assert {name for name in run if name.startswith("eval/")} == {
        "eval/eval_return",
        "eval/eval_random_return",
        "eval/eval_greedy_return",
        "eval/eval_optimum",
        "eval/eval_optimality_gap",
        "eval/eval_random_optimality_gap",
        "eval/eval_greedy_optimality_gap",
    }
    # Knapsack episodes end when no item fits; returns are positive values.
    assert np.all(run["episode_return"][-1] > 0)
    assert np.all(run["eval/eval_greedy_return"] > 0)
    # No packing beats the optimum (`eval_optimum` is that of the agent's
    # instances; each player's gap is to its own); random play is far from
    # it, greedy close.
    assert np.all(run["eval/eval_optimum"] >= run["eval/eval_return"] - 1e-6)
    for who in ("", "random_", "greedy_"):
        gap = run[f"eval/eval_{who}optimality_gap"]
        assert np.all((gap >= -1e-6) & (gap < 1)), who
    assert np.all(run["eval/eval_random_optimality_gap"] > run["eval/eval_greedy_optimality_gap"])


# ------------------------------------------------------------ bad splits


def _devices(**kwargs):
    return S.DevicesSpec(**kwargs)


@pytest.mark.parametrize(
    "kwargs, seeds, key, message",
    [
        ({"count": 8}, 2, "devices.count", "8 devices asked for, but only 4 are available"),
        ({"count": 4, "data_axis": 3}, 2, "devices.data_axis", "data_axis 3 does not divide the 4 devices"),
        ({"count": 4, "seed_axis": 3}, 3, "devices.seed_axis", "seed_axis 3 does not divide the 4 devices"),
        ({"count": 4, "seed_axis": 4}, 2, "devices.seed_axis", "seed_axis 4 does not divide the 2 seeds"),
        ({"count": 4, "seed_axis": 2, "data_axis": 4}, 2, "devices", "2 x 4 = 8 is not the 4 devices"),
    ],
)
def test_bad_layouts_are_named(kwargs, seeds, key, message):
    with pytest.raises(devices.LayoutError) as error:
        devices.resolve(_devices(**kwargs), seeds, available=4)
    assert error.value.key == key
    assert message in str(error.value)


def test_default_layout_is_data_parallel():
    assert devices.resolve(_devices(count="all"), 2, available=4) == devices.Layout(1, 4)
    assert devices.resolve(_devices(count=4, seed_axis=2), 2, available=4) == devices.Layout(2, 2)
    assert devices.resolve(_devices(), 2, available=4) == devices.Layout(1, 1)


@pytest.mark.parametrize(
    "algorithm, hyperparameters, network, message",
    [
        ("ppo", {"num_envs": 6, "num_steps": 4}, {}, "hyperparameters.num_envs: num_envs (6) does not split over 4"),
        (
            "ppo",
            {"num_envs": 8, "num_steps": 3, "num_minibatches": 8},
            {},
            "hyperparameters.num_minibatches: a minibatch of 3 steps does not split over 4",
        ),
        (
            "ppo",
            {"num_envs": 8, "num_steps": 4, "num_minibatches": 4},
            {"kind": "gru"},
            "a minibatch of 2 envs does not split over 4",
        ),
        (
            "reinforce",
            {"num_envs": 8, "num_steps": 4, "num_minibatches": 4},
            {},
            "a minibatch of 2 envs does not split over 4",
        ),
        (
            "ppo",
            {"num_envs": 8, "num_steps": 4, "evaluation": {"episodes": 6}},
            {},
            "hyperparameters.evaluation.episodes: evaluation.episodes (6) does not split over 4",
        ),
        (
            "alphazero",
            {"num_envs": 8, "train_batch_size": 6},
            {"kind": "mlp"},
            "hyperparameters.train_batch_size: train_batch_size (6) does not split over 4",
        ),
    ],
)
def test_batches_that_do_not_split_are_named(monkeypatch, algorithm, hyperparameters, network, message):
    """The algorithm's own check, reached through `build` with 4 devices
    (the device count is what `resolve` sees; nothing is compiled)."""
    env = (
        {"suite": "pgx", "id": "tic_tac_toe"} if algorithm == "alphazero" else {"suite": "gymnax", "id": "CartPole-v1"}
    )
    data = {
        "name": "split",
        "algorithm": algorithm,
        "env": env,
        "seeds": [0],
        "budget": {"env_steps": 10_000},
        "hyperparameters": hyperparameters,
        "network": network,
        "devices": {"count": 4},
    }
    monkeypatch.setattr(devices.jax, "device_count", lambda: 4)
    with pytest.raises(S.SpecError) as error:
        build.build(S.parse(data, "split.yaml"), "split.yaml")
    assert message in str(error.value)
    assert "(devices.data_axis)" in str(error.value)


@pytest.mark.parametrize(
    "change, message",
    [
        (
            {
                "algorithm": "alphazero",
                "env": {"suite": "pgx", "id": "tic_tac_toe"},
                "hyperparameters": {"num_envs": 16},
                "network": {"kind": "resnet"},
            },
            "network.kind: exact layouts (devices.shards) of alphazero take an mlp or item_set network, not resnet",
        ),
        (
            {
                "algorithm": "alphazero",
                "env": {"suite": "pgx", "id": "tic_tac_toe"},
                "hyperparameters": {"num_envs": 16, "train_batch_size": 12},
                "network": {"kind": "mlp"},
            },
            "devices.shards: train_batch_size (12) does not split into 8 logical shards",
        ),
        (
            {
                "algorithm": "reinforce",
                "hyperparameters": {"num_envs": 16, "num_steps": 16, "normalize_advantages": True},
            },
            "hyperparameters.normalize_advantages: exact layouts (devices.shards) of reinforce normalise advantages"
            " only without a baseline",
        ),
        ({"devices": {"count": 4, "shards": 4}}, "devices.shards: 4 logical shards do not split into at least two"),
        ({"devices": {"count": 4, "shards": 6}}, "devices.shards: 6 logical shards do not split into at least two"),
        ({"hyperparameters": {"num_envs": 4, "num_steps": 16}}, "devices.shards: num_envs (4) does not split into 8"),
        (
            {"hyperparameters": {"num_envs": 8, "num_steps": 4, "num_minibatches": 8}},
            "devices.shards: a minibatch of 4 steps does not split into 8 logical shards",
        ),
        ({"network": {"kind": "gru", "gru_size": 24}}, "network.gru_size: 24 is not a multiple of 16"),
    ],
)
def test_exact_layouts_that_cannot_work_are_named(monkeypatch, change, message):
    data = {
        "name": "exact",
        "algorithm": "ppo",
        "env": {"suite": "gymnax", "id": "CartPole-v1"},
        "seeds": [0],
        "budget": {"env_steps": 10_000},
        "hyperparameters": {"num_envs": 16, "num_steps": 16},
        "devices": {"shards": 8},
    }
    data = {**data, **change}
    if "shards" not in data["devices"]:
        data["devices"] = {**data["devices"], "shards": 8}
    monkeypatch.setattr(devices.jax, "device_count", lambda: 4)
    with pytest.raises(S.SpecError) as error:
        build.build(S.parse(data, "exact.yaml"), "exact.yaml")
    assert message in " ".join(str(error.value).split())


def test_bad_device_options_exit_2_with_one_line(tmp_path, capsys, tiny_spec_data):
    path = write_spec(tmp_path, tiny_spec_data)
    for option, message in (
        (["--devices", "many"], "--devices takes a number or all, not 'many'"),
        (["--devices", "0"], "--devices: count must be at least 1, or all"),
        (["--devices", "2"], "devices.count: 2 devices asked for, but only 1 are available"),
        (["--num-processes", "2"], "--num-processes and --process-id need --coordinator"),
    ):
        assert cli.main(["run", str(path), "--no-progress", *option]) == 2
        err = capsys.readouterr().err
        assert message in " ".join(err.split()), err
        assert "Traceback" not in err


def test_devices_do_not_change_the_spec_hash(tiny_spec_data):
    plain = S.parse(tiny_spec_data)
    spread = S.parse({**tiny_spec_data, "devices": {"count": "all", "seed_axis": 2}})
    assert S.spec_hash(plain) == S.spec_hash(spread)
    assert "devices" in S.to_yaml(spread)


# ---------------------------------------------------------- two processes


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
BACKGROUND = {"layouts_run": (run_layouts, 300), "two_process_job": (run_two_process_job, 100)}


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
