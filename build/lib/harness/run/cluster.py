"""A multi-process job: joining it, process 0's word to start, and the
host-side collectives every process takes part in (checkpoints, signals)."""

from __future__ import annotations

import json
import os
from typing import Any

import jax
import numpy as np


class DistributedError(RuntimeError):
    """The multi-process job could not be joined."""


# Whether this process joined a multi-process job (JAX's shutdown at exit then matters).
joined = False


def initialize(coordinator: str | None, num_processes: int | None, process_id: int | None, *, auto: bool) -> None:
    """Join a multi-process job before JAX touches a device.

    With `coordinator` (host:port), `num_processes` and `process_id` (flags,
    or JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES, JAX_PROCESS_ID), the job is
    described explicitly; with `auto`, JAX's own cluster detection (SLURM,
    Open MPI, Cloud TPU, ...) fills them in. Neither: a single process."""
    coordinator = coordinator or os.environ.get("JAX_COORDINATOR_ADDRESS")
    if num_processes is None and "JAX_NUM_PROCESSES" in os.environ:
        num_processes = int(os.environ["JAX_NUM_PROCESSES"])
    if process_id is None and "JAX_PROCESS_ID" in os.environ:
        process_id = int(os.environ["JAX_PROCESS_ID"])
    if coordinator is None and not auto:
        if num_processes not in (None, 1) or process_id not in (None, 0):
            raise DistributedError("--num-processes and --process-id need --coordinator (host:port)")
        return
    if coordinator is not None and (num_processes is None or process_id is None):
        raise DistributedError("--coordinator needs --num-processes and --process-id (or their JAX_* variables)")
    global joined
    try:
        jax.distributed.initialize(coordinator, num_processes, process_id)
        joined = True
    except Exception as error:  # noqa: BLE001  (JAX raises several kinds)
        where = f" at {coordinator}" if coordinator else ""
        raise DistributedError(f"cannot join the multi-process job{where}: {error}") from None


def is_main_process() -> bool:
    """Only process 0 talks to MLflow and writes artifacts."""
    return jax.process_index() == 0


# Process 0 sets up its MLflow runs and run directory while the others wait
# for its word under this key of JAX's coordination service (not a device
# collective, whose CPU transport gives up after 30 s): "go", or why it
# stopped, so that they stop too instead of waiting on it.
_START_KEY = "harness/start"
_announced = []


def _coordination_client() -> Any:
    # JAX's client of the job's coordination service: its key-value store has
    # no public API (orbax's multi-host helpers use it the same way).
    from jax._src import distributed

    return distributed.global_state.client


def announce_start(error: str | None = None, run: dict[str, str] | None = None) -> None:
    """Process 0: let the other processes start training, with what they
    need of its MLflow run (`run`: uri and parent run id, for their system
    metrics), or (`error`) tell them the job stopped before training. Once
    per process; a no-op in a single process."""
    if jax.process_count() == 1 or _announced:
        return
    _announced.append(True)
    value = f"error: {error}" if error is not None else "go " + json.dumps(run or {})
    _coordination_client().key_value_set(_START_KEY, value)


def wait_for_start(timeout_seconds: int = 24 * 3600) -> dict[str, str]:
    """The other processes: until process 0 starts training; returns what it
    said of its MLflow run. Raises DistributedError with process 0's message
    if it stopped before."""
    value = _coordination_client().blocking_key_value_get(_START_KEY, timeout_seconds * 1000)
    if not value.startswith("go"):
        raise DistributedError(f"process 0 of the job stopped before training ({value.removeprefix('error: ')})")
    return json.loads(value.removeprefix("go").strip() or "{}")


def node_id() -> str | None:
    """This process's name among a job's system metrics (`process_1`); None
    in a single process, whose metrics keep MLflow's plain names."""
    return f"process_{jax.process_index()}" if jax.process_count() > 1 else None


def gather_to_host(tree: Any) -> Any:
    """Every leaf's global value as a numpy array in this process. In a
    multi-process job arrays are spread over the processes' devices, so this
    is a collective: every process must call it, in the same order."""
    if jax.process_count() == 1:
        return jax.device_get(tree)
    from jax.experimental import multihost_utils

    return multihost_utils.process_allgather(tree, tiled=True)


def broadcast_from_main(tree: Any) -> Any:
    """Process 0's numpy `tree`, in every process (the others pass arrays of
    the same shapes and dtypes, whose values are ignored). A collective."""
    if jax.process_count() == 1:
        return tree
    from jax.experimental import multihost_utils

    return multihost_utils.broadcast_one_to_all(tree)


def agree_on_signal(signum: int) -> int:
    """The stop signal any process of the job received (0: none), so that all
    stop after the same chunk: a process that went on alone would wait for
    the others' collectives for ever. A collective in a multi-process job."""
    if jax.process_count() == 1:
        return signum
    from jax.experimental import multihost_utils

    return int(np.max(multihost_utils.process_allgather(np.int32(signum))))
