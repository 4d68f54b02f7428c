"""Where a peer's code, unchanged, meets the project's pinned versions: shims
applied only around its import or its tracing, each giving the computation
the peer means (see `benchmarks.machinery.peers` for which peer needs which)."""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator
from typing import Any

import jax


class _FiveTupleStep:
    """A gymnax env whose `step` returns the pre-1.0 five values."""

    def __init__(self, env: Any):
        self._env = env

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    def step(self, key, state, action, params=None):
        obs, state, reward, terminated, truncated, info = self._env.step(key, state, action, params)
        return obs, state, reward, terminated | truncated, info


class GymnaxShim:
    """The `gymnax` module as PureJaxRL's ppo.py sees it."""

    def __init__(self, gymnax: types.ModuleType):
        self._gymnax = gymnax

    def __getattr__(self, name: str) -> Any:
        return getattr(self._gymnax, name)

    def make(self, *args, **kwargs):
        env, params = self._gymnax.make(*args, **kwargs)
        return _FiveTupleStep(env), params


@contextlib.contextmanager
def one_qr_at_a_time() -> Iterator[None]:
    """While a peer's program is traced in the block: random orthogonal
    matrices (the orthogonal initialisers') drawn under a `vmap` one after
    another (`jax.custom_batching.sequential_vmap`), not as one batched QR.
    PureJaxRL's `train` initialises its network inside the seed-vmapped
    program; jaxlib's batched CPU QR parallelises inside XLA's thread pool
    and deadlocked it (jaxlib 0.10.2, 2 cores: 5 of 6 processes hung within
    8 calls of the 16-seed CartPole program, none of 6 with this). The values
    are the same (checked bit for bit on its layer shapes); the harness's
    own runner initialises seeds one at a time for the same reason."""
    from jax._src import random as jax_random

    original = jax_random.orthogonal

    def orthogonal(key, n, shape=(), dtype=float, m=None):
        return jax.custom_batching.sequential_vmap(lambda k: original(k, n, shape, dtype, m))(key)

    jax_random.orthogonal = orthogonal
    try:
        yield
    finally:
        jax_random.orthogonal = original


@contextlib.contextmanager
def array_defaults_through_factories() -> Iterator[None]:
    """While a peer's modules are imported in the block: a `flax.struct`
    dataclass field whose default is a JAX array gets that same array from a
    `default_factory`, since Python 3.11+ refuses an unhashable default."""
    import dataclasses

    import flax.struct

    original = flax.struct.dataclass

    def dataclass(cls, **kwargs):
        for name in getattr(cls, "__annotations__", {}):
            value = cls.__dict__.get(name)
            if isinstance(value, jax.Array):
                setattr(cls, name, dataclasses.field(default_factory=lambda value=value: value))
        return original(cls, **kwargs)

    flax.struct.dataclass = dataclass
    try:
        yield
    finally:
        flax.struct.dataclass = original
