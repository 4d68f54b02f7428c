"""How the harness lowers JAX's threefry hash on CPU.

JAX lowers `threefry2x32` (every `jax.random` draw and split) on CPU as a
rolled loop of its 5 round groups, to keep compile times down; XLA:CPU then
runs each trip as ~16 separate kernels, so one random draw inside a training
step costs ~90 kernel launches: as many as the rest of a CartPole PPO env
step (measured from XLA's optimized HLO of the benchmark chunk). Lowered
straight-line, as JAX does on GPU and TPU, the whole hash fuses into one
kernel. The integer operations are the same, so every bit is the same
(tests/test_lowering.py): the choice is one of speed and compile time only.

The harness lowers threefry straight-line on CPU on jaxlib 0.10 and older
(`STRAIGHT_LINE_UP_TO`), and keeps JAX's rolled loop on newer ones: there,
XLA's CPU compiler spends more than seven minutes (LLVM's loop vectorizer)
on a straight-line hash over a whole array, in AlphaZero's tic-tac-toe
evaluation and Othello's initialisation, which compile in seconds with the
loop (results/compile/cpu-intel-xeon-2core-alphazero.json).

`harness.run.runner` registers the harness's lowering when it is imported;
`jax_default_threefry` gives JAX's own back for a block (the bench's
side-by-side entries compile their peers' code under it, so the peers run
as they would on their own).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from jax._src.interpreters import mlir
from jax._src.lib import version as jaxlib_version

try:
    from jax._src.random import threefry2x32
except ImportError:  # jax 0.10.1 and older keep the primitive and its lowerings in prng
    from jax._src import prng as threefry2x32

STRAIGHT_LINE_UP_TO = (0, 10)  # the newest jaxlib line lowered straight-line


def straight_line() -> bool:
    """Whether the harness lowers threefry straight-line on this jaxlib's CPU."""
    return tuple(jaxlib_version[:2]) <= STRAIGHT_LINE_UP_TO


def _register(rule) -> None:
    mlir.register_lowering(threefry2x32.threefry2x32_p, rule, platform="cpu")


def harness_threefry_on_cpu() -> None:
    """Lower threefry as the harness does on CPU from now on (idempotent)."""
    if straight_line():
        _register(threefry2x32._threefry2x32_lowering_rule)
    else:
        _register(threefry2x32._threefry2x32_cpu_lowering_rule)


@contextlib.contextmanager
def jax_default_threefry() -> Iterator[None]:
    """JAX's own CPU lowering of threefry for programs lowered in the block."""
    _register(threefry2x32._threefry2x32_cpu_lowering_rule)
    try:
        yield
    finally:
        harness_threefry_on_cpu()
