"""Peers' code, imported from a local checkout for side-by-side benchmarks
(`nox -s bench -- --against PATH`); never vendored, never downloaded. This
module finds each peer in a checkout, checks what it needs and loads it; the
configurations the entries run the peers at are `peer_configs`, the fresh
import with stand-ins is `peer_imports`, and the shims for the pinned
versions are `peer_shims` (all of them read as `peers.*` too).

PureJaxRL (a checkout of `luchris429/purejaxrl`): its `purejaxrl/ppo.py`
exposes `make_train(config) -> train(rng)`, one jitted function for a whole
run. Its `wrappers.py` imports Brax and navix at module level for wrappers
that CartPole does not use; where they are not installed, empty stand-in
modules are registered for that import (and removed after it), so nothing
the CartPole path runs is replaced. Its `ppo.py` needs `distrax`, which is
not one of the harness's dependencies: without it the entry stops with a
message saying what to install.

Its `train` is traced under `one_qr_at_a_time` (an XLA:CPU deadlock in
batched QR, see there). One API shim, for the pinned gymnax: since gymnax
1.0 `env.step` returns `(obs, state, reward, terminated, truncated, info)`,
where PureJaxRL expects the older `(obs, state, reward, done, info)` with
`done = terminated or truncated`; the loaded module's `gymnax.make` returns
envs whose `step` gives that (the same computation, its outputs regrouped).

xland-minigrid (a checkout of `dunnolab/xland-minigrid`): its
`training/train_single_task.py` exposes `TrainConfig`, `make_states(config)`
and `make_train(env, env_params, config)`, one `pmap`ped function for a
whole run, with the pinned `xminigrid` package as its environment. It imports
`wandb` and `pyrallis` at module level for its `__main__` only; where they
are not installed, stand-ins are registered for that import (`pyrallis.wrap`
returning the function it wraps). One shim for Python 3.11+, where a
dataclass field may not default to an unhashable value such as a JAX array:
while its modules are imported, a `flax.struct.PyTreeNode` field whose
default is a JAX array gets that same array from a `default_factory`
(its `utils.RolloutStats`). Its `nn.py` needs `distrax`. Its module
sets `jax_threefry_partitionable`, already JAX's default with the pinned
version, so the project's random streams are the same in that process.

pgx (a checkout of `sotetsuk/pgx`): its `examples/alphazero/train.py`
defines, at module level, the jitted (`pmap`ped) `selfplay`,
`compute_loss_input` and `train` and the haiku network and optimizer they
use, reading its configuration from the command line (`OmegaConf.from_cli`);
its loop over iterations is under `__main__`. It is imported with the
configuration as its command line, `wandb` stood in for where not installed
(its `__main__` logs to it), and `pgx.make_baseline_model` stood in for
during the import: the real one downloads a baseline's weights for the
example's evaluation, which the side-by-side does not run (the stand-in
model raises if called). It needs `dm-haiku` and `omegaconf`, which are not the
harness's dependencies: without them the entry stops with a message saying
what to install.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import jax

from benchmarks.machinery import peer_imports
from benchmarks.machinery.peer_configs import (
    PGX_ALPHAZERO_CONNECT_FOUR,
    PUREJAXRL_PPO_BRAX_INVERTED_PENDULUM,
    PUREJAXRL_PPO_CARTPOLE,
    PUREJAXRL_PPO_MINATAR,
    XMINIGRID_SINGLE_TASK,
)
from benchmarks.machinery.peer_imports import PeerError
from benchmarks.machinery.peer_shims import GymnaxShim, array_defaults_through_factories, one_qr_at_a_time

# The side-by-side entries and the tests read all of these as `peers.*`: the
# configurations and the QR guard live beside this module, and are its names too.
__all__ = [
    "PGX_ALPHAZERO_CONNECT_FOUR",
    "PUREJAXRL_PPO_BRAX_INVERTED_PENDULUM",
    "PUREJAXRL_PPO_CARTPOLE",
    "PUREJAXRL_PPO_MINATAR",
    "XMINIGRID_SINGLE_TASK",
    "PeerError",
    "check",
    "check_pgx",
    "check_purejaxrl",
    "check_xminigrid",
    "identify",
    "load_pgx_alphazero",
    "load_purejaxrl_ppo",
    "load_xminigrid_single_task",
    "same_work",
    "one_qr_at_a_time",
    "pgx_alphazero_dir",
    "purejaxrl_dir",
    "xminigrid_training_dir",
]

# Modules PureJaxRL's wrappers.py imports for wrappers CartPole does not use.
_UNUSED_IMPORTS = {
    "brax": ("brax", "brax.envs", "brax.envs.wrappers", "brax.envs.wrappers.training"),
    "navix": ("navix",),
}
# Modules xland-minigrid's training script imports for its `__main__` only.
_XMINIGRID_UNUSED_IMPORTS = {"wandb": ("wandb",), "pyrallis": ("pyrallis",)}
_XMINIGRID_FILES = ("train_single_task.py", "nn.py", "utils.py")
_PGX_FILES = ("train.py", "network.py")
# What pgx's AlphaZero example imports that the harness does not install.
_PGX_NEEDS = {"haiku": "dm-haiku", "omegaconf": "omegaconf"}


def identify(path: str | Path) -> tuple[str, Path]:
    """Which peer the checkout at `path` is, by its name in
    `peer_checkouts.CHECKOUTS`: ("purejaxrl", its `purejaxrl/`),
    ("xland-minigrid", its `training/`) or ("pgx", its `examples/alphazero/`)."""
    for name, find in (
        ("purejaxrl", purejaxrl_dir),
        ("xland-minigrid", xminigrid_training_dir),
        ("pgx", pgx_alphazero_dir),
    ):
        with contextlib.suppress(PeerError):
            return name, find(path)
    raise PeerError(
        f"--against {path}: not a PureJaxRL checkout (purejaxrl/ppo.py), an xland-minigrid one"
        " (training/train_single_task.py) or a pgx one (examples/alphazero/train.py) there"
    )


def xminigrid_training_dir(path: str | Path) -> Path:
    """The folder holding xland-minigrid's `train_single_task.py`: `path`
    itself, or its `training/` (a checkout's root)."""
    root = Path(path).expanduser().resolve()
    for candidate in (root, root / "training"):
        if all((candidate / name).is_file() for name in _XMINIGRID_FILES):
            return candidate
    raise PeerError(f"--against {path}: no xland-minigrid checkout there (looked for training/train_single_task.py)")


def purejaxrl_dir(path: str | Path) -> Path:
    """The folder holding PureJaxRL's `ppo.py`: `path` itself, or its
    `purejaxrl/` (a checkout's root)."""
    root = Path(path).expanduser().resolve()
    for candidate in (root, root / "purejaxrl"):
        if (candidate / "ppo.py").is_file() and (candidate / "wrappers.py").is_file():
            return candidate
    raise PeerError(f"--against {path}: no PureJaxRL checkout there (looked for ppo.py and wrappers.py in it)")


def check_purejaxrl(path: str | Path, module: str = "ppo") -> Path:
    """The checkout's `purejaxrl/` folder, once what its `module` needs is here."""
    folder = purejaxrl_dir(path)
    source = folder / f"{module}.py"
    if not source.is_file():
        raise PeerError(f"--against {path}: the PureJaxRL checkout has no {source.name}")
    peer_imports.needs_distrax(path, source)
    return folder


def load_purejaxrl_ppo(path: str | Path, module_name: str = "ppo") -> Callable[[dict[str, Any]], Callable]:
    """PureJaxRL's `make_train` from the checkout at `path`: its `ppo.py`, or
    (`module_name`) another of its single files, e.g. `ppo_continuous_action`."""
    folder = check_purejaxrl(path, module_name)
    stand_ins = peer_imports.stand_ins(_UNUSED_IMPORTS, EpisodeWrapper=object, AutoResetWrapper=object)
    module = peer_imports.import_fresh(path, folder, module_name, ("wrappers",), stand_ins)
    if int(version("gymnax").split(".")[0]) >= 1 and hasattr(module, "gymnax"):
        module.gymnax = GymnaxShim(module.gymnax)
    return module.make_train


def check_xminigrid(path: str | Path) -> Path:
    """The checkout's `training/` folder, once what its script needs is here."""
    folder = xminigrid_training_dir(path)
    peer_imports.needs_distrax(path, folder / "nn.py")
    return folder


def pgx_alphazero_dir(path: str | Path) -> Path:
    """The folder holding pgx's AlphaZero example: `path` itself, or its
    `examples/alphazero/` (a checkout's root)."""
    root = Path(path).expanduser().resolve()
    for candidate in (root, root / "examples" / "alphazero"):
        if all((candidate / name).is_file() for name in _PGX_FILES):
            return candidate
    raise PeerError(f"--against {path}: no pgx checkout there (looked for examples/alphazero/train.py)")


def check_pgx(path: str | Path) -> Path:
    """The checkout's `examples/alphazero/` folder, once what it imports is here."""
    folder = pgx_alphazero_dir(path)
    missing = [package for module, package in _PGX_NEEDS.items() if importlib.util.find_spec(module) is None]
    if missing:
        raise PeerError(
            f"--against {path}: pgx's examples/alphazero/train.py imports {' and '.join(missing)}, not installed"
            f" here (pip install {' '.join(missing)}, into the bench's environment: .nox/bench)"
        )
    return folder


def _no_baseline(model_id: str) -> Callable:
    def baseline(*args: Any) -> Any:
        raise PeerError(f"pgx's baseline {model_id} is not loaded in the side-by-side bench (it downloads weights)")

    return baseline


def load_pgx_alphazero(path: str | Path, config: dict[str, Any], devices: int | None = None) -> Any:
    """pgx's `examples/alphazero/train.py` from the checkout at `path`,
    configured by `config` (its `Config` fields) as its command line: the
    module, with its `config`, `env`, `forward`, `optimizer`, `selfplay`,
    `compute_loss_input` and `train`. It `pmap`s over the devices that
    `jax.local_devices()` gives at its import: all of them, or the first
    `devices` (on a CPU split into host devices, one: as it runs unsplit)."""
    import pgx

    folder = check_pgx(path)
    argv, make_baseline, local_devices = sys.argv, pgx.make_baseline_model, jax.local_devices
    sys.argv = ["train.py", *(f"{key}={value}" for key, value in config.items())]
    pgx.make_baseline_model = _no_baseline
    if devices is not None:
        jax.local_devices = lambda *args, **kwargs: local_devices(*args, **kwargs)[:devices]
    try:
        return peer_imports.import_fresh(
            path, folder, "train", ("network",), peer_imports.stand_ins({"wandb": ("wandb",)})
        )
    finally:
        sys.argv, pgx.make_baseline_model, jax.local_devices = argv, make_baseline, local_devices


def check(path: str | Path) -> tuple[str, Path]:
    """Which peer the checkout at `path` is (`identify`) and its folder, once
    what that peer's entries need is here: what `--against PATH` checks
    before any entry runs."""
    name, _ = identify(path)
    return name, {"purejaxrl": check_purejaxrl, "xland-minigrid": check_xminigrid, "pgx": check_pgx}[name](path)


def load_xminigrid_single_task(path: str | Path) -> Any:
    """xland-minigrid's `train_single_task` module from the checkout at
    `path` (its `TrainConfig`, `make_states`, `make_train`)."""
    folder = check_xminigrid(path)
    stand_ins = peer_imports.stand_ins(
        _XMINIGRID_UNUSED_IMPORTS, wrap=lambda *args, **kwargs: lambda function: function
    )
    with array_defaults_through_factories():
        return peer_imports.import_fresh(path, folder, "train_single_task", ("nn", "utils"), stand_ins)


def same_work(entry_name: str, peer_name: str, ours: int, peer: int) -> None:
    """A side-by-side entry compares the same work: the env steps a call of
    each side takes, each counted from that side's own configuration."""
    if ours != peer:
        raise AssertionError(
            f"{entry_name}: {peer_name} takes {peer:,} env steps per call by its own configuration, the project "
            f"{ours:,}: the two sides run different configurations, so their rates cannot be compared"
        )
