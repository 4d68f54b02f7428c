"""Shared fixtures. Compiles are the slow part of the suite, so the tiny
training runs are made once per session and shared."""

from __future__ import annotations

import contextlib
import copy
import functools
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

# One persistent XLA compilation cache for the session, set before JAX starts
# and inherited by the `harness` subprocesses the tests launch: a program
# compiled once (e.g. the same tiny spec run twice) is not compiled again.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", tempfile.mkdtemp(prefix="jax-cache-"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
# Compiling is most of the suite's time, and the tests check what the harness
# computes and records, never how fast: XLA's CPU backend compiles without
# LLVM's optimisations here (half the compile time; the tiny runs execute a
# few times slower). Every program is compiled alike, so bit-for-bit
# comparisons within the suite hold; benchmarks and published runs use
# XLA's defaults. Inherited by the subprocesses the tests start.
TEST_XLA_FLAGS = "--xla_backend_optimization_level=0"
os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {TEST_XLA_FLAGS}".strip()

import pytest  # noqa: E402
import yaml  # noqa: E402

from harness import build, cli  # noqa: E402
from harness import spec as spec_module  # noqa: E402
from harness.console import err_console, out_console  # noqa: E402
from harness.run import runner  # noqa: E402
from harness.run.programs import Programs  # noqa: E402

# The CLI's output is read whole: no line wrapped at 80 columns.
out_console.width = err_console.width = 200

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


TINY_PPO = {
    "name": "tiny_ppo",
    "algorithm": "ppo",
    "env": {"suite": "gymnax", "id": "CartPole-v1"},
    "seeds": [0, 1],
    "budget": {"env_steps": 60 * 4 * 128},
    "hyperparameters": {"num_envs": 4, "num_steps": 128},
    "optimizer": {"learning_rate": 0.001, "max_grad_norm": 0.5, "adam_eps": 1e-5},
    "logging": {"interval": 20},
}

# Continuous actions, observation and reward normalisation: learns within
# its 60 iterations (about -1300 to about -350 on both seeds).
TINY_PENDULUM = {
    "name": "tiny_pendulum",
    "algorithm": "ppo",
    "env": {"suite": "gymnax", "id": "Pendulum-v1"},
    "seeds": [0, 1],
    "budget": {"env_steps": 60 * 16 * 64},
    "hyperparameters": {
        "num_envs": 16,
        "num_steps": 64,
        "num_minibatches": 8,
        "update_epochs": 10,
        "gamma": 0.95,
        "entropy_coef": 0.0,
        "normalize_observations": True,
        "normalize_rewards": True,
    },
    "optimizer": {"learning_rate": 0.001, "max_grad_norm": 0.5},
    "logging": {"interval": 20},
}

TINY_AZ = {
    "name": "tiny_alphazero",
    "algorithm": "alphazero",
    "env": {"suite": "pgx", "id": "tic_tac_toe"},
    "seeds": [0, 1],
    # 12 iterations (4 chunks), so that the checkpoint tests have chunks
    # after their interrupt and can reuse this run.
    "budget": {"env_steps": 12 * 32 * 12},
    "network": {"kind": "mlp", "hidden_sizes": [32], "activation": "relu"},
    "optimizer": {"learning_rate": 0.003},
    "hyperparameters": {
        "num_envs": 32,
        "collection_steps": 12,
        "num_simulations": 8,
        "train_steps": 2,
        "train_batch_size": 64,
        "capacity": 24,
        # The published tic-tac-toe spec's search (mctx's, the default, is
        # on tests/device_runs.py's layouts).
        "tree_search": "batched",
        "evaluation": {"games": 4, "pool_size": 2},
    },
    "logging": {"interval": 3},
}


@pytest.fixture
def tiny_spec_data() -> dict:
    return copy.deepcopy(TINY_SPEC)


@functools.cache
def _store_template() -> Path:
    path = Path(tempfile.mkdtemp(prefix="mlflow-template-")) / "mlflow.db"
    from harness.record.store import open_client

    open_client(f"sqlite:///{path}")  # made and migrated by MLflow itself
    return path


def new_store(directory: Path, name: str = "mlflow.db") -> str:
    """The URI of the MLflow SQLite store `name` in `directory`, made empty
    if it is not there yet: a copy of one that MLflow made for the session,
    since making and migrating a store takes about 3 s (the tests of store
    creation make their own)."""
    path = directory / name
    if not path.exists():
        shutil.copyfile(_store_template(), path)
    return f"sqlite:///{path}"


def write_spec(directory: Path, data: dict, name: str = "spec.yaml") -> Path:
    path = directory / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# The compiled programs of each plan `train` trained, by `id(plan.algorithm)`:
# a test that trains the same plan again (resumed, interrupted) reuses them.
_PROGRAMS: dict[int, Programs] = {}


def train(data: dict) -> tuple[build.Plan, runner.RunResult]:
    plan = build.build(spec_module.parse(data))
    programs = _PROGRAMS.setdefault(id(plan.algorithm), Programs())
    return plan, train_plan(plan, programs)


def programs_of(plan: build.Plan) -> Programs:
    """The programs `train` compiled for `plan` (kept for the session)."""
    return _PROGRAMS[id(plan.algorithm)]


def train_plan(plan: build.Plan, programs: Programs | None = None) -> runner.RunResult:
    return runner.run(
        plan.algorithm, plan.spec.seeds, plan.num_iterations, plan.spec.logging.interval, programs=programs
    )


@pytest.fixture(scope="session")
def tiny_run() -> tuple[build.Plan, runner.RunResult]:
    """The tiny REINFORCE spec, trained once for the session."""
    return train(copy.deepcopy(TINY_SPEC))


def record_of(plan: build.Plan, result: runner.RunResult):
    """The results.json a run of `plan` would log, read back."""
    from harness.record import schema
    from harness.sessions import results

    return schema.parse(results.make_results(plan, result, 1.0, 0.0).to_json(), "results.json")


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


class Background:
    """The modules' slow fixtures whose work is mostly subprocesses (the
    bench's tiny entry, signalled runs, device layouts, a multi-process job,
    store faults, a published spec on unseen seeds), done in LANES threads
    started when the session starts, beside the in-process tests: each
    lane takes the next work, the longest first (each module's BACKGROUND
    gives its works' seconds here, about). Two lanes: one at a time left
    the suite waiting for the chain long after the in-process tests were
    done; more than the cores starve the in-process tests.
    `result(name)` waits for one (re-raising its error)."""

    LANES = 2

    def __init__(self, works: dict, tmp_path_factory: pytest.TempPathFactory):
        self.done = {name: threading.Event() for name in works}
        self.values: dict[str, object] = {}
        self.errors: dict[str, BaseException] = {}
        self.seconds: dict[str, float] = {}  # each work's wall time, for the session's summary
        order = sorted(works, key=lambda name: -works[name][1])
        self._queue = [(name, works[name][0]) for name in order]
        self._lock = threading.Lock()
        self.threads = [
            threading.Thread(target=self._run, args=(tmp_path_factory,), name=f"background-{lane}", daemon=True)
            for lane in range(min(self.LANES, len(works)))
        ]
        for thread in self.threads:
            thread.start()

    def _run(self, tmp_path_factory) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    return
                name, work = self._queue.pop(0)
            start = time.perf_counter()
            try:
                self.values[name] = work(tmp_path_factory)
            except BaseException as error:  # noqa: BLE001  (re-raised in the test that needs it)
                self.errors[name] = error
            self.seconds[name] = time.perf_counter() - start
            self.done[name].set()

    def result(self, name: str):
        self.done[name].wait()
        if name in self.errors:
            raise self.errors[name]
        return self.values[name]


_BACKGROUND: list[Background] = []
# What background work leaves running for its tests (a server of its own).
_AT_SESSION_END: list = []


def at_session_end(stop) -> None:
    """Call `stop()` when the session ends, after its background work, also
    when the session stops early: what a work leaves running for its tests
    outlives none of them."""
    _AT_SESSION_END.append(stop)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests of modules with background work run last (in their order), so
    that the session does other tests while that work runs instead of
    waiting for it."""
    items.sort(key=lambda item: hasattr(item.module, "BACKGROUND"))


@pytest.fixture(scope="session", autouse=True)
def _background_work(request, tmp_path_factory):
    """Start the `BACKGROUND` work of the selected test modules (fixture
    name -> (work(tmp_path_factory), about how many seconds it takes)) that
    a selected test uses; the session ends after it (no subprocess outlives
    the suite)."""
    # The session's temporary folder is made here, once: threads that each
    # made it on their first `mktemp` raced (pytest's factory is not
    # thread-safe), and one failed with "not a normalized and relative path".
    tmp_path_factory.getbasetemp()
    works = {}
    for item in request.session.items:
        for name, work in getattr(item.module, "BACKGROUND", {}).items():
            if name in item.fixturenames:
                works.setdefault(name, work)
    if works:
        _BACKGROUND.append(Background(works, tmp_path_factory))
    yield
    for background in _BACKGROUND:
        for thread in background.threads:
            thread.join()
    while _AT_SESSION_END:
        _AT_SESSION_END.pop()()


def pytest_terminal_summary(terminalreporter) -> None:
    """The background work's wall times, beside pytest's --durations."""
    for background in _BACKGROUND:
        if background.seconds:
            times = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in background.seconds.items())
            terminalreporter.write_line(f"background work: {times}")


def background_result(name: str):
    """The result of the background work `name` (waiting for it)."""
    (background,) = _BACKGROUND
    return background.result(name)


# ------------------------------------------------------------- the harness


def run_cli(*argv: str) -> tuple[int, str, str]:
    """`harness ARGV` in this process: its exit code, stdout and stderr."""
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


# ------------------------------------------------------------ mlflow server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class MlflowServer:
    """A real `mlflow server` on 127.0.0.1 (SQLite backend, proxied
    artifacts in `directory`); `stop()` and `start()` again on the same port
    and store, as a server that goes away and comes back."""

    def __init__(self, directory: Path, port: int | None = None):
        self.directory = Path(directory)
        self.port = port or free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 180) -> MlflowServer:
        log = (self.directory / "server.log").open("a")
        self.proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "mlflow", "server"),
                *("--host", "127.0.0.1", "--port", str(self.port), "--workers", "1"),
                *("--backend-store-uri", f"sqlite:///{self.directory / 'server.db'}"),
                *("--artifacts-destination", str(self.directory / "artifacts")),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the workers go with it
        )
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                pytest.fail(f"mlflow server exited: {(self.directory / 'server.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.uri}/health", timeout=2) as response:
                    if response.status == 200:
                        return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"mlflow server did not answer within {timeout} s")
            time.sleep(0.5)

    def stop(self, crash: bool = False) -> None:
        """Shut it down (SIGTERM, its workers finishing their requests), or
        with `crash`, kill it at once (SIGKILL: a server that goes away)."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL if crash else signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None


@pytest.fixture(scope="session")
def server(tmp_path_factory) -> MlflowServer:
    """One real MLflow tracking server for the session (a test that stops it
    starts it again)."""
    running = MlflowServer(tmp_path_factory.mktemp("mlflow-server")).start()
    try:
        yield running
    finally:
        running.stop()
