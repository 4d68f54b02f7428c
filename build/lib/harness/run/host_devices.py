"""A CPU split into host devices, one per core (`devices: {host_devices:
cores}`, `--host-devices`).

XLA runs a CPU as one device by default, with a pool of threads for the
work inside one program; the small kernels of an RL iteration leave most of
that pool idle (measured on 2 cores: 16 seeds of the PPO CartPole benchmark
spec ran at 1.03x PureJaxRL's speed on one device). XLA can present the host
as several CPU devices instead (`--xla_force_host_platform_device_count`),
each running its part of a sharded program on a core of its own: with the
seeds spread over them (the mesh's seed axis) the same 16 seeds ran at 2.07x.

The flag is read when JAX starts its backends, so the harness sets it before
that, and it is recorded with the run (`device.xla_flags`). Spreading seeds
over devices gives each device a narrower seed batch: the same computation
as one device, not the same bits (as any `seed_axis` layout).
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

# The flag, and how a recorded one is read (harness.judge.xla_flags: the
# verdicts read it there).
from harness.judge.xla_flags import HOST_DEVICE_COUNT as FLAG
from harness.judge.xla_flags import host_device_counts
from harness.judge.xla_flags import without_host_device_count as without_flag  # noqa: F401  (part of this module's interface)

CORES = "cores"


class HostDevicesError(Exception):
    """Host devices asked for that this process cannot have; reported
    without a traceback, naming the spec key."""


def cores() -> int:
    """The cores this process may run on (its CPU affinity, e.g. under
    `taskset`), else every core."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this OS
        return os.cpu_count() or 1


def resolve(value: int | str, num_runs: int, devices: int | None = None) -> int:
    """How many host devices `value` asks for: a number as it is; `cores`:
    the most devices, up to one per core (and up to `devices`, those there
    are), that the runs (seeds) split over evenly: 1 for one seed, as there
    is nothing to spread."""
    if value != CORES:
        return int(value)
    limit = max(1, min(cores(), num_runs, devices or num_runs))
    return max(n for n in range(1, limit + 1) if num_runs % n == 0)


def current(environ: MutableMapping[str, str] = os.environ) -> int | None:
    """The host device count `XLA_FLAGS` sets (the last one, as XLA reads
    them), or None when it sets none."""
    found = host_device_counts(environ.get("XLA_FLAGS", ""))
    if not found:
        return None
    try:
        return int(found[-1])
    except ValueError:
        return None


def enable(count: int, environ: MutableMapping[str, str] = os.environ) -> None:
    """Split the host into `count` CPU devices before JAX starts its
    backends. A count `XLA_FLAGS` sets already is the user's: a different
    one, or backends started with another, are errors."""
    present = current(environ)
    if present == count:
        return
    if present is not None:
        raise HostDevicesError(
            f"devices.host_devices: {count} host devices asked for, but XLA_FLAGS sets {FLAG}={present};"
            " leave one of them out"
        )
    from jax._src import xla_bridge

    if xla_bridge.backends_are_initialized():
        import jax

        started = len(jax.devices("cpu"))
        if started == count:
            return
        raise HostDevicesError(
            f"devices.host_devices: {count} host devices are set before JAX starts its devices, and this process"
            f" has started {started} already: run the command in a new process, or set XLA_FLAGS='{FLAG}={count}'"
            " before it starts"
        )
    environ["XLA_FLAGS"] = f"{environ.get('XLA_FLAGS', '')} {FLAG}={count}".strip()
