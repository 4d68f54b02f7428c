"""The bench run in MLflow: a session run in the experiment `bench` with a
child run per entry (its figures as metrics, its configuration as params,
the report's table and chart as artifacts)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from benchmarks.machinery import report
from benchmarks.machinery.history import Change
from benchmarks.machinery.measure import ENV_STEPS, Result
from harness.record import store, tracking
from harness.run.ceiling import Ceiling

EXPERIMENT = "bench"  # the MLflow experiment of the bench's runs


def _tags(info: dict[str, Any]) -> dict[str, str]:
    return {
        "bench.device_key": info["device_key"],
        "bench.mode": info["mode"],
        "bench.session": info["session"],
        **tracking.provenance_tags(info["fingerprint"], info["versions"], info["git"]),
    }


def entry_metrics(result: Result, change: Change, ceiling: Ceiling | None) -> dict[str, float]:
    """The numbers an entry's MLflow run holds (None values left out)."""
    values: dict[str, float | None] = {
        "rate_median": result.rate[0],
        "rate_min": result.rate[1],
        "rate_max": result.rate[2],
        "repeats": result.repeats,
        "compile_seconds": result.compile_seconds,
        "simulations_per_second": result.simulations_per_second,
        "updates_per_second": result.updates_per_second,
        "flops_per_iteration": result.flops_per_iteration,
        "gflops_per_second": result.gflops_per_second,
        "gbytes_per_second_upper": result.gbytes_per_second,
        "xla_flops_per_call": result.xla_flops_per_call,
        "peak_host_mb": result.peak_host_bytes / 2**20 if result.peak_host_bytes is not None else None,
        "peak_device_mb": result.peak_device_bytes / 2**20 if result.peak_device_bytes is not None else None,
        "change_percent": 100 * (change.ratio - 1) if change.ratio is not None else None,
    }
    if result.unit == ENV_STEPS:
        values.update(sps_median=result.rate[0], sps_min=result.rate[1], sps_max=result.rate[2])
    if ceiling and result.gflops_per_second is not None:
        values["matmul_fraction"] = result.gflops_per_second / ceiling.matmul_for(result.compute_dtype)
    if ceiling and result.gbytes_per_second is not None:
        values["bandwidth_fraction_upper"] = result.gbytes_per_second / ceiling.bandwidth_gbs[0]
    if result.final_metric:
        values[f"final_{result.final_metric}"] = result.final_value
    if test := result.extra.get("speed"):  # the candidate's speed over the baseline's (or the peer's)
        values.update(
            speed_ratio=test["ratio"], speed_ratio_low=test["interval"][0], speed_ratio_high=test["interval"][1]
        )
    return {k: float(v) for k, v in values.items() if v is not None}


def log_to_mlflow(
    uri: str,
    document: dict[str, Any],
    results: list[Result],
    changes: dict[str, Change],
    ceiling: Ceiling | None,
    artifacts: dict[str, Path | str],
) -> str:
    """Log a bench run to the experiment `bench` at `uri`: a session run
    (ceiling, chart, table, JSON) and, under it, one run per entry tagged
    with the device fingerprint and versions. Returns the session run's id.
    `artifacts` maps a file name to a path or to text."""
    from mlflow.entities import Metric, Param, RunTag

    from harness import experiment_spec as spec

    client = tracking.open_client(uri)
    experiment_id = store.get_or_create_experiment(client, uri, EXPERIMENT)
    info = document["harness"]
    tags = _tags(info)
    now = document_millis(info)
    figures = info.get("baseline_figures", [])
    session_id = client.create_run(
        experiment_id,
        run_name=f"bench {info['mode']} {info['started'][:19]}",
        tags={**tags, "bench.kind": "session", **{k: v for f in figures for k, v in figure_tags(f).items()}},
    ).info.run_id
    open_runs = [session_id]
    try:
        session_metrics = {
            "entries": len(results),
            "slower": sum(report.slower(r) for r in results),
            "wall_seconds": info.get("wall_seconds"),
            **{f"{f['figure']}_ratio": f["ratio"] for f in figures},
        }
        if ceiling:
            session_metrics.update(
                ceiling_matmul_gflops=ceiling.matmul_gflops[0],
                ceiling_matmul_bf16_gflops=ceiling.matmul_bf16_gflops[0] if ceiling.matmul_bf16_gflops else None,
                ceiling_bandwidth_gbs=ceiling.bandwidth_gbs[0],
            )
        client.log_batch(
            session_id,
            metrics=[Metric(k, float(v), now, 0) for k, v in session_metrics.items() if v is not None],
        )
        for r in results:
            change = changes.get(r.name, Change("new"))
            run_id = client.create_run(
                experiment_id,
                run_name=r.name,
                tags={
                    **tags,
                    "mlflow.parentRunId": session_id,
                    "bench.kind": r.kind,
                    "bench.entry": r.name,
                    "bench.unit": r.unit,
                    "bench.config_hash": r.config_hash,
                    "bench.change": change.label(),
                    **speed_tags(r),
                },
            ).info.run_id
            open_runs.append(run_id)
            params = {**spec.flatten(r.config), "unit": r.unit, "iteration": r.iteration}
            client.log_batch(
                run_id,
                metrics=[Metric(k, v, now, 0) for k, v in entry_metrics(r, change, ceiling).items()],
                params=[Param(k, str(v)[:6000]) for k, v in params.items()],
            )
            client.set_terminated(run_id, "FINISHED")
            open_runs.remove(run_id)
        with tempfile.TemporaryDirectory() as tmp:
            for name, content in artifacts.items():
                if isinstance(content, Path):
                    client.log_artifact(session_id, str(content))
                else:
                    path = Path(tmp) / name
                    path.write_text(content)
                    client.log_artifact(session_id, str(path))
        client.set_terminated(session_id, "FINISHED")
        open_runs.remove(session_id)
    finally:
        for run_id in open_runs:
            client.log_batch(run_id, tags=[RunTag("error", "the bench run's logging failed")])
            client.set_terminated(run_id, "FAILED")
    return session_id


def figure_tags(figure: dict[str, Any]) -> dict[str, str]:
    """A figure's test against the baseline, the entries as rounds
    (benchmarks.machinery.baseline_figures), as the session run's tags:
    `bench.compile_seconds.verdict` (fail, pass or inconclusive), its
    outcome, ratio and interval, and the entries it took."""
    prefix = f"bench.{figure['figure']}"
    return {
        f"{prefix}.verdict": figure["verdict"],
        f"{prefix}.outcome": figure["outcome"],
        f"{prefix}.ratio": f"{figure['ratio']:.3f} [{figure['interval'][0]:.3f}, {figure['interval'][1]:.3f}]",
        f"{prefix}.rounds": str(figure["rounds"]),
    }


def speed_tags(result: Any) -> dict[str, str]:
    """An entry's speed test as tags: `bench.verdict` (fail, pass or
    inconclusive: harness.stats.verdict's words), what it was against, its
    ratio and interval, and `bench.baseline` (the baseline's commit)."""
    test = result.extra.get("speed")
    baseline = result.extra.get("baseline", {})
    tags = {"bench.baseline": str(baseline["rev"])} if baseline.get("rev") else {}
    if baseline.get("missing"):
        tags["bench.baseline_missing"] = baseline["missing"][:500]
    if test is None:
        return tags
    return {
        **tags,
        "bench.verdict": test["verdict"],
        "bench.speed": test["outcome"],
        "bench.against": "baseline" if baseline else "peer",
        "bench.ratio": f"{test['ratio']:.4f} [{test['interval'][0]:.4f}, {test['interval'][1]:.4f}]",
        "bench.rounds": str(test["rounds"]),
        "bench.slower_by": str(test["slower_by"]),
    }


def document_millis(info: dict[str, Any]) -> int:
    """The run's start as MLflow's timestamp (milliseconds since the epoch)."""
    from datetime import datetime

    return int(datetime.fromisoformat(info["started"]).timestamp() * 1000)
