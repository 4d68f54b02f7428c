"""The benchmark suite (`nox -s bench`): a tiny entry end to end (its table
row, its MLflow run, its saved JSON), the comparison with the last run on
saved data, and one clear message for each bad input. No speed is asserted:
only that figures are recorded and compared."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
from support import TINY_SPEC, background_result, new_store, write_spec

from benchmarks.machinery import history, planned, report
from benchmarks.machinery import measure as bench
from harness.run.ceiling import Ceiling
from harness.stats import speed

ROOT = Path(__file__).resolve().parent.parent
ENTRY = "spec[tiny_bench]"
TINY_BENCH = {
    **copy.deepcopy(TINY_SPEC),
    "name": "tiny_bench",
    "seeds": [0],
    # 4 chunks of 5 iterations: a warm-up and 3 repeats.
    "budget": {"env_steps": 4 * 5 * 16 * 32},
    "logging": {"interval": 5},
}


def run_bench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """`nox -s bench`'s pytest command, results and MLflow store in tmp_path."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "benchmarks",
            "-p",
            "no:cacheprovider",
            "--benchmark-only",
            "--bench-dir",
            str(tmp_path / "bench"),
            "--tracking-uri",
            new_store(tmp_path),
            *args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )


def run_tiny_bench(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """The tiny entry benched in a subprocess, in the background (conftest's
    BACKGROUND) while the session does other tests."""
    tmp = tmp_path_factory.mktemp("bench")
    spec = write_spec(tmp, TINY_BENCH, "tiny_bench.yaml")
    # --profile: the entry's second chunk is traced and left out of the repeats.
    return run_bench(tmp, "--spec", str(spec), "-k", "tiny_bench", "--profile"), tmp


BACKGROUND = {"tiny_bench": run_tiny_bench}


@pytest.fixture(scope="module")
def tiny_bench():
    return background_result("tiny_bench")


def saved_run(tmp: Path) -> tuple[Path, dict]:
    (path,) = (tmp / "bench" / "history").glob("*/*.json")
    return path, json.loads(path.read_text())


def test_a_tiny_entry_writes_its_table_row_json_and_mlflow_run(tiny_bench):
    proc, tmp = tiny_bench
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]

    # The entry's row in each of the report's four tables, printed at the end
    # and kept in report.txt, none wider than a terminal.
    rows = [line for line in proc.stdout.splitlines() if ENTRY in line]
    assert len(rows) == 4, proc.stdout[-4000:]
    assert "steps/s" in rows[0] and "new" in rows[0] and "episode_return" in rows[3]
    report = (tmp / "bench" / "report.txt").read_text()
    assert all(row in report for row in rows)
    assert max(len(line) for line in report.splitlines() if "│" in line) <= 80
    assert "device ceiling:" in proc.stdout

    # The saved JSON: pytest-benchmark's document, filed under the device key.
    path, document = saved_run(tmp)
    info = document["harness"]
    assert path.parent.name == history.device_key(info["fingerprint"])
    assert document["machine_info"]["device_fingerprint"] == info["fingerprint"]
    assert info["ceiling"]["matmul_gflops"][0] > 0 and info["ceiling"]["bandwidth_gbs"][0] > 0
    assert info["ceiling"]["matmul_bf16_gflops"][0] > 0 and "bfloat16" in proc.stdout
    (record,) = history.entries(document)
    result = bench.Result.from_dict(record)
    assert result.name == ENTRY and result.kind == "spec" and result.unit == bench.ENV_STEPS
    assert result.repeats == 2 and result.rate[1] <= result.rate[0] <= result.rate[2]
    # The trace of the chunk left out, where the report says, readable by the profiler.
    (trace,) = Path(result.extra["profile"]).rglob("*.xplane.pb")
    assert Path(result.extra["profile"]).is_relative_to(tmp / "bench" / "profiles")
    assert "profiles: " in proc.stdout and "xprof --logdir" in proc.stdout
    assert any("chunk" in event.name for event in _host_events(trace))
    assert result.compile_seconds > 0 and result.flops_per_iteration > 0 and result.peak_host_bytes > 0
    assert result.final_metric == "episode_return" and np.isfinite(result.final_value)
    assert result.config["seeds"] == 1 and result.config["evaluate"] is False
    assert (tmp / "bench" / "benchmark.json").is_file() and (tmp / "bench" / "sps.png").is_file()

    # The MLflow runs: one per entry under a session run, in experiment bench.
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("bench")
    runs = client.search_runs([experiment.experiment_id])
    (run,) = [r for r in runs if r.data.tags.get("bench.entry") == ENTRY]
    assert run.info.status == "FINISHED"
    assert run.data.metrics["sps_median"] == pytest.approx(result.rate[0])
    assert run.data.metrics["compile_seconds"] == pytest.approx(result.compile_seconds)
    assert "final_episode_return" in run.data.metrics and "matmul_fraction" in run.data.metrics
    tags = run.data.tags
    assert tags["device.platform"] == info["fingerprint"]["platform"]
    assert tags["version.jax"] == jax.__version__
    assert tags["bench.device_key"] == path.parent.name and tags["bench.change"] == "new"
    assert run.data.params["spec_hash"] == result.config["spec_hash"]
    session = client.get_run(tags["mlflow.parentRunId"])
    assert session.data.tags["bench.kind"] == "session" and session.info.status == "FINISHED"
    artifacts = {a.path for a in client.list_artifacts(session.info.run_id)}
    assert {"sps.png", "report.txt", "benchmark.json"} <= artifacts


def _host_events(trace: Path):
    from jax.profiler import ProfileData

    profile = ProfileData.from_file(str(trace))
    return [event for plane in profile.planes for line in plane.lines for event in line.events]


def planted(document: dict, factor: float, started: str) -> dict:
    """A copy of a saved run with every rate multiplied by `factor`."""
    out = copy.deepcopy(document)
    out["harness"]["started"] = started
    for record in history.entries(out):
        record["rate"] = [rate * factor for rate in record["rate"]]
    return out


def test_the_last_run_gives_a_ratio_to_read_never_a_verdict(tiny_bench):
    """A stored run cannot be interleaved with this one: a planted 20% gap
    shows as a ratio, and nothing is flagged (verdicts come from --baseline)."""
    proc, tmp = tiny_bench
    assert proc.returncode == 0, proc.stderr[-4000:]
    _, document = saved_run(tmp)
    current = history.entries(document)
    earlier = "2000-01-01T00:00:00+00:00"
    changes = history.compare(current, history.previous_entries([planted(document, 1 / 0.8, earlier)]))
    assert changes[ENTRY].status == "compared" and changes[ENTRY].ratio == pytest.approx(0.8)
    assert changes[ENTRY].label() == "-20.0%"
    results = [bench.Result.from_dict(r) for r in current]
    text = report.render(report.table(results, changes, None, "t"))
    row = next(line for line in text.splitlines() if ENTRY in line)
    assert "-20.0%" in row and "SLOWER" not in text and "REGRESSION" not in text


def record(name: str, median: float, config: str = "a") -> dict:
    return {"name": name, "config_hash": config, "rate": [median, 0.9 * median, 1.1 * median]}


def run_document(started: str, *records: dict) -> dict:
    return {"harness": {"started": started}, "benchmarks": [{"extra_info": {"harness": r}} for r in records]}


def test_the_default_bench_runs_the_work_its_ledger_plans():
    """benchmarks/planned.json: work entering the default bench (a budget, an
    evaluation, an assessment after training) fails here until the ledger is
    written again on purpose."""
    now = planned.planned()
    assert planned.changes(now, json.loads(planned.LEDGER.read_text())) == []
    assert not any(entry["assessment"] for entry in now.values())
    changed = {**now, "spec[extra]": {"env_steps": 1}}
    changed["filled[alphazero_connect_four]"] = {**now["filled[alphazero_connect_four]"], "assessment": True}
    assert planned.changes(changed, now) == [
        "spec[extra]: new entry",
        "filled[alphazero_connect_four]: assessment False -> True",
    ]


def test_each_entry_is_compared_with_the_latest_run_that_has_it():
    runs = [
        run_document("2026-01-01T00:00:00", record("a", 100.0), record("b", 10.0)),
        run_document("2026-01-03T00:00:00", record("a", 200.0)),  # a `-k a` run
        run_document("2026-01-02T00:00:00", record("a", 150.0), record("b", 20.0)),
    ]
    previous = history.previous_entries(runs)
    assert previous["a"]["rate"][0] == 200.0 and previous["b"]["rate"][0] == 20.0
    changes = history.compare([record("a", 150.0), record("b", 20.0), record("c", 1.0)], previous)
    assert changes["a"].ratio == 0.75 and changes["a"].previous_started == "2026-01-03T00:00:00"
    assert changes["b"].status == "compared" and changes["c"].status == "new"
    changed = history.compare([record("b", 1.0, config="other")], previous)
    assert changed["b"].status == "config changed" and changed["b"].ratio is None


def test_each_entry_is_set_against_the_matmul_ceiling_of_the_dtype_it_computes_in():
    ceiling = Ceiling(
        matmul_gflops=(100.0, 90.0, 110.0),
        bandwidth_gbs=(10.0, 9.0, 11.0),
        matmul_size=8192,
        copy_bytes=2 * 2**30,
        xla_matmul_flops=None,
        matmul_bf16_gflops=(400.0, 380.0, 420.0),
    )
    assert ceiling.matmul_for("float32") == 100.0 and ceiling.matmul_for("bfloat16") == 400.0
    # A run saved before bfloat16 was measured reads back, with float32's for both.
    old = {k: v for k, v in ceiling.as_dict().items() if k != "matmul_bf16_gflops"}
    assert Ceiling.from_dict(old).matmul_for("bfloat16") == 100.0
    assert Ceiling.from_dict(ceiling.as_dict()) == ceiling
    entry = dict(name="e", kind="micro", config={}, unit=bench.ENV_STEPS, rate=(1.0, 1.0, 1.0), repeats=1)
    f32 = bench.Result(**entry, gflops_per_second=50.0)
    bf16 = bench.Result(**entry, gflops_per_second=50.0, compute_dtype="bfloat16")
    text = report.render(report.table([f32, bf16], {}, ceiling, "t"))
    assert "50%" in text and "12%" in text
    # Measured at other sizes than the last run: not compared.
    smaller = {**ceiling.as_dict(), "matmul_size": 2048}
    assert "not compared" in history.ceiling_change(ceiling, smaller)


def test_the_speed_tests_against_the_peers_are_the_line_above_the_table():
    def against(name, ours, peer):
        test = speed.decide(speed.log_ratios(peer, ours, rates=True), speed.SpeedTest(alpha=0.01))
        extra = {"our_rates": ours, "peer_rates": peer, "speed": test.as_dict()}
        return bench.Result(name, "micro", {}, bench.ENV_STEPS, (1.0, 1.0, 1.0), len(ours), extra=extra)

    assert report.against_summary([record_result()]) is None  # no side-by-side entry: no line
    fast = against("against_a", [12.0, 11.0, 13.0, 12.5, 11.5], [10.0, 10.0, 10.0, 10.2, 9.9])
    slow = against("against_c", [8.0] * 12, [10.0] * 12)
    line = report.against_summary([fast])
    assert line.startswith("against peers, 1 entry tested: 1 not slower by 10%; lowest ratio 1.20x")
    line = report.against_summary([fast, slow])
    assert "1 SLOWER (against_c), 1 not slower by 10%; lowest ratio 0.80x [0.80-0.80] (against_c)" in line
    # Slower than a peer is a finding, not a regression of the project: no red row.
    assert not report.slower(slow)


def record_result() -> bench.Result:
    return bench.Result("spec[x]", "spec", {}, bench.ENV_STEPS, (1.0, 1.0, 1.0), 3)


def test_runs_are_saved_and_found_by_device(tmp_path):
    fingerprint = {"platform": "cpu", "device_kind": "cpu", "cpu_model": "X", "host": "a"}
    key = history.device_key(fingerprint)
    assert history.device_key({**fingerprint, "host": "b"}) == key, "the host name is not the device"
    assert history.device_key({**fingerprint, "device_kind": "gpu"}) != key
    # A CPU split into host devices (the bench's one per core) is the same CPU.
    split = {**fingerprint, "device_count": "2", "local_device_count": "2"}
    split["xla_flags"] = "--xla_cpu_ftz=true --xla_force_host_platform_device_count=2"
    assert history.device_key(split) == history.device_key({**fingerprint, "xla_flags": "--xla_cpu_ftz=true"})
    document = run_document("2026-01-01T00:00:00+00:00", record("a", 1.0))
    document["harness"].update(device_key=key, session="0123456789")
    path = history.save_run(tmp_path, document)
    assert path.parent == history.history_dir(tmp_path, key)
    (path.parent / "broken.json").write_text("{")
    runs, notes = history.load_runs(path.parent)
    assert runs == [document] and len(notes) == 1 and "broken.json" in notes[0]
    assert history.load_runs(history.history_dir(tmp_path, "other"))[0] == []


def test_peak_host_memory_belongs_to_the_block():
    with bench.HostPeak() as peak:
        block = np.ones(64 * 2**20 // 8)  # 64 MB, touched
    assert peak.bytes >= block.nbytes
    del block


def _missing_platform() -> str:
    present = {d.platform for d in jax.devices()}
    for platform in ("gpu", "tpu", "cpu"):
        try:
            jax.devices(platform)
        except RuntimeError:
            return platform
    raise AssertionError(f"every platform is present: {present}")


@pytest.mark.parametrize(
    "args,message",
    [
        (["-k", "no_such_entry"], "-k 'no_such_entry' matches no benchmark entry"),
        (["--full", "no_such_spec"], "--full: no published spec 'no_such_spec'"),
        (["--device", _missing_platform()], "no such device here"),
        (["--spec", "no/such/spec.yaml"], "no/such/spec.yaml: no such file"),
        (["--against", "no/such/checkout"], "--against no/such/checkout: no checkout of a peer there"),
        (["--fill-seconds", "-5", "-k", "filled and reinforce"], "--fill-seconds: must be a number of seconds above 0"),
        (["--fill-seconds", "soon"], "--fill-seconds: 'soon' is not a number of seconds"),
        (["--fail-on-regression"], "--fail-on-regression judges against a baseline: add --baseline REV"),
        (["--slower-by", "-0.1"], "--slower-by: must be a share above 0 (0.1 is 10%), not -0.1"),
        (["--baseline-python", sys.executable, "-k", "env_step"], "--baseline-python needs --baseline-dir DIR"),
    ],
    ids=[
        "k-matches-nothing",
        "unknown-full-spec",
        "missing-device",
        "missing-spec-file",
        "unknown-peer",
        "negative-fill-seconds",
        "fill-seconds-not-a-number",
        "fail-on-regression-without-a-baseline",
        "negative-slower-by",
        "baseline-without-its-folder",
    ],
)
def test_bad_input_gets_one_clear_message_and_a_nonzero_exit(tmp_path, args, message):
    proc = run_bench(tmp_path, *args)
    output = proc.stdout + proc.stderr
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, output[-3000:]
    assert message in output, output[-3000:]
    assert "Traceback" not in output and not (tmp_path / "bench" / "history").exists()


@pytest.mark.parametrize(
    "path",
    sorted((ROOT / "benchmarks" / "specs").rglob("*.yaml")),
    ids=lambda p: str(p.relative_to(ROOT / "benchmarks" / "specs")),
)
def test_every_benchmark_spec_builds_into_a_warm_up_chunk_and_timed_ones(path):
    from benchmarks.machinery.measure import chunk_lengths
    from harness import build
    from harness import experiment_spec as spec_module

    plan = build.build(spec_module.load(path))
    assert len(chunk_lengths(plan.num_iterations, plan.spec.logging.interval)) >= 3, "a warm-up and 2 timed chunks"


def test_long_entry_names_wrap_after_a_separator_within_the_column():
    from benchmarks.machinery.report import wrap_name

    for name in ("spec[ppo_cartpole-16seeds-cores]", "env_step[xminigrid-MiniGrid-Empty-6x6]", "iteration[ppo]"):
        lines = wrap_name(name, 26).split("\n")
        assert "".join(lines) == name and all(len(line) <= 26 for line in lines)
        assert all(line[-1] in "[-_/|" for line in lines[:-1]), lines
    assert wrap_name("iteration[ppo-deterministic]", 26) == "iteration[\nppo-deterministic]"
