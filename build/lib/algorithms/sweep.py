"""Hyperparameters as numbers in the state: many configurations in one program.

A sweep over values that only enter the computation as numbers (a learning
rate, a discount, a loss coefficient) needs no program per value: each run
carries its values in its state, as scalars, and the harness vmaps the runs
of every point and seed together as it vmaps seeds. `swept` turns a factory
`make(numbers) -> Algorithm`, which builds the algorithm with those numbers
in place of the configuration's constants, into one algorithm whose state
holds them: `init(key, numbers)` and `step(state)`. The factory is called
while tracing (the numbers are then tracers), so it must use them only in
arithmetic, never in Python control flow.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax

from algorithms.base import Algorithm, Metrics


class SweptState(NamedTuple):
    state: Any  # the algorithm's own state
    numbers: dict[str, jax.Array]  # this run's hyperparameters, float32 scalars


def swept(make: Callable[[dict[str, jax.Array]], Algorithm], template: Algorithm) -> Algorithm:
    """The algorithm `make(numbers)` builds, with `numbers` read from its
    state. `template` is one `make` built with constants: its
    `env_steps_per_step`, `map_seeds` and whether it evaluates (none of
    which may depend on the numbers)."""

    def init(key: jax.Array, numbers: dict[str, jax.Array]) -> SweptState:
        return SweptState(make(numbers).init(key), numbers)

    def step(swept_state: SweptState) -> tuple[SweptState, Metrics]:
        state, metrics = make(swept_state.numbers).step(swept_state.state)
        return SweptState(state, swept_state.numbers), metrics

    def evaluate(swept_state: SweptState) -> tuple[SweptState, Metrics]:
        state, metrics = make(swept_state.numbers).evaluate(swept_state.state)
        return SweptState(state, swept_state.numbers), metrics

    return template._replace(init=init, step=step, evaluate=evaluate if template.evaluate is not None else None)
