"""AlphaZero's `assess`: what the spec's `strength:` section asks of the
final parameters once training is over, each measure from its own stream of
the final key (training never draws them): perfect play where the game is
solved (`alphazero.strength`), an anchored Elo ladder (`alphazero.ladder`)."""

from __future__ import annotations

from collections.abc import Callable

import jax

from algorithms import base
from algorithms.alphazero.config import StrengthConfig
from algorithms.alphazero.ladder import Anchor, make_ladder
from algorithms.alphazero.state import AlphaZeroState
from algorithms.alphazero.strength import make_strength
from algorithms.base import Environment

PERFECT_PLAY_KEY = 0x5EED
LADDER_KEY = 0x1ADD


def make_assess(
    strength: StrengthConfig, env: Environment, search: Callable, anchors: tuple[Anchor, ...]
) -> Callable[[AlphaZeroState], base.Metrics]:
    """`assess(state) -> metrics`. `anchors`: `strength.anchors` with their
    committed ratings, in that order."""
    if strength.perfect_play and (env.solution is None or env.positions is None):
        raise ValueError("perfect_play needs a solved game (the env's solution and positions)")
    if tuple(anchor.name for anchor in anchors) != strength.anchors:
        raise ValueError(f"the anchors' ratings ({[a.name for a in anchors]}) are not those of {strength.anchors}")
    perfect = make_strength(env, search, strength.games) if strength.perfect_play else None
    ladder = make_ladder(env, search, anchors, strength.games) if anchors else None

    def assess(state: AlphaZeroState) -> base.Metrics:
        metrics = {}
        if perfect is not None:
            metrics.update(perfect(state.params, jax.random.fold_in(state.key, PERFECT_PLAY_KEY)))
        if ladder is not None:
            metrics.update(ladder(state.params, jax.random.fold_in(state.key, LADDER_KEY)))
        return metrics

    return assess
