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

from ..registry import kernel

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
    with np.errstate(all="ignore"):
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


# ---- erf (numpy has none) ------------------------------------------------------------------
# float64: rational approximations of erf/erfc on four ranges of |x| (the classic fdlibm
# split), good to double precision, each range evaluated on its masked subset.
# float32 and narrower: one pass with no masks (masking costs more than the arithmetic):
# the fdlibm small-|x| rational for |x| < 0.84375, Numerical Recipes' Chebyshev fit of erfc
# (relative error < 1.2e-7) elsewhere; within 2 float32 ulps of the true value.

_ERF_SMALL_P = (1.28379167095512558561e-01, -3.25042107247001499370e-01,
                -2.84817495755985104766e-02, -5.77027029648944159157e-03,
                -2.37630166566501626084e-05)
_ERF_SMALL_Q = (1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02,
                5.08130628187576562776e-03, 1.32494738004321644526e-04,
                -3.96022827877536812320e-06)
_ERF_NEAR_ONE = 8.45062911510467529297e-01
_ERF_MID_P = (-2.36211856075265944077e-03, 4.14856118683748331666e-01,
              -3.72207876035701323847e-01, 3.18346619901161753674e-01,
              -1.10894694282396677476e-01, 3.54783043256182359371e-02,
              -2.16637559486879084300e-03)
_ERF_MID_Q = (1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01,
              7.18286544141962662868e-02, 1.26171219808761642112e-01,
              1.36370839120290507362e-02, 1.19844998467991074170e-02)
_ERFC_A_P = (-9.86494403484714822705e-03, -6.93858572707181764372e-01,
             -1.05586262253232909814e+01, -6.23753324503260060396e+01,
             -1.62396669462573470355e+02, -1.84605092906711035994e+02,
             -8.12874355063065934246e+01, -9.81432934416914548592e+00)
_ERFC_A_Q = (1.0, 1.96512716674392571292e+01, 1.37657754143519042600e+02,
             4.34565877475229228821e+02, 6.45387271733267880336e+02,
             4.29008140027567833386e+02, 1.08635005541779435134e+02,
             6.57024977031928170135e+00, -6.04244152148580987438e-02)
_ERFC_B_P = (-9.86494292470009928597e-03, -7.99283237680523006574e-01,
             -1.77579549177547519889e+01, -1.60636384855821916062e+02,
             -6.37566443368389627722e+02, -1.02509513161107724954e+03,
             -4.83519191608651397019e+02)
_ERFC_B_Q = (1.0, 3.03380607434824582924e+01, 3.25792512996573918826e+02,
             1.53672958608443695994e+03, 3.19985821950859553908e+03,
             2.55305040643316442583e+03, 4.74528541206955367215e+02,
             -2.24409524465858183362e+01)


def _polynomial(coefficients, t: np.ndarray) -> np.ndarray:
    """c0 + c1*t + c2*t^2 + ... by Horner's rule."""
    result = np.full_like(t, coefficients[-1])
    for c in reversed(coefficients[:-1]):
        result *= t
        result += c
    return result


_ERFC_CHEBYSHEV = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
                   0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277)


def erf(x: np.ndarray) -> np.ndarray:
    """The error function of a float array: float64 stays float64, anything else is float32."""
    x = np.asarray(x)
    with np.errstate(all="ignore"):
        if x.dtype == np.float64:
            return _erf_double(x)
        return _erf_single(x.astype(np.float32, copy=False))


def _erf_single(x: np.ndarray) -> np.ndarray:
    a = np.abs(x)
    square = a * a
    small = a + a * (_polynomial(_ERF_SMALL_P, square) / _polynomial(_ERF_SMALL_Q, square))
    t = np.float32(1) / (np.float32(1) + np.float32(0.5) * a)
    erfc = t * np.exp(_polynomial(_ERFC_CHEBYSHEV, t) - square)
    return np.copysign(np.where(a < 0.84375, small, np.float32(1) - erfc), x)


def _erf_double(x: np.ndarray) -> np.ndarray:
    a = np.abs(x)
    out = np.ones_like(a)                        # |x| >= 6 (and inf): erf is 1 in float64

    small = a < 0.84375
    v = a[small]
    out[small] = v + v * (_polynomial(_ERF_SMALL_P, v * v) / _polynomial(_ERF_SMALL_Q, v * v))

    mid = (a >= 0.84375) & (a < 1.25)
    s = a[mid] - 1.0
    out[mid] = _ERF_NEAR_ONE + _polynomial(_ERF_MID_P, s) / _polynomial(_ERF_MID_Q, s)

    tail_a = (a >= 1.25) & (a < 1 / 0.35)
    tail_b = (a >= 1 / 0.35) & (a < 6.0)
    for mask, p, q in ((tail_a, _ERFC_A_P, _ERFC_A_Q), (tail_b, _ERFC_B_P, _ERFC_B_Q)):
        v = a[mask]
        s = 1.0 / (v * v)
        erfc = np.exp(-v * v - 0.5625 + _polynomial(p, s) / _polynomial(q, s)) / v
        out[mask] = 1.0 - erfc
    out[np.isnan(a)] = np.nan
    return np.copysign(out, x)


# ---- unary math ------------------------------------------------------------------------------


def _unary(op_type: str, fn, float_only: bool = False):
    """Register `op_type` as fn(x) keeping x's dtype (consumed_inputs of opset 1 is ignored)."""

    def run(ctx, x, **_legacy):
        if float_only or is_ml_float(x.dtype):
            return float_math(fn, x)
        with np.errstate(all="ignore"):
            return _same_dtype(fn(x), x)

    run.__name__ = op_type.lower()
    run.__qualname__ = run.__name__
    kernel(op_type)(run)


_UNARY_MATH = {
    "Abs": np.abs, "Neg": np.negative, "Sign": np.sign,
    "Floor": np.floor, "Ceil": np.ceil, "Round": np.round,   # np.round: halves to even
}
_UNARY_FLOAT_MATH = {
    "Reciprocal": np.reciprocal, "Sqrt": np.sqrt, "Exp": np.exp, "Log": np.log,
    "Sin": np.sin, "Cos": np.cos, "Tan": np.tan,
    "Asin": np.arcsin, "Acos": np.arccos, "Atan": np.arctan,
    "Sinh": np.sinh, "Cosh": np.cosh, "Asinh": np.arcsinh, "Acosh": np.arccosh,
    "Atanh": np.arctanh, "Erf": erf,
}
for _op, _fn in _UNARY_MATH.items():
    _unary(_op, _fn)
for _op, _fn in _UNARY_FLOAT_MATH.items():
    _unary(_op, _fn, float_only=True)


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


def _arithmetic(fn, a, b, broadcast=0, axis=None):
    """fn(a, b) in a's dtype, ml_dtypes floats computed in float32."""
    if a.dtype == b.dtype and a.dtype.kind == "f" and not broadcast:
        return fn(a, b)       # the common case, kept cheap: same float dtype, numpy rules
    b = align_legacy_broadcast(a, b, broadcast, axis)
    with np.errstate(all="ignore"):
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
    y = align_legacy_broadcast(x, y, broadcast, axis)
    with np.errstate(all="ignore"):
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
    with np.errstate(all="ignore"):
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
    with np.errstate(all="ignore"):
        if low is not None:
            out = np.maximum(out, np.asarray(low).astype(x.dtype).reshape(()))
        if high is not None:
            out = np.minimum(out, np.asarray(high).astype(x.dtype).reshape(()))
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
