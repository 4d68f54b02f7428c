"""Plain data that every layer shares: what the runner hands back
(`ChunkMetrics`, `ChunkTimes`, `RunResult`), and the records' small types
(`EnvInfo`, `Layout`). Nothing here imports JAX at run
time, so `harness.record` and `harness.judge` can use them without it."""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import numpy as np


class EnvInfo(NamedTuple):
    suite: str
    id: str
    library_version: str
    env_version: str | None

    def as_tags(self) -> dict[str, str]:
        return {
            "env.suite": self.suite,
            "env.id": self.id,
            "env.library_version": self.library_version,
            "env.version": self.env_version or "",
        }


class Layout(NamedTuple):
    """How many devices a run uses and how they split."""

    seed_axis: int
    data_axis: int

    @property
    def count(self) -> int:
        return self.seed_axis * self.data_axis

    def describe(self) -> str:
        return f"seed={self.seed_axis},data={self.data_axis}"


class ChunkMetrics(NamedTuple):
    first_iteration: int  # 1-based index of the chunk's first iteration
    metrics: dict[str, np.ndarray]  # name -> [K, num_seeds]
    # The algorithm's evaluation after the chunk's last iteration (if it has one).
    evaluation: dict[str, np.ndarray] = {}  # name -> [num_seeds]

    @property
    def last_iteration(self) -> int:
        return self.first_iteration + next(iter(self.metrics.values())).shape[0] - 1


class Sink(Protocol):
    def __call__(self, chunk: ChunkMetrics) -> None: ...


class ChunkTimes(NamedTuple):
    """Where one chunk's wall time went, seen from the host (seconds). The
    host dispatches chunk i+1 before it reads chunk i, so `device_wait`
    (blocked until the device hands chunk i's metrics over) is time the
    device was busy and the host idle; `logging` (the sink: journal, MLflow,
    progress bar) and `checkpoint` (the host copy and the save) are the
    harness's own work, overlapped with the next chunk's compute."""

    last_iteration: int
    wall: float  # from the end of the previous chunk on the device to this one's
    device_wait: float
    evaluation: float  # waiting for the evaluation after the chunk
    logging: float
    checkpoint: float


class RunResult(NamedTuple):
    metrics: dict[str, np.ndarray]  # name -> [num_iterations, num_seeds]
    state: Any  # the final state, leading seed axis
    compile_seconds: float  # init and chunk compiles, ahead of time
    steady_seconds: float  # wall time of the steady-state chunks
    steady_env_steps: int  # env steps (all seeds) in the steady-state chunks
    chunk_seconds: list[float]  # wall time of every chunk on the device, in order
    evaluation: dict[str, np.ndarray] = {}  # name -> [num_chunks, num_seeds], after each chunk
    evaluation_iterations: tuple[int, ...] = ()  # the iteration each evaluation followed
    # Of the chunks' wall time: waiting for the evaluations after them (the
    # host's view: the device runs chunk and evaluation back to back), and
    # copying and saving checkpoints.
    evaluation_seconds: float = 0.0
    checkpoint_seconds: float = 0.0
    # The host's side of each chunk this call ran, in order (`ChunkTimes`).
    chunk_times: tuple[ChunkTimes, ...] = ()
    # The last iteration of the chunk traced into `profile_dir`; None: none.
    profiled_through: int | None = None
    # `Algorithm.assess` of the final state (name -> [num_seeds]), and its
    # seconds, compile included: figures of the trained policy, no curve.
    assessment: dict[str, np.ndarray] = {}
    assessment_seconds: float = 0.0

    @property
    def sps(self) -> float:
        """Steady-state env steps per second, all seeds together."""
        return self.steady_env_steps / self.steady_seconds if self.steady_seconds > 0 else float("nan")
