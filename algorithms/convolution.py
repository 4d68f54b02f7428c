"""A 2-D convolution whose gradients are convolutions in the layouts XLA's
CPU backend runs natively (`conv`), for the networks that train with
convolutions: AlphaZero's ResNet (`network: {conv_gradient: conv}`) and
the grid agents' encoder (the same option).

JAX's own transpose rules give convolutions with other dimension labels
(the kernel's in/out swapped, the batch contracted). In the entry
computation XLA's CPU backend moves their operands into its native layouts;
inside a loop (every training step is in one) it cannot, and runs them as
slow generic loops: 0.45 s for the input gradient of 4,096 connect_four
positions x 32 channels, against 0.01 s in the native form. Here the input
gradient is a convolution with the flipped kernel, and the kernel gradient
one of the input, channels as its batch and positions as its features, by
the output gradient as the kernel, over pieces of `KERNEL_GRADIENT_CHUNK`
positions (zero-padded; zeros add nothing) summed in order: whole, that
convolution's operands leave the cache. The gradients equal JAX's to float
rounding, not bit for bit. Under a `vmap` whose kernels differ (seeds'
parameters) the convolutions become grouped ones, as JAX's would.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

NHWC = ("NHWC", "HWIO", "NHWC")  # the layouts XLA's CPU convolution runs natively
KERNEL_GRADIENT_CHUNK = 256  # positions per piece of the kernel gradient

Padding = tuple[tuple[int, int], tuple[int, int]]


def _conv(x: jax.Array, kernel: jax.Array, padding: str | Padding) -> jax.Array:
    return jax.lax.conv_general_dilated(x, kernel, (1, 1), padding, dimension_numbers=NHWC)


def _explicit(padding: str, kernel_shape: tuple[int, ...]) -> Padding:
    """'SAME' (odd kernels) or 'VALID' as the (before, after) of each spatial axis."""
    if padding == "VALID":
        return ((0, 0), (0, 0))
    if padding == "SAME" and all(size % 2 for size in kernel_shape[:2]):
        return tuple((size // 2, size // 2) for size in kernel_shape[:2])
    raise ValueError(f"padding {padding!r} with a {kernel_shape[0]}x{kernel_shape[1]} kernel")


def _kernel_gradient(x: jax.Array, g: jax.Array, padding: Padding) -> jax.Array:
    """`d(conv(x, k) . g)/dk` for one piece of the batch:
    `[N, H, W, C]`, `[N, H', W', D]` -> `[KH, KW, C, D]`."""
    by_channel = jnp.transpose(x, (3, 1, 2, 0))  # [C, H, W, N]
    as_kernel = jnp.transpose(g, (1, 2, 0, 3))  # [H', W', N, D]
    return jnp.transpose(_conv(by_channel, as_kernel, padding), (1, 2, 0, 3))


@partial(jax.custom_vjp, nondiff_argnums=(2,))
def conv(x: jax.Array, kernel: jax.Array, padding: str) -> jax.Array:
    """A stride-1 convolution `[N, H, W, C] x [KH, KW, C, D] -> [N, H', W', D]`,
    `padding` 'SAME' (odd kernels) or 'VALID', whose gradients are
    NHWC/HWIO convolutions too (the module's docstring)."""
    return _conv(x, kernel, padding)


def _forward(x: jax.Array, kernel: jax.Array, padding: str):
    return _conv(x, kernel, padding), (x, kernel)


def _backward(padding: str, saved, g: jax.Array):
    x, kernel = saved
    pads = _explicit(padding, kernel.shape)
    flipped = jnp.swapaxes(jnp.flip(kernel, (0, 1)), 2, 3)
    back = tuple((size - 1 - low, size - 1 - high) for size, (low, high) in zip(kernel.shape[:2], pads, strict=True))
    dx = _conv(g, flipped, back)
    n = x.shape[0]
    if n <= KERNEL_GRADIENT_CHUNK:
        return dx, _kernel_gradient(x, g, pads)
    pieces = -(-n // KERNEL_GRADIENT_CHUNK)

    def split(a):
        pad = ((0, pieces * KERNEL_GRADIENT_CHUNK - n),) + ((0, 0),) * (a.ndim - 1)
        return jnp.pad(a, pad).reshape(pieces, KERNEL_GRADIENT_CHUNK, *a.shape[1:])

    def add(total, piece):
        return total + _kernel_gradient(*piece, pads), None

    dk, _ = jax.lax.scan(add, jnp.zeros_like(kernel), (split(x), split(g)))
    return dx, dk


conv.defvjp(_forward, _backward)
