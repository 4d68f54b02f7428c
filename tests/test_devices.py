"""Devices: the mesh layout's checks, the same curves on 1, 2 and 4
(simulated CPU) devices for every algorithm, and a real two-process job.

Simulated devices need XLA_FLAGS before JAX starts, so the multi-device runs
happen in subprocesses."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import write_spec
from device_runs import LAYOUTS
from mlflow.tracking import MlflowClient

from harness import build, cli, devices
from harness import spec as S

ROOT = Path(__file__).resolve().parent.parent
# Relative difference allowed between layouts: float reductions (psum,
# all-gather then mean) add in another order. Metrics that pass through
# zero (a policy loss with normalised advantages) are compared at an
# absolute 1e-6 instead.
RTOL, ATOL = 1e-5, 1e-6


def _env(device_count: int) -> dict[str, str]:
    env = dict(os.environ)
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={device_count}"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests"), env.get("PYTHONPATH", "")])
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------ invariance


@pytest.fixture(scope="module")
def layouts_run():
    """Every algorithm's tiny spec on the plain path and on meshes of 1, 2
    and 4 devices (data-parallel, and seeds split as well)."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "device_runs.py")],
        env=_env(4),
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


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
    [(name, layout) for name, layouts in LAYOUTS.items() for layout in layouts if layout not in ("plain", "1x1")],
)
def test_same_curves_on_1_2_and_4_devices(layouts_run, algorithm, layout):
    runs = layouts_run[algorithm]
    reference = runs["1x1"]
    assert len(next(iter(reference.values()))) >= 4  # iterations were run
    assert _differences(runs[layout], reference) == []


@pytest.mark.parametrize("algorithm", ["ppo", "alphazero"])
def test_one_device_mesh_matches_the_plain_program(layouts_run, algorithm):
    """A one-device mesh computes what plain jit does: AlphaZero bit for bit,
    PPO up to how its advantage statistics are summed (`parallel.mean_std`)."""
    runs = layouts_run[algorithm]
    assert _differences(runs["1x1"], runs["plain"]) == []
    if algorithm == "alphazero":
        assert runs["1x1"] == runs["plain"]


def test_seeds_differ_from_each_other(layouts_run):
    """The check above would pass for a layout that ran one seed twice."""
    loss = np.asarray(layouts_run["ppo"]["2x2"]["loss"])
    assert not np.allclose(loss[:, 0], loss[:, 1])


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


MULTI_SPEC = {
    "name": "two_process",
    "algorithm": "ppo",
    "env": {"suite": "gymnax", "id": "CartPole-v1"},
    "seeds": [0, 1],
    "budget": {"env_steps": 6 * 8 * 16},
    "hyperparameters": {"num_envs": 8, "num_steps": 16, "num_minibatches": 2},
    "logging": {"interval": 2},
    # Every device along data: gradients are averaged across the processes.
    "devices": {"count": "all"},
}


def test_two_processes_train_one_spec_together(tmp_path):
    """Two local processes with 2 simulated devices each join one job on
    127.0.0.1 and give the curves of one process with 4 devices; only
    process 0 logs, as one parent run."""
    path = write_spec(tmp_path, MULTI_SPEC)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    port = _free_port()

    def harness(*args: str, devices_per_process: int) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "harness", "run", str(path), "--no-progress", *args],
            env=_env(devices_per_process),
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    job = [
        harness(
            "--coordinator",
            f"127.0.0.1:{port}",
            "--num-processes",
            "2",
            "--process-id",
            str(i),
            *(["--tracking-uri", uri, "--results-out", str(tmp_path / "job.json")] if i == 0 else []),
            devices_per_process=2,
        )
        for i in range(2)
    ]
    outputs = [p.communicate(timeout=600)[0] for p in job]
    assert [p.returncode for p in job] == [0, 0], "\n\n".join(o[-3000:] for o in outputs)
    alone = harness(
        "--tracking-uri",
        f"sqlite:///{tmp_path / 'alone.db'}",
        "--results-out",
        str(tmp_path / "alone.json"),
        devices_per_process=4,
    )
    output = alone.communicate(timeout=600)[0]
    assert alone.returncode == 0, output[-3000:]

    job_record = json.loads((tmp_path / "job.json").read_text())
    alone_record = json.loads((tmp_path / "alone.json").read_text())
    assert job_record["fingerprint"]["process_count"] == "2"
    assert job_record["fingerprint"]["device_count"] == "4"
    assert job_record["fingerprint"]["local_device_count"] == "2"
    assert job_record["fingerprint"]["mesh"] == alone_record["fingerprint"]["mesh"] == "seed=1,data=4"
    assert job_record["curves"]["env_steps"] == alone_record["curves"]["env_steps"]
    for name, per_seed in alone_record["curves"]["metrics"].items():
        for seed, values in per_seed.items():
            a = np.asarray(job_record["curves"]["metrics"][name][seed])
            assert np.allclose(a, values, rtol=RTOL, atol=ATOL), (name, seed)

    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("two_process")
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parents) == 1 and len(runs) == 3  # one parent, a child per seed
    tags = parents[0].data.tags
    assert tags["device.process_count"] == "2"
    assert tags["device.mesh"] == "seed=1,data=4"
    assert {r.info.status for r in runs} == {"FINISHED"}
    # Per-device speed is logged with the rest.
    assert parents[0].data.metrics["sps_per_device"] == pytest.approx(parents[0].data.metrics["sps"] / 4)
