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
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest

# Compiling is most of the suite's time, and the tests check what the harness
# computes and records, never how fast: XLA's CPU backend compiles without
# LLVM's optimisations and, where jaxlib still has them (before 0.11), with
# its elemental emitters instead of the fusion emitters (on jax 0.10.2 a
# third of the compile's CPU time at level 0, a fifth of XLA's defaults; the
# tiny runs execute a few times slower), and each program as one LLVM module
# instead of pieces compiled on parallel threads, which on a machine the
# suite already fills only add work (the exact layouts' four chunk programs,
# three rounds in fresh processes: 8.8-12.8 CPU-s against 10.8-14.4). Every
# program is compiled alike, so a program's re-run, resume or second process
# gives its bits; benchmarks and published runs use XLA's defaults. conftest
# sets it before JAX starts; subprocesses inherit it.
#
# Programs that differ and must still give the same bits (an exact layout on
# 1 or 4 devices, a sweep's exact points and their own specs, a loop rolled
# or unrolled) give them with the fusion emitters, as users compile them,
# not with the elemental ones: their tests compile with EXACT_XLA_FLAGS (a
# subprocess) or EXACT_COMPILER_OPTIONS (one program, in this process).
EXACT_XLA_FLAGS = "--xla_backend_optimization_level=0 --xla_cpu_parallel_codegen_split_count=1"
_ELEMENTAL = "xla_cpu_use_fusion_emitters"


def _elemental_emitters() -> bool:
    """Whether this jaxlib can compile with the elemental emitters (0.11
    has no such flag, and XLA stops on a flag it does not know)."""
    try:
        major, minor = (int(part) for part in version("jaxlib").split(".")[:2])
    except (PackageNotFoundError, ValueError):
        return False
    return (major, minor) < (0, 11)


_HAS_ELEMENTAL = _elemental_emitters()
TEST_XLA_FLAGS = f"{EXACT_XLA_FLAGS} --{_ELEMENTAL}=false" if _HAS_ELEMENTAL else EXACT_XLA_FLAGS
EXACT_COMPILER_OPTIONS = {_ELEMENTAL: True} if _HAS_ELEMENTAL else {}


def run_cli(*argv: str) -> tuple[int, str, str]:
    """`harness ARGV` in this process: its exit code, stdout and stderr."""
    from harness import cli  # here: importing this module starts no JAX (conftest sets XLA_FLAGS first)

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    return code, out.getvalue(), err.getvalue()


def device_env(device_count: int | None, flags: str = TEST_XLA_FLAGS) -> dict[str, str]:
    """The environment of a subprocess that runs the repository's code on
    `device_count` simulated CPU devices (None: as many as JAX starts with,
    which a command may still split itself, `--host-devices`), compiled with
    `flags` (as the suite compiles; EXACT_XLA_FLAGS where programs that
    differ must give the same bits)."""
    env = dict(os.environ)
    count = f" --xla_force_host_platform_device_count={device_count}" if device_count else ""
    env["XLA_FLAGS"] = flags + count
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
