import jax
import jax.numpy as jnp

from harness.run.flops import count_flops


def test_matmul_flops_are_two_per_multiply_add():
    a, b = jnp.ones((8, 16)), jnp.ones((16, 32))
    assert count_flops(jnp.dot, a, b).matmul == 2 * 8 * 16 * 32


def test_scans_multiply_their_body_by_the_trip_count():
    a, b = jnp.ones((8, 16)), jnp.ones((16, 16))

    def inner(x):
        return jax.lax.scan(lambda c, _: (c @ b, None), x, None, length=5)[0]

    def outer(x):
        return jax.lax.scan(lambda c, _: (inner(c), None), x, None, length=3)[0]

    count = count_flops(jax.jit(outer), a)
    assert count.matmul == 3 * 5 * 2 * 8 * 16 * 16
    assert count.unbounded_loops == 0


def test_batched_and_vmapped_matmuls():
    a, b = jnp.ones((4, 8, 16)), jnp.ones((4, 16, 2))
    assert count_flops(jax.vmap(jnp.dot), a, b).matmul == 4 * 2 * 8 * 16 * 2


def test_bytes_count_what_each_primitive_reads_and_writes():
    a, b = jnp.ones((8, 16)), jnp.ones((16, 32))
    count = count_flops(lambda a, b: jnp.tanh(a @ b), a, b)
    matmul_bytes = (8 * 16 + 16 * 32 + 8 * 32) * 4
    tanh_bytes = 2 * 8 * 32 * 4
    assert count.bytes == matmul_bytes + tanh_bytes
