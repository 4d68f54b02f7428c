"""The registry: every suite's adapter by name, and `make`, which builds an
env from a spec's `env` section (suite, id, kwargs, wrappers).

The suites' modules import their libraries (gymnax, jumanji, pgx, xminigrid,
brax) only inside their `make`, so importing them here stays cheap: a run
loads the one library its env needs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from algorithms.base import Environment
from harness.envs.brax import make as make_brax
from harness.envs.errors import UnknownEnvError
from harness.envs.gymnax import make as make_gymnax
from harness.envs.jumanji import make as make_jumanji
from harness.envs.pgx import make as make_pgx
from harness.envs.wrappers import apply_wrappers
from harness.envs.xminigrid import make as make_xminigrid
from harness.types import EnvInfo

SUITES = ("gymnax", "jumanji", "pgx", "xminigrid", "brax")

_MAKERS: dict[str, Callable[[str, dict[str, Any]], tuple[Environment, EnvInfo]]] = {
    "gymnax": make_gymnax,
    "jumanji": make_jumanji,
    "pgx": make_pgx,
    "xminigrid": make_xminigrid,
    "brax": make_brax,
}


# Each env built once per process: an adapter is pure functions over its
# library's env (building one can take seconds: Brax loads and compiles
# its MuJoCo model), so the plans of a sweep, a scale ladder or a layout
# matrix share it.
_BUILT: dict[tuple, tuple[Environment, EnvInfo]] = {}


def make(
    suite: str, env_id: str, kwargs: dict[str, Any] | None = None, wrappers: tuple[Any, ...] = ()
) -> tuple[Environment, EnvInfo]:
    """Build the adapter for `suite`/`env_id`, then apply `wrappers` (spec
    wrapper models, in order); once per process for the same arguments.
    Raises `UnknownEnvError` for an unknown env, `EnvKwargsError` for a bad
    `env.kwargs` entry and `ValueError` for a wrapper that does not fit it."""
    if suite not in _MAKERS:
        raise UnknownEnvError(f"unknown env suite {suite!r}; available: {', '.join(SUITES)}")
    key = (suite, env_id, json.dumps(kwargs or {}, sort_keys=True, default=str), repr(wrappers))
    if key not in _BUILT:
        env, info = _MAKERS[suite](env_id, dict(kwargs or {}))
        _BUILT[key] = (apply_wrappers(env, wrappers), info)
    return _BUILT[key]
