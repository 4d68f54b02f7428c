"""What a run's XLA flags (`XLA_FLAGS`, recorded as `device.xla_flags`) say
about its bits, for the verdicts: whether XLA's deterministic ops were on,
and the flags as far as they change the numbers.

The two flags the harness sets itself are named here, where the records are
read; harness.run.determinism and harness.run.host_devices set them before
JAX starts its backends.
"""

from __future__ import annotations

import re

# XLA's deterministic ops (`devices: {deterministic: true}`): a GPU program
# then runs to the same bits every time.
DETERMINISTIC_OPS = "--xla_gpu_deterministic_ops=true"
_DETERMINISTIC_OPS = re.compile(r"--xla_gpu_deterministic_ops(=(true|1))?(\s|$)")
# Platforms whose programs are run-to-run deterministic without the flag.
DETERMINISTIC_PLATFORMS = ("cpu", "tpu")

# A CPU split into this many host devices (`devices: {host_devices: N}`).
HOST_DEVICE_COUNT = "--xla_force_host_platform_device_count"
_HOST_DEVICE_COUNT = re.compile(rf"{HOST_DEVICE_COUNT}=(\S*)")


def deterministic_ops(xla_flags: str) -> bool:
    """Whether `xla_flags` (an `XLA_FLAGS` value) turns XLA's deterministic ops on."""
    return bool(_DETERMINISTIC_OPS.search(xla_flags))


def without_deterministic_ops(xla_flags: str) -> str:
    """`xla_flags` without the deterministic-ops flag."""
    return " ".join(_DETERMINISTIC_OPS.sub(" ", xla_flags).split())


def host_device_counts(xla_flags: str) -> list[str]:
    """The values `xla_flags` gives the host device count, in order (XLA
    reads the last)."""
    return _HOST_DEVICE_COUNT.findall(xla_flags)


def without_host_device_count(xla_flags: str) -> str:
    """`xla_flags` without the host device count."""
    return " ".join(_HOST_DEVICE_COUNT.sub(" ", xla_flags).split())


def exact_problem(fingerprint: dict[str, str]) -> str | None:
    """Why a run with this fingerprint cannot be judged bit for bit even
    against itself: a GPU run without deterministic ops."""
    if fingerprint.get("platform") == "gpu" and not deterministic_ops(fingerprint.get("xla_flags", "")):
        return (
            "this GPU run was not deterministic: XLA may autotune kernels and reduce with atomics, so an exact"
            " verdict on a GPU needs deterministic ops (harness reproduce --deterministic, or devices:"
            " {deterministic: true}, against a reference made with them)"
        )
    return None


def numerics_flags(xla_flags: str, platform: str) -> str:
    """`xla_flags` as far as they change the bits on `platform`: the
    deterministic-ops flag does not on a platform that is deterministic."""
    return without_deterministic_ops(xla_flags) if platform in DETERMINISTIC_PLATFORMS else xla_flags
