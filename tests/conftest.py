"""Shared fixtures. Compiles are the slow part of the suite, so the tiny
training runs are made once per session and shared."""

from __future__ import annotations

import copy
import os
import tempfile
from pathlib import Path

# One persistent XLA compilation cache for the session, set before JAX starts
# and inherited by the `harness` subprocesses the tests launch: a program
# compiled once (e.g. the same tiny spec run twice) is not compiled again.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", tempfile.mkdtemp(prefix="jax-cache-"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "1")

import pytest  # noqa: E402
import yaml  # noqa: E402

from harness import build, runner  # noqa: E402
from harness import spec as spec_module

TINY_SPEC = {
    "name": "tiny_reinforce",
    "algorithm": "reinforce",
    "env": {"suite": "gymnax", "id": "CartPole-v1"},
    "seeds": [0, 1],
    # 80 iterations of 16 envs x 32 steps.
    "budget": {"env_steps": 80 * 16 * 32},
    "hyperparameters": {"num_envs": 16, "num_steps": 32},
    "optimizer": {"learning_rate": 0.003, "max_grad_norm": 0.5},
    "logging": {"interval": 20},
}


@pytest.fixture
def tiny_spec_data() -> dict:
    return copy.deepcopy(TINY_SPEC)


def write_spec(directory: Path, data: dict, name: str = "spec.yaml") -> Path:
    path = directory / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def train(data: dict) -> tuple[build.Plan, runner.RunResult]:
    plan = build.build(spec_module.parse(data))
    result = runner.run(plan.algorithm, plan.spec.seeds, plan.num_iterations, plan.spec.logging.interval)
    return plan, result


@pytest.fixture(scope="session")
def tiny_run() -> tuple[build.Plan, runner.RunResult]:
    return train(copy.deepcopy(TINY_SPEC))
