"""Shared fixtures and the session's hooks; what the tests share besides
them is the `support` package beside this file. Compiles are the slow part
of the suite, so the tiny training runs are made once per session and
shared."""

from __future__ import annotations

import copy
import os
import tempfile

# One persistent XLA compilation cache for the session, set before JAX starts
# and inherited by the `harness` subprocesses the tests launch: a program
# compiled once (e.g. the same tiny spec run twice) is not compiled again.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", tempfile.mkdtemp(prefix="jax-cache-"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
# The checkout's modules compiled to bytecode once for the session's hundred
# Python processes, into a folder of the session's (the checkout left as it
# is): where PYTHONDONTWRITEBYTECODE is set, each process would compile every
# module of the harness it imports again (nox installs the packages compiled,
# not the checkout).
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
    os.environ.setdefault("PYTHONPYCACHEPREFIX", tempfile.mkdtemp(prefix="pycache-"))

from support.processes import TEST_XLA_FLAGS  # noqa: E402  (imports no JAX)

# Every program compiled as support.processes.TEST_XLA_FLAGS says (inherited
# by the subprocesses the tests start).
os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {TEST_XLA_FLAGS}".strip()

import pytest  # noqa: E402
from support import background  # noqa: E402
from support.server import MlflowServer  # noqa: E402
from support.specs import TINY_AZ, TINY_PENDULUM, TINY_PPO, TINY_SPEC  # noqa: E402
from support.training import record_of, train, train_plan  # noqa: E402

from harness import build  # noqa: E402
from harness import experiment_spec as spec_module  # noqa: E402
from harness.console import err_console, out_console  # noqa: E402
from harness.run import runner  # noqa: E402
from harness.run.programs import Programs  # noqa: E402

# The CLI's output is read whole: no line wrapped at 80 columns.
out_console.width = err_console.width = 200


@pytest.fixture
def tiny_spec_data() -> dict:
    return copy.deepcopy(TINY_SPEC)


@pytest.fixture(scope="session")
def tiny_run() -> tuple[build.Plan, runner.RunResult]:
    """The tiny REINFORCE spec, trained once for the session."""
    return train(copy.deepcopy(TINY_SPEC))


@pytest.fixture(scope="session")
def tiny_record(tiny_run):
    """The results.json a run of the tiny spec logs, read back (copy it
    before changing it)."""
    return record_of(*tiny_run)


@pytest.fixture(scope="session")
def tiny_ppo_run() -> tuple[build.Plan, runner.RunResult]:
    """The tiny PPO spec, trained once for the session."""
    return train(copy.deepcopy(TINY_PPO))


@pytest.fixture(scope="session")
def tiny_pendulum_run() -> tuple[build.Plan, runner.RunResult]:
    """The tiny continuous-action PPO spec, trained once for the session."""
    return train(copy.deepcopy(TINY_PENDULUM))


@pytest.fixture(scope="session")
def tiny_az_runs() -> tuple[tuple[build.Plan, runner.RunResult], ...]:
    """The tiny AlphaZero spec, trained twice by the same compiled programs
    (the second run's bit-identity is tested; that of a plan built anew is
    tested by test_checkpoint, whose interrupted and resumed run of the spec
    logs this run's bits)."""
    plan = build.build(spec_module.parse(copy.deepcopy(TINY_AZ)))
    programs = Programs()
    return (plan, train_plan(plan, programs)), (plan, train_plan(plan, programs))


# ------------------------------------------------- work started in the background


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    background.order(items)


@pytest.fixture(scope="session", autouse=True)
def _background_work(request, tmp_path_factory):
    """Start the `BACKGROUND` work the selected tests use (support.background);
    the session ends after it (no subprocess outlives the suite)."""
    # The session's temporary folder is made here, once: threads that each
    # made it on their first `mktemp` raced (pytest's factory is not
    # thread-safe), and one failed with "not a normalized and relative path".
    tmp_path_factory.getbasetemp()
    background.start(request.session.items, tmp_path_factory)
    yield
    background.finish()


def pytest_terminal_summary(terminalreporter) -> None:
    """The background work's wall times, beside pytest's --durations."""
    if line := background.summary():
        terminalreporter.write_line(line)


# ------------------------------------------------------------ mlflow server


@pytest.fixture(scope="session")
def server(tmp_path_factory) -> MlflowServer:
    """One real MLflow tracking server for the session (a test that stops it
    starts it again)."""
    running = MlflowServer(tmp_path_factory.mktemp("mlflow-server")).start()
    try:
        yield running
    finally:
        running.stop()
