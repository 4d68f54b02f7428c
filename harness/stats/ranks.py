"""A reference test's bets by rank: each run seed held against every
faithful seed at once, not against one (harness.stats.sequential pairs
them otherwise).

A run's seed is ranked among the faithful seeds and the run's own earlier
seeds (itself included, ties broken by a draw of its own seed's,
`tie_breaks`): its **conformal p-value**,
the share of those values below it. If the run is faithful, the faithful
seeds and the run's seeds are one exchangeable sequence, and each new
seed's p-value is uniform on [0, 1] and independent of the ones before it
(Vovk, Gammerman and Shafer, "Algorithmic learning in a random world",
conformal test martingales), whatever the values' shape: two clusters,
ties at a range's end, a rare failure. A payoff of the p-value with mean
0 under the uniform is then a fair bet, seed after seed, and its wealth a
test martingale; the run's seeds beyond the faithful ones' number still
count. Its power comes from the whole pool: a run seed's rank moves with a
regression as much as a mean over all the faithful seeds would, where a
pair's difference carries one faithful seed's noise as well.

- **against a faithful run (H0)**: a regressed run's seeds rank low. One
  payoff is linear, `1 - 2p` (a shift of every seed); three are tails,
  `1(p < q) / q - 1` for q in TAILS (a few seeds collapsing below nearly
  every faithful one), each paying up to `1/q - 1` on a seed in the
  lowest q and losing 1 otherwise.
- **against a regressed run (H1)**: the run's seeds plus delta, ranked the
  same way, are faithful when the run is the faithful distribution moved
  down by delta; the payoff `PASS_LINEAR (2p - 1) + (1 - PASS_LINEAR)
  (1(p >= PASS_TAIL) - (1 - PASS_TAIL)) / (1 - PASS_TAIL)` is fair there,
  and loses on a seed that stays in the lowest PASS_TAIL even after delta
  is added back, so a run with a few collapsed seeds is slow to pass.

Each payoff's stakes are its Kelly stake (harness.stats.stakes) for a run
at the other hypothesis, sampled from the sizing seeds: faithful seeds
that are never ranked against (a stake sized on the seeds a run is ranked
among would suit the run those seeds happen to meet), moved down by delta
for the linear bets; for the tail bets, a share `delta / level` of seeds
collapsed below every one, the mean drop of delta. Stakes are fixed
before the run's first seed: they cost power when sized wrong, never
validity.
"""

from __future__ import annotations

import numpy as np

from harness.stats.stakes import kelly

TAILS = (0.03, 0.1, 0.2)
PASS_TAIL = 0.15
PASS_LINEAR = 0.5
# The key of the draws that break a run seed's ties (`tie_breaks`): each seed's own draw.
TIE_KEY = 0x7469


def tie_breaks(seeds) -> np.ndarray:
    """The draws `[seeds]` (uniform on [0, 1)) that break the ties of a run's
    seeds, in the order given: each a function of its seed number alone, so
    a verdict is a function of its seeds, two reproductions of other seeds
    get other draws, and no draw depends on a value (the conformal p-values
    stay uniform under a faithful run whatever its ties)."""
    return np.array([np.random.default_rng([TIE_KEY, int(seed)]).random() for seed in seeds], dtype=np.float64)


def _counts(faithful: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """How many faithful seeds (`[rows, faithful]`) are below each of
    `values` (`[rows, seeds]`), and how many equal it, row by row."""
    rows, size = faithful.shape
    span = max(float(np.abs(faithful).max(initial=0.0)), float(np.abs(values).max(initial=0.0))) * 2 + 1
    offset = span * np.arange(rows)[:, None]  # one sorted array for every row, each in its own interval
    flat = np.sort(faithful + offset, axis=1).ravel()
    shifted = (values + offset).ravel()
    start = (size * np.arange(rows))[:, None]
    left = np.searchsorted(flat, shifted, side="left").reshape(values.shape) - start
    right = np.searchsorted(flat, shifted, side="right").reshape(values.shape) - start
    return left.astype(np.float64), (right - left).astype(np.float64)


def conformal(faithful: np.ndarray, values: np.ndarray, ties: np.ndarray) -> np.ndarray:
    """Each run seed's p-value `[rows, seeds]`: its rank among the faithful
    seeds `[rows, faithful]`, the run's earlier seeds and itself, ties
    split by `ties` (uniform draws, `[rows, seeds]`)."""
    below, equal = _counts(faithful, values)
    for seed in range(1, values.shape[1]):
        current, earlier = values[:, seed : seed + 1], values[:, :seed]
        below[:, seed] += (earlier < current).sum(axis=1)
        equal[:, seed] += (earlier == current).sum(axis=1)
    return (below + ties * (equal + 1)) / (faithful.shape[1] + np.arange(1, values.shape[1] + 1))


def fail_payoffs(p: np.ndarray) -> list[np.ndarray]:
    """The payoffs against a faithful run, each of mean 0 for a uniform `p`."""
    return [1 - 2 * p] + [(p < q) / q - 1 for q in TAILS]


def pass_payoff(p: np.ndarray) -> np.ndarray:
    """The payoff against a regressed run (of the run's seeds plus delta), of mean 0 for a uniform `p`."""
    tail = ((p >= PASS_TAIL) - (1 - PASS_TAIL)) / (1 - PASS_TAIL)
    return PASS_LINEAR * (2 * p - 1) + (1 - PASS_LINEAR) * tail


def _against(faithful: np.ndarray, shifted: np.ndarray) -> np.ndarray:
    """p-values of `shifted` values (one per faithful seed) among the faithful seeds, ties halved."""
    below, equal = _counts(faithful, shifted)
    return (below + 0.5 * equal) / faithful.shape[1]


def bets(
    faithful: np.ndarray,
    sizing: np.ndarray,
    values: np.ndarray,
    delta: float,
    ties: np.ndarray,
) -> tuple[list[tuple[np.ndarray, np.ndarray]], list[tuple[np.ndarray, np.ndarray]]]:
    """The `(payoff, stakes)` bets against H0 and against H1 of run `values`
    `[rows, seeds]` held against `faithful` seeds `[rows, faithful]`, all
    on the unit scale, the run seeds' ties broken by `ties` (`[rows, seeds]`
    uniform draws independent of the values: `tie_breaks` of a real run's
    seeds, fresh draws in a simulation); the stakes sized on the `sizing`
    seeds `[rows, sizing]` alone, never ranked against (stakes.SIZING_SEEDS)."""
    grid = (np.arange(256) + 0.5) / 256
    share = np.clip(delta / np.maximum(sizing.mean(axis=1, keepdims=True), 1e-9), 0.0, 1.0)
    collapsed = np.where(grid[None, :] < share, 0.0, (grid[None, :] - share) / np.maximum(1 - share, 1e-9))
    linear_alternative, *_ = fail_payoffs(_against(sizing, sizing - delta))
    fail = [
        (payoff, kelly(alternative))
        for payoff, alternative in zip(
            fail_payoffs(conformal(faithful, values, ties)),
            [linear_alternative, *fail_payoffs(collapsed)[1:]],
            strict=True,
        )
    ]
    passing = pass_payoff(conformal(faithful, values + delta, ties))
    pass_stakes = kelly(pass_payoff(_against(sizing, sizing + delta)))
    return fail, [(passing, pass_stakes)]
