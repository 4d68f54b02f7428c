"""Peak memory, as a run and a bench entry record it: on an accelerator the
device allocator's high-water mark (`peak_bytes_in_use`, the largest over
the local devices), on a CPU, whose XLA buffers are the process's own, the
process's peak resident memory.

Both count everything since the process started: an accelerator's peak
includes the compiler's autotuning scratch when a program was compiled
rather than loaded from the persistent cache, and a CPU's includes the
imports (a few hundred MB). `HostPeak` measures one block on Linux.
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path
from typing import Any, NamedTuple

import jax


class Peak(NamedTuple):
    bytes: int
    where: str  # "device": the accelerator allocator's peak; "host": the process's peak resident memory


def device_peak_bytes(devices: Any = None) -> int | None:
    """The largest allocator peak over `devices` (default: this process's
    devices; another process's are skipped); None where the backend keeps
    no statistics (CPU)."""
    peaks = []
    for device in devices if devices is not None else jax.local_devices():
        if device.process_index != jax.process_index():
            continue  # another process's device: its statistics are not this process's to read
        stats = device.memory_stats() if hasattr(device, "memory_stats") else None
        if stats and stats.get("peak_bytes_in_use") is not None:
            peaks.append(int(stats["peak_bytes_in_use"]))
    return max(peaks) if peaks else None


def host_peak_bytes() -> int:
    """The process's peak resident memory since it started."""
    usage = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return usage if sys.platform == "darwin" else usage * 1024  # bytes on macOS, kilobytes on Linux


def peak(devices: Any = None) -> Peak:
    """The peak that matters where the run ran: the devices' on an
    accelerator, the process's on a CPU."""
    on_device = device_peak_bytes(devices)
    return Peak(on_device, "device") if on_device is not None else Peak(host_peak_bytes(), "host")


class HostPeak:
    """The process's peak resident memory over a `with` block, in `bytes`.

    On Linux the kernel's high-water mark is reset on entry (writing 5 to
    /proc/self/clear_refs) and read on exit (VmHWM), so the figure belongs to
    the block. Elsewhere it is the peak since the process started
    (`since_start` is then True).
    """

    def __init__(self) -> None:
        self.bytes: int | None = None
        self.since_start = True

    def __enter__(self) -> HostPeak:
        try:
            Path("/proc/self/clear_refs").write_text("5")
            self.since_start = False
        except OSError:
            self.since_start = True
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self.since_start:
            for line in Path("/proc/self/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    self.bytes = int(line.split()[1]) * 1024
                    return
        self.bytes = host_peak_bytes()
        self.since_start = True
