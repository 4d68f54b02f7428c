"""Which build of JAX fits this machine: the CPU build, the CUDA 12 plugin
for an NVIDIA driver, the TPU runtime on a TPU VM, or the machine's own
preinstalled JAX (`system`, as cloud images ship it).

The nox sessions (noxfile.py) install the build chosen here on top of
`constraints.txt`, where the plugins are pinned at the jax version the
references were made with, and export the choice as HARNESS_JAX_BUILD, which
every run records in its fingerprint (`jax_build`). Standard library only:
noxfile.py loads this file by its path, before the project is installed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NamedTuple

ENV = "HARNESS_JAX_BUILD"
# The pip packages each build adds to the CPU build that constraints.txt pins.
PACKAGES: dict[str, tuple[str, ...]] = {
    "cpu": (),
    "cuda12": ("jax-cuda12-plugin[with-cuda]", "jax-cuda12-pjrt"),
    "tpu": ("libtpu",),
    "system": (),
}


# The JAX lines the project is installed and tested on (`nox -s NAME -- --jax
# LINE`): each one's constraints file, every package pinned at versions that
# resolve with that JAX, and the oldest Python its wheels are built for.
class JaxLine(NamedTuple):
    constraints: str
    oldest_python: tuple[int, int]
    # Requirements that override a package's own (uv pip install --overrides), where a
    # package's cap would keep the line's JAX out; and the reason, said at install.
    overrides: str | None = None
    why: str = ""


LINES: dict[str, JaxLine] = {
    "0.10": JaxLine("constraints.txt", (3, 11)),
    "0.11": JaxLine("constraints-jax0.11.txt", (3, 12)),
    "0.12": JaxLine(
        "constraints-jax0.12.txt",
        (3, 12),
        "overrides-jax0.12.txt",
        "gymnax 1.0.1, its newest release, declares jax<0.12; overrides-jax0.12.txt lifts that cap",
    ),
}
DEFAULT_LINE = "0.10"  # constraints.txt: the line the CPU references in results/ were made with
# Newer lines, and what keeps each out.
NOT_YET: dict[str, str] = {}


def overridden(overrides: str) -> str:
    """An overrides file with its packages' versions dropped: the caps it
    lifts stay lifted, and a `system` install keeps the machine's JAX."""
    names = []
    for line in overrides.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            names.append(re.split(r"[=<>!~\[; ]", line, maxsplit=1)[0])
    return "\n".join(names) + "\n"


def line_constraints(line: str | None, python: tuple[int, int]) -> str:
    """The constraints file of JAX `line` (None: the default), for a Python
    of version `python`; a ValueError that says why it cannot be used."""
    chosen = line or DEFAULT_LINE
    lines = ", ".join(f"{name} ({entry.constraints})" for name, entry in LINES.items())
    if chosen in NOT_YET:
        raise ValueError(f"--jax {chosen}: not yet: {NOT_YET[chosen]}; the JAX lines are {lines}")
    if chosen not in LINES:
        raise ValueError(f"--jax {chosen}: no such JAX line; the JAX lines are {lines}")
    oldest = LINES[chosen].oldest_python
    if python < oldest:
        need = ".".join(map(str, oldest))
        raise ValueError(
            f"--jax {chosen} needs Python {need} or newer (its wheels are built for no older one); this is Python "
            f"{python[0]}.{python[1]}: run nox with a newer one, e.g. python{need} -m nox -s tests -- --jax {chosen}"
        )
    return LINES[chosen].constraints


def line_hint(reference: str | None, here: str | None) -> str:
    """Where a reference's jax version is on another JAX line than this
    environment's: how to install the reference's line (to be judged bit
    for bit), as words to follow the versions; else ''."""
    if not reference or not here:
        return ""
    line = ".".join(reference.split(".")[:2])
    if line == ".".join(here.split(".")[:2]) or line not in LINES:
        return ""
    entry = LINES[line]
    need = ".".join(map(str, entry.oldest_python))
    return (
        f" (the reference is on the jax {line} line: install {entry.constraints}, on Python {need} or newer,"
        f" or pass `-- --jax {line}` to nox, to be judged bit for bit)"
    )


# The oldest NVIDIA driver CUDA 12 runs on (CUDA's minor-version compatibility).
MIN_CUDA12_DRIVER = 525
# Packages that a `system` install leaves as the machine has them.
JAX_PACKAGES = ("jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda12-pjrt", "libtpu")


def current() -> str:
    """The build this process runs with: the nox session's choice (ENV),
    or `own environment` outside nox."""
    return os.environ.get(ENV, "own environment")


class Choice(NamedTuple):
    build: str  # a key of PACKAGES
    reason: str  # why, in a few words: what was found or asked for


def nvidia_driver(
    version_file: Path = Path("/proc/driver/nvidia/version"),
    which: Callable[[str], str | None] = shutil.which,
) -> str | None:
    """The NVIDIA driver's version (e.g. `580.159.04`), or None without one."""
    if version_file.exists():
        found = re.search(r"\b(\d{3,}\.\d+(?:\.\d+)?)\b", version_file.read_text())
        if found:
            return found.group(1)
    if which("nvidia-smi"):
        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.split()[0]
    return None


def tpu_present(dev: Path = Path("/dev"), environ: Mapping[str, str] = os.environ) -> bool:
    """Whether this is a TPU VM: its chips as /dev/accel*, or the TPU
    runtime's environment."""
    if any(dev.glob("accel*")):
        return True
    return any(key in environ for key in ("TPU_ACCELERATOR_TYPE", "TPU_NAME", "TPU_WORKER_HOSTNAMES"))


def detect(driver: str | None, tpu: bool) -> Choice:
    """The build for what was found: a TPU, an NVIDIA driver recent enough
    for CUDA 12, or neither."""
    if tpu:
        return Choice("tpu", "a TPU VM")
    if driver is not None:
        major = int(driver.split(".")[0])
        if major >= MIN_CUDA12_DRIVER:
            return Choice("cuda12", f"NVIDIA driver {driver}")
        return Choice("cpu", f"NVIDIA driver {driver} is older than CUDA 12 needs ({MIN_CUDA12_DRIVER})")
    return Choice("cpu", "no NVIDIA driver or TPU found")


def choose(requested: str | None, *, driver: str | None = None, tpu: bool = False) -> Choice:
    """`requested` (`--accelerator`), or the detected build."""
    if requested is None:
        return detect(driver, tpu)
    if requested not in PACKAGES:
        raise ValueError(f"--accelerator {requested}: one of {', '.join(PACKAGES)}")
    return Choice(requested, "asked for (--accelerator)")


def requirements(build: str) -> list[str]:
    """What pip installs for `build` besides the project (constraints.txt pins the versions)."""
    return list(PACKAGES[build])


def without_jax(constraints: str) -> str:
    """constraints.txt less the JAX packages: a `system` install keeps the machine's."""
    kept = []
    for line in constraints.splitlines():
        name = re.split(r"[=<>!~\[; ]", line.strip(), maxsplit=1)[0].lower().replace("_", "-")
        if name not in JAX_PACKAGES:
            kept.append(line)
    return "\n".join(kept) + "\n"


def gpu_missing(platforms: list[str], build: str | None, driver: str | None) -> str:
    """Why JAX sees no GPU here, and the one command that mends it."""
    if driver is None:
        return (
            "no NVIDIA driver was found on this machine (/proc/driver/nvidia/version, nvidia-smi): JAX cannot see"
            " a GPU without one"
        )
    if build in (None, "cpu"):
        where = f"this environment has JAX's CPU build ({ENV}={build})" if build else "this JAX has no CUDA plugin"
        return (
            f"NVIDIA driver {driver} found, but {where}; install the CUDA plugin with: nox -s bench -- --accelerator"
            ' cuda12 (or, in your own environment: pip install -c constraints.txt "jax-cuda12-plugin[with-cuda]"'
            " jax-cuda12-pjrt)"
        )
    return (
        f"NVIDIA driver {driver} and the {build} build are here, but JAX found only {', '.join(platforms)}:"
        " see the CUDA plugin's error above (python -c 'import jax; jax.devices(\"gpu\")' shows it)"
    )
