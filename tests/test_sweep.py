"""Sweeps (harness.sweep, harness.sessions.sweep): points validated as
specs, numeric keys in one program, structure in programs of their own,
the MLflow layout read back, a point against its single run, and a sweep
interrupted by Ctrl-C and resumed against one that was not."""

from __future__ import annotations

import copy
import json
import signal
import subprocess
import sys

import numpy as np
import pytest
from mlflow.tracking import MlflowClient
from support import EXACT_XLA_FLAGS, background_result, device_env, new_store, run_cli, train, write_spec

from harness import experiment_spec as S
from harness import sweep as sweeps
from harness.record import rundir
from harness.run import runner
from harness.run.programs import Programs
from harness.sessions import run as session
from harness.sessions import sweep as sweep_session

SWEEP_SPEC = {
    "name": "tiny_sweep",
    "algorithm": "ppo",
    "env": {"suite": "gymnax", "id": "CartPole-v1"},
    "seeds": [0, 1],
    "budget": {"env_steps": 24 * 4 * 32},  # 24 iterations at num_envs 4, 12 at 8
    "hyperparameters": {"num_envs": 4, "num_steps": 32, "update_epochs": 2, "num_minibatches": 2},
    "network": {"hidden_sizes": [16, 16]},
    "optimizer": {"learning_rate": 0.001, "max_grad_norm": 0.5},
    "logging": {"interval": 4},
    "checkpoint": {"every": 4},
    "sweep": {"optimizer.learning_rate": [0.001, 0.003], "hyperparameters.num_envs": [4, 8]},
}
# The largest difference, relative to the metric's largest magnitude, between
# a point's curves and its spec's single run (measured: see the README).
TOLERANCE = 1e-3


class Swept:
    def __init__(self, tmp):
        self.tmp = tmp
        self.path = write_spec(tmp, SWEEP_SPEC)
        self.uri = new_store(tmp)
        self.client = MlflowClient(tracking_uri=self.uri)
        self.sweep = sweeps.make_sweep(S.load(self.path), str(self.path))
        self.programs = Programs()  # shared by the three sweeps of the same programs

    def run(self, root: str, **kwargs) -> sweep_session.SweepLogged:
        options = session.RunOptions(progress=False, checkpoint_dir=self.tmp / root, programs=self.programs, **kwargs)
        return sweep_session.run_sweep(self.sweep, self.uri, options)

    def history(self, run_id: str, name: str) -> np.ndarray:
        points = sorted(self.client.get_metric_history(run_id, name), key=lambda m: m.step)
        return np.array([m.value for m in points], dtype=np.float32)


@pytest.fixture(scope="module")
def swept(tmp_path_factory) -> Swept:
    t = Swept(tmp_path_factory.mktemp("sweep"))
    t.whole = t.run("whole")
    t.compiled_programs = len(t.programs)

    def interrupt(chunk):
        if chunk.last_iteration == 8:  # the first program's second chunk
            signal.raise_signal(signal.SIGINT)

    with pytest.raises(runner.Interrupted):
        t.run("resumed", on_chunk=interrupt)
    t.interrupted = rundir.run_directories(t.tmp / "resumed")[0]
    t.interrupted_info = t.interrupted.info
    t.resumed = t.run("resumed", resume=True)
    return t


def test_points_are_grouped_by_structure_and_numbers_ride_in_the_state(swept):
    sweep = swept.sweep
    assert [p.values for p in sweep.points] == [
        {"optimizer.learning_rate": 0.001, "hyperparameters.num_envs": 4},
        {"optimizer.learning_rate": 0.001, "hyperparameters.num_envs": 8},
        {"optimizer.learning_rate": 0.003, "hyperparameters.num_envs": 4},
        {"optimizer.learning_rate": 0.003, "hyperparameters.num_envs": 8},
    ]
    # num_envs changes shapes: one program per value; the learning rates ride along.
    assert [[p.index for p in g.points] for g in sweep.groups] == [[0, 2], [1, 3]]
    assert all(g.numeric == ("optimizer.learning_rate",) for g in sweep.groups)
    assert sweep.groups[0].run_seeds == (0, 1, 0, 1)
    np.testing.assert_array_equal(
        sweep.groups[0].numbers["optimizer.learning_rate"], np.float32([1e-3] * 2 + [3e-3] * 2)
    )
    # One init and one chunk program per structure, nothing per point.
    assert swept.compiled_programs == 2 * len(sweep.groups)
    # Every point is a spec of its own, with its own hash.
    assert len({S.spec_hash(p.spec) for p in sweep.points}) == 4
    assert all(p.spec.sweep is None for p in sweep.points)


def test_the_mlflow_layout_reads_back(swept):
    logged, client = swept.whole, swept.client
    parent = client.get_run(logged.parent_id)
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["harness.kind"] == "sweep"
    assert parent.data.tags["sweep.points"] == "4" and parent.data.tags["sweep.programs"] == "2"
    assert parent.data.params["sweep.optimizer.learning_rate"] == "[0.001, 0.003]"
    artifacts = {a.path for a in client.list_artifacts(logged.parent_id)}
    assert {"spec.yaml", "summary.md", "summary.json", "sweep.png"} <= artifacts
    summary = json.loads(
        client.download_artifacts(logged.parent_id, "summary.json", str(swept.tmp))
        and (swept.tmp / "summary.json").read_text()
    )
    assert [p["point"] for p in summary["points"]] == [row.point for row in logged.summary]
    iqms = [p["iqm"] for p in summary["points"]]
    assert iqms == sorted(iqms, reverse=True)
    assert parent.data.tags["sweep.best_run_id"] == logged.summary[0].run_id
    for point, point_id in zip(swept.sweep.points, logged.point_ids, strict=True):
        run = client.get_run(point_id)
        assert run.info.status == "FINISHED"
        assert run.data.tags["mlflow.parentRunId"] == logged.parent_id
        assert run.data.tags["spec_hash"] == S.spec_hash(point.spec)
        assert run.data.params["optimizer.learning_rate"] == json.dumps(point.values["optimizer.learning_rate"])
        assert "final_episode_return" in run.data.metrics and "sps" in run.data.metrics
        record = logged.records[point.index]
        assert record.spec_hash == S.spec_hash(point.spec) and record.mlflow_run_id == point_id
        # Vmapped with another point: not its own run's batch, so not its bits (see the README).
        assert record.fingerprint["batch"] == run.data.tags["device.batch"] == "4 runs vmapped (2 points x 2 seeds)"
        seeds = client.search_runs([run.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{point_id}'")
        assert sorted(r.data.tags["seed"] for r in seeds) == ["0", "1"]
        for seed_run in seeds:
            iterations = record.iterations
            assert len(swept.history(seed_run.info.run_id, "loss")) == iterations
        # A point's run reads like a run of its spec: reproduce --run-id finds its spec there.
        found, note = S_parent(client, swept.uri, point_id)
        assert found.info.run_id == point_id and note is None


def S_parent(client, uri, run_id):
    from harness.record.tracking import get_parent_run

    return get_parent_run(client, uri, run_id)


@pytest.fixture(scope="module")
def singles(swept) -> dict[int, tuple]:
    """Points 0 and 2 (the learning rates at num_envs 4) as specs of their own, trained alone."""
    return {i: train(S.canonical(swept.sweep.points[i].spec)) for i in (0, 2)}


def test_a_point_trains_what_its_spec_trains(swept, singles):
    """The learning-rate points of num_envs 4 against their specs' single runs."""
    logged = swept.whole
    for index, (plan, single) in singles.items():
        point = swept.sweep.points[index]
        point_id = logged.point_ids[point.index]
        seeds = swept.client.search_runs(
            [swept.client.get_run(point_id).info.experiment_id],
            filter_string=f"tags.mlflow.parentRunId = '{point_id}'",
        )
        by_seed = {int(r.data.tags["seed"]): r.info.run_id for r in seeds}
        for name, values in single.metrics.items():
            for s, seed in enumerate(plan.spec.seeds):
                logged_values = swept.history(by_seed[seed], name)
                scale = max(float(np.abs(values[:, s]).max()), 1e-6)
                worst = float(np.abs(logged_values - values[:, s]).max()) / scale
                assert worst <= TOLERANCE, (point.label(), name, seed, worst)


# A sweep's exact points and their specs are programs that differ, whose bits
# must not: compiled as users compile them (support.processes.EXACT_XLA_FLAGS),
# in a process of their own.
EXACT_POINTS = """
import json, sys
import numpy as np
from harness import experiment_spec as S
from harness import sweep as sweeps
from harness.run import runner
from support import train
data = json.loads(sys.argv[1])
sweep = sweeps.make_sweep(S.parse(data), "spec.yaml", exact_points=True)
(group,) = sweep.groups
plan = group.plan
result = runner.run(plan.algorithm, group.run_seeds, plan.num_iterations, 4, numbers=group.numbers, block=group.block)
differ = []
for i, point in enumerate(sweep.points):
    single = train(S.canonical(point.spec))[1]
    for name, values in single.metrics.items():
        if not np.array_equal(result.metrics[name][:, 2 * i : 2 * i + 2], values):
            differ.append(f"{point.label()}: {name}")
print(json.dumps({"block": group.block, "points": len(sweep.points), "differ": differ}))
"""


def run_exact_points(tmp_path_factory) -> dict:
    del tmp_path_factory
    data = copy.deepcopy(SWEEP_SPEC)
    data["sweep"] = {"optimizer.learning_rate": [0.001, 0.003]}
    env = device_env(None, EXACT_XLA_FLAGS)
    out = subprocess.run(
        [sys.executable, "-c", EXACT_POINTS, json.dumps(data)], env=env, capture_output=True, text=True, timeout=900
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


BACKGROUND = {"exact_points": run_exact_points}


@pytest.fixture(scope="module")
def exact_points():
    return background_result("exact_points")


def test_exact_points_give_their_specs_own_bits(exact_points):
    """`--exact-points`: each point of the learning rates' sweep, run in one
    program with the other, trains its own spec's bits, every metric."""
    assert (exact_points["block"], exact_points["points"]) == (2, 2)
    assert exact_points["differ"] == []
    data = copy.deepcopy(SWEEP_SPEC)
    data["sweep"] = {"optimizer.learning_rate": [0.001, 0.003]}
    exact = sweeps.make_sweep(S.parse(data), "spec.yaml", exact_points=True)
    assert exact.sweep_hash != sweeps.make_sweep(S.parse(data), "spec.yaml").sweep_hash


def test_an_interrupted_sweep_resumes_bit_identically(swept):
    info = swept.interrupted_info
    assert info["status"] == "KILLED" and info["groups_done"] == []
    resumed, whole = swept.resumed, swept.whole
    assert resumed.parent_id == swept.interrupted.run_id
    assert swept.client.get_run(resumed.parent_id).info.status == "FINISHED"
    assert swept.client.get_run(resumed.parent_id).data.tags["resumed"] == "1"
    for point in swept.sweep.points:
        a, b = whole.records[point.index], resumed.records[point.index]
        assert a.per_seed_final == b.per_seed_final
        assert a.curves == b.curves
        # Every step logged once, with the uninterrupted run's bits.
        whole_seeds = _seed_runs(swept.client, whole.point_ids[point.index])
        resumed_seeds = _seed_runs(swept.client, resumed.point_ids[point.index])
        for seed in whole_seeds:
            for name in ("loss", "episode_return"):
                np.testing.assert_array_equal(
                    swept.history(resumed_seeds[seed], name), swept.history(whole_seeds[seed], name)
                )


def _seed_runs(client, point_id: str) -> dict[str, str]:
    experiment = client.get_run(point_id).info.experiment_id
    runs = client.search_runs([experiment], filter_string=f"tags.mlflow.parentRunId = '{point_id}'")
    return {r.data.tags["seed"]: r.info.run_id for r in runs}


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    "sweep, argv, where, message",
    [
        ({"hyperparameters.nope": [1, 2]}, [], "sweep.hyperparameters.nope", "no such key"),
        ({"hyperparameters.num_envs": ["four"]}, [], "sweep.hyperparameters.num_envs", "'four'"),
        ({"optimizer.learning_rate": [0.001, -1.0]}, [], "sweep.optimizer.learning_rate", "-1.0"),
        ({"optimizer.learning_rate": []}, [], "sweep", "empty list"),
        ({"name": ["a", "b"]}, [], "sweep.name", "cannot be swept"),
        ({"seeds": [[0], [1]]}, [], "sweep.seeds", "cannot be swept"),
        (
            {"optimizer.learning_rate": {"low": 1e-4, "high": 1e-2, "log": True}},
            [],
            "sweep.optimizer.learning_rate",
            "--samples",
        ),
        (
            {"optimizer.learning_rate": [1e-4, 1e-3], "hyperparameters.gamma": [0.9, 0.99]},
            ["--max-points", "3"],
            "sweep",
            "exceed --max-points 3",
        ),
        ({"hyperparameters.num_minibatches": [3]}, [], "hyperparameters.num_minibatches", "does not divide"),
    ],
    ids=[
        "unknown-key",
        "wrong-type",
        "out-of-range",
        "empty",
        "name",
        "seeds",
        "range-needs-samples",
        "too-many",
        "structure",
    ],
)
def test_bad_sweeps_get_one_message_naming_the_key_and_no_run(tmp_path, sweep, argv, where, message):
    data = copy.deepcopy(SWEEP_SPEC) | {"sweep": sweep}
    path = write_spec(tmp_path, data)
    uri = new_store(tmp_path)
    code, out, err = run_cli("sweep", str(path), "--tracking-uri", uri, "--no-progress", *argv)
    assert code == 2, err
    assert where in err and message in err, err
    assert "Traceback" not in err
    assert (
        MlflowClient(tracking_uri=uri).search_runs(
            [e.experiment_id for e in MlflowClient(tracking_uri=uri).search_experiments()]
        )
        == []
    )


def test_set_and_random_points(tmp_path):
    data = copy.deepcopy(SWEEP_SPEC)
    del data["sweep"]
    loaded = S.parse(data)
    sets = S.parse_sets(["hyperparameters.gamma=0.9,0.99", "hyperparameters.entropy_coef=0.0,null"])
    assert sets == {"hyperparameters.gamma": (0.9, 0.99), "hyperparameters.entropy_coef": (0.0, None)}
    with pytest.raises(S.SpecError, match="entropy_coef"):  # null is not a coefficient
        sweeps.make_sweep(loaded, "spec.yaml", sets=sets)
    ranged = loaded.model_copy(
        update={
            "sweep": {
                "optimizer.learning_rate": S.SweepRange(low=1e-4, high=1e-2, log=True),
                "hyperparameters.num_steps": (16, 32),
            }
        }
    )
    one = sweeps.make_sweep(ranged, "spec.yaml", samples=6, sample_seed=3)
    two = sweeps.make_sweep(ranged, "spec.yaml", samples=6, sample_seed=3)
    assert [p.values for p in one.points] == [p.values for p in two.points]  # reproducible draws
    assert one.sweep_hash == two.sweep_hash
    other = sweeps.make_sweep(ranged, "spec.yaml", samples=6, sample_seed=4)
    assert other.sweep_hash != one.sweep_hash
    rates = [p.values["optimizer.learning_rate"] for p in one.points]
    assert all(1e-4 <= r <= 1e-2 for r in rates) and len(set(rates)) == 6
    assert {p.values["hyperparameters.num_steps"] for p in one.points} <= {16, 32}
    assert "random: 6 samples, seed 3" == one.mode


def test_validate_lists_the_points_and_programs(tmp_path):
    path = write_spec(tmp_path, copy.deepcopy(SWEEP_SPEC))
    code, out, err = run_cli("validate", str(path), "--set", "hyperparameters.gamma=0.9,0.99")
    assert code == 0, err
    assert "8 points x 2 seeds in 2 program(s), points and seeds vmapped together" in out
    assert "numbers in the state: optimizer.learning_rate, hyperparameters.gamma" in out


def test_compare_and_reproduce_read_a_sweep_as_its_points(swept, tmp_path):
    code, out, err = run_cli(
        "compare",
        swept.whole.parent_id,
        "--tracking-uri",
        swept.uri,
        "--allow-different-specs",
        "--out",
        str(tmp_path / "compare.png"),
    )
    assert code == 0, err
    assert f"run {swept.whole.parent_id} is a sweep; comparing its 4 points" in err
    assert "optimizer.learning_rate" in out and (tmp_path / "compare.png").exists()
    code, out, err = run_cli("reproduce", "--run-id", swept.whole.parent_id, "--tracking-uri", swept.uri)
    assert code == 2 and "is a sweep: reproduce one of its points" in err
    # A point reproduces as the spec it is: statistically, since it was vmapped with another point.
    point_id = swept.whole.point_ids[0]
    code, out, err = run_cli("reproduce", "--run-id", point_id, "--tracking-uri", swept.uri, "--no-progress")
    assert code == 0, out + err
    assert "not judged bit for bit: device.batch: '4 runs vmapped (2 points x 2 seeds)' in the reference" in out
