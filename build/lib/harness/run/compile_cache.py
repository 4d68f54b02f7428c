"""JAX's persistent compilation cache for `harness run` and `reproduce`.

A spec run a second time on the same machine, devices and versions loads
its compiled programs from disk instead of compiling them again. The cache
lives in a per-user directory (`default_dir`), or where `--compile-cache
DIR`, `HARNESS_COMPILE_CACHE` or JAX's own `JAX_COMPILATION_CACHE_DIR` say;
`--no-compile-cache` turns it off. The bench never uses it
(benchmarks.machinery.plugin): its compile seconds are always a compile's.

Nothing a run computes depends on the cache: a cached executable is the one
XLA compiled for the same program, options and devices (JAX's cache key).
Whether the cache served a run's compiles is counted from JAX's monitoring
events and kept in the record beside the compile seconds.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import NamedTuple

import jax

ENV = "HARNESS_COMPILE_CACHE"

_lock = threading.Lock()
_counts = {"/jax/compilation_cache/compile_requests_use_cache": 0, "/jax/compilation_cache/cache_hits": 0}
_listening = False


def default_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "rl-harness" / "jax"


def resolve(option: str | None, disabled: bool) -> Path | None:
    """The cache directory a command uses, or None when it is off."""
    if disabled:
        return None
    chosen = option or os.environ.get(ENV) or os.environ.get("JAX_COMPILATION_CACHE_DIR")
    return Path(chosen).expanduser() if chosen else default_dir()


def configure(directory: Path | None) -> None:
    """Use (or, with None, do not use) the cache at `directory`. Before the
    first compile of the process: JAX decides once whether it uses a cache."""
    listen()
    if directory is None:
        jax.config.update("jax_enable_compilation_cache", False)
        return
    directory.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_enable_compilation_cache", True)
    jax.config.update("jax_compilation_cache_dir", str(directory))
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
        # Every program of a run, also the ones that compile in under a second.
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


def _count(event: str, **kwargs) -> None:
    if event in _counts:
        with _lock:
            _counts[event] += 1


def listen() -> None:
    """Count the cache's requests and hits from here on."""
    global _listening
    with _lock:
        if _listening:
            return
        _listening = True
    jax.monitoring.register_event_listener(_count)


class Usage(NamedTuple):
    requests: int  # compiles that asked the persistent cache
    hits: int  # of them, served from it

    def __sub__(self, other: Usage) -> Usage:
        return Usage(self.requests - other.requests, self.hits - other.hits)

    @property
    def verdict(self) -> str:
        """off (no compile asked the cache), miss, hit (all served) or partial."""
        if self.requests == 0:
            return "off"
        if self.hits == 0:
            return "miss"
        return "hit" if self.hits == self.requests else "partial"


def usage() -> Usage:
    with _lock:
        return Usage(
            _counts["/jax/compilation_cache/compile_requests_use_cache"], _counts["/jax/compilation_cache/cache_hits"]
        )


def add_arguments(parser) -> None:
    """--compile-cache DIR and --no-compile-cache, for the commands that train."""
    group = parser.add_argument_group(
        "compile cache", "JAX's persistent compilation cache (results never depend on it)"
    )
    group.add_argument(
        "--compile-cache",
        metavar="DIR",
        help=f"where compiled programs are kept (default: ${ENV}, $JAX_COMPILATION_CACHE_DIR or {default_dir()})",
    )
    group.add_argument("--no-compile-cache", action="store_true", help="compile everything, keep nothing")


def configure_from(args) -> None:
    """Configure the cache as a command's arguments say (if it has them)."""
    if hasattr(args, "no_compile_cache"):
        configure(resolve(args.compile_cache, args.no_compile_cache))
