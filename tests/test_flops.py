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


def test_a_shard_map_body_counts_once_per_device():
    from jax.sharding import AbstractMesh
    from jax.sharding import PartitionSpec as P

    a, b = jnp.ones((8, 16)), jnp.ones((16, 4))
    mapped = jax.shard_map(lambda x: x @ b, mesh=AbstractMesh((2,), ("x",)), in_specs=P("x"), out_specs=P("x"))
    assert count_flops(mapped, a).matmul == count_flops(jnp.dot, a, b).matmul == 2 * 8 * 16 * 4


def test_an_iteration_counted_from_the_compiled_chunk_is_its_step_over_the_seeds():
    from harness.run import flops, runner
    from harness.run.programs import Programs

    w = jnp.ones((16, 16))

    def step(state):
        return jnp.tanh(state @ w), {"norm": jnp.sum(state)}

    state = jnp.ones((3, 8, 16))  # 3 seeds
    programs = Programs(keep_traces=True)
    runner.compile_chunk(step, 5, state, programs=programs)
    assert list(programs.chunk_traces) == [5]
    assert flops.per_iteration(programs.chunk_traces[5], 5) == count_flops(jax.vmap(step), state)
