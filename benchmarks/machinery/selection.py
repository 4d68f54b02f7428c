"""What the bench's command line selects, checked before any entry runs: the
device the entries run on (`--device`) and the spec entries (`--full`,
`--spec`, or by default the small benchmark specs, one seed and many). A bad
name, device or spec file is a usage error, not a failed entry."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NamedTuple

import pytest


def bench_specs(config: pytest.Config) -> Path:
    """The small benchmark specs, in the repository's `benchmarks/specs/`."""
    return config.rootpath / "benchmarks" / "specs"


def published_specs(config: pytest.Config) -> Path:
    """The published specs' folder in the repository (`experiments/`)."""
    from harness.judge import references  # here: a usage error in the options is told before JAX starts

    return config.rootpath / references.PUBLISHED


def full_only_specs(config: pytest.Config) -> Path:
    """Benchmark specs at the sizes accelerator users run (thousands of
    envs), too long for a CPU's default suite: `--full` runs them beside the
    published specs."""
    return bench_specs(config) / "full"


class SpecEntry(NamedTuple):
    id: str  # the pytest id: the entry is named spec[<id>]
    path: Path
    seeds: tuple[int, ...] | None  # None: the spec's own
    evaluate: bool  # run the algorithm's evaluation, as harness run does
    cores: bool = False  # the seeds spread over the CPU's cores (devices: {host_devices: cores})

    def plan(self):
        from harness import build
        from harness import experiment_spec as spec_module

        loaded = spec_module.load(self.path)
        if self.seeds is not None:
            loaded = loaded.model_copy(update={"seeds": self.seeds})
        if self.cores:
            loaded = build.with_devices(loaded, {"host_devices": "cores"})
        return build.build(loaded, str(self.path))


# The benchmark specs benched with all their seeds vmapped too, and on a
# CPU with those seeds over its cores: PPO on CartPole, the configuration the
# peers are compared at. The other workloads' many-seed throughput is their
# `filled[...]` entry (the published spec's seeds at the size that fills the
# device); the suite stays under 10 minutes on a 2-core CPU.
MANY_SEEDS_SPECS = ("ppo_cartpole",)
# Benchmark specs whose small configuration the default suite leaves out:
# each compiles for about 25 s on a 2-core CPU, and their workload is in the
# suite as its `filled[...]` entry (and with --full, as published).
FILLED_ONLY_SPECS = ("alphazero_connect_four", "ppo_minigrid_empty_6x6")


def split_host() -> None:
    """One CPU device per core (`harness.run.host_devices`), set before JAX
    starts, for the entries that spread seeds over the cores; a split that
    XLA_FLAGS sets, or devices already started, stay as they are."""
    from harness.run import host_devices

    try:
        host_devices.enable(host_devices.cores())
    except host_devices.HostDevicesError:
        pass


def _spread_over_cores(device: Any, seeds: int) -> bool:
    """Whether a CPU bench has host devices to spread `seeds` seeds over."""
    import jax

    from harness.run import host_devices

    if device.platform != "cpu":
        return False
    return host_devices.resolve(host_devices.CORES, seeds, devices=len(jax.devices("cpu"))) > 1


def default_entries(folder: Path, over_cores) -> list[SpecEntry]:
    """The default bench's spec entries, from the benchmark specs in
    `folder`: each at 1 seed, MANY_SEEDS_SPECS at all their seeds too and,
    where `over_cores(seeds)`, those seeds over the CPU's cores."""
    from harness import experiment_spec as spec_module

    entries = []
    for path in sorted(p for p in folder.glob("*.yaml") if p.stem not in FILLED_ONLY_SPECS):
        seeds = spec_module.load(path).seeds
        for count in sorted({1, len(seeds) if path.stem in MANY_SEEDS_SPECS else 1}):
            label = "1seed" if count == 1 else f"{count}seeds"
            # The default bench times training alone: AlphaZero's
            # evaluation games compile for about a minute on a CPU.
            entries.append(SpecEntry(f"{path.stem}-{label}", path, tuple(seeds[:count]), False))
            # On a CPU the many-seed run again, its seeds spread over the cores.
            if count > 1 and over_cores(count):
                entries.append(SpecEntry(f"{path.stem}-{label}-cores", path, tuple(seeds), False, cores=True))
    return entries


def spec_entries(config: pytest.Config, device: Any) -> tuple[str, list[SpecEntry]]:
    """The mode and the spec entries the options ask for; bad names and bad
    spec files are usage errors."""
    from harness import experiment_spec as spec_module

    full, paths = config.getoption("full"), config.getoption("spec")
    entries: list[SpecEntry] = []
    if full:
        published = {
            p.stem: p
            for folder in (published_specs(config), full_only_specs(config))
            for p in sorted(folder.glob("*.yaml"))
        }
        names = list(published) if full == "all" else [n.strip() for n in full.split(",") if n.strip()]
        unknown = [n for n in names if n not in published]
        if unknown:
            raise pytest.UsageError(
                f"--full: no published spec {', '.join(map(repr, unknown))}; the specs in {published_specs(config)} "
                f"and {full_only_specs(config)} are: "
                f"{', '.join(published)}"
            )
        entries += [SpecEntry(name, published[name], None, True) for name in names]
    for raw in paths:
        path = Path(raw)
        entries.append(SpecEntry(path.stem, path, None, True))
    if full or paths:
        mode = "full" if full else "spec"
    else:
        mode = "default"
        entries = default_entries(bench_specs(config), lambda seeds: _spread_over_cores(device, seeds))
    if mode != "default":
        # Files from the command line: build each (no compiling) so that a
        # bad spec or env is a usage error, not a failed entry.
        from benchmarks.machinery.measure import chunk_lengths

        for entry in entries:
            try:
                plan = entry.plan()
            except spec_module.SpecError as error:
                raise pytest.UsageError(str(error)) from None
            if len(chunk_lengths(plan.num_iterations, plan.spec.logging.interval)) < 2:
                raise pytest.UsageError(
                    f"{entry.path}: {plan.num_iterations} iteration(s) in chunks of {plan.spec.logging.interval} "
                    "(logging.interval) make one chunk; a benchmark needs a warm-up chunk and timed ones"
                )
    return mode, entries


def device(platform: str | None):
    """JAX's first device of `platform` (`--device`), or its default device."""
    import jax

    if platform is None:
        return jax.devices()[0]
    try:
        return jax.devices(platform)[0]
    except RuntimeError as error:
        present = sorted({d.platform for d in jax.devices()})
        why = ""
        if platform in ("gpu", "cuda"):
            from harness import jax_build

            why = "; " + jax_build.gpu_missing(present, os.environ.get(jax_build.ENV), jax_build.nvidia_driver())
        raise pytest.UsageError(
            f"--device {platform}: no such device here ({error}); this machine has: {', '.join(present)}{why}"
        ) from None


def describe(device) -> str:
    """What the bench measures, said before its first entry: the platform,
    its devices and how JAX was installed."""
    import jax

    from harness import jax_build

    count = len(jax.devices(device.platform))
    return (
        f"harness bench: measuring {device.platform}: {count} x {device.device_kind}"
        f" (jax {jax.__version__}, JAX build: {jax_build.current()})"
    )
