"""AlphaZero's training state for one seed (its fields' shapes are in
`alphazero.factory.make_alphazero`'s docstring), and the split of the
network's variables into what training differentiates and batch norm's
running averages. Read by the factory and by the evaluation."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax

from algorithms.alphazero.buffer import Buffer
from algorithms.alphazero.opponents import Pool
from algorithms.alphazero.ranked import RankedMemory
from algorithms.alphazero.search import Games


class SelfPlayStats(NamedTuple):
    """Figures of the games that ended most recently (kept when none ended)."""

    length: jax.Array  # []
    episode_return: jax.Array  # [] player 0's return (single-player: the env return)
    draw_rate: jax.Array  # []


class AlphaZeroState(NamedTuple):
    params: Any
    opt_state: Any
    games: Games
    buffer: Buffer
    ranked: RankedMemory
    stats: SelfPlayStats
    pool: Pool | None  # two-player games only
    key: jax.Array
    iteration: jax.Array  # [] int32, iterations done
    evaluations: jax.Array  # [] int32, evaluations done


def trainable(variables: Any) -> tuple[Any, Any]:
    """The network's variables as what training differentiates and the
    batch statistics' running averages that it updates (None without batch
    norm: then the first is all of them)."""
    if "batch_stats" not in variables:
        return variables, None
    return {k: v for k, v in variables.items() if k != "batch_stats"}, variables["batch_stats"]


def with_stats(weights: Any, batch_stats: Any) -> Any:
    """`trainable`'s inverse."""
    return weights if batch_stats is None else {**weights, "batch_stats": batch_stats}
