"""Tic-tac-toe solved: the game-theoretic value of every move in every
reachable position, by minimax, once (a few hundred milliseconds in numpy,
cached for the process), and looked up in JAX from a pgx state.

A position is coded from the mover's side, so one table serves both
colours: cell i counts `3**i` times 0 (empty), 1 (the mover's mark) or 2
(the other's). `VALUES[code, a]` is the value of move `a` for the mover
under perfect play from then on: +1 a win, 0 a draw, -1 a loss, and
`ILLEGAL` where the cell is taken or the game is over. 5,478 positions are
reachable from the empty board (4,520 with a move to make); the empty
board is a draw.

`move_values(state) -> [9]` reads a pgx `tic_tac_toe` state (its board:
-1 empty, 0 and 1 the colours' marks, `color` the mover's).
"""

from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np

CELLS = 9
CODES = 3**CELLS
ILLEGAL = -2
LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
_POWERS = 3 ** np.arange(CELLS)


def code_of(cells) -> int:
    """The code of a position from the mover's side: cells 0, 1 (mover) or 2."""
    return int(np.dot(np.asarray(cells), _POWERS))


def _won(cells: tuple[int, ...], mark: int) -> bool:
    return any(all(cells[i] == mark for i in line) for line in LINES)


@functools.cache
def solve() -> tuple[np.ndarray, np.ndarray]:
    """`(values [CODES, 9] int8, reachable [CODES] bool)`: every move's
    value for the mover, and which positions occur in a game from the
    empty board (reachable ones that are over have no legal move)."""
    values = np.full((CODES, CELLS), ILLEGAL, dtype=np.int8)
    reachable = np.zeros(CODES, dtype=bool)

    @functools.cache
    def value(cells: tuple[int, ...]) -> int:
        """The value of the position for the mover (the last mover was the other: mark 2)."""
        code = code_of(cells)
        reachable[code] = True
        if _won(cells, 2):
            return -1
        empty = [i for i, c in enumerate(cells) if c == 0]
        if not empty:
            return 0
        best = -1
        for move in empty:
            after = list(cells)
            after[move] = 1
            # The other side moves next: swap the marks, so that it is "the mover" there.
            swapped = tuple((0, 2, 1)[c] for c in after)
            outcome = -value(swapped)
            values[code, move] = outcome
            best = max(best, outcome)
        return best

    value((0,) * CELLS)
    values.setflags(write=False)
    reachable.setflags(write=False)
    return values, reachable


def move_values(state) -> jnp.ndarray:
    """`[9]` int32: each move's value for the mover of pgx tic_tac_toe state `state` (ILLEGAL where not legal)."""
    values, _ = solve()
    board = state._x.board
    mover = state._x.color
    cells = jnp.where(board < 0, 0, jnp.where(board == mover, 1, 2))
    code = jnp.dot(cells, jnp.asarray(_POWERS, jnp.int32))
    return jnp.asarray(values, jnp.int32)[code]


@functools.cache
def _position_boards() -> tuple[np.ndarray, np.ndarray]:
    """Every reachable position with a move to make, as pgx boards `[P, 9]`
    (-1 empty, 0 X's mark, 1 O's) and the colour to move `[P]`: X moves
    when the marks are even."""
    values, reachable = solve()
    codes = np.flatnonzero(reachable & (values.max(axis=1) > ILLEGAL))
    cells = (codes[:, None] // _POWERS) % 3  # 0 empty, 1 the mover's, 2 the other's
    mover = ((cells == 1).sum(axis=1) > (cells == 2).sum(axis=1)).astype(np.int32)  # 1: O moves
    board = np.where(cells == 0, -1, np.where(cells == 1, mover[:, None], 1 - mover[:, None]))
    return board.astype(np.int32), mover


def positions(env, timestep):
    """`(states, timesteps)` of every reachable tic-tac-toe position with a
    move to make (4,520), batched, from pgx's `env` and the adapter's
    `timestep(state, reward, terminated, truncated)`."""
    import jax

    boards, movers = _position_boards()

    def one(board, color):
        state = env.init(jax.random.PRNGKey(0))
        x = state._x._replace(board=board, color=color, winner=jnp.int32(-1))
        state = state.replace(current_player=jnp.int32(0), _x=x, legal_action_mask=board < 0)
        state = state.replace(observation=env.observe(state, state.current_player))
        return state, timestep(state, jnp.zeros(2, jnp.float32), False, False)

    return jax.vmap(one)(jnp.asarray(boards), jnp.asarray(movers))
