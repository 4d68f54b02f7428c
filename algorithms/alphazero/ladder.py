"""AlphaZero's strength on an anchored Elo ladder, where the game is too large
to solve here: the final network, searching without noise, plays fixed
anchors (`alphazero.anchors`) whose ratings a committed tournament among
themselves fixed once (`harness ladder`), both colours, and is rated
against them by maximum likelihood (Bradley-Terry on the Elo scale, a draw
half a win), with the likelihood-ratio interval.

Metrics, per seed:
- `ladder_elo`: the rating, on the ladder's scale (the random player at 0);
- `ladder_elo_low`, `ladder_elo_high`: its 95% interval, from the agent's
  games alone (the anchors' ratings held at their committed values);
- `ladder_score_<anchor>`: the agent's score against each anchor (wins and
  half the draws, per game).

A score of 0 or 1 against every anchor has no finite maximum-likelihood
rating: half a game is moved off each all-or-nothing score, the usual
correction, so the rating then says "beyond the ladder's top (bottom)".
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from algorithms import base
from algorithms.alphazero.anchors import anchor_player
from algorithms.alphazero.opponents import bisect, by_slices, play, searching_player
from algorithms.base import Environment

ELO_SPAN = 4000.0  # a rating is searched within this of the anchors' ratings
CHI2_95 = 3.841458820694124  # the 95% quantile of chi-squared with one degree of freedom
LOGIT_PER_ELO = math.log(10.0) / 400.0  # the logistic's argument per Elo point
BISECTIONS = 64


class Anchor(NamedTuple):
    """An anchor and its committed rating."""

    name: str
    rating: float


def log_likelihood(rating: jax.Array, scores: jax.Array, games: jax.Array, ratings: jax.Array) -> jax.Array:
    """The log-likelihood of a rating given `scores` (wins + draws / 2) out of
    `games` against opponents rated `ratings`."""
    logit = (rating - ratings) * LOGIT_PER_ELO
    return jnp.sum(scores * jax.nn.log_sigmoid(logit) + (games - scores) * jax.nn.log_sigmoid(-logit))


def rate(scores: jax.Array, games: jax.Array, ratings: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """A newcomer's maximum-likelihood rating against fixed opponents, and
    its 95% likelihood-ratio interval: `(rating, low, high)`. All-or-nothing
    scores move half a game inward."""
    scores = jnp.clip(scores, 0.5, games - 0.5)
    low = jnp.min(ratings) - ELO_SPAN
    high = jnp.max(ratings) + ELO_SPAN

    def surplus(r):  # expected less achieved score: increasing in r, 0 at the maximum (minus the slope, scaled)
        return jnp.sum(games * jax.nn.sigmoid((r - ratings) * LOGIT_PER_ELO) - scores)

    best = bisect(surplus, low, high, BISECTIONS)
    top = log_likelihood(best, scores, games, ratings)

    def drop(r):  # how far below the top, less the interval's threshold
        return 2 * (top - log_likelihood(r, scores, games, ratings)) - CHI2_95

    below = bisect(lambda r: -drop(r), low, best, BISECTIONS)
    above = bisect(drop, best, high, BISECTIONS)
    return best, below, above


def make_ladder(
    env: Environment, search: Callable, anchors: tuple[Anchor, ...], games: int
) -> Callable[[Any, jax.Array], base.Metrics]:
    """`ladder(params, key) -> metrics`: `games` games against each anchor,
    the agent's side alternating, in one batch of games."""
    players = tuple(anchor_player(env, anchor.name) for anchor in anchors)
    ratings = jnp.array([anchor.rating for anchor in anchors], jnp.float32)
    num_games = games * len(anchors)

    def ladder(params, key: jax.Array) -> base.Metrics:
        opponents = by_slices(players, (games,) * len(anchors))
        totals = play(env, key, num_games, searching_player(search, params), opponents).reshape(len(anchors), games)
        scores = ((totals > 0) + 0.5 * (totals == 0)).sum(axis=1)
        rating, low, high = rate(scores, jnp.full(len(anchors), float(games)), ratings)
        metrics = {"ladder_elo": rating, "ladder_elo_low": low, "ladder_elo_high": high}
        for anchor, score in zip(anchors, scores, strict=True):
            metrics[f"ladder_score_{anchor.name}"] = score / games
        return metrics

    return ladder


def round_robin(env: Environment, names: tuple[str, ...], games: int) -> Callable[[jax.Array], jax.Array]:
    """`tournament(key) -> totals [pairs, games]`: every pair of anchors
    `(i, j)`, i < j, in `itertools.combinations` order, plays `games` games,
    anchor i first in the even ones and second in the odd ones; each game's
    total is anchor i's (+1 a win, 0 a draw, -1 a loss). One batch of games."""
    players = [anchor_player(env, name) for name in names]
    pairs = list(itertools.combinations(range(len(names)), 2))
    sizes = (games,) * len(pairs)
    first = by_slices([players[i] for i, _ in pairs], sizes)
    second = by_slices([players[j] for _, j in pairs], sizes)

    def tournament(key: jax.Array) -> jax.Array:
        return play(env, key, games * len(pairs), first, second).reshape(len(pairs), games)

    return tournament
