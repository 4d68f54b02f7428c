"""The stakes a test bets, each sized from what is known before the seed it
is staked on, so that Ville's inequality holds as a theorem.

A gambler's wealth is a nonnegative supermartingale under the hypothesis
tested, and reaches `1/a` with probability at most `a`, when each seed's
payoff is fair *given everything before it* and the stake on it is fixed
before it (predictable). A stake sized on the values it then bets on (the
faithful seeds a run's seeds are paired with, or ranked among) is not
predictable: a pool whose seeds happen to sit high sizes stakes that suit
the run it is about to meet. So:

- **a paired test** sizes pair `i`'s stakes and scale on the pairs before
  it (`earlier_spread`, `earlier_rate`): pair `i`'s difference is
  independent of them, so its payoff stays fair given them;
- **a test by ranks** sizes its stakes on the first `SIZING_SEEDS` faithful
  seeds and ranks the run's seeds among the others only (the sizing seeds
  are never ranked against);
- **a test against a stated number** sizes them on faithful seeds it never
  bets on.

Each stake is Kelly's (the stake that grows the mean log-wealth most, by
bisection) for a run at the other hypothesis, times each of `STAKES` (an
average of e-processes is one, so a stake sized for the wrong spread costs
a little evidence, never validity), at most `MAX_LOSS`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

# The stakes, as multiples of the Kelly stake: one sized right, one for twice the spread, one for half.
STAKES = (0.5, 1.0, 2.0)
# The most of its wealth a bet may lose on one seed at the worst value: a bet never goes broke.
MAX_LOSS = 0.9
# The pairs a paired test sizes its stakes on a spread of delta / 2 before it measures one.
FIRST_PAIRS = 2
# The faithful seeds a test by ranks sizes its stakes on, apart from the seeds it ranks against.
SIZING_SEEDS = 16
# The points a stake is computed at between which a pair's stake is read off (linearly).
GRID = 257


def kelly(payoffs: np.ndarray, multiples: tuple[float, ...] = STAKES, max_loss: float = MAX_LOSS) -> np.ndarray:
    """Stakes `[rows, stakes]`: `multiples` of the stake that grows the mean
    log-wealth most over the sampled `payoffs` `[rows, samples]` (each at
    least -1), at most `max_loss`. The growth is concave in the stake: its
    slope is halved down to the top."""
    low = np.zeros(payoffs.shape[0])
    high = np.full(payoffs.shape[0], max_loss)
    for _ in range(40):
        middle = (low + high) / 2
        rising = (payoffs / (1 + middle[:, None] * payoffs)).mean(axis=1) > 0
        low, high = np.where(rising, middle, low), np.where(rising, high, middle)
    return np.clip(low[:, None] * np.asarray(multiples), 0.0, max_loss)


def earlier_spread(faithful: np.ndarray, run: np.ndarray, delta: float) -> np.ndarray:
    """The spread `[rows, pairs]` a paired test sizes pair `i` on: a seed's
    spread about its side's mean over the pairs before it (`faithful` and
    `run` values `[rows, pairs]`, in pairing order; independent of pair `i`
    under either hypothesis), at least `delta / 4` (seeds that all agree do
    not prove the next one will); before two pairs, `delta / 2`."""
    before = np.arange(faithful.shape[1])  # the pairs before each pair

    def deviations(side):  # each side's squared deviations about its own mean, over the pairs before
        total, squares = before_sum(side), before_sum(side**2)
        return np.maximum(squares - total**2 / np.maximum(before, 1), 0.0)

    freedom = np.maximum(2 * (before - 1), 1)
    spread = np.sqrt((deviations(faithful) + deviations(run)) / freedom)
    return np.where(before >= FIRST_PAIRS, np.maximum(spread, delta / 4), delta / 2)


def earlier_rate(faithful: np.ndarray) -> np.ndarray:
    """The faithful rate `[rows, pairs]` a paired test of a share sizes
    pair `i` on: of the faithful seeds (0 or 1) of the pairs before it, with
    one seed of each kind before the first (Laplace's rule)."""
    return (before_sum(faithful) + 1) / (np.arange(faithful.shape[1]) + 2)


def before_sum(values: np.ndarray) -> np.ndarray:
    """Each position's sum of the values before it, `[rows, pairs]` (not a
    sum less its own value: that would carry the value in its last bits)."""
    return np.pad(np.cumsum(values, axis=1)[:, :-1], ((0, 0), (1, 0)))


def read_off(stakes_at: Callable[[np.ndarray], np.ndarray], grid: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Stakes `[rows, stakes, pairs]` at `points` `[rows, pairs]` (a spread
    or a rate, one per pair), read off linearly between `stakes_at(grid)`
    (`[len(grid), stakes]`): any stake fixed before its pair keeps the
    bet fair, so reading it off costs at most a little growth."""
    table = stakes_at(grid)
    read = np.stack([np.interp(points, grid, table[:, column]) for column in range(table.shape[1])], axis=1)
    return np.clip(read, 0.0, MAX_LOSS)
