"""Checkpoints and resume: real orbax files, real signals.

For each algorithm a tiny spec is trained once without interruption and once
interrupted by a real SIGINT (raised in the training process between two
chunks) and then resumed with `--resume`; every logged metric of the two must
be bit-identical, in the same MLflow runs, without a point logged twice. The
reinforce run is then resumed again from a damaged checkpoint, and under a
changed spec (refused). Runs stopped by a NaN or a signal: test_stopped_runs.
"""

from __future__ import annotations

import copy
import json
import signal
import time
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from mlflow.tracking import MlflowClient
from support import (
    TINY_AZ,
    TINY_PENDULUM,
    TINY_SPEC,
    new_store,
    programs_of,
    write_spec,
)

from harness import build, cli
from harness import experiment_spec as S
from harness.record import rundir, tracking, windows
from harness.record.journal import Journal
from harness.run import checkpoint, chunk_loop, runner
from harness.run.programs import Programs
from harness.sessions import results
from harness.sessions import run as session

SPECS = {
    "reinforce": copy.deepcopy(TINY_SPEC),
    # PPO with continuous actions: normalisation statistics in the state too
    # (discrete PPO's state is the same without them).
    "ppo_pendulum": copy.deepcopy(TINY_PENDULUM),
    "alphazero": copy.deepcopy(TINY_AZ),
}
SESSION_RUNS = {
    "reinforce": "tiny_run",
    "ppo_pendulum": "tiny_pendulum_run",
    "alphazero": "tiny_az_runs",
}
for name, data in SPECS.items():
    data["name"] = f"ckpt_{name}"
    data["checkpoint"] = {"every": data["logging"]["interval"], "keep": 3}
# Points per curve for the interrupted and resumed runs: windows
# of 3, 3 and 4 iterations, so that the interruption (iteration 40, 40 and 6)
# falls inside a window.
POINTS = {"reinforce": 30, "ppo_pendulum": 20, "alphazero": 3}


def _expected(result: runner.RunResult, seeds, steps_per_iteration: int, window: int = 1) -> dict[str, dict]:
    """Per seed, what an uninterrupted run logs: (step, value) per metric,
    computed here from the arrays. With `window` > 1 iterations per point,
    each window's mean, min and max at the step of its last iteration
    (harness.record.windows)."""
    out = {}
    for s, seed in enumerate(seeds):
        curves: dict[str, list] = {}
        for name, values in result.metrics.items():
            if window == 1:
                curves[name] = [((i + 1) * steps_per_iteration, float(v)) for i, v in enumerate(values[:, s])]
                continue
            count = len(values)
            for start in range(0, count, window):
                rows = np.asarray(values[start : start + window]).astype(np.float64)
                step = min(start + window, count) * steps_per_iteration
                for prefix, summary in (("", np.nanmean), ("window_min/", np.nanmin), ("window_max/", np.nanmax)):
                    curves.setdefault(prefix + name, []).append((step, float(summary(rows, axis=0)[s])))
        for name, values in result.evaluation.items():
            curves[name] = [
                (it * steps_per_iteration, float(v))
                for it, v in zip(result.evaluation_iterations, values[:, s], strict=True)
            ]
        out[str(seed)] = curves
    return out


def _history(client: MlflowClient, run_id: str) -> dict[str, list[tuple[int, float]]]:
    names = client.get_run(run_id).data.metrics
    return {
        name: sorted((m.step, m.value) for m in client.get_metric_history(run_id, name))
        for name in names
        if not name.startswith("final_")
    }


class Trained:
    """One algorithm's uninterrupted run, and its interrupted-then-resumed
    twin: of a plan built anew from the spec file, or with `like`, of that
    plan's algorithm and compiled programs (the session's run of the spec)."""

    def __init__(self, tmp: Path, data: dict, like: build.Plan | None = None):
        self.tmp = tmp
        self.data = data
        self.spec_path = write_spec(tmp, data)
        self.uri = new_store(tmp)
        self.root = tmp / "checkpoints"
        self.plan = build.build(S.load(self.spec_path))
        self.client = MlflowClient(tracking_uri=self.uri)
        # The interrupted run and its resumption share compiled programs.
        self.programs = Programs()
        if like is not None:
            self.plan = self.plan._replace(env=like.env, env_info=like.env_info, algorithm=like.algorithm)
            self.programs = programs_of(like)

    def train(self, **kwargs) -> session.Logged:
        options = session.RunOptions(progress=False, checkpoint_dir=self.root, programs=self.programs, **kwargs)
        return session.train_and_log(self.plan, self.uri, options)

    def children(self, parent_id: str) -> dict[str, str]:
        info = json.loads((self.root / parent_id / "run.json").read_text())
        return info["child_run_ids"]


@pytest.fixture(scope="module", params=list(SPECS))
def trained(request, tmp_path_factory):
    # The uninterrupted run: the runner alone (as `harness run` trains), the
    # session's tiny run of the same spec (the name and checkpoint sections
    # change nothing it computes). The interrupted and resumed runs reuse its
    # compiled programs, except AlphaZero's: its plan is built anew, so that
    # a rebuilt plan's bits are checked too (tiny_az_runs holds two runs of
    # one plan, whose bit-identity test_alphazero checks).
    session_run = request.getfixturevalue(SESSION_RUNS[request.param])
    whole_plan, whole = session_run[0] if request.param == "alphazero" else session_run
    like = None if request.param == "alphazero" else whole_plan
    t = Trained(tmp_path_factory.mktemp(f"ckpt-{request.param}"), SPECS[request.param], like)
    t.whole_plan, t.whole = whole_plan, whole
    t.expected = _expected(t.whole, t.plan.spec.seeds, t.plan.env_steps_per_iteration)
    interval = t.data["logging"]["interval"]
    stop_after = interval  # a real SIGINT, noted between chunks

    def interrupt(chunk):
        if chunk.last_iteration == stop_after:
            signal.raise_signal(signal.SIGINT)

    # Chunk 2 is waited for however long it takes on a loaded machine: a
    # chunk over STOP_WITHIN_SECONDS after the signal would be dropped
    # (test_interrupts checks that), and this test is of the one that ends.
    with pytest.raises(runner.Interrupted), pytest.MonkeyPatch.context() as patch:
        patch.setattr(chunk_loop, "STOP_WITHIN_SECONDS", 600.0)
        t.train(on_chunk=interrupt, metric_points=POINTS[request.param])
    t.interrupted_id = max(rundir.run_directories(t.root), key=lambda d: d.info["created"]).run_id
    t.interrupted = {
        "status": {
            r: t.client.get_run(r).info.status for r in [t.interrupted_id, *t.children(t.interrupted_id).values()]
        },
        "steps": rundir.saved_iterations(t.root / t.interrupted_id / "state"),
        "journaled": Journal(t.root / t.interrupted_id).logged_through(),
    }
    t.resumed = t.train(resume=True, metric_points=POINTS[request.param])
    t.window = windows.window_for(t.plan.num_iterations, POINTS[request.param])
    return t


def test_interrupt_writes_a_final_checkpoint_and_marks_runs_killed(trained):
    interval = trained.data["logging"]["interval"]
    assert set(trained.interrupted["status"].values()) == {"KILLED"}
    # The signal came while chunk 1's metrics were handled; chunk 2 was
    # already running and is logged and checkpointed too: the final
    # checkpoint is the last logged iteration.
    steps = trained.interrupted["steps"]
    assert steps[-1] == trained.interrupted["journaled"] == 2 * interval < trained.plan.num_iterations
    assert steps == [interval, 2 * interval]
    tags = trained.client.get_run(trained.interrupted_id).data.tags
    assert tags["error"] == "interrupted (SIGINT)"


def test_resume_continues_the_same_runs_bit_identically(trained):
    assert trained.resumed.parent_id == trained.interrupted_id
    parent = trained.client.get_run(trained.interrupted_id)
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["resumed"] == "1"
    assert parent.data.tags["resumed.1"] == f"from iteration {trained.interrupted['steps'][-1]}"
    resumed = trained.children(trained.interrupted_id)
    steps_per_iteration = trained.plan.env_steps_per_iteration
    stopped_at = trained.interrupted["journaled"] * steps_per_iteration
    assert trained.window > 1 and trained.interrupted["journaled"] % trained.window, "stopped inside a window"
    # What an uninterrupted run logs: the windows of the uninterrupted run's
    # arrays (test_windows holds a logged run's curves against its arrays).
    expected = _expected(trained.whole, trained.plan.spec.seeds, steps_per_iteration, trained.window)
    for seed, whole in expected.items():
        got = _history(trained.client, resumed[seed])
        assert set(got) == set(whole)
        for name, points in whole.items():
            # Every point of the uninterrupted curve, the same bits; besides
            # them only the stopped invocation's partial window, at its step.
            extra = [p for p in got[name] if p not in points]
            assert [p for p in got[name] if p in points] == points, (seed, name)
            assert len(extra) <= 1 and all(step == stopped_at for step, _ in extra), (seed, name, extra)
        assert trained.client.get_run(resumed[seed]).info.status == "FINISHED"
    whole_finals = {str(seed): v for seed, v in results.per_seed_final(trained.whole_plan, trained.whole).items()}
    assert trained.resumed.record.per_seed_final == whole_finals


def _truncate(step_dir: Path) -> None:
    data = max((p for p in (step_dir / "state").rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])


def _change_values(step_dir: Path) -> None:
    """Rewrite the step's state as a well-formed checkpoint whose largest leaf
    has every bit flipped: storage reads it without complaint (flipping bytes
    of the file instead lands in zstd frames, which fail or not by chance), so
    only the checksums can tell."""
    import shutil

    import orbax.checkpoint as ocp

    item = step_dir / "state"
    with ocp.PyTreeCheckpointer() as checkpointer:
        leaves = checkpointer.restore(item)
        name = max(leaves, key=lambda k: leaves[k].nbytes)
        leaves[name] = (leaves[name].view(np.uint8) ^ 0xFF).view(leaves[name].dtype)
        checkpointer.save(step_dir / "rewritten", leaves)
    shutil.rmtree(item)
    (step_dir / "rewritten").rename(item)


# orbax reports the truncated file from a thread after its event loop closed.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("trained", ["reinforce"], indirect=True)  # one algorithm is enough
def test_damaged_checkpoints_fall_back_to_the_newest_good_one(trained, capsys):
    t = trained
    interval = t.data["logging"]["interval"]

    def interrupt(chunk):
        if chunk.last_iteration == 2 * interval:
            signal.raise_signal(signal.SIGINT)

    with pytest.raises(runner.Interrupted):
        t.train(on_chunk=interrupt)
    run_id = max(rundir.run_directories(t.root), key=lambda d: d.info["created"]).run_id
    state = t.root / run_id / "state"
    assert rundir.saved_iterations(state) == [interval, 2 * interval, 3 * interval]
    # The newest is cut short, the one before holds other values (which only
    # the checksums can tell).
    _truncate(state / str(3 * interval))
    _change_values(state / str(2 * interval))
    capsys.readouterr()
    code = cli.main(["run", str(t.spec_path), "--tracking-uri", t.uri, "--checkpoint-dir", str(t.root), "--resume"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 0, err
    assert f"the checkpoint at iteration {3 * interval} ({state / str(3 * interval)}) is damaged" in err, err
    assert f"the checkpoint at iteration {2 * interval} ({state / str(2 * interval)}) is damaged" in err, err
    assert "CRC32" in err, err
    assert f"resuming run {run_id} from the checkpoint at iteration {interval}" in err
    assert len(list((t.root / run_id / "damaged").iterdir())) == 2
    # Iterations 21-60 were recomputed from iteration 20, not logged twice,
    # and the run is bit-identical to the uninterrupted one.
    resumed = t.children(run_id)
    for seed, expected in t.expected.items():
        assert _history(t.client, resumed[seed]) == expected
    assert t.client.get_run(run_id).info.status == "FINISHED"


@pytest.mark.parametrize("trained", ["reinforce"], indirect=True)  # one algorithm is enough
def test_resume_under_a_changed_spec_is_refused(trained, capsys):
    t = trained

    def interrupt(chunk):
        if chunk.last_iteration == t.data["logging"]["interval"]:
            signal.raise_signal(signal.SIGINT)

    with pytest.raises(runner.Interrupted):
        t.train(on_chunk=interrupt)
    run_id = max(rundir.run_directories(t.root), key=lambda d: d.info["created"]).run_id
    changed = copy.deepcopy(t.data)
    changed["hyperparameters"]["gamma"] = 0.9
    path = write_spec(t.tmp, changed, "changed.yaml")
    capsys.readouterr()
    code = cli.main(["run", str(path), "--tracking-uri", t.uri, "--checkpoint-dir", str(t.root), "--resume", run_id])
    out, err = capsys.readouterr()
    err = " ".join(err.split())
    assert code == 2 and "Traceback" not in out + err
    assert f"run {run_id} was made from another spec" in err and "hyperparameters.gamma: 0.99 -> 0.9" in err, err
    assert t.client.get_run(run_id).info.status == "KILLED", "the refused resume touched nothing"


def test_checkpoint_section_is_not_part_of_the_hash(tiny_spec_data):
    base = S.spec_hash(S.parse(tiny_spec_data))
    tiny_spec_data["checkpoint"] = {"every": 5, "keep": 1}
    assert S.spec_hash(S.parse(tiny_spec_data)) == base
    assert "checkpoint" not in S.flatten(S.canonical(S.parse(tiny_spec_data)))
    assert "checkpoint: {every: 5, keep: 1}" in S.to_yaml(S.parse(tiny_spec_data))


# ------------------------------------------------------------ unit: leaves


def test_typed_keys_and_empty_leaves_round_trip(tmp_path):
    import jax

    state = {
        "key": jax.random.split(jax.random.key(3), 4),
        "x": jnp.arange(6.0).reshape(2, 3),
        "empty": jnp.zeros((2, 0), jnp.int32),
    }
    with checkpoint.opened(tmp_path / "state", every=1, keep=2, spec_hash="h") as ckpt:
        ckpt.save(ckpt.snapshot(state), 1, final=True)
    template = jax.tree.map(jnp.zeros_like, {**state, "key": jax.random.split(jax.random.key(0), 4)})
    with checkpoint.opened(tmp_path / "state", every=1, keep=2, spec_hash="h") as ckpt:
        restored, step = ckpt.restore_latest(template, [])
    assert step == 1
    assert jax.random.key_impl(restored["key"]) == jax.random.key_impl(state["key"])
    np.testing.assert_array_equal(jax.random.key_data(restored["key"]), jax.random.key_data(state["key"]))
    np.testing.assert_array_equal(restored["x"], state["x"])
    assert restored["empty"].shape == (2, 0)
    with (
        checkpoint.opened(tmp_path / "state", every=1, keep=2, spec_hash="other") as other,
        pytest.raises(rundir.CheckpointError, match="made from another spec"),
    ):
        other.restore_latest(template, [])


def test_unreachable_tracking_server_is_reported_quickly_before_compiling(tmp_path, capsys, tiny_spec_data):
    from support import free_port

    path = write_spec(tmp_path, tiny_spec_data)
    started = time.monotonic()
    code = cli.main(["run", str(path), "--tracking-uri", f"http://127.0.0.1:{free_port()}", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "cannot use the MLflow tracking store" in err and "Connection refused" in err
    assert "Traceback" not in err and "compiled" not in err
    assert time.monotonic() - started < 30
    assert tracking.DEFAULT_TRACKING_URI  # the default store is untouched by this
