"""The baseline's checkout for `nox -s bench -- --baseline REV`: REV's
worktree in `.bench/baseline/<commit>/tree` with this checkout's
`benchmarks/` copied in (the same instrument measures both commits), and
an environment of its own beside it, installed as the bench session installs
the project (its constraints file, the JAX build). The bench then starts
REV's bench in that environment (benchmarks/machinery/baseline.py).

Standard library only: `noxfile.py` loads this file by its path, before the
project is installed. Every failure is a `BaselineError` of one line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path


class BaselineError(ValueError):
    """A baseline that cannot be compared with: said in one line."""


def _git(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)


def commit_of(root: Path, rev: str) -> str:
    """REV's full commit hash; the checkout at `root` must have no uncommitted
    change (both sides of a comparison are commits)."""
    found = _git(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    if found.returncode != 0:
        raise BaselineError(f"--baseline {rev}: no such commit in this repository")
    changed = _git(root, "status", "--porcelain", "--untracked-files=no").stdout.strip()
    if changed:
        files = ", ".join(line.split()[-1] for line in changed.splitlines()[:5])
        raise BaselineError(
            f"--baseline {rev}: this checkout has uncommitted changes ({files}); commit them, so that both sides of"
            " the comparison are commits"
        )
    return found.stdout.strip()


def prepare(root: Path, rev: str, commit: str, python: str, constraints: str, extra: Sequence[str], log) -> Path:
    """The baseline's folder, its worktree and environment made (the
    environment again only where the commit, constraints or packages
    changed): `python` makes the environment, `constraints` is the
    constraints file's name in the tree, `extra` the JAX build's packages."""
    folder = (root / ".bench" / "baseline" / commit[:12]).resolve()
    tree, venv = folder / "tree", folder / "venv"
    if not (tree / ".git").exists():
        _git(root, "worktree", "prune")
        shutil.rmtree(tree, ignore_errors=True)
        made = _git(root, "worktree", "add", "--detach", "--force", str(tree), commit)
        if made.returncode != 0:
            raise BaselineError(f"--baseline {rev}: cannot check it out: {_last_line(made)}")
    shutil.rmtree(tree / "benchmarks", ignore_errors=True)
    shutil.copytree(root / "benchmarks", tree / "benchmarks", ignore=shutil.ignore_patterns("__pycache__"))
    wanted = " ".join([commit, constraints, *extra])
    stamp, interpreter = folder / "installed", venv / "bin" / "python"
    if stamp.exists() and stamp.read_text() == wanted and interpreter.exists():
        return folder
    stamp.unlink(missing_ok=True)
    if not (tree / constraints).exists():
        raise BaselineError(f"--baseline {rev}: the baseline {commit[:10]} has no {constraints} to install it with")
    project = ["-c", str(tree / constraints), "-e", f"{tree}[test]", *extra]
    uv = shutil.which("uv")
    steps = (
        [[uv, "venv", "--quiet", "--python", python, str(venv)],
         [uv, "pip", "install", "--quiet", "--python", str(interpreter), *project]]
        if uv
        else [[python, "-m", "venv", str(venv)], [str(interpreter), "-m", "pip", "install", "--quiet", *project]]
    )  # fmt: skip
    log(f"baseline {commit[:10]}: installing it into {venv}")
    quick = {**os.environ, "UV_COMPILE_BYTECODE": "0"}  # as the bench session installs (noxfile.py)
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, env=quick)
        if done.returncode != 0:
            raise BaselineError(f"--baseline {rev}: the baseline {commit[:10]} fails to build: {_last_line(done)}")
    stamp.write_text(wanted)
    return folder


def _last_line(done: subprocess.CompletedProcess) -> str:
    text = (done.stderr or "").strip() or (done.stdout or "").strip() or f"exit {done.returncode}"
    return text.splitlines()[-1]


def options(folder: Path, commit: str) -> list[str]:
    """The bench's options that start the baseline's bench from `folder`."""
    python = folder / "venv" / "bin" / "python"
    return ["--baseline-python", str(python), "--baseline-dir", str(folder), "--baseline-rev", commit]
