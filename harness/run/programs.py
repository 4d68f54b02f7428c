"""Compiled programs kept for reuse by later runs in the same process.

`harness.run.runner.run` traces, lowers and compiles its programs (the
initial state, the chunks, the evaluation) ahead of time, every run. A
caller that runs one `Algorithm` more than once in a process (a resumed run
after an interrupted one, the points of a sweep that share a structure, a
test comparing two runs of one plan) passes the same `Programs` to each:
later runs reuse the executables and report 0 compile seconds for them.
JAX's persistent compilation cache (harness.run.compile_cache) saves XLA's
compile across processes, not the tracing and lowering, which for
AlphaZero's search is most of the time.

A program is found again only for the same function object (the same
built `Algorithm`, not an equal one built anew), the same static settings
and the same abstract arguments (tree structure, shapes, dtypes,
shardings). Without a `Programs`, nothing is kept: every run compiles, as
benchmarks that time compiles need. A `Programs(keep_traces=True)` also keeps
each chunk program's jaxpr, as it was traced for the compile: what a
benchmark counts the chunk's FLOPs from without tracing it again.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import jax


def signature(args: Any) -> Hashable:
    """What a compiled program's arguments must match: structure, shapes,
    dtypes and shardings."""
    leaves, tree = jax.tree.flatten(args)
    return tree, tuple((leaf.shape, leaf.dtype, getattr(leaf, "sharding", None)) for leaf in leaves)


class Programs:
    """Compiled programs by (what was compiled, its arguments' signature)."""

    def __init__(self, keep_traces: bool = False) -> None:
        self._compiled: dict[Hashable, Any] = {}
        # The chunk programs' closed jaxprs by chunk length (harness.run.runner.compile_chunk).
        self.chunk_traces: dict[int, Any] | None = {} if keep_traces else None

    def __len__(self) -> int:
        return len(self._compiled)

    def compiled(self) -> list[Any]:
        """Every program compiled so far, in the order they were made."""
        return list(self._compiled.values())

    def get(self, key: Hashable, args: Any, make: Callable[[], Any]) -> Any:
        """The program compiled under `key` for arguments like `args`; made
        by `make()` the first time."""
        full_key = (key, signature(args))
        if full_key not in self._compiled:
            self._compiled[full_key] = make()
        return self._compiled[full_key]


def compile_once(programs: Programs | None, key: Hashable, args: Any, make: Callable[[], Any]) -> Any:
    """`make()`, or the program `programs` already holds for `key` and `args`."""
    return make() if programs is None else programs.get(key, args, make)
