"""A real `mlflow server` on 127.0.0.1 for the tests that need one."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest


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
            # Without MLflow's job runners (GenAI jobs, which tracking does
            # not use): seven more processes that import MLflow, 25 CPU
            # seconds a start here.
            env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
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
