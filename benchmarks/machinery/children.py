"""The environment of a command a bench entry runs in a child process."""

from __future__ import annotations

import os


def child_env() -> dict[str, str]:
    """This process's environment for a child `harness` command. On a GPU
    the bench process already holds JAX's preallocated share of the device's
    memory (75%), so a child that preallocates its own fails to load its
    first program (CUDA_ERROR_OUT_OF_MEMORY): the child allocates as it
    goes instead. A CPU ignores the setting."""
    return {**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
