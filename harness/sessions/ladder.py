"""`harness ladder`'s work: an Elo ladder's anchors play each other once, in
one jitted program, and their fitted ratings become the committed record
(harness.judge.ladder)."""

from __future__ import annotations

import itertools
import time
from typing import Any

import jax
import numpy as np

from algorithms.alphazero.ladder import round_robin
from harness.judge.ladder import FORMAT, ZERO, LadderError, LadderRecord, PairResult, fit
from harness.run import provenance


def play_tournament(names: tuple[str, ...], env: Any, env_name: str, games: int, seed: int) -> LadderRecord:
    """Every pair of anchors plays `games` games (half with each colour), in
    one jitted program; their ratings fitted."""
    if ZERO not in names:
        raise LadderError(f"the ladder's zero, {ZERO}, is not among the anchors ({', '.join(names)})")
    if len(names) < 2:
        raise LadderError("a tournament needs at least two anchors")
    start = time.perf_counter()
    totals = np.asarray(jax.jit(round_robin(env, names, games))(jax.random.key(seed)))
    seconds = time.perf_counter() - start
    pairs = [
        PairResult(
            first=names[i],
            second=names[j],
            wins=int((row > 0).sum()),
            draws=int((row == 0).sum()),
            losses=int((row < 0).sum()),
        )
        for (i, j), row in zip(itertools.combinations(range(len(names)), 2), totals, strict=True)
    ]
    return LadderRecord(
        format=FORMAT,
        env=env_name,
        anchors=fit(list(names), pairs),
        games_per_pair=games,
        seed=seed,
        pairs=pairs,
        seconds=round(seconds, 1),
        git=provenance.git_state(),
        versions=provenance.versions(),
        fingerprint=provenance.fingerprint(),
    )
