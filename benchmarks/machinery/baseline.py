"""The baseline's bench process (`--baseline REV`, benchmarks.machinery.lockstep):
started by the candidate's bench once its entries are collected, with the
same options and entries, in REV's worktree and environment, which
`nox -s bench -- --baseline REV` prepares (noxfile.py)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from benchmarks.machinery import lockstep

# The candidate's options that the baseline's bench does not take over (with the
# number of values each has): where its own results go, and the baseline itself.
OWN_OPTIONS = {
    "--baseline-python": 1,
    "--baseline-dir": 1,
    "--baseline-rev": 1,
    "--benchmark-json": 1,
    "--bench-dir": 1,
    "--tracking-uri": 1,
    "--fail-on-regression": 0,
    "--profile": 0,
}
FOLLOW = "--lockstep-follower"


def follower_args(args: Sequence[str], bench_dir: Path, read_fd: int, write_fd: int) -> list[str]:
    """The baseline bench's pytest arguments: the candidate's, less its own
    (OWN_OPTIONS), its results in `bench_dir`, following on the two pipes."""
    out: list[str] = []
    skip = 0
    for arg in args:
        if skip:
            skip -= 1
            continue
        name = arg.split("=", 1)[0]
        if name in OWN_OPTIONS:
            skip = OWN_OPTIONS[name] if "=" not in arg else 0
            continue
        out.append(arg)
    bench_dir.mkdir(parents=True, exist_ok=True)
    return [
        *out,
        "--bench-dir",
        str(bench_dir),
        "--benchmark-json",
        str(bench_dir / "benchmark.json"),
        # Its own store: REV's bench session is no run of this bench's experiment.
        "--tracking-uri",
        f"sqlite:///{bench_dir / 'mlflow.db'}",
        FOLLOW,
        f"{read_fd},{write_fd}",
    ]


class Baseline:
    """The baseline's bench, running: its process, its log, the leader that drives it."""

    def __init__(self, python: str, folder: Path, rev: str, args: Sequence[str], order: Sequence[str]):
        self.folder, self.rev = Path(folder), rev
        tree = self.folder / "tree"
        self.log = self.folder / "bench.log"
        follower_reads, leader_writes = os.pipe()
        leader_reads, follower_writes = os.pipe()
        ends = (follower_reads, follower_writes)
        argv = [python, "-m", "pytest", *follower_args(args, self.folder / "bench", *ends)]
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(argv, cwd=tree, stdout=log, stderr=subprocess.STDOUT, pass_fds=ends)
        for end in ends:
            os.close(end)
        self.leader = lockstep.Leader(lockstep.Channel(leader_reads, leader_writes), order)

    def finish(self, seconds: float = 600.0) -> str:
        """Tell the baseline's bench that nothing more is compared and wait
        for it to write its report; a line on how it ended."""
        self.leader.close()
        try:
            code = self.process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return f"the baseline's bench did not end in {seconds:.0f} s and was stopped (its log: {self.log})"
        return f"baseline {self.rev[:10]}: its bench's own report in {self.log} (exit {code})"


def follower(value: str) -> lockstep.Follower:
    """The baseline's side of the channel, from `--lockstep-follower R,W`."""
    read_fd, write_fd = (int(fd) for fd in value.split(","))
    return lockstep.Follower(lockstep.Channel(read_fd, write_fd))
