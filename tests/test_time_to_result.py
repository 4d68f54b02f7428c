"""Time to result: the persistent compilation cache, the wall-time breakdown
in the record, and the metric writer's parallel workers."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from mlflow.tracking import MlflowClient
from support import TINY_SPEC, new_store, run_cli, write_spec

from harness.record import schema
from harness.record.metric_writer import split_entry
from harness.run import compile_cache

# Checks what is recorded, not learning: the tiny spec, made cheaper still.
SPEC = copy.deepcopy(TINY_SPEC) | {
    "name": "time_to_result",
    "budget": {"env_steps": 40 * 4 * 8},
    "hyperparameters": {"num_envs": 4, "num_steps": 8},
    "network": {"kind": "mlp", "hidden_sizes": [16]},
}


def _curves(record: schema.Results) -> dict:
    return record.curves.metrics


@pytest.fixture(scope="module")
def cached_runs(tmp_path_factory):
    """The spec run twice in this process, with the session's compilation
    cache (tests/conftest.py): the second run's programs come from it."""
    tmp = tmp_path_factory.mktemp("time")
    spec = write_spec(tmp, SPEC)
    uri = new_store(tmp)
    records, outputs = [], []
    for i in range(2):
        out = tmp / f"results{i}.json"
        code, stdout, stderr = run_cli(
            "run", str(spec), "--tracking-uri", uri, "--no-progress", "--results-out", str(out)
        )
        assert code == 0, stderr
        records.append(schema.parse(out.read_text(), str(out)))
        outputs.append(stdout)
    return tmp, spec, uri, records, outputs


def _parents(uri: str) -> list:
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name(SPEC["name"]).experiment_id], order_by=["start_time"])
    return [r for r in runs if "mlflow.parentRunId" not in r.data.tags]


def test_a_second_run_is_served_by_the_cache_and_bit_identical(cached_runs):
    _, _, uri, (first, second), _ = cached_runs
    assert second.speed.compile_cache == "hit"
    assert first.speed.compile_cache in {"miss", "partial", "hit"}  # earlier tests may have compiled it
    assert _curves(second) == _curves(first)
    tags = [r.data.tags["compile_cache"] for r in _parents(uri)]
    assert tags == [first.speed.compile_cache, second.speed.compile_cache]


def test_no_compile_cache_compiles_everything_and_gives_the_same_bits(cached_runs, tmp_path):
    """A fresh process with the cache off (--no-compile-cache): nothing asks
    the cache, and the curves are those of the cached runs, bit for bit."""
    _, spec, _, (first, _), _ = cached_runs
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "run", str(spec), "--no-compile-cache", "--no-progress"]
        + ["--tracking-uri", new_store(tmp_path), "--results-out", str(out)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    uncached = schema.parse(out.read_text(), str(out))
    assert uncached.speed.compile_cache == "off"
    assert _curves(uncached) == _curves(first)
    assert "cache: off" in " ".join(proc.stdout.split())


def test_the_record_says_where_the_wall_time_went(cached_runs):
    _, _, uri, records, outputs = cached_runs
    for record, stdout in zip(records, outputs, strict=True):
        wall = record.speed.wall_time
        assert wall is not None
        parts = [wall.startup, wall.compile, wall.first_chunk, wall.steady, wall.metric_writing]
        assert all(p >= 0 for p in [*parts, wall.evaluation, wall.checkpoint])
        assert wall.compile == pytest.approx(record.speed.compile_seconds)
        assert wall.metric_writing == pytest.approx(record.speed.metrics_flush_seconds)
        # The parts are disjoint stretches of the run: they add up to at most the total.
        assert sum(parts) <= wall.total + 1e-6
        assert "time: start-up" in stdout and f"total {wall.total:.1f} s" in " ".join(stdout.split())
    names = {f"time_{part}_seconds" for part in schema.WallTime.model_fields}
    for parent, record in zip(_parents(uri), records, strict=True):
        assert names <= set(parent.data.metrics)
        assert parent.data.metrics["time_total_seconds"] == record.speed.wall_time.total


def test_cache_directory_resolution(monkeypatch, tmp_path):
    monkeypatch.delenv(compile_cache.ENV, raising=False)
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert compile_cache.resolve(None, False) == tmp_path / "rl-harness" / "jax"
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "jax"))
    assert compile_cache.resolve(None, False) == tmp_path / "jax"
    monkeypatch.setenv(compile_cache.ENV, str(tmp_path / "harness"))
    assert compile_cache.resolve(None, False) == tmp_path / "harness"
    assert compile_cache.resolve(str(tmp_path / "option"), False) == tmp_path / "option"
    assert compile_cache.resolve(str(tmp_path / "option"), True) is None
    assert compile_cache.Usage(0, 0).verdict == "off"
    assert compile_cache.Usage(3, 0).verdict == "miss"
    assert compile_cache.Usage(3, 1).verdict == "partial"
    assert compile_cache.Usage(3, 3).verdict == "hit"


def test_the_writer_splits_an_entry_into_jobs_that_cover_every_point_once():
    names = ["loss", "entropy", "grad_norm"]
    entry = {"seq": 4, "first": 7, "steps": 32, "metrics": {n: np.arange(6.0).reshape(3, 2).tolist() for n in names}}
    for runs, workers in [(["a", "b"], 1), (["a", "b"], 4), (["a"], 4), (["a"], 8)]:
        jobs = split_entry(entry, runs, workers)
        assert len(jobs) >= min(workers, len(runs) * len(names))
        covered = sorted((run, column, name) for run, column, part in jobs for name in part["metrics"])
        assert covered == sorted((run, c, n) for c, run in enumerate(runs) for n in names)
        assert all(part["first"] == 7 and part["seq"] == 4 for _, _, part in jobs)
    assert json.dumps(jobs)  # what goes to a worker process


def test_a_run_records_prints_and_compares_its_peak_memory(cached_runs):
    # On a CPU the peak is the process's resident memory (harness.run.memory).
    tmp, _, uri, (first, _), (stdout, _) = cached_runs
    assert first.speed.peak_memory == "host" and first.speed.peak_memory_bytes > 100 * 2**20
    assert f"peak memory {first.speed.peak_memory_bytes / 2**20:,.0f} MB (host)" in " ".join(stdout.split())
    parent = _parents(uri)[0]
    assert parent.data.metrics["peak_memory_mb"] == pytest.approx(first.speed.peak_memory_bytes / 2**20)
    code, out, err = run_cli("compare", "--experiment", SPEC["name"], "--tracking-uri", uri, "--out", str(tmp / "c"))
    assert code == 0, err
    assert "peak MB" in out and "(host)" in out and (tmp / "c.png").exists()
    # A plot path that is not a PNG's is refused before anything is read.
    code, out, err = run_cli("compare", "--experiment", "nope", "--tracking-uri", uri, "--out", str(tmp / "c.svg"))
    assert code == 2 and "the plot is a PNG; give a path that ends in .png" in err and not out
