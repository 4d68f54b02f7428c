"""FLOPs of one iteration of the chunk program an entry compiled: counted
from the jaxpr its compile traced (`Programs(keep_traces=True)`), rather
than by tracing the step a second time.

Against a baseline (`--baseline REV`) this checkout's benchmarks/ run over
REV's harness, which may predate kept traces: there the step is traced
again and counted as that harness counts it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.run import flops
from harness.run.programs import Programs


def keeping_traces() -> Programs:
    """Programs for one entry's run that keep its chunks' traces, where the harness can."""
    try:
        return Programs(keep_traces=True)
    except TypeError:  # a baseline's harness from before kept traces
        return Programs()


def per_iteration(programs: Programs, iterations: int, step: Callable, layout: Any, state: Any) -> Any:
    """One iteration's FlopCount (over the run's seeds) of the chunk program
    of `iterations` iterations compiled through `programs`; without its trace,
    `step` over the seeds of `state`, traced again."""
    trace = (getattr(programs, "chunk_traces", None) or {}).get(iterations)
    if trace is None:
        return flops.count_flops(flops.over_seeds(step, layout), state)
    return flops.per_iteration(trace, iterations)  # a harness that keeps traces counts them
