"""What importing the harness loads. No module of the installed `harness`
imports pytest (the bench's plugin and the rest of its machinery live in
benchmarks/machinery/, outside the package), and nothing under
`harness.record` imports JAX (the metric writer and `harness sync` start
without it); importing never starts JAX's devices (`--deterministic` sets
XLA's flags after the imports). Each check imports every module of a package in a fresh
interpreter, since this one has pytest and JAX loaded already."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Every module of the package, then what the interpreter holds. `__main__`
# is left out: importing it runs the command line.
IMPORT_EVERY_MODULE = """
import importlib, json, pkgutil, sys
package = importlib.import_module(sys.argv[1])
names = [sys.argv[1]] + sorted(
    m.name for m in pkgutil.walk_packages(package.__path__, sys.argv[1] + ".") if not m.name.endswith(".__main__")
)
for name in names:
    importlib.import_module(name)
started = "jax" in sys.modules and importlib.import_module("jax._src.xla_bridge").backends_are_initialized()
print(json.dumps({"imported": names, "loaded": sorted(sys.modules), "started": started}))
"""


def import_every_module(package: str) -> tuple[set[str], set[str], bool]:
    """(the modules of `package` imported, every module then loaded, whether
    JAX's backends were started), in a fresh interpreter started in the
    repository's root."""
    proc = subprocess.run(
        [sys.executable, "-c", IMPORT_EVERY_MODULE, package],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    return set(out["imported"]), set(out["loaded"]), out["started"]


def test_no_harness_module_imports_pytest_or_the_bench_or_starts_jax():
    imported, loaded, started = import_every_module("harness")
    assert {"harness", "harness.cli.dispatch", "harness.build", "harness.run.runner", "harness.run.flops"} <= imported
    assert not {"pytest", "_pytest", "pytest_benchmark"} & loaded
    assert not any(name == "benchmarks" or name.startswith("benchmarks.") for name in loaded)
    # A computation at import (a module-level jnp constant) starts the devices,
    # after which --deterministic can no longer set XLA's flags.
    assert not started, "importing the harness started JAX's backends"


def test_harness_record_imports_no_jax():
    imported, loaded, _ = import_every_module("harness.record")
    assert {"harness.record", "harness.record.tracking", "harness.record.metric_writer"} <= imported
    assert not any(name == "jax" or name.startswith(("jax.", "jaxlib")) for name in loaded)


def test_the_statistics_import_nothing_of_the_harness():
    """harness.stats, the tests on numbers alone, imports no other module of
    the harness (only the package's own, lazy __init__) and no JAX: the
    claims, the bench and drift share its tests as algorithms/ is shared."""
    imported, loaded, _ = import_every_module("harness.stats")
    assert {
        "harness.stats.sequential",
        "harness.stats.ranks",
        "harness.stats.speed",
        "harness.stats.verdict",
    } <= imported
    others = {name for name in loaded if name.startswith("harness.") and not name.startswith("harness.stats")}
    assert others == set(), others
    assert not any(name == "jax" or name.startswith(("jax.", "jaxlib")) for name in loaded)
