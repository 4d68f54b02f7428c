"""The harness in this process and in others: the CLI's output, the
environment of a subprocess on simulated devices, fresh processes."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

# Compiling is most of the suite's time, and the tests check what the harness
# computes and records, never how fast: XLA's CPU backend compiles without
# LLVM's optimisations here (half the compile time; the tiny runs execute a
# few times slower). Every program is compiled alike, so bit-for-bit
# comparisons within the suite hold; benchmarks and published runs use
# XLA's defaults. conftest sets it before JAX starts; subprocesses inherit it.
TEST_XLA_FLAGS = "--xla_backend_optimization_level=0"


def run_cli(*argv: str) -> tuple[int, str, str]:
    """`harness ARGV` in this process: its exit code, stdout and stderr."""
    from harness import cli  # here: importing this module starts no JAX (conftest sets XLA_FLAGS first)

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    return code, out.getvalue(), err.getvalue()


def device_env(device_count: int | None) -> dict[str, str]:
    """The environment of a subprocess that runs the repository's code on
    `device_count` simulated CPU devices (None: as many as JAX starts with,
    which a command may still split itself, `--host-devices`), compiled as
    the suite compiles (TEST_XLA_FLAGS)."""
    env = dict(os.environ)
    count = f" --xla_force_host_platform_device_count={device_count}" if device_count else ""
    env["XLA_FLAGS"] = TEST_XLA_FLAGS + count
    root = Path(__file__).resolve().parent.parent
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(root / "tests"), env.get("PYTHONPATH", "")])
    return env


# XLA_FLAGS that `fresh_process` starts with: a user's flag, which the
# harness's own flags are added to.
USER_XLA_FLAGS = "--xla_cpu_multi_thread_eigen=true"


def fresh_process(script: str, *args: str) -> dict:
    """`python -c SCRIPT ARGS` in a fresh process (JAX not started, XLA_FLAGS
    set to USER_XLA_FLAGS): the JSON of its last line of output."""
    root = Path(__file__).resolve().parent.parent
    path = os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "XLA_FLAGS": USER_XLA_FLAGS}
    out = subprocess.run(
        [sys.executable, "-c", script, *args], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def start_harness(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.Popen:
    """`harness ARGS` as a subprocess, its stdout and stderr together."""
    return subprocess.Popen(
        [sys.executable, "-m", "harness", *args],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_for_training(root: Path, processes: list[subprocess.Popen], timeout: float = 300) -> None:
    """Until a run under the checkpoint root `root` has journaled a chunk;
    fails if a process ends first."""
    deadline = time.monotonic() + timeout
    while not any(journal.stat().st_size for journal in Path(root).glob("*/journal.jsonl")):
        for proc in processes:
            if proc.poll() is not None:
                pytest.fail(f"harness ended before training: {proc.communicate()[0][-3000:]}")
        if time.monotonic() > deadline:
            pytest.fail("training did not start")
        time.sleep(0.05)
