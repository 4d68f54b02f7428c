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
from benchmarks.machinery.peer_checkouts import CHECKOUTS
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
    "MissingPackages",
    "PeerError",
    "check",
    "identify",
    "load_pgx_alphazero",
    "load_purejaxrl_ppo",
    "load_xminigrid_single_task",
    "same_work",
    "missing",
    "one_qr_at_a_time",
    "peer_dir",
    "ready",
]

# Modules PureJaxRL's wrappers.py imports for wrappers CartPole does not use.
_UNUSED_IMPORTS = {
    "brax": ("brax", "brax.envs", "brax.envs.wrappers", "brax.envs.wrappers.training"),
    "navix": ("navix",),
}
# Modules xland-minigrid's training script imports for its `__main__` only.
_XMINIGRID_UNUSED_IMPORTS = {"wandb": ("wandb",), "pyrallis": ("pyrallis",)}


def identify(path: str | Path) -> tuple[str, Path]:
    """Which peer the checkout at `path` is, by its name in
    `peer_checkouts.CHECKOUTS`, and the folder its entries load from."""
    for name in CHECKOUTS:
        with contextlib.suppress(PeerError):
            return name, peer_dir(name, path)
    looked = ", ".join(f"{c.title} ({c.folder}/{c.files[0]})" for c in CHECKOUTS.values())
    raise PeerError(f"--against {path}: no checkout of a peer there; looked for {looked}")


def peer_dir(name: str, path: str | Path) -> Path:
    """The folder of peer `name`'s checkout at `path` that holds the files
    its entries load: `path` itself, or its `Checkout.folder` (a checkout's root)."""
    checkout = CHECKOUTS[name]
    root = Path(path).expanduser().resolve()
    for candidate in (root, root / checkout.folder):
        if all((candidate / file).is_file() for file in checkout.files):
            return candidate
    raise PeerError(
        f"--against {path}: no {checkout.title} checkout there (looked for {checkout.folder}/"
        f"{' and '.join(checkout.files)})"
    )


def missing(name: str) -> list[str]:
    """The packages peer `name`'s entries import that are not installed here."""
    return [package for module, package in CHECKOUTS[name].needs.items() if importlib.util.find_spec(module) is None]


def ready(name: str, path: str | Path) -> Path:
    """Peer `name`'s folder in the checkout at `path`, once what its entries
    import is installed."""
    folder = peer_dir(name, path)
    if packages := missing(name):
        raise MissingPackages({name: packages})
    return folder


def check(path: str | Path) -> tuple[str, Path]:
    """Which peer the checkout at `path` is and its folder, once what that
    peer's entries import is installed: what `--against` checks before any
    entry runs."""
    name, _ = identify(path)
    return name, ready(name, path)


class MissingPackages(PeerError):
    """Peers whose entries import packages not installed here: one message
    for all of them (peer name -> packages)."""

    def __init__(self, by_peer: dict[str, list[str]]):
        self.by_peer = by_peer
        needed: dict[str, list[str]] = {}
        for name, packages in by_peer.items():
            for package in packages:
                needed.setdefault(package, []).append(name)
        listed = ", ".join(f"{package} ({', '.join(names)})" for package, names in needed.items())
        super().__init__(
            f"--against: the peers' code imports what is not installed here: {listed}; "
            f"pip install {' '.join(needed)} into the bench's environment (`nox -s bench -- --against ...` "
            "installs them: the project's `peers` extra)"
        )


def load_purejaxrl_ppo(path: str | Path, module_name: str = "ppo") -> Callable[[dict[str, Any]], Callable]:
    """PureJaxRL's `make_train` from the checkout at `path`: its `ppo.py`, or
    (`module_name`) another of its single files, e.g. `ppo_continuous_action`."""
    folder = ready("purejaxrl", path)
    if not (folder / f"{module_name}.py").is_file():
        raise PeerError(f"--against {path}: the PureJaxRL checkout has no {module_name}.py")
    stand_ins = peer_imports.stand_ins(_UNUSED_IMPORTS, EpisodeWrapper=object, AutoResetWrapper=object)
    module = peer_imports.import_fresh(path, folder, module_name, ("wrappers",), stand_ins)
    if int(version("gymnax").split(".")[0]) >= 1 and hasattr(module, "gymnax"):
        module.gymnax = GymnaxShim(module.gymnax)
    return module.make_train


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

    folder = ready("pgx", path)
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


def load_xminigrid_single_task(path: str | Path) -> Any:
    """xland-minigrid's `train_single_task` module from the checkout at
    `path` (its `TrainConfig`, `make_states`, `make_train`)."""
    folder = ready("xland-minigrid", path)
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
