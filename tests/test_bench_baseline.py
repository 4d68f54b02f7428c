"""`nox -s bench -- --baseline REV` (benchmarks.machinery.lockstep,
baseline): the two benches' protocol, entry by entry, with a real pipe
between two threads; the baseline bench's arguments; and the bench against
a baseline end to end, two real pytest processes in lockstep on real
entries. No speed is asserted: only that rounds pair up, the verdict is
recorded where users read it, and every way it can go wrong says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from support import background_result, new_store

from benchmarks.machinery import baseline, baseline_checkout, baseline_figures, lockstep
from harness.stats import speed

ROOT = Path(__file__).resolve().parent.parent


def _pair() -> tuple[lockstep.Channel, lockstep.Channel]:
    follower_reads, leader_writes = os.pipe()
    leader_reads, follower_writes = os.pipe()
    return lockstep.Channel(leader_reads, leader_writes), lockstep.Channel(follower_reads, follower_writes)


def test_the_two_benches_take_turns_entry_by_entry(monkeypatch):
    """The follower runs entries a, b (which fails at the baseline), c and d;
    the leader compares a, b and d and has no rounds for c."""
    monkeypatch.setattr(lockstep, "ROUND_SECONDS", 0.0)  # a call a round
    leader_end, follower_end = _pair()
    calls: list[str] = []
    ran: dict[str, list[float] | str] = {}

    def follower():
        me = lockstep.Follower(follower_end)
        for name in ("a", "b", "c", "d"):
            if not me.arrive(name):
                ran[name] = "skipped"
                continue
            if name == "b":  # the baseline lacks something this entry needs
                me.failed(name, "AttributeError: no training_only")
                continue
            ran[name] = me.rounds(name, lambda name=name: calls.append(f"baseline {name}"))
            if name == "a":  # its result then fails at the baseline: told, and nothing answers it
                me.failed(name, "KeyError: after the rounds")
        follower_end.close()

    thread = threading.Thread(target=follower)
    thread.start()
    leader = lockstep.Leader(leader_end, ["a", "b", "c", "d"])
    test = speed.SpeedTest(alpha=0.01)
    a = leader.rounds("a", lambda: calls.append("candidate a"), test, alone=3)
    b = leader.rounds("b", lambda: calls.append("candidate b"), test, alone=3)
    d = leader.rounds("d", lambda: calls.append("candidate d"), test, alone=3)
    leader.close()
    thread.join(timeout=30)
    assert not thread.is_alive()
    # a: paired rounds until the test decided, the sides alternating who goes first.
    assert a.verdict is not None and len(a.own) == len(a.baseline) == a.verdict.rounds == len(ran["a"])
    entry_a = [c for c in calls if c.endswith(" a")]
    # One call sizes the rounds, then the side that goes first alternates.
    assert entry_a[:5] == ["candidate a", "baseline a", "candidate a", "candidate a", "baseline a"]
    # b failed at the baseline: its own rounds only, and why.
    assert b.verdict is None and len(b.own) == 3 and b.baseline == [] and "no training_only" in b.why

    # c: the leader had no rounds for it, so the follower skipped it; d was compared.
    assert ran["c"] == "skipped" and d.verdict is not None and ran["d"] == d.baseline


def test_the_side_that_compiles_first_alternates_by_entry(monkeypatch):
    """Entry a (place 0): the baseline compiles first; b (place 1): the
    candidate; c: the candidate's entry fails after the baseline compiled,
    and the baseline is released to go on to d."""
    monkeypatch.setattr(lockstep, "ROUND_SECONDS", 0.0)
    leader_end, follower_end = _pair()
    order: list[str] = []
    ran: dict[str, list[float]] = {}

    def follower():
        me = lockstep.Follower(follower_end)
        for name in ("a", "b", "c", "d"):
            if me.arrive(name):
                order.append(f"baseline compiles {name}")
                ran[name] = me.rounds(name, lambda: None)
        follower_end.close()

    thread = threading.Thread(target=follower)
    thread.start()
    leader = lockstep.Leader(leader_end, ["a", "b", "c", "d"])
    test = speed.SpeedTest(alpha=0.2, cap=6)
    for name in ("a", "b", "c", "d"):
        leader.turn(name)
        order.append(f"candidate compiles {name}")
        if name != "c":  # c fails before its rounds
            leader.rounds(name, lambda: None, test, alone=2)
        leader.release(name)
    leader.close()
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert order == [
        "baseline compiles a", "candidate compiles a", "candidate compiles b", "baseline compiles b",
        "baseline compiles c", "candidate compiles c", "candidate compiles d", "baseline compiles d",
    ]  # fmt: skip
    assert ran["c"] == [] and len(ran["a"]) >= 1 and len(ran["d"]) >= 1


def test_rounds_last_long_enough_and_long_calls_get_fewer_of_them():
    test = speed.SpeedTest(cap=40)
    calls, short = lockstep.sizing(0.001, test)
    assert calls == 200 and short.cap == 40
    calls, long = lockstep.sizing(3.0, test)
    assert calls == 1 and long.cap == lockstep.MIN_CAP  # 45 s a side would hold 15 rounds of 3 s


def test_a_follower_that_ends_leaves_the_leader_its_own_rounds():
    leader_end, follower_end = _pair()
    follower_end.close()
    leader = lockstep.Leader(leader_end, ["a"])
    result = leader.rounds("a", lambda: None, speed.SpeedTest(), alone=4)
    assert result.verdict is None and len(result.own) == 4 and "ended" in result.why


def test_the_baseline_bench_takes_the_candidates_options_but_its_own_results(tmp_path):
    args = [
        "benchmarks", "-k", "env_step", "--benchmark-json", ".bench/benchmark.json", "--baseline-python", "/py",
        "--baseline-dir=/d", "--baseline-rev", "abc", "--fail-on-regression", "--slower-by", "0.2",
    ]  # fmt: skip
    out = baseline.follower_args(args, tmp_path / "bench", 7, 9)
    assert out[:5] == ["benchmarks", "-k", "env_step", "--slower-by", "0.2"]
    assert out[5:] == [
        "--bench-dir", str(tmp_path / "bench"), "--benchmark-json", str(tmp_path / "bench" / "benchmark.json"),
        "--tracking-uri", f"sqlite:///{tmp_path / 'bench' / 'mlflow.db'}", "--lockstep-follower", "7,9",
    ]  # fmt: skip


def run_against_baseline(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """Two real benches in lockstep: this checkout against a worktree of its
    own HEAD, in this Python (A/A), on one env-step entry."""
    tmp = tmp_path_factory.mktemp("baseline")
    folder = tmp / "baseline"
    folder.mkdir()
    subprocess.run(["git", "worktree", "prune"], cwd=ROOT, check=False)
    subprocess.run(["git", "worktree", "add", "--detach", str(folder / "tree"), "HEAD"], cwd=ROOT, check=True)
    try:
        subprocess.run(["rm", "-rf", str(folder / "tree" / "benchmarks")], check=True)
        subprocess.run(["cp", "-r", str(ROOT / "benchmarks"), str(folder / "tree" / "benchmarks")], check=True)
        proc = subprocess.run(
            [
                sys.executable, "-m", "pytest", "benchmarks", "-p", "no:cacheprovider", "--benchmark-only",
                "--bench-dir", str(tmp / "bench"), "--tracking-uri", new_store(tmp),
                "-k", "env_step and (CartPole or Pendulum) and not brax",
                "--baseline-python", sys.executable, "--baseline-dir", str(folder), "--baseline-rev", "HEAD",
                "--fail-on-regression",
            ],
            cwd=ROOT, capture_output=True, text=True, timeout=900,
        )  # fmt: skip
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(folder / "tree")], cwd=ROOT, check=False)
    return proc, tmp


BACKGROUND = {"against_baseline": run_against_baseline}


@pytest.fixture(scope="module")
def against_baseline():
    return background_result("against_baseline")


def test_an_entry_against_its_baseline_is_judged_where_users_read_it(against_baseline):
    proc, tmp = against_baseline
    assert proc.returncode in (0, 1), proc.stdout[-4000:] + proc.stderr[-2000:]
    (saved,) = (tmp / "bench" / "history").glob("*/*.json")
    document = json.loads(saved.read_text())
    (entry,) = [b["extra_info"]["harness"] for b in document["benchmarks"] if "CartPole" in b["name"]]
    test = entry["extra"]["speed"]
    assert test["outcome"] in speed.OUTCOMES and test["rounds"] == len(entry["extra"]["baseline"]["seconds"])
    assert entry["repeats"] == test["rounds"] and entry["extra"]["baseline"]["rev"] == "HEAD"
    # The run's alpha over the two entries -k chose and the compile and memory figures' tests.
    assert test["alpha"] == pytest.approx(speed.ALPHA / (2 + baseline_figures.TESTS))
    assert document["harness"]["baseline"]["rev"] == "HEAD"
    assert "speed test against the baseline HEAD" in proc.stdout
    assert "against the baseline HEAD, 2 entries tested:" in proc.stdout
    # Compile seconds and peak host memory, the two entries as rounds (no device memory on a CPU).
    figures = {f["figure"]: f for f in document["harness"]["baseline_figures"]}
    assert set(figures) == {"compile_seconds", "peak_host_bytes"}
    for figure in figures.values():
        assert figure["outcome"] in speed.OUTCOMES and figure["rounds"] <= len(figure["entries"]) == 2
    assert "against the baseline, compile seconds, " in proc.stdout
    assert "against the baseline, peak host memory, " in proc.stdout
    # --fail-on-regression: exit 1 exactly when a test said SLOWER (or LARGER).
    outcomes = [b["extra_info"]["harness"]["extra"]["speed"]["outcome"] for b in document["benchmarks"]]
    outcomes += [f["outcome"] for f in figures.values()]
    assert (proc.returncode == 1) == (speed.SLOWER in outcomes)
    log = (tmp / "baseline" / "bench.log").read_text()
    assert "2 passed" in log  # the baseline's own bench, its report written
    from mlflow.tracking import MlflowClient

    client = MlflowClient(new_store(tmp))
    runs = client.search_runs([client.get_experiment_by_name("bench").experiment_id])
    (logged,) = [r for r in runs if "CartPole" in r.data.tags.get("bench.entry", "")]
    assert logged.data.tags["bench.verdict"] == test["verdict"] and logged.data.tags["bench.baseline"] == "HEAD"
    assert logged.data.metrics["speed_ratio"] == pytest.approx(test["ratio"])
    (session,) = [r for r in runs if r.data.tags.get("bench.kind") == "session"]
    assert session.data.tags["bench.compile_seconds.verdict"] == figures["compile_seconds"]["verdict"]
    assert session.data.metrics["compile_seconds_ratio"] == pytest.approx(figures["compile_seconds"]["ratio"])


def _repo(tmp_path: Path, pyproject: str) -> Path:
    """A git repository of one commit: a project that `pip install -e .` reads."""
    root = tmp_path / "repo"
    (root / "benchmarks").mkdir(parents=True)
    (root / "pyproject.toml").write_text(pyproject)
    (root / "constraints.txt").write_text("")
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "x"]):
        subprocess.run(["git", *args], cwd=root, check=True)
    return root


def test_every_way_a_baseline_cannot_be_had_is_one_line(tmp_path):
    root = _repo(tmp_path, "[project]\nname = 'broken'\nversion = 'not a version'\n")
    with pytest.raises(baseline_checkout.BaselineError, match="--baseline nope: no such commit in this repository"):
        baseline_checkout.commit_of(root, "nope")
    commit = baseline_checkout.commit_of(root, "HEAD")
    with pytest.raises(baseline_checkout.BaselineError, match=f"the baseline {commit[:10]} fails to build: "):
        baseline_checkout.prepare(root, "HEAD", commit, sys.executable, "constraints.txt", [], lambda _: None)
    (root / "pyproject.toml").write_text("changed")
    with pytest.raises(baseline_checkout.BaselineError, match=r"uncommitted changes \(pyproject.toml\)"):
        baseline_checkout.commit_of(root, "HEAD")


def run_dead_baseline(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """REV's bench that dies at once (its Python a script that exits 3)."""
    tmp = tmp_path_factory.mktemp("dead-baseline")
    (tmp / "baseline" / "tree").mkdir(parents=True)
    dead = tmp / "dead-python"
    dead.write_text("#!/bin/sh\necho 'no pytest here' >&2\nexit 3\n")
    dead.chmod(0o755)
    proc = subprocess.run(
        [
            sys.executable, "-m", "pytest", "benchmarks", "-p", "no:cacheprovider", "--benchmark-only",
            "--bench-dir", str(tmp / "bench"), "--tracking-uri", new_store(tmp),
            "-k", "env_step and CartPole", "--baseline-python", str(dead),
            "--baseline-dir", str(tmp / "baseline"), "--baseline-rev", "abc123",
        ],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    return proc, tmp


BACKGROUND["dead_baseline"] = run_dead_baseline


@pytest.fixture(scope="module")
def dead_baseline():
    return background_result("dead_baseline")


def test_a_baseline_bench_that_never_runs_an_entry_is_an_error(dead_baseline):
    """The entry is measured alone, and the bench ends with one error line
    and exit 1, its report written."""
    proc, tmp = dead_baseline
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "error: the baseline abc123's bench ran none of the entries compared: no verdict" in proc.stdout
    assert "1 without a baseline" in proc.stdout
    assert "no pytest here" in (tmp / "baseline" / "bench.log").read_text()
