"""The xland-minigrid suite (PyPI `xminigrid`) behind the one `Environment`
interface: every `MiniGrid-*` id it registers, and the `XLand-MiniGrid-*`
ids with a ruleset read from a local file.

Observation, `[V, V, 3]` float32 for a view of V x V tiles: channel 0 the
tile id, channel 1 the colour id (xminigrid's symbolic view, the agent's
field of view) and channel 2 the agent's direction (0-3) on every tile, as
the xland-minigrid PPO baseline's direction wrapper gives it (there one-hot,
beside the grid; here one id, so that an observation stays one array).

XLand ids need a ruleset: xminigrid downloads its benchmarks of rulesets
from the internet, which a run must not depend on, so the spec names a
local file in `env.kwargs`:

    env: {suite: xminigrid, id: XLand-MiniGrid-R1-9x9,
          kwargs: {ruleset_file: rulesets/trivial.pkl.bz2, ruleset_index: 0}}

The file is xminigrid's own format (a bz2 pickle of `goals`, `rules`,
`init_tiles`, `num_rules`, as `xminigrid.benchmarks.save_bz2_pickle` writes
it; the downloaded benchmarks are such files). The env's recorded version is
the file's SHA-256 (first 12 hex digits) and the index, so two runs on other
rulesets are never compared as one env. Other kwargs set xminigrid's
`EnvParams` (e.g. `max_steps`, `view_size`).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import jax.numpy as jnp

from algorithms.base import Environment, TimeStep
from harness.envs.errors import EnvKwargsError, no_such_env
from harness.envs.helpers import library_version, select_tree, single_agent_timestep
from harness.types import EnvInfo

RULESET_KEYS = ("ruleset_file", "ruleset_index")


def load_ruleset(path: str | Path, index: int) -> tuple[Any, str]:
    """The ruleset at `index` of the benchmark file `path`, and the env
    version that names it."""
    from xminigrid.benchmarks import Benchmark, load_bz2_pickle

    path = Path(path).expanduser()
    if not path.is_file():
        raise EnvKwargsError("env.kwargs.ruleset_file", f"{path}: no such ruleset file")
    try:
        data = load_bz2_pickle(str(path))
        benchmark = Benchmark(
            goals=jnp.asarray(data["goals"]),
            rules=jnp.asarray(data["rules"]),
            init_tiles=jnp.asarray(data["init_tiles"]),
            num_rules=jnp.asarray(data["num_rules"]),
        )
    except Exception as error:  # noqa: BLE001  (anything unreadable is "not a ruleset file")
        raise EnvKwargsError(
            "env.kwargs.ruleset_file",
            f"{path}: not an xminigrid ruleset file (a bz2 pickle of goals, rules, init_tiles and num_rules):"
            f" {type(error).__name__}: {error}",
        ) from None
    count = benchmark.num_rulesets()
    if not isinstance(index, int) or not 0 <= index < count:
        raise EnvKwargsError("env.kwargs.ruleset_index", f"{index!r} is not a ruleset of {path} (it has {count})")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    return benchmark.get_ruleset(index), f"ruleset {digest}#{index}"


def make(env_id: str, kwargs: dict[str, Any]) -> tuple[Environment, EnvInfo]:
    """The adapter for xminigrid's `env_id`, with its ruleset and `EnvParams`
    from `kwargs`; its version is the ruleset's, for XLand ids, else none."""
    import xminigrid

    available = registered()
    if env_id not in available:
        raise no_such_env("xminigrid", env_id, available)
    kwargs = dict(kwargs)
    ruleset_file = kwargs.pop("ruleset_file", None)
    ruleset_index = kwargs.pop("ruleset_index", 0)
    xland = env_id.startswith("XLand-")
    if not xland and ruleset_file is not None:
        raise EnvKwargsError("env.kwargs.ruleset_file", f"{env_id} takes no ruleset (only XLand-MiniGrid-* ids do)")
    if xland and ruleset_file is None:
        raise EnvKwargsError(
            "env.kwargs.ruleset_file",
            f"{env_id} needs a ruleset: a local xminigrid benchmark file (downloads are not made at run time)",
        )
    env, params = xminigrid.make(env_id)
    try:
        params = params.replace(**kwargs)
    except (TypeError, ValueError) as error:
        raise EnvKwargsError("env.kwargs", f"{env_id}: {error}") from None
    version = None
    if xland:
        ruleset, version = load_ruleset(ruleset_file, ruleset_index)
        params = params.replace(ruleset=ruleset)
    view = params.view_size
    obs_shape = (view, view, 3)
    num_actions = int(env.num_actions(params))

    def timestep(ts, reward, terminated, truncated) -> TimeStep:
        grid = jnp.asarray(ts.observation, jnp.float32)
        direction = jnp.broadcast_to(jnp.asarray(ts.state.agent.direction, jnp.float32), (view, view, 1))
        observation = jnp.concatenate([grid, direction], axis=-1)
        return single_agent_timestep(observation, num_actions, reward, terminated, truncated)

    def reset(key):
        ts = env.reset(params, key)
        return ts, timestep(ts, 0.0, False, False)

    def step(state, action, key):
        ts = env.step(params, state, action)
        last = ts.last()
        # A terminated episode has discount 0; a time limit keeps 1.
        terminated = last & (ts.discount == 0)
        out = timestep(ts, ts.reward, terminated, last & ~terminated)
        restart = env.reset(params, key)
        state = select_tree(last, restart, ts)
        first = timestep(restart, 0.0, False, False)
        return state, out._replace(observation=jnp.where(last, first.observation, out.observation))

    return (
        Environment(reset, step, obs_shape, num_actions, 1, True),
        EnvInfo("xminigrid", env_id, library_version("xminigrid"), version),
    )


def registered() -> list[str]:
    """Every env id xminigrid registers, MiniGrid and XLand alike."""
    import xminigrid

    return list(xminigrid.registered_environments())
