"""`harness drift`: two environments' runs of a spec side by side
(harness.sessions.drift, harness.judge.drift). End to end, the newer side
is this environment with XLA's backend optimisations on where the suite
turns them off (a script that sets XLA_FLAGS and starts this Python), so
what must come out is known: other bits and a slower compile on the
newer side, and each side named as what it is; the comparison's
other answers are checked on records."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from mlflow.tracking import MlflowClient
from support import TINY_SPEC, background_result, device_env, run_cli, start_harness, write_spec

from harness.judge import compare, drift
from harness.record import schema, store, tracking
from harness.stats import speed

# The newer side's flag: XLA's default backend optimisation, where the suite
# compiles at level 0 (tests/support: TEST_XLA_FLAGS; the last value wins).
# Here that ran the tiny spec about 1.5x as fast and compiled 1.7x as long.
OPTIMISED = "--xla_backend_optimization_level=2"


def python_with_flags(folder, flags: str, *, added: bool = True) -> str:
    """A side that is this Python with `flags` added to XLA_FLAGS (or, not
    `added`, as the whole of it)."""
    script = folder / "python-with-flags"
    value = f"$XLA_FLAGS {flags}" if added else flags
    script.write_text(f'#!/bin/sh\nexport XLA_FLAGS="{value}"\nexec {sys.executable} "$@"\n')
    script.chmod(0o755)
    return str(script)


def run_drift(tmp_path_factory) -> tuple[subprocess.CompletedProcess, object]:
    """`harness drift` of the tiny spec cut to 4 iterations, one round,
    this Python against itself with OPTIMISED: a process as a user starts it."""
    tmp = tmp_path_factory.mktemp("drift")
    spec = write_spec(tmp, TINY_SPEC, "tiny.yaml")
    newer = python_with_flags(tmp, OPTIMISED)
    argv = [sys.executable, "-m", "harness", "drift", str(spec), "--older", sys.executable, "--newer", newer]
    argv += ["--rounds", "1", "--iterations", "4", "--out", str(tmp / "drift.json")]
    argv += ["--tracking-uri", f"sqlite:///{tmp / 'mlflow.db'}"]
    env = device_env(None)
    env["COLUMNS"] = "200"
    proc = subprocess.run(argv, cwd=tmp, env=env, capture_output=True, text=True, timeout=600, check=False)
    return proc, tmp


BACKGROUND = {"drift_run": run_drift}


@pytest.fixture(scope="module")
def drift_run():
    return background_result("drift_run")


def test_drift_names_each_side_and_measures_the_newer_against_the_older(drift_run):
    proc, tmp = drift_run
    # Cut to 4 iterations, other bits are not judged: no agreement shown, exit 4.
    assert proc.returncode == 4, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "no agreement shown" in proc.stderr
    document = json.loads((tmp / "drift.json").read_text())
    (row,) = document["specs"]
    assert document["older"].startswith("jax ") and document["newer"].startswith(document["older"][:-1])
    assert OPTIMISED in document["newer"] and OPTIMISED not in document["older"]
    assert (row["spec"], row["iterations"], row["bits"]) == ("tiny", 4, "differ")
    assert drift.shown_verdict(row, document["settings"]) == "not judged (4 iterations)"
    # Speeds are only checked as measured: 4 tiny iterations beside the suite's other work came out
    # at 0.997x once, where alone they run 1.5x; which side compiles longer depends on the jaxlib
    # (the optimised side 1.7x on 0.10.2, 0.92x once on 0.12). The compile ratio's direction is
    # checked against what each side's own run recorded (below).
    assert row["speed_ratio"] > 0 and row["peak_memory"] == "host"
    assert document["settings"]["budget"] == "4 iterations per spec" and document["settings"]["machine"]
    assert "| tiny | 4 | differ | not judged (4 iterations) |" in (tmp / "drift.md").read_text()
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("drift").experiment_id])
    (logged,) = [r for r in runs if r.info.run_name == "drift"]
    assert logged.data.tags["drift.older"] == document["older"] and logged.info.status == "FINISHED"
    assert {"drift.json", "drift.md"} <= {a.path for a in client.list_artifacts(logged.info.run_id)}
    # The drift's run carries the result: tags to sort by, ratios to chart.
    tags, metrics = logged.data.tags, logged.data.metrics
    assert tags["verdict"] == "not judged" and tags["drift.tiny.outcome"] == "not judged"
    assert tags["drift.tiny.bits"] == "differ" and tags["drift.tiny.verdict"] == "not judged (4 iterations)"
    assert metrics["tiny/speed_ratio"] == pytest.approx(row["speed_ratio"])
    assert metrics["tiny/compile_ratio"] == pytest.approx(row["compile_ratio"])
    # Both sides' runs are under it, named for their side and round, each
    # with its seeds' runs under it, and none in the spec's own experiment.
    sides = {r.data.tags["drift.side"]: r for r in runs if r.data.tags.get("mlflow.parentRunId") == logged.info.run_id}
    assert sorted(sides) == ["newer", "older"] and all(r.info.status == "FINISHED" for r in sides.values())
    assert {side: r.info.run_name for side, r in sides.items()} == {s: f"tiny {s} round 1" for s in sides}
    assert OPTIMISED in sides["newer"].data.tags["device.xla_flags"]
    assert OPTIMISED not in sides["older"].data.tags["device.xla_flags"]
    # The ratio is the newer side's compile seconds over the older's, as each side's run recorded them.
    compiled = {
        side: json.loads(tracking.read_text_artifact(client, r.info.run_id, "results.json"))["speed"]["compile_seconds"]
        for side, r in sides.items()
    }
    assert row["compile_ratio"] == pytest.approx(compiled["newer"] / compiled["older"])
    seeds = [r for r in runs if r.data.tags.get("mlflow.parentRunId") in {s.info.run_id for s in sides.values()}]
    assert len(seeds) == 2 * len(TINY_SPEC["seeds"])
    assert client.get_experiment_by_name(TINY_SPEC["name"]) is None
    # A side's run stands for itself (not for the drift run above it), a
    # seed's for its side's; `harness compare --experiment drift` sets the
    # two sides side by side.
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    side = sides["older"].info.run_id
    assert tracking.get_parent_run(client, uri, side)[0].info.run_id == side
    seed = next(r.info.run_id for r in seeds if r.data.tags["mlflow.parentRunId"] == side)
    assert tracking.get_parent_run(client, uri, seed)[0].info.run_id == side
    compared, _ = compare.fetch(client, uri, experiment="drift")
    assert sorted(r.run_id for r in compared) == sorted(r.info.run_id for r in sides.values())


def test_the_speed_ratio_is_the_medians_and_its_spread_the_rounds(tiny_record):
    """Three rounds, each side's steady-state speed made up: the ratio is the
    newer median over the older, the spread the lowest and highest ratio of
    a round's pair (one round, as the run above takes, has no spread to show)."""

    def at(sps: float):
        record = tiny_record.model_copy(deep=True)
        record.speed.sps = sps
        return record

    older = drift.Side("a", [at(100.0), at(100.0), at(200.0)])
    newer = drift.Side("b", [at(120.0), at(150.0), at(180.0)])
    row = drift.compare("tiny", older, newer)
    assert row.speed_ratio == pytest.approx(150.0 / 100.0)
    assert row.speed_spread == pytest.approx((0.9, 1.5))


def test_each_figure_is_judged_by_the_speed_test_on_the_rounds_pairs(tiny_record):
    """Twelve rounds: the newer side 30% slower in steps/s, its compile as
    fast, its memory the same: SLOWER, not slower, not larger; SLOWER fails
    the drift."""

    def at(sps: float, compile_seconds: float):
        record = tiny_record.model_copy(deep=True)
        record.speed.sps, record.speed.compile_seconds = sps, compile_seconds
        return record

    noise = [1.0, 1.02, 0.97, 1.01, 0.99, 1.03, 0.98, 1.0, 1.01, 0.99, 1.02, 0.98]
    older = drift.Side("a", [at(100.0 * n, 2.0 * n) for n in noise])
    newer = drift.Side("b", [at(70.0 * n, 2.0 * n * 0.99) for n in noise])
    test = speed.SpeedTest(alpha=speed.alpha_each(3))
    row = drift.compare("tiny", older, newer, test)
    assert row.tests["speed"]["outcome"] == speed.SLOWER and row.tests["speed"]["ratio"] == pytest.approx(0.7)
    assert row.tests["compile"]["outcome"] == speed.NOT_SLOWER
    if "memory" in row.tests:
        assert row.tests["memory"]["outcome"] == speed.NOT_SLOWER
    document = drift.to_dict("a", "b", [row], {"rounds": 12, "budget": "each spec's own budget"})
    assert "tiny" in drift.failed(document) and drift.slower(document["specs"][0]) == ["speed"]
    assert "0.70x [0.70-0.70] SLOWER" in drift.to_markdown(document)
    assert drift.decided(older.records, newer.records, test)
    assert not drift.decided(older.records[:2], newer.records[:2], test)


def test_bits_and_verdicts_compare_the_sides(tiny_record):
    same = drift.Side("a", [tiny_record, tiny_record])
    assert drift.compare("tiny", same, same)._replace(speed_spread=None)[2:4] == ("identical", "exact, PASS")
    changed = tiny_record.model_copy(deep=True)
    changed.curves.metrics["episode_return"]["1"][3] += 1.0
    row = drift.compare("tiny", same, drift.Side("b", [changed, changed]))
    assert (row.bits, row.verdict) == ("differ", "exact, FAIL")
    row = drift.compare("tiny", same, drift.Side("b", [tiny_record, changed]))
    assert row.bits == "differ within a side"


def test_a_run_that_does_not_finish_is_a_row_of_its_own(tiny_record):
    row = drift.unfinished("tiny", "newer", 300.0, {"older": [tiny_record], "newer": []})
    assert row.verdict == f"the newer did not finish in 300 s; the older took {tiny_record.speed.wall_seconds:.0f} s"
    document = drift.to_dict("a", "b", [row], {"rounds": 1, "budget": "each spec's own budget"})
    assert "| tiny | 0 | - | the newer did not finish in 300 s" in drift.to_markdown(document)
    assert drift.table(document).row_count == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--older", "/no/such/python", "--newer", sys.executable], "--older/--newer /no/such/python: cannot start it"),
        (["--older", sys.executable, "--newer", sys.executable, "--iterations", "2"], "--iterations at least 4"),
    ],
)
def test_bad_drift_options_get_one_line_and_exit_2(tmp_path, args, message):
    spec = write_spec(tmp_path, TINY_SPEC, "tiny.yaml")
    code, out, err = run_cli("drift", str(spec), *args, "--tracking-uri", f"sqlite:///{tmp_path / 'm.db'}")
    assert code == 2 and message in err and "Traceback" not in err, err


# Sides that cannot be one, as shell scripts: (body, what the message says).
BAD_SIDES = {
    "not-a-python": ("exit 0", "did not answer as a Python with JAX and the harness does"),
    "silent-failure": ("exit 3", "it exited 3 and printed no error"),
    "other-output": ("echo hello", "did not answer as a Python with JAX and the harness does"),
    "no-packages": (f'exec {sys.executable} -S -I "$@"', "No module named"),
    # A Python that answers the probe, but whose `harness run` writes no results.
    "no-results": (f'case "$1" in -c) exec {sys.executable} "$@";; esac\nexit 0', "exited 0 without its results"),
}


@pytest.mark.parametrize("name", BAD_SIDES)
def test_a_side_that_cannot_run_gets_one_line_and_no_run_left_running(tmp_path, name):
    body, message = BAD_SIDES[name]
    side = tmp_path / name
    side.write_text(f"#!/bin/sh\n{body}\n")
    side.chmod(0o755)
    spec = write_spec(tmp_path, TINY_SPEC, "tiny.yaml")
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    args = ["--older", str(side), "--newer", sys.executable, "--iterations", "4", "--rounds", "1"]  # checked first
    code, _, err = run_cli("drift", str(spec), *args, "--tracking-uri", uri, "--out", str(tmp_path / "d.json"))
    assert code == 2 and message in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) <= 2 + (name == "no-results") * 13, err
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("drift")
    if experiment is not None:  # the probe refuses a side before any run is made
        assert all(r.info.status != "RUNNING" for r in client.search_runs([experiment.experiment_id]))


def test_a_killed_side_leaves_no_run_running(tmp_path):
    """A side's run killed where it could not end its own runs (inside a
    compile, deaf to Ctrl-C): drift ends them KILLED, and nothing else."""
    from harness.sessions import drift as session

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("drift")
    parent = client.create_run(experiment, run_name="drift").info.run_id
    done = client.create_run(experiment, tags={"mlflow.parentRunId": parent}).info.run_id
    client.set_terminated(done)
    killed = client.create_run(experiment, tags={"mlflow.parentRunId": parent}).info.run_id
    seeds = [client.create_run(experiment, tags={"mlflow.parentRunId": killed}).info.run_id for _ in range(2)]
    session._end_killed(uri, parent)
    status = {run_id: client.get_run(run_id).info.status for run_id in [parent, done, killed, *seeds]}
    assert status == {parent: "RUNNING", done: "FINISHED", killed: "KILLED", seeds[0]: "KILLED", seeds[1]: "KILLED"}


def test_stopping_the_drift_stops_the_run_it_waits_on(tmp_path):
    """SIGINT to the drift process alone (a script's or a scheduler's, not a
    terminal's, which reaches the whole group): the side's run it waits on
    is stopped too, no process is left behind and no MLflow run RUNNING."""
    spec = write_spec(tmp_path, {**TINY_SPEC, "budget": {"env_steps": 100_000 * 16 * 32}}, "long.yaml")
    pids = tmp_path / "pids"
    side = tmp_path / "python-side"  # this Python, saying its process id
    side.write_text(f'#!/bin/sh\necho $$ >> {pids}\nexec {sys.executable} "$@"\n')
    side.chmod(0o755)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    argv = ["drift", str(spec), "--older", str(side), "--newer", str(side), "--rounds", "1"]
    proc = start_harness(*argv, "--out", str(tmp_path / "drift.json"), "--tracking-uri", uri, env=device_env(None))
    client = store.open_client(uri)  # under the harness's lock: the drift is making the same store
    try:
        deadline = time.monotonic() + 120
        while len(_drift_runs(client)) < 2:  # the drift's own and its first side run's
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0][-3000:]
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        output = proc.communicate(timeout=120)[0]
        assert proc.returncode == 130 and "Traceback" not in output, output[-3000:]
        left = [pid for pid in map(int, pids.read_text().split()) if _alive(pid)]
        assert not left, f"side processes still running: {left}"
    finally:
        for pid in map(int, pids.read_text().split()) if pids.exists() else []:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
    runs = _drift_runs(client)
    # The drift's own run says it was stopped before its verdict (harness.record.command_run).
    assert {run.info.run_name == "drift · interrupted" for run in runs} == {True, False}
    assert {run.info.status for run in runs} == {"KILLED"}


def _drift_runs(client: MlflowClient) -> list:
    experiment = client.get_experiment_by_name("drift")
    return client.search_runs([experiment.experiment_id]) if experiment else []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_report_rows_are_named_by_stem_unless_two_folders_share_one_or_it_is_the_bench_s():
    from pathlib import Path

    from harness.sessions.drift import row_names

    paths = [Path("experiments/ppo_cartpole.yaml"), Path("experiments/ppo_pendulum.yaml")]
    paths += [Path("benchmarks/specs/ppo_cartpole.yaml"), Path("benchmarks/specs/reinforce_cartpole.yaml")]
    expected = ["experiments/ppo_cartpole", "ppo_pendulum", "benchmarks/specs/ppo_cartpole"]
    assert row_names(paths) == [*expected, "benchmarks/specs/reinforce_cartpole"]
    assert row_names([Path("benchmarks/specs/ppo_pendulum.yaml")]) == ["benchmarks/specs/ppo_pendulum"]


def test_a_cut_report_judges_bits_only(tiny_record):
    """Cut to a few iterations, differing bits are not judged (the returns
    are too short) and do not fail the report; identical bits are an exact
    PASS; an unfinished run fails it."""
    same = drift.Side("a", [tiny_record])
    changed = tiny_record.model_copy(deep=True)
    changed.curves.metrics["episode_return"]["1"][3] += 1.0
    rows = [drift.compare("same", same, same), drift.compare("moved", same, drift.Side("b", [changed]))]
    cut = drift.to_dict("a", "b", rows, {"rounds": 1, "budget": "4 iterations per spec", "iterations": 4})
    assert [drift.shown_verdict(row, cut["settings"]) for row in cut["specs"]] == [
        "exact, PASS",
        "not judged (4 iterations)",
    ]
    assert drift.failed(cut) == [] and "| moved | " in drift.to_markdown(cut)
    whole = drift.to_dict("a", "b", rows, {"rounds": 1, "budget": "each spec's own budget", "iterations": None})
    assert drift.failed(whole) == ["moved"]
    unfinished = drift.unfinished("late", "newer", 300.0, {"older": [tiny_record], "newer": []})
    assert drift.failed(drift.to_dict("a", "b", [unfinished], cut["settings"])) == ["late"]


def test_the_newer_sides_claims_are_judged_in_the_report(tiny_record):
    """In a whole-budget report each row says whether the spec's claims hold
    on the newer side; one that fails there fails the report, and says so
    where the older side's run failed it too."""

    def with_claims(**holds: bool) -> schema.Results:
        record = tiny_record.model_copy(deep=True)
        record.claims = {
            name: schema.ClaimOutcome(claim={}, value=1.0, low=0.5, high=1.5, seeds=2, holds=held)
            for name, held in holds.items()
        }
        return record

    older = drift.Side("a", [with_claims(solves=True, beats_random=False)])
    held = drift.compare("held", older, drift.Side("b", [with_claims(solves=True, beats_random=True)]))
    broken = drift.compare("broken", older, drift.Side("b", [with_claims(solves=False, beats_random=False)]))
    assert held.claims == "2/2 hold"
    assert broken.claims == "0/2 hold: solves, beats_random fail (also on the older: beats_random)"
    assert drift.compare("none", drift.Side("a", [tiny_record]), drift.Side("b", [tiny_record])).claims == "-"
    whole = drift.to_dict("a", "b", [held, broken], {"rounds": 1, "budget": "each spec's own budget"})
    assert drift.failed(whole) == ["broken"]
    assert "| held | " in drift.to_markdown(whole) and " | 2/2 hold | " in drift.to_markdown(whole)
    assert drift.table(whole).row_count == 2


def test_a_side_that_sets_an_xla_flag_is_named_by_it(tiny_record, tmp_path):
    """A side may be a script that sets XLA_FLAGS and starts a Python: the
    report names the flag, so two sides of one environment are told apart."""
    import platform

    import jax

    from harness.sessions.drift import side_label

    flag = "--xla_backend_extra_options=-vectorize-loops=false"
    wrapper = python_with_flags(tmp_path, flag, added=False)
    plain = f"jax {jax.__version__} (Python {platform.python_version()}"
    assert side_label(wrapper) == f"{plain}; XLA_FLAGS={flag})"
    flagged = tiny_record.model_copy(deep=True)
    flagged.fingerprint["xla_flags"] = flag
    assert drift.label(flagged) == f"{plain}; XLA_FLAGS={flag})"
    flagged.fingerprint["xla_flags"] = ""
    assert drift.label(flagged) == f"{plain})"


def test_the_drift_process_starts_no_device(tmp_path):
    """Cutting a spec (the drift's own work) builds nothing: on a GPU the
    drift process would otherwise hold XLA's memory while its sides run."""
    spec = write_spec(tmp_path, TINY_SPEC, "tiny.yaml")
    code = (
        "import sys, pathlib, yaml; from harness.sessions import drift; import jax._src.xla_bridge as xb;"
        " cut = drift.cut_short(pathlib.Path(sys.argv[1]), 8, pathlib.Path(sys.argv[2]));"
        " print(yaml.safe_load(cut.read_text())['budget']['env_steps'], xb.backends_are_initialized())"
    )
    done = subprocess.run([sys.executable, "-c", code, str(spec), str(tmp_path)], capture_output=True, text=True)
    assert done.stdout.split() == [str(8 * 16 * 32), "False"], done.stderr
