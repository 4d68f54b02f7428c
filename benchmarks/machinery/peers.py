"""Peers' code, imported from a local checkout for side-by-side benchmarks
(`nox -s bench -- --against PATH`); never vendored, never downloaded.

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
import importlib
import importlib.util
import sys
import types
from collections.abc import Callable, Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import jax


class PeerError(ValueError):
    """A peer checkout that cannot be used; the message says why."""


# PureJaxRL's CartPole PPO configuration (the `__main__` of its ppo.py), in
# its own keys; TOTAL_TIMESTEPS is set by the caller.
PUREJAXRL_PPO_CARTPOLE = {
    "LR": 2.5e-4,
    "NUM_ENVS": 4,
    "NUM_STEPS": 128,
    "UPDATE_EPOCHS": 4,
    "NUM_MINIBATCHES": 4,
    "GAMMA": 0.99,
    "GAE_LAMBDA": 0.95,
    "CLIP_EPS": 0.2,
    "ENT_COEF": 0.01,
    "VF_COEF": 0.5,
    "MAX_GRAD_NORM": 0.5,
    "ACTIVATION": "tanh",
    "ENV_NAME": "CartPole-v1",
    "ANNEAL_LR": True,
    "DEBUG": False,
}

# Its MinAtar configuration (the same ppo.py: the grid flattened, a relu MLP).
PUREJAXRL_PPO_MINATAR = {
    **PUREJAXRL_PPO_CARTPOLE,
    "LR": 5e-3,
    "NUM_ENVS": 64,
    "NUM_STEPS": 128,
    "UPDATE_EPOCHS": 4,
    "NUM_MINIBATCHES": 8,
    "ACTIVATION": "relu",
    "ENV_NAME": "Breakout-MinAtar",
}

# Its continuous-action PPO (ppo_continuous_action.py) on Brax
# inverted_pendulum, backend positional (its BraxGymnaxWrapper's; episodes
# of 1000 steps), at 256 envs: the published ppo_brax_inverted_pendulum.
PUREJAXRL_PPO_BRAX_INVERTED_PENDULUM = {
    "LR": 3e-4,
    "NUM_ENVS": 256,
    "NUM_STEPS": 10,
    "UPDATE_EPOCHS": 4,
    "NUM_MINIBATCHES": 32,
    "GAMMA": 0.99,
    "GAE_LAMBDA": 0.95,
    "CLIP_EPS": 0.2,
    "ENT_COEF": 0.0,
    "VF_COEF": 0.5,
    "MAX_GRAD_NORM": 0.5,
    "ACTIVATION": "tanh",
    "ENV_NAME": "inverted_pendulum",
    "ANNEAL_LR": True,
    "NORMALIZE_ENV": True,
    "DEBUG": False,
}

# xland-minigrid's single-task script (`TrainConfig` fields) at the
# configuration its timing was quoted at on a 2-core CPU: MiniGrid-Empty-6x6,
# 512 envs x 16 steps, GRU 256, heads 256, one epoch of 16 minibatches. Its
# training function evaluates after every update (80 episodes by default); at
# 1 episode that costs a few milliseconds of an update's seconds, so the
# comparison is of training. total_timesteps is set by the caller.
XMINIGRID_SINGLE_TASK = {
    "env_id": "MiniGrid-Empty-6x6",
    "num_envs": 512,
    "num_steps": 16,
    "rnn_hidden_dim": 256,
    "head_hidden_dim": 256,
    "update_epochs": 1,
    "num_minibatches": 16,
    "eval_episodes": 1,
}

# pgx's AlphaZero example (`Config` fields of examples/alphazero/train.py)
# at the configuration of issue 16's comparison: connect_four, 256 games x 64
# moves per iteration, 32 Gumbel simulations, ResNet 2 blocks x 32 channels,
# updates of 4,096 positions (4 per iteration).
PGX_ALPHAZERO_CONNECT_FOUR = {
    "env_id": "connect_four",
    "seed": 30,
    "num_channels": 32,
    "num_layers": 2,
    "selfplay_batch_size": 256,
    "num_simulations": 32,
    "max_num_steps": 64,
    "training_batch_size": 4096,
}

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


class _FiveTupleStep:
    """A gymnax env whose `step` returns the pre-1.0 five values."""

    def __init__(self, env: Any):
        self._env = env

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    def step(self, key, state, action, params=None):
        obs, state, reward, terminated, truncated, info = self._env.step(key, state, action, params)
        return obs, state, reward, terminated | truncated, info


class _GymnaxShim:
    """The `gymnax` module as PureJaxRL's ppo.py sees it."""

    def __init__(self, gymnax: types.ModuleType):
        self._gymnax = gymnax

    def __getattr__(self, name: str) -> Any:
        return getattr(self._gymnax, name)

    def make(self, *args, **kwargs):
        env, params = self._gymnax.make(*args, **kwargs)
        return _FiveTupleStep(env), params


def identify(path: str | Path) -> tuple[str, Path]:
    """Which peer the checkout at `path` is: ("purejaxrl", its `purejaxrl/`)
    or ("xminigrid", its `training/`)."""
    for name, find in (("purejaxrl", purejaxrl_dir), ("xminigrid", xminigrid_training_dir), ("pgx", pgx_alphazero_dir)):
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


@contextlib.contextmanager
def _stand_ins(unused: dict[str, tuple[str, ...]], **attributes: Any) -> Iterator[None]:
    """Empty modules (with `attributes`) for the packages in `unused` that
    are not installed, registered for an import and removed after it."""
    added = []
    for package, names in unused.items():
        if importlib.util.find_spec(package) is not None:
            continue
        for name in names:
            module = types.ModuleType(name)
            module.__dict__.update(attributes)
            sys.modules[name] = module
            added.append(name)
    try:
        yield
    finally:
        for name in added:
            sys.modules.pop(name, None)


def _import_fresh(path: str | Path, folder: Path, module_name: str, siblings: tuple[str, ...], stand_ins) -> Any:
    """`module_name` imported from `folder`, it and its `siblings` (plain
    file names such as `utils`) loaded fresh and not left in `sys.modules`."""
    sys.path.insert(0, str(folder))
    names = (module_name, *siblings)
    try:
        with stand_ins:
            for name in names:
                sys.modules.pop(name, None)
            module = importlib.import_module(module_name)
    except Exception as error:  # noqa: BLE001  (whatever the peer's import raises, named once)
        raise PeerError(f"--against {path}: importing {folder / module_name}.py failed: {error!r}") from error
    finally:
        sys.path.remove(str(folder))
        for name in siblings:
            sys.modules.pop(name, None)
    if module.__file__ is None or Path(module.__file__).resolve().parent != folder:
        raise PeerError(f"--against {path}: imported another module named {module_name} ({module.__file__})")
    return module


def _needs_distrax(path: str | Path, source: Path) -> None:
    if "import distrax" in source.read_text() and importlib.util.find_spec("distrax") is None:
        raise PeerError(
            f"--against {path}: the peer's {source.name} imports distrax, which is not installed here"
            " (pip install distrax, into the bench's environment: .nox/bench)"
        )


def check_purejaxrl(path: str | Path, module: str = "ppo") -> Path:
    """The checkout's `purejaxrl/` folder, once what its `module` needs is here."""
    folder = purejaxrl_dir(path)
    source = folder / f"{module}.py"
    if not source.is_file():
        raise PeerError(f"--against {path}: the PureJaxRL checkout has no {source.name}")
    _needs_distrax(path, source)
    return folder


def load_purejaxrl_ppo(path: str | Path, module_name: str = "ppo") -> Callable[[dict[str, Any]], Callable]:
    """PureJaxRL's `make_train` from the checkout at `path`: its `ppo.py`, or
    (`module_name`) another of its single files, e.g. `ppo_continuous_action`."""
    folder = check_purejaxrl(path, module_name)
    stand_ins = _stand_ins(_UNUSED_IMPORTS, EpisodeWrapper=object, AutoResetWrapper=object)
    module = _import_fresh(path, folder, module_name, ("wrappers",), stand_ins)
    if int(version("gymnax").split(".")[0]) >= 1 and hasattr(module, "gymnax"):
        module.gymnax = _GymnaxShim(module.gymnax)
    return module.make_train


@contextlib.contextmanager
def one_qr_at_a_time() -> Iterator[None]:
    """While a peer's program is traced in the block: random orthogonal
    matrices (the orthogonal initialisers') drawn under a `vmap` one after
    another (`jax.custom_batching.sequential_vmap`), not as one batched QR.
    PureJaxRL's `train` initialises its network inside the seed-vmapped
    program; jaxlib's batched CPU QR parallelises inside XLA's thread pool
    and deadlocked it (jaxlib 0.10.2, 2 cores: 5 of 6 processes hung within
    8 calls of the 16-seed CartPole program, none of 6 with this). The values
    are the same (checked bit for bit on its layer shapes); the harness's
    own runner initialises seeds one at a time for the same reason."""
    from jax._src import random as jax_random

    original = jax_random.orthogonal

    def orthogonal(key, n, shape=(), dtype=float, m=None):
        return jax.custom_batching.sequential_vmap(lambda k: original(k, n, shape, dtype, m))(key)

    jax_random.orthogonal = orthogonal
    try:
        yield
    finally:
        jax_random.orthogonal = original


@contextlib.contextmanager
def _array_defaults_through_factories() -> Iterator[None]:
    import dataclasses

    import flax.struct

    original = flax.struct.dataclass

    def dataclass(cls, **kwargs):
        for name in getattr(cls, "__annotations__", {}):
            value = cls.__dict__.get(name)
            if isinstance(value, jax.Array):
                setattr(cls, name, dataclasses.field(default_factory=lambda value=value: value))
        return original(cls, **kwargs)

    flax.struct.dataclass = dataclass
    try:
        yield
    finally:
        flax.struct.dataclass = original


def check_xminigrid(path: str | Path) -> Path:
    """The checkout's `training/` folder, once what its script needs is here."""
    folder = xminigrid_training_dir(path)
    _needs_distrax(path, folder / "nn.py")
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
        return _import_fresh(path, folder, "train", ("network",), _stand_ins({"wandb": ("wandb",)}))
    finally:
        sys.argv, pgx.make_baseline_model, jax.local_devices = argv, make_baseline, local_devices


def check(path: str | Path) -> tuple[str, Path]:
    """Which peer the checkout at `path` is (`identify`) and its folder, once
    what that peer's entries need is here: what `--against PATH` checks
    before any entry runs."""
    name, _ = identify(path)
    return name, {"purejaxrl": check_purejaxrl, "xminigrid": check_xminigrid, "pgx": check_pgx}[name](path)


def load_xminigrid_single_task(path: str | Path) -> Any:
    """xland-minigrid's `train_single_task` module from the checkout at
    `path` (its `TrainConfig`, `make_states`, `make_train`)."""
    folder = check_xminigrid(path)
    stand_ins = _stand_ins(_XMINIGRID_UNUSED_IMPORTS, wrap=lambda *args, **kwargs: lambda function: function)
    with _array_defaults_through_factories():
        return _import_fresh(path, folder, "train_single_task", ("nn", "utils"), stand_ins)
