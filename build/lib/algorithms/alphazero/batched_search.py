"""Gumbel MuZero search (Danihelka et al. 2022, "Policy improvement by
planning with Gumbel") over a batch of trees whose bookkeeping costs what a
simulation touches, not the size of the tree.

mctx's search writes each simulation's backup as a `while_loop` over one
tree, `vmap`-ed over the batch. A `while_loop` whose condition is batched
selects, at every step, between the old and the new value of everything it
carries: here the whole tree, `[B, N, A]` per array, once per level of the
path. On a CPU that is most of a small game's search (tic-tac-toe: about 5
of every 6 ms of a simulation of 512 games). This search computes the same
policy with the same arithmetic, in four batched stages per simulation:

- selection walks all B paths down together, carrying only `[B]` indices
  and the path so far (`[B, D]`), reading the tree as a constant;
- expansion evaluates the B new nodes with one call of `recurrent_fn`;
- the backup's values are the recurrence `G = r + d G` along each path, on
  `[B]` vectors;
- every node of every path is then written with one scatter per array.

Per-game keys: game b's Gumbel noise and its env steps' keys come from
`keys[b]` alone, as if it were searched by itself, so a game's search does
not depend on the other games in the batch (or on the device). A search
whose steps take no key (`keyed_steps=False`: a deterministic game) splits
no keys after the root's noise: on a CPU each split is a loop of small
kernels, and in a small game they are a good part of a simulation.

Shapes: B games, N = num_simulations + 1 nodes, A actions, D = max_depth.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

ROOT = 0
UNVISITED = -1


class Tree(NamedTuple):
    node_visits: jax.Array  # [B, N] int32
    raw_values: jax.Array  # [B, N] the network's value at the node
    node_values: jax.Array  # [B, N] mean of the backed-up values
    children_index: jax.Array  # [B, N, A] int32, UNVISITED where not expanded
    children_prior_logits: jax.Array  # [B, N, A] the network's logits at the node
    children_visits: jax.Array  # [B, N, A] int32
    children_rewards: jax.Array  # [B, N, A]
    children_discounts: jax.Array  # [B, N, A]
    children_values: jax.Array  # [B, N, A] the child's node value
    embeddings: Any  # [B, N, ...] the env state at each node


class Step(NamedTuple):
    """What `recurrent_fn` returns for each of B expanded edges."""

    reward: jax.Array  # [B]
    discount: jax.Array  # [B], 0 after a terminal transition
    prior_logits: jax.Array  # [B, A] the new node's
    value: jax.Array  # [B] the new node's


class SearchOutput(NamedTuple):
    action: jax.Array  # [B] int32
    action_weights: jax.Array  # [B, A] the improved policy, a training target
    tree: Tree


# recurrent_fn(params, keys [B] or None, action [B], embedding [B, ...]) -> (Step, embedding)
RecurrentFn = Callable[[Any, jax.Array, jax.Array, Any], tuple[Step, Any]]


@functools.cache
def considered_visits(max_considered: int, num_simulations: int) -> np.ndarray:
    """Sequential halving's schedule: row m, column s is the visit count
    that the root's considered actions have when simulation s starts, with
    m actions considered at first (halved each phase, at least 2), each
    phase's budget split evenly. `[max_considered + 1, num_simulations]`."""
    table = np.zeros((max_considered + 1, num_simulations), np.int32)
    for m in range(max_considered + 1):
        if m <= 1:
            table[m] = np.arange(num_simulations)
            continue
        phases = math.ceil(math.log2(m))
        schedule: list[int] = []
        visits, considered = 0, m
        while len(schedule) < num_simulations:
            rounds = max(1, int(num_simulations / (phases * considered)))
            for _ in range(rounds):
                # Every considered action is visited once per round, and
                # they all have `visits` visits when the round starts.
                schedule.extend([visits] * considered)
                visits += 1
            considered = max(2, considered // 2)
        table[m] = schedule[:num_simulations]
    return table


def completed_qvalues(visits, prior_logits, qvalues, raw_value, *, value_scale=0.1, maxvisit_init=50.0):
    """Q-values completed by the mixed value and rescaled to [0, 1], times
    `(maxvisit_init + max visits) * value_scale`: `[..., A]` rows."""
    visited = visits > 0
    sum_visits = jnp.sum(visits, axis=-1)
    probs = jnp.maximum(jnp.finfo(prior_logits.dtype).tiny, jax.nn.softmax(prior_logits))
    sum_probs = jnp.sum(jnp.where(visited, probs, 0.0), axis=-1)
    weighted_q = jnp.sum(
        jnp.where(visited, probs * qvalues / jnp.where(visited, sum_probs[..., None], 1.0), 0.0), axis=-1
    )
    mixed = (raw_value + sum_visits * weighted_q) / (sum_visits + 1)
    completed = jnp.where(visited, qvalues, mixed[..., None])
    low = jnp.min(completed, axis=-1, keepdims=True)
    high = jnp.max(completed, axis=-1, keepdims=True)
    completed = (completed - low) / jnp.maximum(high - low, 1e-8)
    scale = maxvisit_init + jnp.max(visits, axis=-1)
    return (scale * value_scale)[..., None] * completed


def _scores(considered_visit, gumbel, logits, qvalues, visits):
    """Sequential halving's root scores: among the actions with exactly the
    considered visit count, the one maximising gumbel + logits + q."""
    logits = logits - jnp.max(logits, axis=-1, keepdims=True)
    penalty = jnp.where(visits == considered_visit, 0, -jnp.inf)
    return jnp.maximum(-1e9, gumbel + logits + qvalues) + penalty


def _rows(tree: Tree, node: jax.Array):
    """The children's statistics of node[b] in tree b: `[B, A]` each."""
    b = jnp.arange(node.shape[0])
    return (
        tree.children_visits[b, node],
        tree.children_prior_logits[b, node],
        tree.children_rewards[b, node] + tree.children_discounts[b, node] * tree.children_values[b, node],
        tree.raw_values[b, node],
    )


def _root_choice(tree: Tree, gumbel, invalid, considered_visit: Callable):
    """Among the root's actions with the visit count `considered_visit(visits
    [B, A]) -> [B, 1]`, the best by gumbel + logits + completed Q: (action
    [B], the root's logits and completed Q, `[B, A]` each)."""
    visits, logits, qvalues, raw_value = _rows(tree, jnp.zeros(gumbel.shape[0], jnp.int32))
    q = completed_qvalues(visits, logits, qvalues, raw_value)
    scores = jnp.where(invalid, -jnp.inf, _scores(considered_visit(visits), gumbel, logits, q, visits))
    return jnp.argmax(scores, axis=-1).astype(jnp.int32), logits, q


def _select_at_root(tree: Tree, gumbel, invalid, num_considered, table):
    """Sequential halving with Gumbel noise: the considered actions are those
    with the visit count the schedule gives this simulation. `[B]`."""
    schedule = lambda visits: table[num_considered, jnp.sum(visits, axis=-1)][:, None]  # noqa: E731
    return _root_choice(tree, gumbel, invalid, schedule)[0]


def _select_below_root(tree: Tree, node):
    """The improved policy's deterministic visit schedule at `node [B]`:
    the action whose share of visits lags its probability most."""
    visits, logits, qvalues, raw_value = _rows(tree, node)
    probs = jax.nn.softmax(logits + completed_qvalues(visits, logits, qvalues, raw_value))
    return jnp.argmax(probs - visits / (1 + jnp.sum(visits, axis=-1, keepdims=True)), axis=-1).astype(jnp.int32)


def _simulate(tree: Tree, gumbel, invalid, num_considered, table, max_depth: int):
    """Walk every game's tree from the root until an unexpanded action or
    `max_depth`: (parent [B], action [B], path nodes [B, D], path actions
    [B, D], path length [B]); position k of a path is the k-th edge taken."""
    batch = gumbel.shape[0]
    b = jnp.arange(batch)

    def step(state):
        node, action, nodes, actions, going, depth = state
        # Games that have stopped keep their state; the others take a step.
        here = jnp.where(going, tree.children_index[b, node, action], node)
        chosen = jnp.where(going, _select_below_root(tree, here), action)
        column = jnp.where(going, depth, max_depth)  # out of range: dropped
        nodes = nodes.at[b, column].set(here, mode="drop")
        actions = actions.at[b, column].set(chosen, mode="drop")
        depth = jnp.where(going, depth + 1, depth)
        going = going & (tree.children_index[b, here, chosen] != UNVISITED) & (depth < max_depth)
        return here, chosen, nodes, actions, going, depth

    # The root's step is taken by all games, outside the loop: its rule
    # differs, and the loop then runs only the interior one.
    root = jnp.zeros(batch, jnp.int32)
    action = _select_at_root(tree, gumbel, invalid, num_considered, table)
    nodes = jnp.zeros((batch, max_depth), jnp.int32)
    actions = jnp.zeros((batch, max_depth), jnp.int32).at[:, 0].set(action)
    depth = jnp.ones(batch, jnp.int32)
    going = (tree.children_index[b, root, action] != UNVISITED) & (1 < max_depth)
    state = (root, action, nodes, actions, going, depth)
    node, action, nodes, actions, _, depth = jax.lax.while_loop(lambda s: jnp.any(s[4]), step, state)
    return node, action, nodes, actions, depth


def _write_node(tree: Tree, index, prior_logits, value, embedding) -> Tree:
    """Node `index [B]` of each tree evaluated (a repeat evaluation, at the
    depth limit, adds a visit)."""
    b = jnp.arange(index.shape[0])
    return tree._replace(
        children_prior_logits=tree.children_prior_logits.at[b, index].set(prior_logits),
        raw_values=tree.raw_values.at[b, index].set(value),
        node_values=tree.node_values.at[b, index].set(value),
        node_visits=tree.node_visits.at[b, index].set(tree.node_visits[b, index] + 1),
        embeddings=jax.tree.map(lambda t, s: t.at[b, index].set(s), tree.embeddings, embedding),
    )


def _expand(params, keys, tree: Tree, recurrent_fn: RecurrentFn, parent, action, child) -> Tree:
    b = jnp.arange(parent.shape[0])
    embedding = jax.tree.map(lambda x: x[b, parent], tree.embeddings)
    step, embedding = recurrent_fn(params, keys, action, embedding)
    tree = _write_node(tree, child, step.prior_logits, step.value, embedding)
    return tree._replace(
        children_index=tree.children_index.at[b, parent, action].set(child),
        children_rewards=tree.children_rewards.at[b, parent, action].set(step.reward),
        children_discounts=tree.children_discounts.at[b, parent, action].set(step.discount),
    )


def _backup(tree: Tree, leaf, nodes, actions, depth, max_depth: int) -> Tree:
    """Back the leaf's value up every path: walking from the leaf, the value
    is G = r + d G at each edge; each node on the path becomes the running
    mean of its values with G, and its edge's child value the child's new
    node value. The recurrence runs on `[B]` vectors; the tree is written
    once per array."""
    batch = leaf.shape[0]
    b = jnp.arange(batch)
    rewards = tree.children_rewards[b[:, None], nodes, actions]  # [B, D]
    discounts = tree.children_discounts[b[:, None], nodes, actions]
    counts = tree.node_visits[b[:, None], nodes]
    old_values = tree.node_values[b[:, None], nodes]

    def up(k, carry):
        g, new_values = carry
        # Position j = depth - 1 - k of each path, from the leaf's parent up.
        j = depth - 1 - k
        active = j >= 0
        jj = jnp.maximum(j, 0)
        g_here = rewards[b, jj] + discounts[b, jj] * g
        count = counts[b, jj]
        value = (old_values[b, jj] * count + g_here) / (count + 1.0)
        new_values = new_values.at[b, jnp.where(active, jj, max_depth)].set(value, mode="drop")
        return jnp.where(active, g_here, g), new_values

    leaf_value = tree.node_values[b, leaf]
    _, new_values = jax.lax.fori_loop(
        0, jnp.max(depth), up, (leaf_value, jnp.zeros((batch, max_depth), leaf_value.dtype))
    )

    on_path = jnp.arange(max_depth)[None, :] < depth[:, None]
    column_nodes = jnp.where(on_path, nodes, tree.node_values.shape[1])  # off the path: dropped
    # The edge at path position k leads to the node at k + 1 (the leaf at
    # the last position), whose value its parent's child value becomes.
    last = jnp.arange(max_depth)[None, :] == depth[:, None] - 1
    child_values = jnp.concatenate([new_values[:, 1:], jnp.zeros((batch, 1), new_values.dtype)], axis=1)
    child_values = jnp.where(last, leaf_value[:, None], child_values)
    rows = b[:, None]
    return tree._replace(
        node_values=tree.node_values.at[rows, column_nodes].set(new_values, mode="drop"),
        node_visits=tree.node_visits.at[rows, column_nodes].set(counts + 1, mode="drop"),
        children_values=tree.children_values.at[rows, column_nodes, actions].set(child_values, mode="drop"),
        children_visits=tree.children_visits.at[rows, column_nodes, actions].set(
            tree.children_visits[rows, nodes, actions] + 1, mode="drop"
        ),
    )


def _new_tree(prior_logits, value, embedding, num_nodes: int) -> Tree:
    batch, num_actions = prior_logits.shape
    nodes, edges = (batch, num_nodes), (batch, num_nodes, num_actions)
    tree = Tree(
        node_visits=jnp.zeros(nodes, jnp.int32),
        raw_values=jnp.zeros(nodes, value.dtype),
        node_values=jnp.zeros(nodes, value.dtype),
        children_index=jnp.full(edges, UNVISITED, jnp.int32),
        children_prior_logits=jnp.zeros(edges, prior_logits.dtype),
        children_visits=jnp.zeros(edges, jnp.int32),
        children_rewards=jnp.zeros(edges, value.dtype),
        children_discounts=jnp.zeros(edges, value.dtype),
        children_values=jnp.zeros(edges, value.dtype),
        embeddings=jax.tree.map(lambda x: jnp.zeros((batch, num_nodes, *x.shape[1:]), x.dtype), embedding),
    )
    return _write_node(tree, jnp.full(batch, ROOT, jnp.int32), prior_logits, value, embedding)


def _mask(logits, invalid):
    """Invalid actions at the lowest finite logit (all invalid stays finite)."""
    logits = logits - jnp.max(logits, axis=-1, keepdims=True)
    return jnp.where(invalid, jnp.finfo(logits.dtype).min, logits)


def gumbel_muzero(
    params: Any,
    keys: jax.Array,
    prior_logits: jax.Array,
    value: jax.Array,
    embedding: Any,
    recurrent_fn: RecurrentFn,
    *,
    num_simulations: int,
    invalid_actions: jax.Array,
    max_depth: int | None = None,
    max_num_considered_actions: int = 16,
    gumbel_scale: float | jax.Array = 1.0,
    keyed_steps: bool = True,
) -> SearchOutput:
    """Search B roots (`prior_logits [B, A]`, `value [B]`, `embedding [B,
    ...]`) with `num_simulations` simulations each; `keys [B]`, one per game.
    The action is the best of the most visited considered actions; the
    weights are softmax(logits + completed Q), invalid actions masked.
    Without `keyed_steps`, `recurrent_fn` is given None for its keys."""
    max_depth = num_simulations if max_depth is None else max_depth
    batch, num_actions = prior_logits.shape
    split = jax.vmap(jax.random.split)(keys)
    keys, gumbel_keys = split[:, 0], split[:, 1]
    logits = _mask(prior_logits, invalid_actions)
    gumbel = gumbel_scale * jax.vmap(lambda k: jax.random.gumbel(k, (num_actions,), logits.dtype))(gumbel_keys)
    table = jnp.asarray(considered_visits(max_num_considered_actions, num_simulations))
    num_considered = jnp.minimum(max_num_considered_actions, jnp.sum(~invalid_actions, axis=-1)).astype(jnp.int32)

    def simulation(sim, carry):
        keys, tree = carry
        expand_keys = None
        if keyed_steps:
            split = jax.vmap(lambda k: jax.random.split(k, 3))(keys)
            keys, expand_keys = split[:, 0], split[:, 2]
        parent, action, nodes, actions, depth = _simulate(
            tree, gumbel, invalid_actions, num_considered, table, max_depth
        )
        child = tree.children_index[jnp.arange(batch), parent, action]
        child = jnp.where(child == UNVISITED, sim + 1, child)
        tree = _expand(params, expand_keys, tree, recurrent_fn, parent, action, child)
        return keys, _backup(tree, child, nodes, actions, depth, max_depth)

    tree = _new_tree(logits, value, embedding, num_simulations + 1)
    _, tree = jax.lax.fori_loop(0, num_simulations, simulation, (keys, tree))

    # The action: the best of the most visited considered actions.
    most = lambda visits: jnp.max(visits, axis=-1, keepdims=True)  # noqa: E731
    action, root_logits, q = _root_choice(tree, gumbel, invalid_actions, most)
    return SearchOutput(action, jax.nn.softmax(_mask(root_logits + q, invalid_actions)), tree)
