"""The device ceiling: what a device achieves on the simplest heavy programs,
a large matmul's GFLOP/s and a large in-place array update's GB/s, against
which a program's achieved rates are read as fractions.

Timing follows the README's Benchmarks section: compiles are done before the
clock starts, the device is waited for (`block_until_ready`) before the clock
is read, and a rate is the median over repeats, kept with its min and max
(`spread`).

The benchmark suite (benchmarks/machinery/) measures it once per session;
it lives in the installed package because it is general measurement, not
the bench's own: it needs only JAX.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from harness.run.flops import xla_cost


def time_calls(fn: Callable[[], Any], rounds: int, warmup: int = 1) -> list[float]:
    """Seconds of each of `rounds` calls of `fn`, after `warmup` untimed ones;
    every call is waited for (`block_until_ready`) before the clock is read."""
    for _ in range(warmup):
        jax.block_until_ready(fn())
    seconds = []
    for _ in range(rounds):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        seconds.append(time.perf_counter() - start)
    return seconds


def spread(rates: Sequence[float]) -> tuple[float, float, float]:
    """(median, min, max) of per-repeat rates."""
    return statistics.median(rates), min(rates), max(rates)


@dataclasses.dataclass(frozen=True)
class Ceiling:
    """What the device achieves on the simplest heavy programs."""

    matmul_gflops: tuple[float, float, float]  # float32: median, min, max over rounds
    bandwidth_gbs: tuple[float, float, float]  # median, min, max over rounds
    matmul_size: int  # n of the n x n matmuls
    copy_bytes: int  # size of the float32 array updated in place
    xla_matmul_flops: float | None  # XLA's count for the matmul (exact: no loops)
    # bfloat16 inputs and output (float32 accumulation); None in runs saved before it was measured.
    matmul_bf16_gflops: tuple[float, float, float] | None = None

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Ceiling:
        bf16 = data.get("matmul_bf16_gflops")
        return cls(
            **{
                **data,
                "matmul_gflops": tuple(data["matmul_gflops"]),
                "bandwidth_gbs": tuple(data["bandwidth_gbs"]),
                "matmul_bf16_gflops": tuple(bf16) if bf16 else None,
            }
        )

    def matmul_for(self, dtype: str) -> float:
        """The median matmul GFLOP/s in `dtype` (an entry's compute dtype;
        float32's where the other was not measured)."""
        if dtype == "bfloat16" and self.matmul_bf16_gflops:
            return self.matmul_bf16_gflops[0]
        return self.matmul_gflops[0]


# The ceiling's sizes per platform: on a GPU or TPU, a matmul big enough to
# saturate an H100-class device and a copy far beyond its caches (H100: 50 MB
# of L2); on a CPU, sizes that take well under a second.
CEILING_SIZES = {"cpu": (2048, 256 * 2**20)}
ACCELERATOR_CEILING_SIZES = (8192, 2 * 2**30)


def measure_ceiling(
    device: Any = None, *, matmul_size: int | None = None, copy_bytes: int | None = None, rounds: int = 5
) -> Ceiling:
    """The device's large-matmul GFLOP/s (float32 at JAX's default
    precision, and bfloat16; `matmul_size` square) and memory bandwidth:
    `x + 1` over a `copy_bytes` float32 array, donated so that it is updated
    in place (one read and one write of every byte, no new allocation per
    call). Medians over `rounds` calls after a warm-up; the sizes default by
    platform (`CEILING_SIZES`)."""
    device = device or jax.devices()[0]
    default_size, default_bytes = CEILING_SIZES.get(device.platform, ACCELERATOR_CEILING_SIZES)
    n = matmul_size or default_size
    copy_bytes = copy_bytes or default_bytes
    rates, cost = {}, {}
    for dtype in (jnp.float32, jnp.bfloat16):
        a = jax.device_put(jax.random.normal(jax.random.key(0), (n, n), dtype), device)
        b = jax.device_put(jax.random.normal(jax.random.key(1), (n, n), dtype), device)
        matmul = jax.jit(jnp.matmul).lower(a, b).compile()
        cost = cost or xla_cost(matmul)
        rates[dtype] = [2.0 * n**3 / s / 1e9 for s in time_calls(lambda m=matmul, a=a, b=b: m(a, b), rounds)]

    holder = {"x": jax.device_put(jnp.zeros(copy_bytes // 4, jnp.float32), device)}
    update = jax.jit(lambda x: x + 1.0, donate_argnums=0).lower(holder["x"]).compile()

    def step():
        holder["x"] = update(holder["x"])
        return holder["x"]

    copy_seconds = time_calls(step, rounds)
    moved = 2 * (copy_bytes // 4) * 4
    return Ceiling(
        matmul_gflops=spread(rates[jnp.float32]),
        bandwidth_gbs=spread([moved / s / 1e9 for s in copy_seconds]),
        matmul_size=n,
        copy_bytes=copy_bytes,
        xla_matmul_flops=cost.get("flops"),
        matmul_bf16_gflops=spread(rates[jnp.bfloat16]),
    )
