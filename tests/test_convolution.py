"""`algorithms.convolution`: convolutions whose gradients XLA's CPU backend
runs natively inside loops, as AlphaZero's ResNet and the grid agents train
with them (`network: {conv_gradient: conv}`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from algorithms import convolution
from algorithms.networks import make_policy
from harness import envs
from harness.experiment_spec import NetworkSpec, ObservePreviousActionReward

NATIVE = "b01f_01io->b01f"  # NHWC input and output, HWIO kernel


def _convolution_labels(compiled_text: str) -> set[str]:
    return {line.split("dim_labels=")[1].split(",")[0] for line in compiled_text.splitlines() if "dim_labels=" in line}


def _jax_conv(padding):
    def conv(x, k):
        return jax.lax.conv_general_dilated(x, k, (1, 1), padding, dimension_numbers=convolution.NHWC)

    return conv


# 300: the kernel gradient in zero-padded pieces of 256.
@pytest.mark.parametrize("batch", [5, 300])
@pytest.mark.parametrize("padding,size", [("SAME", 3), ("VALID", 2)])
def test_gradients_are_jax_s_as_native_layout_convolutions(batch, padding, size):
    """The gradients equal JAX's own; taken in a loop, as every training
    step is, XLA's compiled program has only NHWC/HWIO convolutions (JAX's
    rules leave others there, which XLA's CPU backend runs as slow generic
    loops)."""
    x = jax.random.normal(jax.random.key(0), (batch, 6, 7, 8))
    kernel = jax.random.normal(jax.random.key(1), (size, size, 8, 4))

    def ours(x, k):
        return convolution.conv(x, k, padding)

    theirs = _jax_conv(padding)
    y, back = jax.vjp(ours, x, kernel)
    their_y, their_back = jax.vjp(theirs, x, kernel)
    np.testing.assert_array_equal(y, their_y)
    g = jax.random.normal(jax.random.key(2), y.shape)
    for a, b in zip(back(g), their_back(g), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-3)

    def in_a_loop(conv):
        def step(k, _):
            dx, dk = jax.vjp(conv, x, k)[1](g)
            return k - 1e-3 * dk, jnp.sum(dx)

        return jax.jit(lambda k: jax.lax.scan(step, k, None, length=2)).lower(kernel).compile().as_text()

    assert _convolution_labels(in_a_loop(ours)) == {NATIVE}
    assert _convolution_labels(in_a_loop(theirs)) - {NATIVE}  # what the test guards against


def test_the_grid_agent_s_two_gradient_forms_share_parameters_and_outputs():
    """`conv_gradient: conv` changes how the grid encoder is differentiated,
    nothing else: the same parameters from the same key, the same outputs
    bit for bit, the same gradients to float rounding, and only native
    convolutions in a training loop."""
    env, _ = envs.make(
        "xminigrid",
        "MiniGrid-Empty-6x6",
        wrappers=(ObservePreviousActionReward(name="observe_previous_action_reward"),),
    )
    obs = jax.vmap(env.reset)(jax.random.split(jax.random.key(0), 6))[1].observation.reshape(3, 2, 7, 7, 5)
    small = {"gru_size": 16, "hidden_sizes": (16,), "conv_channels": (8, 8), "embedding_size": 4}
    forms = {
        form: make_policy(NetworkSpec(kind="grid_gru", **small, **extra), env.num_actions, env.observation_shape)
        for form, extra in (("jax", {}), ("native", {"conv_gradient": "conv"}))
    }
    assert forms["native"].map_seeds and not forms["jax"].map_seeds  # seeds one after another
    params = {form: policy.init(jax.random.key(1), obs[0, 0]) for form, policy in forms.items()}
    jax.tree.map(np.testing.assert_array_equal, params["jax"], params["native"])
    carry, reset = forms["jax"].initial_carry((2,)), jnp.zeros((3, 2), bool)

    def outputs(policy):
        def unrolled(p):
            def step(c, inputs):
                c, logits, value = policy.apply(p, c, *inputs)
                return c, (logits, value)

            return jax.lax.scan(step, carry, (obs, reset))[1]

        return unrolled

    def loss(policy):
        return lambda p: sum(jnp.sum(jnp.sin(out)) for out in outputs(policy)(p))

    for a, b in zip(*(jax.jit(outputs(policy))(params["jax"]) for policy in forms.values()), strict=True):
        np.testing.assert_array_equal(a, b)
    grads = {form: jax.jit(jax.grad(loss(policy)))(params["jax"]) for form, policy in forms.items()}
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5), grads["jax"], grads["native"])
    text = jax.jit(jax.grad(loss(forms["native"]))).lower(params["jax"]).compile().as_text()
    assert _convolution_labels(text) == {NATIVE}
