"""One environment interface (`algorithms.base.Environment`) over gymnax,
jumanji, pgx, xminigrid and brax: one module per suite, `wrappers`,
`errors`, the adapters' shared `helpers`, and the `registry` (`make`,
`SUITES`), whose names this package re-exports.

Each adapter is a pair of pure functions, `reset(key)` and
`step(state, action, key)`, with auto-reset: a step that ends an episode
reports its reward and end flags, and returns the next episode's first
observation. Every adapter also reports the library's version and, where the
env has one, the env's own version, so that results record exactly what ran.

Imports point one way: the registry imports the suites, which import only
`errors` and `helpers` (and their libraries, inside their `make`, so that
`import harness.envs` loads none of them).
"""

from __future__ import annotations

from harness.envs.errors import EnvKwargsError, UnknownEnvError
from harness.envs.helpers import clip_to_bounds, select_tree, single_agent_timestep
from harness.envs.registry import SUITES, make
from harness.envs.wrappers import mask_observation, observe_legal_actions, observe_previous_action_reward
from harness.types import EnvInfo

__all__ = [
    "SUITES",
    "EnvInfo",
    "EnvKwargsError",
    "UnknownEnvError",
    "clip_to_bounds",
    "make",
    "mask_observation",
    "observe_legal_actions",
    "observe_previous_action_reward",
    "select_tree",
    "single_agent_timestep",
]
