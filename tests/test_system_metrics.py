"""What a run records of where its time went, on its parent run: MLflow's
system metrics (harness.record.system_metrics), each chunk's host-side
times and a `--profile` trace (harness.run.profiling)."""

from __future__ import annotations

from pathlib import Path

import jax
import pytest
from mlflow.tracking import MlflowClient
from support import TINY_SPEC, new_store, run_cli, write_spec

from harness import cli
from harness.cli import options as cli_options
from harness.record import system_metrics


@pytest.fixture(scope="module")
def profiled_run(tmp_path_factory):
    """One tiny `harness run --profile` (4 chunks of 20 iterations)."""
    tmp_path = tmp_path_factory.mktemp("profiled")
    path = write_spec(tmp_path, dict(TINY_SPEC, name="tiny_system_metrics"))
    uri = new_store(tmp_path)
    code, out, err = run_cli(
        "run", str(path), "--tracking-uri", uri, "--no-progress", "--system-metrics-interval", "0.2", "--profile"
    )
    assert code == 0, err
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("tiny_system_metrics").experiment_id])
    (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    return client, runs, parent, tmp_path, err


def test_a_run_logs_system_metrics_on_its_parent_run(profiled_run):
    client, runs, parent, _, _ = profiled_run
    history = client.get_metric_history(parent.info.run_id, "system/cpu_utilization_percentage")
    assert history and all(0 <= m.value <= 100 for m in history)
    assert [m.step for m in history] == list(range(len(history)))
    assert "system/system_memory_usage_megabytes" in parent.data.metrics
    # Only the parent: the seeds' runs hold the training curves.
    for run in runs:
        if run.info.run_id != parent.info.run_id:
            assert not any(name.startswith("system/") for name in run.data.metrics)


def test_options_turn_it_off_and_refuse_a_bad_interval():
    parse = cli.parser().parse_args
    args = parse(["run", "spec.yaml", "--no-system-metrics"])
    args.started_at = 0.0
    assert cli_options.run_options(args).system_metrics is None
    args = parse(["run", "spec.yaml"])
    args.started_at = 0.0
    assert cli_options.run_options(args).system_metrics == system_metrics.DEFAULT_INTERVAL
    args = parse(["sweep", "spec.yaml", "--system-metrics-interval", "0"])
    args.started_at = 0.0
    with pytest.raises(cli_options.OptionError, match="--system-metrics-interval"):
        cli_options.run_options(args)


def test_what_cannot_be_measured_is_said():
    assert system_metrics.cannot_measure("cpu") is None
    assert "TPU" in system_metrics.cannot_measure("tpu")


def test_each_chunk_s_host_side_times_are_metrics_of_the_parent_run(profiled_run):
    client, _, parent, _, _ = profiled_run
    steps_per_iteration = 16 * 32
    walls = client.get_metric_history(parent.info.run_id, "host_wall_seconds")
    assert sorted(m.step for m in walls) == [20 * k * steps_per_iteration for k in (1, 2, 3, 4)]
    for part in ("device_wait", "evaluation", "logging", "checkpoint"):
        history = {m.step: m.value for m in client.get_metric_history(parent.info.run_id, f"host_{part}_seconds")}
        assert sorted(history) == sorted(m.step for m in walls), part
        assert all(0 <= v for v in history.values()), part
    # The device computes while the host waits: most of a CPU chunk is that.
    waits = {m.step: m.value for m in client.get_metric_history(parent.info.run_id, "host_device_wait_seconds")}
    assert sum(waits.values()) > 0


def test_profile_leaves_a_trace_the_profiler_reads_back_logged_to_mlflow(profiled_run):
    client, _, parent, tmp_path, err = profiled_run
    # Each file once: Python 3.13's rglob gives a path once per way a
    # pattern with two `**` matches it.
    (trace,) = {p for p in tmp_path.rglob("*.xplane.pb") if "profile" in p.parts}
    data = jax.profiler.ProfileData.from_file(str(trace))
    planes = {plane.name: plane for plane in data.planes}
    host = next(plane for name, plane in planes.items() if name.startswith("/host:CPU"))
    names = {event.name for line in host.lines for event in line.events}
    assert any("chunk" in name for name in names), sorted(names)[:40]
    assert list(trace.parent.glob("*.trace.json.gz")), "a Perfetto trace beside it"

    def artifacts(path):
        for item in client.list_artifacts(parent.info.run_id, path):
            yield from artifacts(item.path) if item.is_dir else [item.path]

    logged = {Path(p).name for p in artifacts("profile")}
    assert trace.name in logged
    assert "the chunk ending at iteration 40" in err and "xprof --logdir" in err


def test_profile_is_refused_for_a_sweep(tmp_path):
    path = write_spec(tmp_path, dict(TINY_SPEC, sweep={"optimizer.learning_rate": [0.001, 0.003]}))
    code, _, err = run_cli("run", str(path), "--tracking-uri", new_store(tmp_path), "--profile")
    assert code == 2 and "--profile" in err and "sweep" in err
