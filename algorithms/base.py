"""The contracts every algorithm shares: the environment it runs on, the
`Algorithm` record it returns, and the registry the harness looks it up in.

Nothing here (or anywhere in `algorithms/`) imports the harness: the harness
adapts environment libraries to `Environment` and drives `Algorithm`s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

PRNGKey = jax.Array
State = Any
Metrics = dict[str, jax.Array]


class TimeStep(NamedTuple):
    """What an environment emits after `reset` or `step`, for one env.

    After a step that ends an episode, `reward`, `terminated` and `truncated`
    describe that last transition, while `observation`, `legal_action_mask`
    and `current_player` already belong to the first state of the next
    episode (auto-reset).
    """

    observation: jax.Array  # [*observation_shape] float32
    legal_action_mask: jax.Array  # [num_actions] bool
    reward: jax.Array  # [num_players] float32, reward of the last transition
    terminated: jax.Array  # [] bool, the last transition reached a terminal state
    truncated: jax.Array  # [] bool, the last transition hit a time limit
    current_player: jax.Array  # [] int32, who acts next


class Environment(NamedTuple):
    """One environment, unbatched, with auto-reset. Pure functions only."""

    reset: Callable[[PRNGKey], tuple[Any, TimeStep]]
    step: Callable[[Any, jax.Array, PRNGKey], tuple[Any, TimeStep]]
    observation_shape: tuple[int, ...]
    num_actions: int  # number of discrete actions, or the action dimension
    num_players: int
    discrete_actions: bool
    # Continuous actions: the bounds (low, high) of each dimension, `[A]`
    # each; the env clips what it is sent to them. None for discrete actions.
    action_bounds: tuple[Any, Any] | None = None
    # Single-player tasks with an exact solver (jumanji Knapsack): the best
    # return any policy can get from a state just reset, `state -> []`.
    optimum: Callable[[Any], jax.Array] | None = None
    # Envs whose transitions are deterministic: a step without auto-reset
    # and without a key, `(state, action) -> (state, TimeStep)`, what a tree
    # search steps its nodes with (below a terminal step nothing reaches
    # the root, so no next game is needed there). None: searches use `step`.
    search_step: Callable[[Any, jax.Array], tuple[Any, TimeStep]] | None = None
    # Games solved here (pgx tic-tac-toe): each move's value for the mover
    # under perfect play, `state -> [num_actions]` (+1 win, 0 draw, -1 loss,
    # below -1 where not legal); and every position worth asking about,
    # `() -> (states [P, ...], TimeStep [P, ...])`. None elsewhere.
    solution: Callable[[Any], jax.Array] | None = None
    positions: Callable[[], tuple[Any, TimeStep]] | None = None


def random_legal_action(key: PRNGKey, legal_action_mask: jax.Array) -> jax.Array:
    """A uniformly random legal action per row of `legal_action_mask [..., A]`."""
    return jax.random.categorical(key, jnp.where(legal_action_mask, 0.0, -jnp.inf))


def random_action(env: Environment, key: PRNGKey, legal_action_mask: jax.Array) -> jax.Array:
    """A uniformly random action per row of `legal_action_mask [..., A]`: a
    legal discrete one, or a continuous one uniform within the bounds."""
    if env.discrete_actions:
        return random_legal_action(key, legal_action_mask)
    low, high = (jnp.asarray(bound, jnp.float32) for bound in env.action_bounds)
    return jax.random.uniform(key, legal_action_mask.shape, jnp.float32, low, high)


def random_step(env: Environment, env_state: Any, timestep: TimeStep, key: PRNGKey) -> tuple[jax.Array, Any, TimeStep]:
    """One step of a batch of envs with uniformly random (legal) actions:
    `(action [B] or [B, A], env_state, timestep)` after it."""
    action_key, env_key = jax.random.split(key)
    action = random_action(env, action_key, timestep.legal_action_mask)
    env_state, timestep = jax.vmap(env.step)(env_state, action, jax.random.split(env_key, action.shape[0]))
    return action, env_state, timestep


class Algorithm(NamedTuple):
    """A training pipeline as pure functions, in the manner of optax.

    `step` is written for one seed and one device shard; the harness places
    `vmap` (or `lax.map`, see `map_seeds`), `scan`, `jit` and sharding
    around it.
    """

    init: Callable[..., State]  # (key) -> state; a sweep's (algorithms.sweep): (key, numbers) -> state
    step: Callable[[State], tuple[State, Metrics]]
    # Env steps one `step` consumes (one seed): filled in by
    # `Registration.make` from the registration's own count, the one home of it.
    env_steps_per_step: int = 0
    # Optional: measure the current policy (e.g. games against fixed
    # opponents); run by the harness once per logging interval, outside the
    # training iterations. `(state) -> (state, metrics of scalars)`.
    evaluate: Callable[[State], tuple[State, Metrics]] | None = None
    # Optional: measure the trained policy once, after the last iteration
    # (e.g. against a perfect player); `(state) -> metrics of scalars`. Its
    # figures join each seed's final values, never a curve, and it draws
    # from a key of its own, so it changes nothing the training computed.
    assess: Callable[[State], Metrics] | None = None
    # Run the seeds one after another (`lax.map`) instead of as one vmapped
    # batch: for pipelines that batch enough work within a seed and whose
    # operations get slower with a batch of parameters (a convolution whose
    # kernel is vmapped over seeds becomes a grouped convolution).
    map_seeds: bool = False

    def training_only(self) -> Algorithm:
        """The pipeline without its evaluation and its assessment: what a
        throughput measurement times, and nothing after it (an assessment
        run after the last chunk would enter the bench's time unmeasured)."""
        return self._replace(evaluate=None, assess=None)


Problem = tuple[str, str]  # (hyperparameter key, why not)


class Registration(NamedTuple):
    """Everything the harness knows of an algorithm, declared in its own
    module: its typed hyperparameters, the networks it takes, which of its
    hyperparameters a sweep may carry as numbers, and its factory. The
    harness builds the spec's `algorithm:` union from the registry, so
    adding an algorithm is one module and one `register` call."""

    # The hyperparameters: a frozen model (algorithms.config.Config) whose
    # fields are the spec's `hyperparameters:` keys.
    config: type[Any]
    # factory(config, env, *, network, optimizer, axis_name[, shards]) -> Algorithm
    factory: Callable[..., Algorithm]
    # Optimizer updates per `step`, so that learning-rate schedules span the run.
    updates_per_step: Callable[[Any], int]
    # Env steps consumed per `step` (one seed), known before anything runs.
    env_steps_per_step: Callable[[Any], int]
    # Returns None when `env` is usable, else a sentence saying why not.
    check_env: Callable[[Any, Environment], str | None]
    # The `network.kind`s the factory takes; the first is the default.
    network_kinds: tuple[str, ...]
    # check(config, network, D) -> None when the batches divide as the
    # algorithm needs (minibatches) and split evenly over D data-parallel
    # shards (D = 1: one device), else (hyperparameter key, why not). None:
    # the algorithm does not run data-parallel and has no rule.
    check: Callable[[Any, Any, int], Problem | None] | None = None
    # check_exact(config, network, L) -> None when the algorithm can run on
    # exact layouts of L logical shards (`devices.shards`), else (spec key,
    # why not). None: it has no exact layouts.
    check_exact: Callable[[Any, Any, int], Problem | None] | None = None
    # The hyperparameters that enter the computation only as numbers, in
    # arithmetic (never in shapes or Python control flow): a sweep carries
    # them in the state, one value per run (algorithms.sweep).
    numeric: tuple[str, ...] = ()
    # The model of the spec's `strength:` section (what `Algorithm.assess`
    # measures of the final parameters; not in the spec hash), passed to
    # the factory as `strength=`; None: the algorithm has no such section.
    strength: type[Any] | None = None

    @property
    def default_network(self) -> str:
        return self.network_kinds[0]

    def make(self, config: Any, env: Environment, **kwargs: Any) -> Algorithm:
        """The algorithm, with its env steps per step."""
        algorithm = self.factory(config, env, **kwargs)
        return algorithm._replace(env_steps_per_step=self.env_steps_per_step(config))


registry: dict[str, Registration] = {}


def register(name: str, registration: Registration) -> None:
    registry[name] = registration


def single_agent(name: str) -> Callable[[Any, Environment], str | None]:
    """An env check for algorithms that need one agent (discrete or
    continuous actions)."""

    def check(config: Any, env: Environment) -> str | None:
        del config
        if env.num_players != 1:
            return f"{name} needs a single-agent env; this env has {env.num_players} players"
        return None

    return check
