"""The pgx suite (board games and other turn-based games, one or more
players) behind the one `Environment` interface, with auto-reset: a step
that ends a game returns the next game's first observation, legal actions
and player to move."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from algorithms.base import Environment, TimeStep
from harness.envs import pgx_tic_tac_toe
from harness.envs.errors import no_such_env
from harness.envs.helpers import library_version, select_tree
from harness.types import EnvInfo

# The games whose step ignores its key (pgx 2.6: `del key` in each
# `_step`); 2048, backgammon and the MinAtar games draw from it.
DETERMINISTIC = frozenset(
    {
        "animal_shogi",
        "chess",
        "connect_four",
        "gardner_chess",
        "go_9x9",
        "go_19x19",
        "hex",
        "kuhn_poker",
        "leduc_holdem",
        "othello",
        "shogi",
        "sparrow_mahjong",
        "tic_tac_toe",
    }
)


def make(env_id: str, kwargs: dict[str, Any]) -> tuple[Environment, EnvInfo]:
    """The adapter for pgx's `env_id`, made with `kwargs`; its version is
    pgx's own for the env."""
    import pgx

    available = list(pgx.available_envs())
    if env_id not in available:
        raise no_such_env("pgx", env_id, available)
    env = pgx.make(env_id, **kwargs)

    def timestep(state, reward, terminated, truncated) -> TimeStep:
        return TimeStep(
            observation=jnp.asarray(state.observation, jnp.float32),
            legal_action_mask=state.legal_action_mask,
            reward=jnp.asarray(reward, jnp.float32),
            terminated=jnp.asarray(terminated, bool),
            truncated=jnp.asarray(truncated, bool) & ~jnp.asarray(terminated, bool),
            current_player=jnp.asarray(state.current_player, jnp.int32),
        )

    def reset(key):
        state = env.init(key)
        return state, timestep(state, jnp.zeros_like(state.rewards), False, False)

    def step(state, action, key):
        key_step, key_reset = jax.random.split(key)
        state = env.step(state, action, key_step)
        done = state.terminated | state.truncated
        out = timestep(state, state.rewards, state.terminated, state.truncated)
        restart = env.init(key_reset)
        state = select_tree(done, restart, state)
        return state, out._replace(
            observation=jnp.where(done, restart.observation.astype(jnp.float32), out.observation),
            legal_action_mask=jnp.where(done, restart.legal_action_mask, out.legal_action_mask),
            current_player=jnp.where(done, restart.current_player, out.current_player),
        )

    def search_step(state, action):
        state = env.step(state, action)
        return state, timestep(state, state.rewards, state.terminated, state.truncated)

    solved = {}
    if env_id == "tic_tac_toe":
        solved = {
            "solution": pgx_tic_tac_toe.move_values,
            "positions": lambda: pgx_tic_tac_toe.positions(env, timestep),
        }
    return (
        Environment(
            reset,
            step,
            tuple(env.observation_shape),
            int(env.num_actions),
            int(env.num_players),
            True,
            search_step=search_step if env_id in DETERMINISTIC else None,
            **solved,
        ),
        EnvInfo("pgx", env_id, library_version("pgx"), str(env.version)),
    )
