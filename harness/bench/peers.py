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

One API shim, for the pinned gymnax: since gymnax 1.0 `env.step` returns
`(obs, state, reward, terminated, truncated, info)`, where PureJaxRL expects
the older `(obs, state, reward, done, info)` with `done = terminated or
truncated`; the loaded module's `gymnax.make` returns envs whose `step`
gives that (the same computation, its outputs regrouped).
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

# Modules PureJaxRL's wrappers.py imports for wrappers CartPole does not use.
_UNUSED_IMPORTS = {
    "brax": ("brax", "brax.envs", "brax.envs.wrappers", "brax.envs.wrappers.training"),
    "navix": ("navix",),
}


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


def purejaxrl_dir(path: str | Path) -> Path:
    """The folder holding PureJaxRL's `ppo.py`: `path` itself, or its
    `purejaxrl/` (a checkout's root)."""
    root = Path(path).expanduser().resolve()
    for candidate in (root, root / "purejaxrl"):
        if (candidate / "ppo.py").is_file() and (candidate / "wrappers.py").is_file():
            return candidate
    raise PeerError(f"--against {path}: no PureJaxRL checkout there (looked for ppo.py and wrappers.py in it)")


@contextlib.contextmanager
def _stand_ins_for_unused_imports() -> Iterator[None]:
    added = []
    for package, names in _UNUSED_IMPORTS.items():
        if importlib.util.find_spec(package) is not None:
            continue
        for name in names:
            module = types.ModuleType(name)
            module.__dict__.update(EpisodeWrapper=object, AutoResetWrapper=object)
            sys.modules[name] = module
            added.append(name)
    try:
        yield
    finally:
        for name in added:
            sys.modules.pop(name, None)


def check_purejaxrl(path: str | Path, module: str = "ppo") -> Path:
    """The checkout's `purejaxrl/` folder, once what its `module` needs is here."""
    folder = purejaxrl_dir(path)
    source = folder / f"{module}.py"
    if not source.is_file():
        raise PeerError(f"--against {path}: the PureJaxRL checkout has no {source.name}")
    if "import distrax" in source.read_text() and importlib.util.find_spec("distrax") is None:
        raise PeerError(
            f"--against {path}: PureJaxRL's {source.name} imports distrax, which is not installed here"
            " (pip install distrax, into the bench's environment: .nox/bench)"
        )
    return folder


def load_purejaxrl_ppo(path: str | Path, module_name: str = "ppo") -> Callable[[dict[str, Any]], Callable]:
    """PureJaxRL's `make_train` from the checkout at `path`: its `ppo.py`, or
    (`module_name`) another of its single files, e.g. `ppo_continuous_action`."""
    folder = check_purejaxrl(path, module_name)
    sys.path.insert(0, str(folder))
    try:
        with _stand_ins_for_unused_imports():
            # Its modules are named as plain files (`import wrappers`): load
            # them fresh from this folder, not from any earlier import.
            for name in (module_name, "wrappers"):
                sys.modules.pop(name, None)
            module = importlib.import_module(module_name)
    except Exception as error:  # noqa: BLE001  (whatever the peer's import raises, named once)
        raise PeerError(f"--against {path}: importing {folder / module_name}.py failed: {error!r}") from error
    finally:
        sys.path.remove(str(folder))
    if module.__file__ is None or Path(module.__file__).resolve().parent != folder:
        raise PeerError(f"--against {path}: imported another module named {module_name} ({module.__file__})")
    if int(version("gymnax").split(".")[0]) >= 1 and hasattr(module, "gymnax"):
        module.gymnax = _GymnaxShim(module.gymnax)
    return module.make_train
