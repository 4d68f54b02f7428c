"""The exact optimum of a 0/1 knapsack instance, in JAX: the best return an
episode of jumanji's Knapsack can reach, behind its optimality gap.
Depth-first branch and bound over the items in order of value per weight,
pruned by the fractional (Dantzig) bound. jumanji's Knapsack draws
real-valued weights, so a dynamic programme over integer capacities would
not be exact; branch and bound is, up to float32 rounding of the sums.

`knapsack_optimum(weights [N], values [N], capacity []) -> []` is pure JAX
(a `while_loop` over search nodes): it jits and vmaps over instances, and a
vmapped batch runs until its hardest instance is solved. On jumanji's
Knapsack-v1 (50 items drawn uniformly on the unit square, budget 12.5) an
instance takes a few hundred to a few thousand nodes.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp


class _Search(NamedTuple):
    taken: jax.Array  # [N] bool, the decisions of items before `depth`
    depth: jax.Array  # [] int32, the next item to decide
    weight: jax.Array  # [] weight of the items taken
    value: jax.Array  # [] value of the items taken
    best: jax.Array  # [] the best value of a complete packing so far
    done: jax.Array  # [] bool


def knapsack_optimum(weights: jax.Array, values: jax.Array, capacity: jax.Array) -> jax.Array:
    """The largest total value of a subset of the items whose total weight
    is at most `capacity` (items of weight 0 or less count as free)."""
    weights = jnp.asarray(weights, jnp.float32)
    values = jnp.asarray(values, jnp.float32)
    capacity = jnp.asarray(capacity, jnp.float32)
    n = weights.shape[0]
    # Items that cannot help (no value) are dropped; the rest sorted by value
    # per weight, best first, which is what makes the fractional bound tight.
    useful = values > 0
    ratio = jnp.where(useful, values / jnp.maximum(weights, 1e-30), -jnp.inf)
    order = jnp.argsort(-ratio, stable=True)
    weights = jnp.where(useful, weights, jnp.inf)[order]
    values = jnp.where(useful, values, 0.0)[order]
    index = jnp.arange(n)

    def bound(state: _Search) -> jax.Array:
        """The value of the taken items plus the best fractional filling of
        what is left with the items from `depth` on."""
        room = capacity - state.weight
        rest = index >= state.depth
        w = jnp.where(rest, weights, 0.0)
        before = jnp.cumsum(w) - w  # weight of the undecided items ahead of each
        whole = rest & (before + weights <= room)
        partial = rest & ~whole & (before < room)
        # Only the first item that does not fit whole counts, in part.
        first_partial = partial & (jnp.cumsum(partial) == 1)
        fraction = jnp.where(first_partial, (room - before) / weights, 0.0)
        return state.value + jnp.sum(jnp.where(whole, values, 0.0)) + jnp.sum(values * fraction)

    def backtrack(state: _Search) -> _Search:
        """Undo the deepest item taken and go on with it left out; done when
        no item is taken."""
        deepest = jnp.max(jnp.where(state.taken, index, -1))
        found = deepest >= 0
        at = jnp.maximum(deepest, 0)
        return state._replace(
            taken=state.taken & (index < deepest),
            depth=jnp.where(found, at + 1, state.depth),
            weight=jnp.where(found, state.weight - weights[at], state.weight),
            value=jnp.where(found, state.value - values[at], state.value),
            done=~found,
        )

    def visit(state: _Search) -> _Search:
        leaf = state.depth >= n
        best = jnp.where(leaf, jnp.maximum(state.best, state.value), state.best)
        state = state._replace(best=best)
        prune = leaf | (bound(state) <= best)
        item = jnp.minimum(state.depth, n - 1)
        fits = state.weight + weights[item] <= capacity
        descend = state._replace(
            taken=state.taken.at[item].set(fits),
            depth=state.depth + 1,
            weight=jnp.where(fits, state.weight + weights[item], state.weight),
            value=jnp.where(fits, state.value + values[item], state.value),
        )
        return jax.tree.map(lambda a, b: jnp.where(prune, a, b), backtrack(state), descend)

    zero = jnp.zeros((), jnp.float32)
    start = _Search(jnp.zeros(n, bool), jnp.zeros((), jnp.int32), zero, zero, zero, jnp.zeros((), bool))
    return jax.lax.while_loop(lambda s: ~s.done, visit, start).best
