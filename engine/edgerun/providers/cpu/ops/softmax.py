"""Softmax, LogSoftmax and Hardmax.

Before opset 13 the input is coerced to 2-D at `axis` (default 1): the result is computed over
all of dims[axis:] at once. From opset 13 it is computed along the single `axis` (default -1).
Softmax and LogSoftmax subtract the maximum first, so large inputs do not overflow; float16
and bfloat16 are computed in float32.
"""
from __future__ import annotations

import math

import numpy as np

from ..native import elementwise as native
from ..registry import kernel
from .elementwise import float_math, widened
from .reduction import trailing_sum


def _axis(x: np.ndarray, axis: int) -> int:
    ndim = max(x.ndim, 1)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of range for a tensor of rank {x.ndim}")
    return axis + ndim if axis < 0 else axis


def _along_axis(fn, x: np.ndarray, axis: int) -> np.ndarray:
    """fn(v, axis) along one axis (opset 13+)."""
    if x.size == 0:
        return x.copy()
    if x.ndim == 0:
        return fn(x.reshape(1), 0).reshape(())
    return fn(x, _axis(x, axis))


def _coerced_2d(fn, x: np.ndarray, axis: int) -> np.ndarray:
    """fn over the flattened dims[axis:] of each of the flattened dims[:axis] (opset < 13)."""
    if x.size == 0:
        return x.copy()
    axis = _axis(x, axis) if x.ndim else 0
    rows = math.prod(x.shape[:axis])
    return fn(x.reshape(rows, -1), 1).reshape(x.shape)


# numpy reduces short rows slowly ((360, 10): 18 us for the row maxima): many rows up to
# this long are computed transposed, where each reduction runs along whole columns
# ((360, 10): 33 -> 18 us where the values span more than one shared shift, as digits_mlp's
# logits do; checked before that span, whose global max and min would add ~3 us)
_NARROW_ROW = 12


def _narrow_rows(v: np.ndarray, axis: int) -> bool:
    width = v.shape[axis]
    return axis == v.ndim - 1 and 1 < width <= _NARROW_ROW and v.size >= 8 * width * width


def _by_columns(fn, v: np.ndarray) -> np.ndarray:
    """fn(columns, 0) over the rows of v's last axis laid out as contiguous columns, returned
    in v's shape and row-major order."""
    columns = v.reshape(-1, v.shape[-1]).T.copy()
    return np.ascontiguousarray(fn(columns, 0).T).reshape(v.shape)


def _finite_maxima(v: np.ndarray, axis: int) -> np.ndarray:
    """The maxima along axis, kept as a size-1 axis, with infinities replaced by 0 (so a row
    of -inf minus its maximum stays -inf rather than becoming NaN)."""
    peak = np.max(v, axis=axis, keepdims=True)
    if not np.isfinite(peak).all():
        peak = np.where(np.isfinite(peak), peak, 0)
    return peak


def _shifted(v: np.ndarray, axis: int) -> np.ndarray:
    """v minus its maximum along axis, fresh."""
    return np.subtract(v, _finite_maxima(v, axis))


# When every value lies within this span of the largest, one shift by the overall maximum
# keeps exp in [e^-16, 1] for every row: two whole-array reductions instead of a maximum per
# row (numpy reduces short rows slowly), and the rounding of v - shift stays below 1e-6.
_ONE_SHIFT_SPAN = 16.0


def _softmax(v: np.ndarray, axis: int) -> np.ndarray:
    # float32 rows: one native call at every size (the numpy path is five or six calls: at
    # [1, 7], a classifier head's, 9 us against 5)
    if axis == v.ndim - 1 and v.dtype == np.float32 and native.available():
        return native.softmax_rows(v)
    if _narrow_rows(v, axis):
        return _by_columns(_softmax_in_place, v)
    high, low = v.max(), v.min()
    if high - low < _ONE_SHIFT_SPAN:           # also False for inf and NaN spans
        e = np.subtract(v, high)
    else:
        e = _shifted(v, axis)                  # fresh: the rest works in place
    return _normalized_exp(e, axis)


def _softmax_in_place(v: np.ndarray, axis: int) -> np.ndarray:
    v -= _finite_maxima(v, axis)
    return _normalized_exp(v, axis)


def _normalized_exp(e: np.ndarray, axis: int) -> np.ndarray:
    """exp(e) divided by its sum along axis, in e's buffer."""
    np.exp(e, out=e)
    if axis == e.ndim - 1:
        e /= trailing_sum(e, axis)
    else:
        e /= np.sum(e, axis=axis, keepdims=True)
    return e


def _log_softmax(v: np.ndarray, axis: int) -> np.ndarray:
    if _narrow_rows(v, axis):
        return _by_columns(_log_softmax, v)
    s = _shifted(v, axis)
    s -= np.log(np.sum(np.exp(s), axis=axis, keepdims=True))
    return s


def _hardmax(v: np.ndarray, axis: int) -> np.ndarray:
    """1 at the first maximum along axis, 0 elsewhere, in v's dtype."""
    first_max = np.expand_dims(np.argmax(widened(v), axis=axis), axis)
    positions = np.arange(v.shape[axis]).reshape((-1,) + (1,) * (v.ndim - axis - 1))
    return (positions == first_max).astype(v.dtype)


@kernel("Softmax")
def softmax_1(ctx, x, axis=1):
    return float_math(lambda v: _coerced_2d(_softmax, v, axis), x)


@kernel("Softmax", since=13)
def softmax_13(ctx, x, axis=-1):
    return float_math(lambda v: _along_axis(_softmax, v, axis), x)


@kernel("LogSoftmax")
def log_softmax_1(ctx, x, axis=1):
    return float_math(lambda v: _coerced_2d(_log_softmax, v, axis), x)


@kernel("LogSoftmax", since=13)
def log_softmax_13(ctx, x, axis=-1):
    return float_math(lambda v: _along_axis(_log_softmax, v, axis), x)


@kernel("Hardmax")
def hardmax_1(ctx, x, axis=1):
    return _coerced_2d(_hardmax, x, axis)


@kernel("Hardmax", since=13)
def hardmax_13(ctx, x, axis=-1):
    return _along_axis(_hardmax, x, axis)
