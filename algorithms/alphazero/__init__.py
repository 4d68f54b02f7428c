"""AlphaZero: self-play with tree search on the real environment, an
episode replay buffer, ranked rewards for single-player tasks, and
evaluation against fixed opponents and a pool of earlier parameters.

  buffer.py      the episode replay buffer
  ranked.py      ranked rewards
  search.py      tree search over the real env (mctx, or batched_search.py)
  state.py       the training state
  self_play.py   self-play: games, buffer rows, value targets
  training.py    the loss and the minibatch updates
  opponents.py   evaluation games, opponents, the Elo pool
  evaluation.py  `make_alphazero`'s evaluate: the agent against them
  config.py      its hyperparameters (`AlphaZeroConfig`)
  factory.py     `make_alphazero` and its registration as "alphazero"
"""

from algorithms.alphazero.buffer import Buffer, buffer_add, buffer_end_episodes, buffer_init, buffer_sample
from algorithms.alphazero.config import AlphaZeroConfig
from algorithms.alphazero.factory import make_alphazero
from algorithms.alphazero.opponents import elo_rating, start_games
from algorithms.alphazero.ranked import (
    RankedMemory,
    ranked_memory_add,
    ranked_memory_init,
    ranked_reward,
    ranked_threshold,
)
from algorithms.alphazero.search import Games, make_search
from algorithms.alphazero.state import AlphaZeroState

__all__ = [
    "AlphaZeroConfig",
    "AlphaZeroState",
    "Buffer",
    "Games",
    "RankedMemory",
    "buffer_add",
    "buffer_end_episodes",
    "buffer_init",
    "buffer_sample",
    "elo_rating",
    "make_alphazero",
    "make_search",
    "ranked_memory_add",
    "ranked_memory_init",
    "ranked_reward",
    "ranked_threshold",
    "start_games",
]
