"""The harness lowers threefry straight-line on CPU on jaxlib 0.10, JAX's
rolled loop on newer ones (harness.run.lowering): the same bits either way,
so no result depends on it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax._src.lib import version as jaxlib_version

from harness.run import lowering, runner  # noqa: F401  (runner registers it)


def _draws():
    def draws(key):
        a, b, c = jax.random.split(key, 3)
        return (
            jax.random.key_data(jax.random.split(a, 7)),
            jax.random.bits(b, (1000,)),
            jax.random.permutation(c, 512),
            jax.random.categorical(a, jnp.linspace(-1.0, 1.0, 6), shape=(300,)),
            jax.random.normal(jax.random.fold_in(b, 3), (64, 5)),
        )

    # A fresh function each time: jit caches what it lowered by function.
    return [np.asarray(x) for x in jax.jit(lambda k: draws(k))(jax.random.key(42))]


def test_straight_line_threefry_gives_jax_s_own_bits():
    ours = _draws()
    with lowering.jax_default_threefry():
        jax_own = _draws()
    for a, b in zip(ours, jax_own, strict=True):
        np.testing.assert_array_equal(a, b)


def test_the_harness_lowers_threefry_without_a_loop_on_cpu_up_to_jaxlib_0_10():
    def hlo() -> str:
        return jax.jit(lambda k: jax.random.bits(k, (8,))).lower(jax.random.key(0)).as_text()

    with lowering.jax_default_threefry():
        jax_own = hlo()
    on_cpu = jax.default_backend() == "cpu"  # elsewhere JAX has no loop either
    assert ("while" in jax_own) == on_cpu
    assert ("while" in hlo()) == (on_cpu and not lowering.straight_line())
    assert lowering.straight_line() == (tuple(jaxlib_version[:2]) <= (0, 10))
