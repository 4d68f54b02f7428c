"""A stop signal during a long chunk: the run does not wait for the chunk's
end. The chunk is dropped, the state before it saved, the runs marked
KILLED, and `--resume` does the chunk again with the same bits as a run that
was never interrupted (harness.run.chunk_loop, `ChunkLoop.abandon`).

The tiny REINFORCE spec with chunks of a few seconds stands in for a
published spec whose chunks take minutes (alphazero_tic_tac_toe's take about
two); the wait a signal grants the running chunk, STOP_WITHIN_SECONDS (5 s),
is shortened to match.
"""

from __future__ import annotations

import copy
import signal
import time

import pytest
from support import TINY_SPEC, new_store, write_spec

from harness import build
from harness import experiment_spec as S
from harness.record import rundir
from harness.record.journal import Journal
from harness.run import chunk_loop, runner
from harness.run.programs import Programs
from harness.sessions import run as session

# Iterations per chunk: about 1.5 s here (15 times WAIT), so that chunk 2
# is still running when the host, having logged chunk 1 (the signal comes
# from its sink), starts waiting for it, even on a loaded machine.
INTERVAL = 240
WAIT = 0.1  # STOP_WITHIN_SECONDS for this test


@pytest.fixture(scope="module")
def long_chunks(tmp_path_factory):
    data = copy.deepcopy(TINY_SPEC)
    data["name"] = "long_chunks"
    data["budget"]["env_steps"] = 2 * INTERVAL * 16 * 32
    data["logging"]["interval"] = INTERVAL
    data["checkpoint"] = {"every": INTERVAL, "keep": 2}
    tmp = tmp_path_factory.mktemp("long-chunks")
    plan = build.build(S.load(write_spec(tmp, data)))
    uri, root, programs = new_store(tmp), tmp / "checkpoints", Programs()

    def train(**kwargs):
        options = session.RunOptions(progress=False, checkpoint_dir=root, programs=programs, **kwargs)
        return session.train_and_log(plan, uri, options)

    whole = train()
    signalled = {}

    def interrupt(chunk):
        # Chunk 1's metrics: chunk 2 is running while the sink has them.
        if chunk.last_iteration == INTERVAL:
            signalled["at"] = time.perf_counter()
            signal.raise_signal(signal.SIGINT)

    mp = pytest.MonkeyPatch()
    mp.setattr(chunk_loop, "STOP_WITHIN_SECONDS", WAIT)
    try:
        with pytest.raises(runner.Interrupted):
            train(on_chunk=interrupt)
        stopped = time.perf_counter() - signalled["at"]
    finally:
        mp.undo()
    directory = max(rundir.run_directories(root), key=lambda d: d.info["created"])
    interrupted = {
        "steps": rundir.saved_iterations(directory.state_dir),
        "journaled": Journal(directory.path).logged_through(),
        "status": directory.info["status"],
    }
    resumed = train(resume=True)
    return {
        "whole": whole,
        "resumed": resumed,
        "stopped": stopped,
        "interrupted": interrupted,
        "chunk_seconds": whole.record.speed.chunk_seconds_median,
    }


def test_a_signal_does_not_wait_for_the_running_chunk(long_chunks):
    # The signal came as chunk 2, the last, started. Waited for, chunk 2
    # would have been logged and saved and the run would have finished;
    # dropped, the state saved is chunk 1's, the last logged, and the runs
    # end KILLED. The seconds from the signal to `Interrupted` include the
    # runs' closing (MLflow, the metric writer, the checkpoint's writing).
    assert long_chunks["chunk_seconds"] > 5 * WAIT, "chunks too short for this test: raise INTERVAL"
    assert long_chunks["interrupted"]["steps"] == [INTERVAL]
    assert long_chunks["interrupted"]["journaled"] == INTERVAL
    assert long_chunks["interrupted"]["status"] == "KILLED"
    assert long_chunks["stopped"] < 15


def test_the_resumed_run_has_the_bits_of_an_uninterrupted_one(long_chunks):
    whole, resumed = long_chunks["whole"].record, long_chunks["resumed"].record
    assert resumed.per_seed_final == whole.per_seed_final
    assert resumed.curves == whole.curves
    assert len(resumed.curves.env_steps) > 2
