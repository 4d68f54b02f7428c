"""What a result was produced with: package versions, git state, devices."""

from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import re
import subprocess
from pathlib import Path
from typing import Any

import jax

from harness import jax_build

PACKAGES = (
    *("jax", "jaxlib", "flax", "optax", "pgx", "jumanji", "gymnax", "xminigrid", "mctx"),
    *("mlflow", "orbax-checkpoint"),
)


@functools.cache
def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for package in PACKAGES:
        # MLflow's client alone is the distribution `mlflow-skinny`.
        for distribution in (package, "mlflow-skinny") if package == "mlflow" else (package,):
            try:
                out[package] = importlib.metadata.version(distribution)
                break
            except importlib.metadata.PackageNotFoundError:
                out[package] = "not installed"
    return out


@functools.cache
def git_state() -> dict[str, str]:
    """Commit and dirty flag of the repository the harness code lives in
    (changes under results/ do not count: publishing a reference writes there)."""
    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        # results/ holds references that runs write; it is output, not code.
        dirty = bool(git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)results"))
    except (OSError, subprocess.SubprocessError):
        return {"commit": "unknown", "dirty": "unknown"}
    return {"commit": commit, "dirty": str(dirty).lower()}


@functools.cache
def _cpuinfo() -> dict[str, str]:
    """The first processor's fields in /proc/cpuinfo (empty where there is none)."""
    try:
        block = Path("/proc/cpuinfo").read_text().split("\n\n", 1)[0]
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in block.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_model() -> str:
    """The host CPU's model name. XLA compiles CPU code for the host's
    instruction set, so two x86_64 machines can round differently."""
    return _cpuinfo().get("model name") or platform.processor() or platform.machine()


# The SIMD extensions XLA's CPU code generator may use (x86 flags; ARM's
# `Features` are kept whole).
_SIMD_FLAG = re.compile(r"^(sse\S*|ssse3|avx\S*|fma\S*|f16c|amx\S*|bmi\d|adx|sha_ni|vaes|vpclmulqdq|gfni)$")


def cpu_isa() -> str:
    """The host CPU's family, model and SIMD extensions: what XLA compiles
    CPU code for, beside the model name. Two hosts that both call
    themselves "AMD EPYC" (a virtual machine often cuts the name short) can
    be different generations, one with AVX-512, whose runs of one program
    differ in the last bits."""
    fields = _cpuinfo()
    if "flags" in fields:  # x86
        simd = " ".join(sorted(f for f in fields["flags"].split() if _SIMD_FLAG.match(f)))
        return f"{fields.get('vendor_id', '?')} family {fields.get('cpu family', '?')} model {fields.get('model', '?')}: {simd}"
    if "Features" in fields:  # ARM
        return (
            f"implementer {fields.get('CPU implementer', '?')} part {fields.get('CPU part', '?')}: {fields['Features']}"
        )
    return platform.machine()


def fingerprint(layout: Any = None, device: Any = None, shards: int | None = None) -> dict[str, str]:
    """The devices and numerics settings a run executes with (tags
    `device.*`, results.json): those of JAX's default platform, or of
    `device`'s (which need not be the default: the bench's `--device`), the
    mesh `layout` it used (`mesh: none` is the plain one-device program,
    not the same program as a one-device mesh) and its logical `shards`
    (exact layouts, `devices.shards`; `none` without)."""
    device = device or jax.devices()[0]
    platform_name = device.platform
    return {
        "platform": platform_name,
        "device_kind": device.device_kind,
        "device_count": str(len(jax.devices(platform_name))),
        "local_device_count": str(len(jax.local_devices(backend=platform_name))),
        "process_count": str(jax.process_count()),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "prng_impl": str(jax.config.jax_default_prng_impl),
        "jax_threefry_partitionable": str(bool(jax.config.jax_threefry_partitionable)).lower(),
        "host": platform.node(),
        "cpu": platform.processor() or platform.machine(),
        "cpu_model": cpu_model(),
        "cpu_isa": cpu_isa(),
        "mesh": "none" if layout is None else layout.describe(),
        "devices_used": "1" if layout is None else str(layout.count),
        "shards": "none" if shards is None else str(shards),
        # How JAX was installed: the nox sessions' choice (harness.jax_build),
        # or the user's own environment.
        "jax_build": jax_build.current(),
    }
