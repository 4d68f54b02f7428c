"""XLA's deterministic mode (`devices: {deterministic: true}`,
`--deterministic`).

On a GPU, XLA may pick kernels by autotuning and reduce with atomics, so two
runs of one program on one device can differ in the last bits. XLA's flag
`--xla_gpu_deterministic_ops` makes every op run-to-run deterministic (it
also excludes the non-deterministic ops and turns autotuning off), at a cost
the bench's `iteration[ppo-deterministic]` measures beside
`iteration[ppo]`. XLA reads `XLA_FLAGS` when JAX starts its backends, so the
flag is set before that; it is then recorded in the run's fingerprint
(`device.xla_flags`), which the exact verdict of `harness reproduce`
compares. CPU and TPU programs are run-to-run deterministic without it: the
flag changes nothing there (the verdict ignores it on those platforms).
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

# The flag, and what a recorded one means (harness.judge.xla_flags: the
# verdicts read it there).
from harness.judge.xla_flags import DETERMINISTIC_OPS as FLAG
from harness.judge.xla_flags import DETERMINISTIC_PLATFORMS
from harness.judge.xla_flags import deterministic_ops as is_on
from harness.judge.xla_flags import without_deterministic_ops as without_flag  # noqa: F401  (part of this module's interface)

# The same, as a compile option of one program (what the bench pair uses:
# both programs in one process).
COMPILER_OPTIONS = {"xla_gpu_deterministic_ops": True}


class DeterminismError(Exception):
    """Deterministic mode asked for too late; reported without a traceback."""


def enable(environ: MutableMapping[str, str] = os.environ) -> None:
    """Add the flag to `XLA_FLAGS` before JAX starts its backends; raise
    DeterminismError when they have started without it."""
    flags = environ.get("XLA_FLAGS", "")
    if is_on(flags):
        return
    from jax._src import xla_bridge

    if xla_bridge.backends_are_initialized():
        raise DeterminismError(
            "deterministic mode sets XLA's flags before JAX starts its devices, and this process has started"
            f" them already: run the command in a new process, or set XLA_FLAGS='{FLAG}' before it starts"
        )
    environ["XLA_FLAGS"] = f"{flags} {FLAG}".strip()


def run_note(fingerprint: dict[str, str]) -> str | None:
    """What to say at the start of a run about determinism, if anything."""
    platform = fingerprint.get("platform", "")
    if is_on(fingerprint.get("xla_flags", "")) and platform in DETERMINISTIC_PLATFORMS:
        return (
            f"deterministic: a {platform} run is run-to-run deterministic already; XLA's deterministic-ops flag"
            " acts on GPUs only (it is recorded in device.xla_flags all the same)"
        )
    return None
