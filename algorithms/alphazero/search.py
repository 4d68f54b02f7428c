"""Tree search on the real environment with mctx: Gumbel MuZero or PUCT,
illegal actions masked at every node, terminal moves ending their branch,
the value's sign flipped whenever the player to move changes."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import mctx

from algorithms.alphazero import batched_search
from algorithms.alphazero.config import AlphaZeroConfig
from algorithms.base import Environment, TimeStep
from algorithms.distributions import masked_logits


class Games(NamedTuple):
    """B games in progress."""

    env_state: Any  # [B, ...]
    timestep: TimeStep  # [B, ...]
    episode_return: jax.Array  # [B] player 0's env return so far
    length: jax.Array  # [B] moves so far


class Tree(NamedTuple):
    """What a search reads of its setting: the spec's search settings, the
    env and the policy-value network."""

    config: AlphaZeroConfig
    env: Environment
    net: Any

    def evaluate(self, params, timestep: TimeStep):
        """A position's prior logits (illegal actions masked) and value."""
        logits, value = self.net.apply(params, timestep.observation)
        return masked_logits(logits, timestep.legal_action_mask), value

    def transition(self, params, mover, next_ts: TimeStep, episode_return, threshold):
        """What the tree learns of one step of each game `[B]`: the mover's
        reward, the discount (-1 where the other player moves next; 0 after
        a terminal step), the new node's prior logits and value."""
        done = next_ts.terminated | next_ts.truncated
        logits, value = self.evaluate(params, next_ts)
        mover_reward = jnp.take_along_axis(next_ts.reward, mover[:, None], axis=1)[:, 0]
        if self.env.num_players == 1:
            episode_return = episode_return + mover_reward
            # The tree sees the ranked outcome at the end, and 0 (the
            # expectation of the coin) on a tie.
            reward = jnp.where(done, jnp.sign(episode_return - threshold), 0.0)
            discount = jnp.ones_like(reward)
        else:
            reward = mover_reward
            discount = jnp.where(next_ts.current_player == mover, 1.0, -1.0)
        step = batched_search.Step(
            reward=reward,
            discount=jnp.where(done, 0.0, discount),
            prior_logits=logits,
            value=jnp.where(done, 0.0, value),
        )
        return step, jnp.where(done, 0.0, episode_return)


def make_search(config: AlphaZeroConfig, env: Environment, net: Any):
    """`search(params, keys [B], games, threshold, explore) -> (action [B], policy [B, A])`.

    Each game is searched with its own key, so a game's search does not
    depend on which other games share the batch (or the device). With
    `explore`, self-play's noise is on (Gumbel noise, or Dirichlet noise and
    visit-count sampling at `temperature`); without, the search is
    deterministic and returns its best action.
    """
    batched = config.tree_search == "batched" and config.search == "gumbel"
    return functools.partial(search_batched if batched else search_each_game_alone, Tree(config, env, net))


def search_with_mctx(tree: Tree, params, key, games: Games, threshold: jax.Array, explore: bool):
    """mctx's Gumbel MuZero or PUCT policy over a batch of games under one key."""
    config, env = tree.config, tree.env
    num_games = games.length.shape[0]

    def recurrent_fn(params, key, action, embedding):
        env_state, timestep, episode_return = embedding
        mover = timestep.current_player
        env_state, next_ts = jax.vmap(env.step)(env_state, action, jax.random.split(key, num_games))
        step, episode_return = tree.transition(params, mover, next_ts, episode_return, threshold)
        output = mctx.RecurrentFnOutput(
            reward=step.reward, discount=step.discount, prior_logits=step.prior_logits, value=step.value
        )
        return output, (env_state, next_ts, episode_return)

    logits, value = tree.evaluate(params, games.timestep)
    root = mctx.RootFnOutput(
        prior_logits=logits, value=value, embedding=(games.env_state, games.timestep, games.episode_return)
    )
    invalid = ~games.timestep.legal_action_mask
    if config.search == "gumbel":
        out = mctx.gumbel_muzero_policy(
            params,
            key,
            root,
            recurrent_fn,
            config.num_simulations,
            invalid_actions=invalid,
            max_depth=config.max_depth,
            max_num_considered_actions=config.max_num_considered_actions,
            gumbel_scale=config.gumbel_scale if explore else 0.0,
        )
        return out.action, out.action_weights
    out = mctx.muzero_policy(
        params,
        key,
        root,
        recurrent_fn,
        config.num_simulations,
        invalid_actions=invalid,
        max_depth=config.max_depth,
        dirichlet_fraction=config.dirichlet_fraction if explore else 0.0,
        dirichlet_alpha=config.dirichlet_alpha,
        pb_c_init=config.pb_c_init,
        temperature=config.temperature,
    )
    action = out.action if explore else jnp.argmax(out.action_weights, axis=-1)
    return action, out.action_weights


def search_batched(tree: Tree, params, keys: jax.Array, games: Games, threshold: jax.Array, explore: bool):
    """Gumbel MuZero over all games at once (`batched_search`), each game's
    noise and env keys from its own key, as when searched alone. A
    deterministic game's nodes are stepped with `env.search_step`: no keys,
    and no next game drawn after a terminal step (nothing below one reaches
    the root, so the search's outputs are the same)."""
    config, env = tree.config, tree.env

    # A node keeps only what its children's steps read: the env state, the
    # player to move and the return so far (the tree writes and reads every
    # leaf of it at every simulation).
    def recurrent_fn(params, keys, action, embedding):
        env_state, mover, episode_return = embedding
        if env.search_step is None:
            env_keys = jax.vmap(lambda k: jax.random.split(k, 1)[0])(keys)
            env_state, next_ts = jax.vmap(env.step)(env_state, action, env_keys)
        else:
            env_state, next_ts = jax.vmap(env.search_step)(env_state, action)
        step, episode_return = tree.transition(params, mover, next_ts, episode_return, threshold)
        return step, (env_state, next_ts.current_player, episode_return)

    logits, value = tree.evaluate(params, games.timestep)
    out = batched_search.gumbel_muzero(
        params,
        keys,
        logits,
        value,
        (games.env_state, games.timestep.current_player, games.episode_return),
        recurrent_fn,
        num_simulations=config.num_simulations,
        invalid_actions=~games.timestep.legal_action_mask,
        max_depth=config.max_depth,
        max_num_considered_actions=config.max_num_considered_actions,
        gumbel_scale=config.gumbel_scale if explore else 0.0,
        keyed_steps=env.search_step is None,
    )
    return out.action, out.action_weights


def search_each_game_alone(tree: Tree, params, keys: jax.Array, games: Games, threshold: jax.Array, explore: bool):
    """Every game searched as a batch of one under its own key (vmapped over
    the games), so that its search does not depend on the others."""

    def search_one(key, game):
        action, policy = search_with_mctx(tree, params, key, jax.tree.map(lambda x: x[None], game), threshold, explore)
        return action[0], policy[0]

    return jax.vmap(search_one)(keys, games)
