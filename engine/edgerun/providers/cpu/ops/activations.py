"""Activation kernels written by hand: in place or with fewer buffers than their formula in
ir/unary_ops.py, falling back to that formula (unary.apply) for the other dtypes; the other
activations are the table's rows, registered by unary.py. And PRelu, which has two inputs.

Relu (opset 14+) and PRelu (16+) also accept integer tensors and keep their dtype.
"""
from __future__ import annotations

import numpy as np

from ..registry import kernel
from .clamp import clip_to, maximum_of, minimum_of
from .elementwise import float_math, is_float
from .erf import erf, gelu_erf
from .unary import apply, in_dtype
from ..native import conv as native_conv


# exp(-x) of arguments up to these stays finite (exp(88) < 3.4e38): clamping there costs
# one cheap operation where a numpy errstate context costs several
_EXP_LIMIT: dict = {np.dtype(np.float32): np.float32(88.0), np.dtype(np.float64): np.float64(709.0)}
_SMALL = 512


def sigmoid_fresh(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)) of float32/float64 x in one fresh buffer, exp's argument clamped so
    that it never overflows (the result there is below 1e-38 either way)."""
    if x.size <= _SMALL:         # numpy's out= costs more than the allocation it saves
        return 1 / (1 + np.exp(-np.maximum(x, -_EXP_LIMIT[x.dtype])))
    y = np.negative(x)
    minimum_of(y, _EXP_LIMIT[x.dtype], out=y)
    np.exp(y, out=y)
    y += 1
    return np.reciprocal(y, out=y)


def _is_float32_or_64(x: np.ndarray) -> bool:
    return x.dtype == np.float32 or x.dtype == np.float64


@kernel("Relu")
def relu(ctx, x, **_legacy):
    return maximum_of(x, 0)


def leaky_relu_of(x: np.ndarray, alpha: float, out=None):
    """LeakyRelu of float32/float64 x (x where x >= 0, else alpha * x), or None where alpha
    is not positive. max(x, alpha * x) for alpha <= 1, min for alpha > 1: the same values
    bit for bit (-0.0, NaN and infinities included) in two vectorised passes; a masked
    multiply (where=x < 0) runs about ten times slower. `out` may be x."""
    if not alpha > 0:          # 0 * inf is NaN where x is kept; a negative alpha flips order
        return None
    scaled = np.multiply(x, x.dtype.type(alpha))
    pick = np.maximum if alpha <= 1 else np.minimum
    return pick(x, scaled, out=scaled if out is None else out)


@kernel("LeakyRelu")
def leaky_relu(ctx, x, alpha=0.01, **_legacy):
    y = native_conv.activated(x, "LeakyRelu", [alpha])     # the same bits in one pass
    if y is not None:
        return y
    if _is_float32_or_64(x):
        y = leaky_relu_of(x, alpha)
        if y is not None:
            return y
    return apply("LeakyRelu", x, [alpha])


@kernel("PRelu")
def prelu(ctx, x, slope, **_legacy):
    """slope broadcasts to x (unidirectionally from opset 7)."""
    if is_float(x.dtype):
        return float_math(lambda v: np.where(v >= 0, v, v * slope.astype(v.dtype)), x)
    return np.where(x >= 0, x, x * slope).astype(x.dtype)


@kernel("Sigmoid")
def sigmoid(ctx, x, **_legacy):
    if _is_float32_or_64(x):
        return sigmoid_fresh(x)
    return apply("Sigmoid", x)


@kernel("HardSwish")
def hard_swish(ctx, x):
    y = native_conv.activated(x, "HardSwish")       # the same bits in one pass
    if y is not None:
        return y
    if x.ndim and (x.dtype == np.float32 or x.dtype == np.float64):   # one buffer, in place
        y = np.multiply(x, x.dtype.type(1 / 6))
        y += x.dtype.type(0.5)
        clip_to(y, 0, 1, out=y)
        y *= x
        return y
    return apply("HardSwish", x)


_SQRT_2_OVER_PI = (2 / np.pi) ** 0.5      # Python floats: a numpy float64 would promote float32
_SQRT_HALF = 0.5 ** 0.5


def _gelu_in_place(x: np.ndarray) -> np.ndarray:
    """0.5 * x * (1 + erf(x / sqrt(2))) for float32/float64 x, in one fresh buffer."""
    y = erf(np.multiply(x, x.dtype.type(_SQRT_HALF)))
    y += x.dtype.type(1)
    y *= x
    y *= x.dtype.type(0.5)
    return y


@kernel("Gelu")
def gelu(ctx, x, approximate="none"):
    if approximate == "none":
        if x.dtype == np.float32:
            return gelu_erf(x)
        if x.ndim and x.dtype == np.float64:
            return _gelu_in_place(x)
        if x.dtype == np.float16:                  # float16 models: computed in float32
            return gelu_erf(x.astype(np.float32)).astype(np.float16)
        return apply("Gelu", x)
    if approximate == "tanh":
        return in_dtype(
            lambda v: 0.5 * v * (1 + np.tanh(_SQRT_2_OVER_PI * (v + 0.044715 * v * v * v))), x)
    raise ValueError(f"Gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


@kernel("Tanh")
def tanh(ctx, x, **_legacy):
    if _is_float32_or_64(x):
        return np.tanh(x)                        # bounded: never warns
    return apply("Tanh", x)
