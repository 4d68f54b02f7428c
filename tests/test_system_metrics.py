"""MLflow's system metrics on a run's parent (harness.record.system_metrics)."""

from __future__ import annotations

import pytest
from conftest import TINY_SPEC, new_store, run_cli, write_spec
from mlflow.tracking import MlflowClient

from harness import cli
from harness.record import system_metrics


def test_a_run_logs_system_metrics_on_its_parent_run(tmp_path):
    path = write_spec(tmp_path, dict(TINY_SPEC, name="tiny_system_metrics"))
    uri = new_store(tmp_path)
    code, out, err = run_cli(
        "run", str(path), "--tracking-uri", uri, "--no-progress", "--system-metrics-interval", "0.2"
    )
    assert code == 0, err
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("tiny_system_metrics").experiment_id])
    (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
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
    assert cli._options(args).system_metrics is None
    args = parse(["run", "spec.yaml"])
    args.started_at = 0.0
    assert cli._options(args).system_metrics == system_metrics.DEFAULT_INTERVAL
    args = parse(["sweep", "spec.yaml", "--system-metrics-interval", "0"])
    args.started_at = 0.0
    with pytest.raises(cli._OptionError, match="--system-metrics-interval"):
        cli._options(args)


def test_what_cannot_be_measured_is_said():
    assert system_metrics.cannot_measure("cpu") is None
    assert "TPU" in system_metrics.cannot_measure("tpu")
