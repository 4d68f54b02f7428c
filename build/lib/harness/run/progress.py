"""The progress bar of a run: iterations, env steps/s and mean return."""

from __future__ import annotations

import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from harness.types import ChunkMetrics


class ProgressBar:
    """A rich progress bar fed with each chunk's metrics by the runner's sink.

    The env steps/s shown is cumulative since compilation finished, so it
    settles on the run's real throughput instead of flickering per chunk.
    """

    def __init__(
        self,
        name: str,
        num_iterations: int,
        env_steps_per_iteration: int,
        num_seeds: int,
        *,
        console: Console | None = None,
        enabled: bool = True,
    ):
        self.name = name
        self.steps_per_iteration = env_steps_per_iteration * num_seeds
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("it"),
            TextColumn("{task.fields[sps]}"),
            TextColumn("return {task.fields[ret]}"),
            TimeRemainingColumn(),
            console=console or Console(stderr=True),
            disable=not enabled,
            # Redraw only when a chunk arrives: a 10 Hz refresh thread would
            # take the GIL and CPU from the training loop for nothing new.
            auto_refresh=False,
        )
        self.task = self.progress.add_task(f"{name}: compiling", total=num_iterations, sps="", ret="-")
        self.started: float | None = None
        self.iterations = 0

    def __enter__(self) -> ProgressBar:
        self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.stop()

    def compiled(self, seconds: float) -> None:
        self.progress.update(self.task, description=f"{self.name} (compiled in {seconds:.1f} s)", refresh=True)
        self.started = time.perf_counter()

    def skip(self, iterations: int) -> None:
        """A resumed run starts `iterations` in."""
        self.progress.update(self.task, completed=iterations, refresh=True)

    def update(self, chunk: ChunkMetrics) -> None:
        length = next(iter(chunk.metrics.values())).shape[0]
        self.iterations += length
        fields = {}
        if self.started is not None:
            elapsed = time.perf_counter() - self.started
            fields["sps"] = f"{self.iterations * self.steps_per_iteration / max(elapsed, 1e-9):,.0f} steps/s"
        if "episode_return" in chunk.metrics:
            fields["ret"] = f"{chunk.metrics['episode_return'][-1].mean():.1f}"
        self.progress.update(self.task, advance=length, refresh=True, **fields)
