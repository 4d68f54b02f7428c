"""The registry: every suite's adapter by name, and `make`, which builds an
env from a spec's `env` section (suite, id, kwargs, wrappers).

The suites' modules import their libraries (gymnax, jumanji, pgx, xminigrid,
brax) only inside their `make`, so importing them here stays cheap: a run
loads the one library its env needs.
"""

from __future__ import annotations

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


def make(
    suite: str, env_id: str, kwargs: dict[str, Any] | None = None, wrappers: tuple[Any, ...] = ()
) -> tuple[Environment, EnvInfo]:
    """Build the adapter for `suite`/`env_id`, then apply `wrappers` (spec
    wrapper models, in order). Raises `UnknownEnvError` for an unknown env,
    `EnvKwargsError` for a bad `env.kwargs` entry and `ValueError` for a
    wrapper that does not fit it."""
    if suite not in _MAKERS:
        raise UnknownEnvError(f"unknown env suite {suite!r}; available: {', '.join(SUITES)}")
    env, info = _MAKERS[suite](env_id, dict(kwargs or {}))
    return apply_wrappers(env, wrappers), info
