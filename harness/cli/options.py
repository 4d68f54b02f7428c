"""The command line's options that change what a spec-driven command does:
seeds and devices in place of the spec's, and how a training session runs
(`RunOptions`); the plan or sweep a command's spec argument loads into,
with those options. Bad values raise `OptionError`, reported like a spec
error."""

from __future__ import annotations

import argparse
from pathlib import Path

from pydantic import ValidationError

from harness import build
from harness import experiment_spec as spec
from harness import sweep as sweeps
from harness.experiment_spec import SpecError
from harness.run import determinism, host_devices
from harness.sessions import errors_report
from harness.sessions import run as run_session
from harness.sessions.run_options import RunOptions

DEVICE_OPTIONS = {
    "count": "--devices",
    "seed_axis": "--seed-axis",
    "data_axis": "--data-axis",
    "host_devices": "--host-devices",
    "deterministic": "--deterministic",
}


class OptionError(ValueError):
    """A bad command-line option (reported like a spec error)."""


def devices(args: argparse.Namespace) -> dict:
    """The command line's --devices/--seed-axis/--data-axis, by spec key."""
    given = {key: getattr(args, key) for key in DEVICE_OPTIONS if getattr(args, key, None) is not None}
    if given.get("count", "all") != "all":
        try:
            given["count"] = int(given["count"])
        except ValueError:
            raise OptionError(f"--devices takes a number or all, not {given['count']!r}") from None
    if given.get("host_devices", host_devices.CORES) != host_devices.CORES:
        try:
            given["host_devices"] = int(given["host_devices"])
        except ValueError:
            raise OptionError(f"--host-devices takes a number or cores, not {given['host_devices']!r}") from None
    return given


def seeds(given: list[int]) -> tuple[int, ...]:
    """--seeds, checked as the spec's seeds are."""
    try:
        return spec.check_seeds(tuple(given))
    except ValueError as error:
        raise OptionError(f"--seeds {' '.join(map(str, given))}: {error}") from None


def with_command_line(loaded: spec.Spec, args: argparse.Namespace | None) -> spec.Spec:
    """`loaded` with the command line's seeds (run's --seeds) and device options
    (if `args` has any) in place of its own; for a command that trains
    (`args` given), XLA's deterministic mode and host devices set when it
    asks for them."""
    if args is not None and getattr(args, "command", None) == "run" and args.seeds:
        # harness reproduce --seeds rebuilds the reference's spec itself.
        loaded = loaded.model_copy(update={"seeds": seeds(args.seeds)})
    if args is not None and (given := devices(args)):
        try:
            loaded = build.with_devices(loaded, given)
        except ValidationError as error:
            problem = error.errors()[0]
            option = DEVICE_OPTIONS[str(problem["loc"][0])]
            raise OptionError(f"{option}: {problem['msg'].removeprefix('Value error, ')}") from None
    if args is not None and loaded.devices.deterministic:
        determinism.enable()
    if args is not None and (host := loaded.devices.host_devices) is not None:
        host_devices.enable(host_devices.cores() if host == host_devices.CORES else host)
    return loaded


def run_options(args: argparse.Namespace, **extra) -> RunOptions:
    """How a training session runs, as the command line says."""
    interval = args.system_metrics_interval
    if interval <= 0:
        raise OptionError(f"--system-metrics-interval must be positive, not {interval}")
    return RunOptions(
        started_at=args.started_at,
        system_metrics=None if args.no_system_metrics else interval,
        progress=not args.no_progress,
        live_metrics=args.live_metrics,
        profile=getattr(args, "profile", False),  # harness run's alone
        metric_points=metric_points(args),
        checkpoint_dir=Path(args.checkpoint_dir) if getattr(args, "checkpoint_dir", None) else None,
        parent_run=getattr(args, "parent_run", None),
        **extra,
    )


def metric_points(args: argparse.Namespace) -> int:
    points = args.metric_points
    if points < 0:
        raise OptionError(f"--metric-points must be 0 (every iteration) or more, not {points}")
    return points


def plot_path(value: str) -> Path:
    """`--out` of a command that draws a PNG: as given when it ends in .png,
    with .png added when it has no suffix (matplotlib would add it unseen)."""
    path = Path(value)
    if path.suffix == "":
        return path.with_suffix(".png")
    if path.suffix.lower() != ".png":
        raise OptionError(f"--out {value}: the plot is a PNG; give a path that ends in .png")
    return path


def plan_of(loaded: spec.Spec, source: str, lines, args: argparse.Namespace | None) -> build.Plan:
    """Build `loaded` with the command line's device options (if `args` has
    any) in place of its `devices:` section; its claims checked against the
    metrics its algorithm produces."""
    plan = build.build(with_command_line(loaded, args), source, lines)
    run_session.check_claims(plan, source, lines)
    return plan


def load_plan(path: str, args: argparse.Namespace | None = None) -> build.Plan:
    loaded = spec.load(path)
    if loaded.sweep is not None:
        raise SpecError(str(path), [("sweep", "a spec with a sweep: section is trained by harness sweep (or run)")])
    return plan_of(loaded, str(path), spec.key_lines(Path(path).read_text()), args)


def load_sweep(args: argparse.Namespace) -> sweeps.Sweep | None:
    """The sweep of `args.spec` with the command line's sweep options, or
    None for a spec without one and no --set."""
    loaded = with_command_line(spec.load(args.spec), args)
    sets = spec.parse_sets(getattr(args, "set", None) or [])
    if loaded.sweep is None and not sets:
        return None
    return sweeps.make_sweep(
        loaded,
        args.spec,
        spec.key_lines(Path(args.spec).read_text()),
        sets=sets,
        samples=getattr(args, "samples", None),
        sample_seed=getattr(args, "sample_seed", 0),
        max_points=getattr(args, "max_points", sweeps.MAX_POINTS),
        exact_points=getattr(args, "exact_points", False),
    )


def seed_batches(args: argparse.Namespace, loaded: spec.Spec) -> tuple[int, int]:
    """`--batch` and `--max-seeds` (defaults from the spec `loaded`:
    harness.sessions.errors_report.seeding), refused as an option error."""
    try:
        return errors_report.seeding(loaded, args.batch, args.max_seeds)
    except ValueError as error:
        raise OptionError(str(error)) from None
