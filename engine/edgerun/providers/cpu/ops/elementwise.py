"""Element-wise operators: unary math, arithmetic, comparison, logic, bitwise, Where, Clip.

Every result keeps the dtype the spec gives it: the input type for math (float16 stays
float16, int8 stays int8), bool for comparisons and logic. Types numpy has no arithmetic for
(bfloat16, float8, ... from ml_dtypes) are computed in float32 and rounded back once.

Opsets 1-6 of the binary operators broadcast with the legacy `broadcast`/`axis` attributes;
`align_legacy_broadcast` turns that form into numpy broadcasting.
"""
from __future__ import annotations

import functools

import numpy as np

from ..native import elementwise as native_elementwise
from ..native.parallel import MIN_RECORD_VALUES
from ..registry import kernel
from .clamp import maximum_of, minimum_of
from .float_errors import ignored_float_errors

# ---- shared helpers (activations.py, reduction.py and softmax.py use these too) -----------


def is_ml_float(dtype) -> bool:
    """bfloat16, float8*, float4*, float6*: ml_dtypes floats, which numpy sees as kind 'V'."""
    dtype = np.dtype(dtype)
    return dtype.kind == "V" and (dtype.name.startswith("float") or dtype.name == "bfloat16")


def is_float(dtype) -> bool:
    return np.dtype(dtype).kind == "f" or is_ml_float(dtype)


def widened(x: np.ndarray) -> np.ndarray:
    """x in a dtype numpy computes in accurately: float32 for float16 and ml_dtypes floats."""
    if x.dtype == np.float16 or is_ml_float(x.dtype):
        return x.astype(np.float32)
    return x


def float_math(fn, x: np.ndarray) -> np.ndarray:
    """fn(x) computed in at least float32 precision, returned in x's dtype.

    Composite formulas (sigmoid, erf, softplus, ...) round once at the end instead of
    after every step when x is float16 or an ml_dtypes float.
    """
    with ignored_float_errors():
        return np.asarray(fn(widened(x))).astype(x.dtype, copy=False)


def align_legacy_broadcast(a: np.ndarray, b: np.ndarray, broadcast: int, axis) -> np.ndarray:
    """B reshaped so numpy broadcasting matches opset-1..6 semantics.

    With broadcast=1 and `axis`, B's shape is a contiguous run of A's shape starting at axis;
    without axis it is a suffix of A's shape, which is already what numpy does.
    """
    if not broadcast or axis is None or b.ndim == 0:
        return b
    axis = axis + a.ndim if axis < 0 else axis
    trailing = a.ndim - axis - b.ndim
    if trailing < 0:
        raise ValueError(f"legacy broadcast: B of shape {b.shape} does not fit A of shape "
                         f"{a.shape} at axis {axis}")
    return b.reshape(b.shape + (1,) * trailing)


def _same_dtype(result, like: np.ndarray) -> np.ndarray:
    return np.asarray(result).astype(like.dtype, copy=False)


# ---- unary math: ir/unary_ops.py's rows (unary.py); the ones that are not formulas ---------


@kernel("IsNaN")
def isnan(ctx, x):
    return np.isnan(widened(x))


@kernel("IsInf")
def isinf(ctx, x, detect_negative=1, detect_positive=1):
    x = widened(x)
    if detect_negative and detect_positive:
        return np.isinf(x)
    if detect_positive:
        return np.isposinf(x)
    if detect_negative:
        return np.isneginf(x)
    return np.zeros(x.shape, dtype=bool)


@kernel("Identity")
def identity(ctx, x):
    """Tensors, sequences and optionals pass through unchanged (kernels never write inputs)."""
    return x


# ---- binary arithmetic ---------------------------------------------------------------------

SPLIT_VALUES = 2 * MIN_RECORD_VALUES      # the least a split_binary can split in two


def _arithmetic(fn, a, b, broadcast=0, axis=None):
    """fn(a, b) in a's dtype, ml_dtypes floats computed in float32."""
    if a.dtype == b.dtype and a.dtype.kind == "f" and not broadcast:
        if a.size >= SPLIT_VALUES or b.size >= SPLIT_VALUES:  # float32 on several threads
            y = native_elementwise.split_binary(fn, a, b)
            if y is not None:
                return y
        return fn(a, b)       # the common case, kept cheap: same float dtype, numpy rules
    b = align_legacy_broadcast(a, b, broadcast, axis)
    with ignored_float_errors():
        if is_ml_float(a.dtype):
            return _same_dtype(fn(widened(a), widened(b)), a)
        return _same_dtype(fn(a, b), a)


@kernel("Add")
def add(ctx, a, b, broadcast=0, axis=None, **_legacy):
    return _arithmetic(np.add, a, b, broadcast, axis)


@kernel("Sub")
def sub(ctx, a, b, broadcast=0, axis=None, **_legacy):
    return _arithmetic(np.subtract, a, b, broadcast, axis)


@kernel("Mul")
def mul(ctx, a, b, broadcast=0, axis=None, **_legacy):
    return _arithmetic(np.multiply, a, b, broadcast, axis)


def truncating_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division rounding toward zero (C semantics), not numpy's floor."""
    q = np.floor_divide(a, b)
    if np.dtype(a.dtype).kind == "u" and np.dtype(b.dtype).kind == "u":
        return q
    inexact = np.remainder(a, b) != 0
    signs_differ = (a < 0) != (b < 0)
    return q + (inexact & signs_differ).astype(q.dtype)


@kernel("Div")
def div(ctx, a, b, broadcast=0, axis=None, **_legacy):
    if a.dtype.kind in "iu":
        return _arithmetic(truncating_divide, a, b, broadcast, axis)
    return _arithmetic(np.divide, a, b, broadcast, axis)


@kernel("Pow")
def pow_(ctx, x, y, broadcast=0, axis=None):
    """x ** y in x's dtype; y may have another type (opset 12+)."""
    if y.size == 1 and y.ndim <= x.ndim and x.dtype.kind == "f" and x.dtype.itemsize >= 4 \
            and y.dtype.kind in "fiu" and y.reshape(-1)[0] == 2:
        return np.multiply(x, x)       # squaring (variances, norms): exact in x's dtype
    y = align_legacy_broadcast(x, y, broadcast, axis)
    with ignored_float_errors():
        if x.dtype.kind in "iu":
            if y.dtype.kind in "iu" and not np.any(y < 0):
                return _same_dtype(np.power(x, y.astype(x.dtype)), x)
            # Negative or fractional exponents: C pow in double, truncated back to the integer.
            return _same_dtype(np.power(x.astype(np.float64), y.astype(np.float64)), x)
        base = widened(x)
        exponent = y.astype(base.dtype) if y.dtype.kind in "iub" else widened(y)
        if exponent.dtype.itemsize > base.dtype.itemsize:
            base = base.astype(exponent.dtype)
        return _same_dtype(np.power(base, exponent), x)


@kernel("Mod")
def mod(ctx, a, b, fmod=0):
    """fmod=0: result takes B's sign (Python %); fmod=1: takes A's sign (C fmod)."""
    if fmod not in (0, 1):
        raise ValueError(f"Mod: fmod must be 0 or 1, got {fmod}")
    return _arithmetic(np.fmod if fmod else np.mod, a, b)


# ---- variadic ----------------------------------------------------------------------------------


def _variadic(fn, inputs) -> np.ndarray:
    inputs = [x for x in inputs if x is not None]
    if not inputs:
        raise ValueError("expected at least one input")
    first = inputs[0]
    with ignored_float_errors():
        if is_ml_float(first.dtype):
            inputs = [widened(x) for x in inputs]
        return _same_dtype(functools.reduce(fn, inputs), first)


@kernel("Max")
def max_(ctx, *inputs, **_legacy):
    return _variadic(np.maximum, inputs)


@kernel("Min")
def min_(ctx, *inputs, **_legacy):
    return _variadic(np.minimum, inputs)


@kernel("Sum")
def sum_(ctx, *inputs, **_legacy):
    return _variadic(np.add, inputs)


@kernel("Mean")
def mean(ctx, *inputs, **_legacy):
    inputs = [x for x in inputs if x is not None]
    total = _variadic(np.add, inputs)
    return float_math(lambda t: t / len(inputs), total)


# ---- comparison and logic ------------------------------------------------------------------


def _compare(fn, a, b, broadcast=0, axis=None) -> np.ndarray:
    b = align_legacy_broadcast(a, b, broadcast, axis)
    if is_ml_float(a.dtype) or is_ml_float(b.dtype):
        a, b = widened(a), widened(b)
    return np.asarray(fn(a, b), dtype=bool)


@kernel("Equal")
def equal(ctx, a, b, broadcast=0, axis=None):
    return _compare(np.equal, a, b, broadcast, axis)


@kernel("Less")
def less(ctx, a, b, broadcast=0, axis=None):
    return _compare(np.less, a, b, broadcast, axis)


@kernel("Greater")
def greater(ctx, a, b, broadcast=0, axis=None):
    return _compare(np.greater, a, b, broadcast, axis)


@kernel("LessOrEqual")
def less_or_equal(ctx, a, b):
    return _compare(np.less_equal, a, b)


@kernel("GreaterOrEqual")
def greater_or_equal(ctx, a, b):
    return _compare(np.greater_equal, a, b)


@kernel("And")
def and_(ctx, a, b, broadcast=0, axis=None):
    return _compare(np.logical_and, a, b, broadcast, axis)


@kernel("Or")
def or_(ctx, a, b, broadcast=0, axis=None):
    return _compare(np.logical_or, a, b, broadcast, axis)


@kernel("Xor")
def xor(ctx, a, b, broadcast=0, axis=None):
    return _compare(np.logical_xor, a, b, broadcast, axis)


@kernel("Not")
def not_(ctx, x):
    return np.logical_not(x)


# ---- bitwise -------------------------------------------------------------------------------


@kernel("BitwiseAnd", since=18)
def bitwise_and(ctx, a, b):
    return _same_dtype(np.bitwise_and(a, b), a)


@kernel("BitwiseOr", since=18)
def bitwise_or(ctx, a, b):
    return _same_dtype(np.bitwise_or(a, b), a)


@kernel("BitwiseXor", since=18)
def bitwise_xor(ctx, a, b):
    return _same_dtype(np.bitwise_xor(a, b), a)


@kernel("BitwiseNot", since=18)
def bitwise_not(ctx, x):
    return np.invert(x)


@kernel("BitShift", since=11)
def bit_shift(ctx, x, y, direction=""):
    """Shifts by a negative amount or by >= the bit width give 0 (-1 for a negative X
    shifted right), as opset 28 specifies; numpy (like C) leaves those undefined."""
    if direction not in ("LEFT", "RIGHT"):
        raise ValueError(f"BitShift: direction must be 'LEFT' or 'RIGHT', got {direction!r}")
    bits = x.dtype.itemsize * 8
    out_of_range = (y < 0) | (y >= bits)
    amount = np.where(out_of_range, 0, y).astype(x.dtype)
    if direction == "LEFT":
        shifted = np.left_shift(x, amount)
        fill = np.zeros((), dtype=x.dtype)
    else:
        shifted = np.right_shift(x, amount)
        signed = x.dtype.kind == "i"
        fill = np.right_shift(x, x.dtype.type(bits - 1)) if signed else np.zeros((), x.dtype)
    return _same_dtype(np.where(out_of_range, fill, shifted), x)


# ---- selection -----------------------------------------------------------------------------


@kernel("Where", since=9)
def where(ctx, condition, x, y):
    return _same_dtype(np.where(condition, x, y), x)


def _clip(x: np.ndarray, low, high) -> np.ndarray:
    """min(max(x, low), high): with low > high every element becomes high; NaN stays NaN."""
    out = x
    with ignored_float_errors():
        if low is not None:
            out = maximum_of(out, np.asarray(low).astype(x.dtype).reshape(()))
        if high is not None:
            fresh = out is not x and type(out) is np.ndarray     # 0-d results are scalars
            out = minimum_of(out, np.asarray(high).astype(x.dtype).reshape(()),
                             out=out if fresh else None)
    return _same_dtype(out, x)


@kernel("Clip")
def clip_1(ctx, x, min=None, max=None, **_legacy):   # noqa: A002 - ONNX attribute names
    """Opsets 1-10: bounds are float attributes, absent meaning unbounded."""
    return _clip(x, min, max)


@kernel("Clip", since=11)
def clip_11(ctx, x, min=None, max=None):   # noqa: A002 - ONNX input names
    """Opset 11+: bounds are optional scalar inputs."""
    for name, bound in (("min", min), ("max", max)):
        if bound is not None and bound.size != 1:
            raise ValueError(f"Clip: '{name}' must be a scalar, got shape {bound.shape}")
    return _clip(x, min, max)
