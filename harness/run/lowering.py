"""How the harness lowers JAX's threefry hash on CPU.

JAX lowers `threefry2x32` (every `jax.random` draw and split) on CPU as a
rolled loop of its 5 round groups, to keep compile times down; XLA:CPU then
runs each trip as ~16 separate kernels, so one random draw inside a training
step costs ~90 kernel launches: as many as the rest of a CartPole PPO env
step (measured from XLA's optimized HLO of the benchmark chunk). Lowered
straight-line, as JAX does on GPU and TPU, the whole hash fuses into one
kernel. The integer operations are the same, so every bit is the same
(tests/test_lowering.py); compile time goes down, not up.

The harness registers the straight-line lowering for its own programs when
`harness.run.runner` is imported; `jax_default_threefry` gives JAX's own
back for a block (the bench's side-by-side entries compile their peers'
code under it, so the peers run as they would on their own).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from jax._src.interpreters import mlir

try:
    from jax._src.random import threefry2x32
except ImportError:  # jax 0.10.1 and older keep the primitive and its lowerings in prng
    from jax._src import prng as threefry2x32


def _register(rule) -> None:
    mlir.register_lowering(threefry2x32.threefry2x32_p, rule, platform="cpu")


def unroll_threefry_on_cpu() -> None:
    """Lower threefry straight-line on CPU from now on (idempotent)."""
    _register(threefry2x32._threefry2x32_lowering_rule)


@contextlib.contextmanager
def jax_default_threefry() -> Iterator[None]:
    """JAX's own CPU lowering of threefry for programs lowered in the block."""
    _register(threefry2x32._threefry2x32_cpu_lowering_rule)
    try:
        yield
    finally:
        unroll_threefry_on_cpu()
