"""`harness scale`: a spec measured at a ladder of sizes, stopping at the
first size the spec refuses, recorded in MLflow with its plot."""

from __future__ import annotations

import copy
import json
import types
from pathlib import Path
from typing import NamedTuple

import mlflow
from support import TINY_PPO, new_store, run_cli, write_spec

from harness.run import scaling
from harness.sessions import scale as scale_session


def test_the_ladder_and_the_saturation_point():
    assert scaling.ladder(16, 100) == [16, 32, 64]
    assert scaling.ladder(3, 8) == [4, 8]

    def point(size, rate):
        return scaling.SizePoint(size, rate, (rate,), 1.0, None, None, None, None)

    points = [point(1, 10.0), point(2, 50.0), point(4, 95.0), point(8, 100.0)]
    assert scaling.saturation(points).size == 4  # the smallest within 10% of the best
    assert scaling.saturation([]) is None
    assert "saturates at envs=4" in scaling.describe_saturation(points, "envs")
    assert "still growing at envs=8" in scaling.describe_saturation(points[:2] + [point(8, 200.0)], "envs")
    assert scaling.marked(points[:2] + [point(8, 200.0)]) is None and scaling.marked(points).size == 4
    assert scaling.resized({"hyperparameters": {"num_envs": 4}, "sweep": {}}, "envs", 8) == {
        "hyperparameters": {"num_envs": 8}
    }
    assert scaling.resized({"seeds": [0]}, "seeds", 3)["seeds"] == [0, 1, 2]
    # The same iterations at every size: the budget grows with the envs.
    grown = scaling.resized({"budget": {"env_steps": 1000}, "hyperparameters": {"num_envs": 4}}, "envs", 16)
    assert grown["budget"] == {"env_steps": 4000}


def test_scale_measures_each_size_and_stops_at_the_first_the_spec_refuses(tmp_path):
    data = copy.deepcopy(TINY_PPO)
    # 4 minibatches of num_envs x 3 steps: 6 envs make 18 steps, which 4 does not divide.
    data["hyperparameters"] = {"num_envs": 4, "num_steps": 3}
    path = write_spec(tmp_path, data)
    uri = new_store(tmp_path)
    png = tmp_path / "scale.png"
    code, out, err = run_cli(
        "scale", str(path), "--sizes", "4,8,6,16", "--chunk-iterations", "1", "--timed-chunks", "1",
        "--no-ceiling", "--tracking-uri", uri, "--out", str(png),
    )  # fmt: skip
    assert code == 0, out + err
    flat = " ".join(out.split())
    assert "envs=6: stopped, does not fit the spec" in flat and "num_minibatches" in flat
    assert "envs=16" not in flat and ("saturates at envs=" in flat or "still growing at envs=8" in flat)
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert json.loads(png.with_suffix(".json").read_text())["stopped"]["size"] == 6

    client = mlflow.MlflowClient(uri)
    (experiment,) = [e for e in client.search_experiments() if e.name == "tiny_ppo"]
    found = client.search_runs([experiment.experiment_id], "tags.`harness.kind` = 'scale'")
    (parent,) = [r for r in found if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in found if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert sorted(r.data.params["scale.envs"] for r in children) == ["4", "8"]
    assert all(r.data.metrics["env_steps_per_second"] > 0 for r in children)
    assert all(r.data.metrics["program_bytes"] > 0 for r in children)
    assert parent.info.status == "FINISHED" and parent.data.tags["scale.saturation"] in {"4", "8"}
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"scale.png", "scale.json"} <= artifacts
    document = json.loads(open(client.download_artifacts(parent.info.run_id, "scale.json", str(tmp_path))).read())
    assert [p["size"] for p in document["points"]] == [4, 8]
    assert document["stopped"]["size"] == 6
    # Steps per iteration grow with the envs; so does the program's memory.
    assert document["points"][1]["program_bytes"] > document["points"][0]["program_bytes"]


def _point(size: int, rate: float, seconds: float = 10.0) -> scaling.SizePoint:
    return scaling.SizePoint(size, rate, (rate,), 1.0, None, None, None, None, 1, seconds)


def _options(**kwargs) -> scale_session.ScaleOptions:
    fields = dict(axis="envs", sizes=[16, 32, 64, 128, 256], chunk_iterations=None, timed_chunks=2, uri="",
                  out=Path("scale.png"), measure_ceiling=False)  # fmt: skip
    return scale_session.ScaleOptions(**{**fields, **kwargs})


def test_the_ladder_stops_once_the_throughput_has_stopped_growing():
    # 136k, 169k, 116k, 157k: two sizes in a row below the best (169k at 32).
    points = [_point(16, 136e3), _point(32, 169e3), _point(64, 116e3)]
    assert not scaling.flat(points)
    assert scaling.flat([*points, _point(128, 157e3)])
    assert not scaling.flat([_point(16, 1.0), _point(32, 2.0), _point(64, 1.5), _point(128, 2.5)])
    stop = scale_session._stop_after([*points, _point(128, 157e3)], _options(until_flat=True), 40.0)
    assert stop.size == 256 and "stopped growing" in stop.reason
    # Sizes or a stop given: the ladder goes on to its end.
    assert scale_session._stop_after([*points, _point(128, 157e3)], _options(), 40.0) is None


def test_max_seconds_starts_no_size_that_would_end_after_it():
    points = [_point(16, 1e5, seconds=30.0)]
    stop = scale_session._stop_after(points, _options(max_seconds=60.0), 40.0)
    assert stop.size == 32 and "--max-seconds 60" in stop.reason
    assert scale_session._stop_after(points, _options(max_seconds=100.0), 40.0) is None


def test_the_ladder_is_said_before_and_its_time_after_the_first_size():
    said = scale_session._ladder(_options(until_flat=True, max_seconds=300.0))
    assert "envs = 16, 32, 64, 128, 256 (5 sizes" in said and "stopped growing" in said and "300 s" in said
    assert "about 10 s a size; at most about 40 s for the 4 sizes left" in scale_session._estimate(
        _point(16, 1e5), _options()
    )


def test_chunks_last_about_two_seconds_at_the_last_size_s_rate():
    class Plan(NamedTuple):
        spec: object
        env_steps_per_iteration: int

    spec = types.SimpleNamespace(logging=types.SimpleNamespace(interval=61), seeds=(0, 1))
    plan = Plan(spec, 1000)
    assert scaling.chunk_iterations(plan, None) == scaling.FIRST_CHUNK_ITERATIONS
    assert scaling.chunk_iterations(plan, _point(16, 20e3)) == 20  # 2 s x 20k / (1000 x 2 seeds)
    assert scaling.chunk_iterations(plan, _point(16, 1e9)) == 61  # at most the logging interval
    assert scaling.chunk_iterations(plan, _point(16, 10.0)) == 1
