"""AlphaZero's evaluation (`make_alphazero`'s `evaluate`): the current
network, searching without noise, plays whole games against a
uniform-random player, a greedy one-ply player and, in two-player games,
each member of a pool of earlier parameters, whose approximate Elo ratings
it updates; a single-player task with an exact solver (Knapsack) also gets
each player's optimality gap."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from algorithms import base
from algorithms.alphazero.config import AlphaZeroConfig
from algorithms.alphazero.opponents import (
    by_slices,
    elo_rating,
    greedy_player,
    optimality_gap,
    outcome_rates,
    play,
    pool_admit,
    pool_params_count,
    random_player,
    searching_player,
)
from algorithms.alphazero.ranked import ranked_threshold
from algorithms.alphazero.search import Games
from algorithms.alphazero.state import AlphaZeroState
from algorithms.base import Environment


def make_evaluate(
    config: AlphaZeroConfig, env: Environment, search: Callable, axis_name: str | None = None
) -> Callable[[AlphaZeroState], tuple[AlphaZeroState, base.Metrics]]:
    """`evaluate(state) -> (state, metrics)`: `evaluation.games` games
    against each opponent with `search` (`alphazero.search.make_search`),
    under `axis_name` the same games on every shard."""
    single_player = env.num_players == 1
    n = config.evaluation.games  # per opponent

    def pool_searcher(pool_params):
        """Each pool member plays its own `n` consecutive games."""

        def act(key, games: Games):
            size = pool_params_count(pool_params)
            split = jax.tree.map(lambda x: x.reshape(size, n, *x.shape[1:]), games)
            keys = jax.random.split(key, size)
            actions = jax.vmap(lambda params, k, g: searching_player(search, params)(k, g))(pool_params, keys, split)
            return actions.reshape(-1)

        return act

    def evaluate(state: AlphaZeroState) -> tuple[AlphaZeroState, base.Metrics]:
        # One batch of games holds every opponent's, so that the agent's
        # search is one program over all of them. Under `axis_name` every
        # shard plays the same games (the parameters are replicated), so the
        # figures do not depend on the number of devices.
        key, play_key = jax.random.split(state.key)
        random, greedy = random_player(env), greedy_player(env)
        if single_player:
            threshold = ranked_threshold(state.ranked, config.ranked_reward.quantile, axis_name)
            agent = searching_player(search, state.params, threshold)
            players = by_slices((agent, random, greedy), (n, n, n))
            per_game = play(env, play_key, 3 * n, players, None)
            totals = per_game.reshape(3, n).mean(axis=1)
            metrics = {"eval_return": totals[0], "eval_random_return": totals[1], "eval_greedy_return": totals[2]}
            if env.optimum is not None:
                # Each player's games are instances of their own: each is
                # judged against its own optimum.
                optimum, gap = optimality_gap(env, play_key, 3 * n, per_game)
                gaps = gap.reshape(3, n).mean(axis=1)
                metrics.update(
                    eval_optimum=optimum[:n].mean(),
                    eval_optimality_gap=gaps[0],
                    eval_random_optimality_gap=gaps[1],
                    eval_greedy_optimality_gap=gaps[2],
                )
            return state._replace(key=key, evaluations=state.evaluations + 1), metrics

        agent = searching_player(search, state.params)
        pool = state.pool
        size = pool.rating.shape[0]
        opponents = by_slices((random, greedy, pool_searcher(pool.params)), (n, n, size * n))
        totals = play(env, play_key, (2 + size) * n, agent, opponents).reshape(2 + size, n)
        vs_pool = totals[2:]
        # A clean sweep has no finite maximum-likelihood rating; half a game
        # is moved off 0% and 100% scores, the usual correction.
        scores = jnp.clip(((vs_pool > 0) + 0.5 * (vs_pool == 0)).mean(axis=1), 0.5 / n, 1 - 0.5 / n)
        rating = elo_rating(scores, pool.rating, pool.valid)
        best = jnp.argmax(jnp.where(pool.valid, pool.rating, -jnp.inf))
        evaluations = state.evaluations + 1
        new_pool = pool_admit(pool, state.params, rating, evaluations)
        metrics = {}
        for name, total in (("random", totals[0]), ("greedy", totals[1]), ("best", vs_pool[best])):
            win, draw, loss = outcome_rates(total)
            metrics.update({f"eval_{name}_win": win, f"eval_{name}_draw": draw, f"eval_{name}_loss": loss})
        metrics.update(elo=rating, elo_best_earlier=pool.rating[best])
        return state._replace(pool=new_pool, key=key, evaluations=evaluations), metrics

    return evaluate
