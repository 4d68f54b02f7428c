"""AlphaZero's hyperparameters (a spec's `hyperparameters:` when
`algorithm: alphazero`): self-play, the search, the replay buffer, training,
ranked rewards and evaluation; and the rules its registration states about
them (env steps and updates per iteration, how batches split over devices,
which envs it plays)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_serializer, model_validator

from algorithms import base
from algorithms.base import Environment
from algorithms.config import Config, NetworkConfig


class RankedRewardConfig(Config):
    """Ranked rewards for single-player tasks (algorithms.alphazero.ranked)."""

    quantile: float = Field(default=0.75, gt=0, lt=1, description="of recent returns, the +1/-1 threshold")
    memory: int = Field(default=100, gt=0, description="recent episode returns remembered per game row")


class EvaluationConfig(Config):
    """Games against fixed opponents and the pool of earlier parameters
    (algorithms.alphazero.opponents), after every logging interval."""

    games: int = Field(default=32, gt=0, description="games against each opponent, every logging interval")
    pool_size: int = Field(default=4, gt=0, description="earlier parameters kept for Elo and best-earlier games")


MAX_PLAYOUT_SIMULATIONS = 4096
_PLAYOUTS = re.compile(r"playouts_([0-9]+)")


def check_anchor(name: str) -> str:
    """An Elo ladder's anchor (algorithms.alphazero.anchors) by name, or
    ValueError saying which names there are."""
    found = _PLAYOUTS.fullmatch(name)
    if name in ("random", "greedy") or (found and 1 <= int(found.group(1)) <= MAX_PLAYOUT_SIMULATIONS):
        return name
    if found:
        raise ValueError(
            f"{name}: a playout search takes 1 to {MAX_PLAYOUT_SIMULATIONS} simulations, not {int(found.group(1))}"
        )
    raise ValueError(f"{name!r} is not an anchor: random, greedy or playouts_N (a search of N random playouts)")


AnchorName = Annotated[str, AfterValidator(check_anchor)]


class StrengthConfig(Config):
    """A spec's `strength:` section: how strong the final parameters are, on
    a scale that stays put, measured once training is over. It judges what
    training made, so it is not part of the spec hash."""

    perfect_play: bool = Field(
        default=False,
        description="games against a perfect player and every position's move held to the solved values"
        " (games the harness solves: pgx tic_tac_toe)",
    )
    anchors: tuple[AnchorName, ...] = Field(
        default=(),
        description="an Elo ladder: the anchors to play (random, greedy, playouts_N), rated by the committed"
        " tournament results/ladders/<suite>-<id>.json (harness ladder)",
    )
    games: int = Field(default=128, gt=0, description="games against the perfect player and against each anchor")

    @model_validator(mode="after")
    def _asks_something(self) -> StrengthConfig:
        if not self.perfect_play and not self.anchors:
            raise ValueError("ask for perfect_play: true, or anchors to rate the final parameters against")
        if len(set(self.anchors)) != len(self.anchors):
            raise ValueError(f"anchors are named twice: {', '.join(self.anchors)}")
        if self.games % 2:
            raise ValueError(f"games ({self.games}) must be even: half with each colour")
        return self


class AlphaZeroConfig(Config):
    """AlphaZero's hyperparameters (the spec's `hyperparameters:`)."""

    num_envs: int = Field(default=64, gt=0, description="games played in parallel per seed")
    collection_steps: int = Field(default=16, gt=0, description="moves of every game per iteration")
    search: Literal["gumbel", "puct"] = Field(default="gumbel", description="mctx Gumbel MuZero, or PUCT")
    tree_search: Literal["mctx", "batched"] = Field(
        default="mctx",
        description="gumbel: mctx's search, vmapped over the games, or the batched search of"
        " algorithms.alphazero.batched_search, whose bookkeeping per simulation does not grow with the tree",
    )
    num_simulations: int = Field(default=32, gt=0, description="search simulations per move")
    max_depth: int | None = Field(
        default=None,
        gt=0,
        description="search depth limit (edges per simulation); null: num_simulations. Past a game's longest"
        " length it changes nothing at the root, and it sizes the batched search's paths",
    )
    max_num_considered_actions: int = Field(default=16, gt=0, description="gumbel: actions sampled at the root")
    gumbel_scale: float = Field(default=1.0, ge=0, description="gumbel: noise scale in self-play")
    dirichlet_alpha: float = Field(default=0.3, gt=0, description="puct: root noise concentration")
    dirichlet_fraction: float = Field(default=0.25, ge=0, le=1, description="puct: root noise weight in self-play")
    pb_c_init: float = Field(default=1.25, gt=0, description="puct: exploration constant")
    temperature: float = Field(default=1.0, ge=0, description="puct: self-play moves ~ visits^(1/temperature)")
    capacity: int = Field(default=64, gt=0, description="replay buffer moves per game row")
    warmup_iterations: int = Field(default=1, ge=0, description="iterations of self-play before training starts")
    train_steps: int = Field(default=8, gt=0, description="minibatch updates per iteration")
    train_batch_size: int = Field(default=256, gt=0, description="positions per training step, from the buffer")
    value_coef: float = Field(default=1.0, ge=0, description="weight of the value loss beside the policy loss")
    l2_coef: float = Field(default=1e-4, ge=0, description="weight decay: L2 penalty on the parameters")
    ranked_reward: RankedRewardConfig = RankedRewardConfig()
    evaluation: EvaluationConfig = EvaluationConfig()

    @model_validator(mode="after")
    def _batched_is_gumbel(self) -> AlphaZeroConfig:
        if self.tree_search == "batched" and self.search != "gumbel":
            raise ValueError("tree_search: batched is a Gumbel MuZero search; with search: puct, use mctx")
        return self

    @model_serializer(mode="wrap")
    def _drop_later_defaults(self, handler: Any) -> dict[str, Any]:
        # tree_search came after specs were published: at its default it is
        # left out, so that their hashes stay.
        data = handler(self)
        if self.tree_search == "mctx":
            data.pop("tree_search", None)
        return data


def env_steps_per_step(config: AlphaZeroConfig) -> int:
    return config.num_envs * config.collection_steps


def updates_per_step(config: AlphaZeroConfig) -> int:
    return config.train_steps


def check_batches(config: AlphaZeroConfig, network: NetworkConfig, shards: int) -> base.Problem | None:
    """The games and every minibatch split evenly over `shards` devices."""
    del network
    if config.num_envs % shards:
        return "num_envs", f"num_envs ({config.num_envs}) does not split over {shards} data-parallel devices"
    if config.train_batch_size % shards:
        return (
            "train_batch_size",
            f"train_batch_size ({config.train_batch_size}) does not split over {shards} data-parallel devices",
        )
    return None


def check_exact(config: AlphaZeroConfig, network: NetworkConfig, shards: int) -> base.Problem | None:
    """Exact layouts: a network of dense layers, and minibatches that split
    into `shards` logical shards."""
    if network.kind not in ("mlp", "item_set"):
        return "network.kind", (
            f"exact layouts (devices.shards) of alphazero take an mlp or item_set network, not {network.kind}"
        )
    if config.train_batch_size % shards:
        return "devices.shards", (
            f"train_batch_size ({config.train_batch_size}) does not split into {shards} logical shards"
        )
    return None


def check_env(config: AlphaZeroConfig, env: Environment) -> str | None:
    del config
    if not env.discrete_actions:
        return "alphazero needs a discrete action space; this env's actions are continuous"
    if env.num_players not in (1, 2):
        return f"alphazero plays one- or two-player games; this env has {env.num_players} players"
    return None
