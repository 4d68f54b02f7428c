"""The dense building blocks of the networks (flax.linen): a matmul whose
kernel gradient keeps the kernel's layout, dense layers initialised
orthogonally (or as flax's default), an MLP trunk and head, and flattening
of an observation. `algorithms.networks` and `algorithms.alphazero.networks`
build their networks from them."""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

ACTIVATIONS = {"tanh": nn.tanh, "relu": nn.relu}

# Output widths that XLA:CPU computes row by row the same whatever the number
# of rows (measured: multiples of 16; narrower outputs change kernels with the
# batch size). Exact layouts (`shards`) compute every dense layer this wide.
ROW_STABLE_WIDTH = 16


@jax.custom_vjp
def product(x: jax.Array, kernel: jax.Array) -> jax.Array:
    """`x @ kernel` (`[..., in] @ [in, out]`), whose kernel gradient is taken
    as `x^T g`, contracting the rows, so that it comes out `[in, out]` as the
    kernel is. JAX's own rule takes `(g^T x)^T`; XLA folds that transpose
    into the product, except under a `vmap` one wide (a run of one seed),
    where it stayed: a transposed copy of every weight gradient and
    optimizer updates reading it across rows. Measured on XLA:CPU with one
    seed: the Adam updates of 256-wide layers 2x slower, and the Brax
    inverted_pendulum spec 0.84x PureJaxRL's speed before, 1.00x after."""
    return x @ kernel


def _product_forward(x, kernel):
    return x @ kernel, (x, kernel)


def _product_backward(residuals, g):
    x, kernel = residuals
    rows = tuple(range(x.ndim - 1))
    dx = jax.lax.dot_general(g, kernel, (((g.ndim - 1,), (1,)), ((), ())))
    return dx, jax.lax.dot_general(x, g, ((rows, rows), ((), ())))


product.defvjp(_product_forward, _product_backward)


# A dense layer's (kernel, bias) initialisers, given the layer's gain:
# orthogonal kernels with that gain and zero biases (CleanRL, PureJaxRL), or
# flax's default lecun-normal kernels and biases uniform in [0, 0.05), the
# gain unused (gymnax-blines' MLPs, utils/models.py).
INITIALIZERS = {
    "orthogonal": lambda scale: (nn.initializers.orthogonal(scale), nn.initializers.zeros),
    "lecun": lambda scale: (nn.initializers.lecun_normal(), nn.initializers.uniform(0.05)),
}


class Dense(nn.Module):
    """`nn.Dense`'s parameters (names, shapes, initialisation) and outputs,
    through `product`. With `align` > 1 the product is taken `align`-wide:
    the kernel is padded with zero columns to a multiple of `align` outputs
    and the result sliced back, so that each row's outputs do not depend on
    how many rows there are (see ROW_STABLE_WIDTH)."""

    features: int
    scale: float
    align: int = 1
    initialization: str = "orthogonal"  # or "lecun" (INITIALIZERS)

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        kernel_init, bias_init = INITIALIZERS[self.initialization](self.scale)
        kernel = self.param("kernel", kernel_init, (x.shape[-1], self.features))
        bias = self.param("bias", bias_init, (self.features,))
        pad = -self.features % self.align
        if pad:
            kernel, bias = jnp.pad(kernel, ((0, 0), (0, pad))), jnp.pad(bias, (0, pad))
            return (product(x, kernel) + bias)[..., : self.features]
        return product(x, kernel) + bias


def dense(features: int, scale: float, align: int = 1, initialization: str = "orthogonal") -> nn.Module:
    """A dense layer, initialised as `initialization` says (by default orthogonally,
    with gain `scale`; `Dense`)."""
    return Dense(features, scale, align, initialization)


def trunk(
    x: jax.Array, hidden_sizes: Sequence[int], activation: str, align: int = 1, initialization: str = "orthogonal"
) -> jax.Array:
    """Dense layers (orthogonal with gain sqrt 2, or `initialization`) with
    `activation`, created in the calling module's scope (so their parameters
    are its Dense_0, ...)."""
    act = ACTIVATIONS[activation]
    for size in hidden_sizes:
        x = act(dense(size, np.sqrt(2.0), align, initialization)(x))
    return x


def flatten(obs: jax.Array, observation_ndim: int) -> jax.Array:
    """`[..., *observation_shape] -> [..., prod(observation_shape)]`."""
    return obs.reshape(*obs.shape[: obs.ndim - observation_ndim], -1)


class MLP(nn.Module):
    hidden_sizes: Sequence[int]
    activation: str
    out_features: int
    out_scale: float
    align: int = 1
    initialization: str = "orthogonal"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = trunk(x, self.hidden_sizes, self.activation, self.align, self.initialization)
        return dense(self.out_features, self.out_scale, self.align, self.initialization)(x)
