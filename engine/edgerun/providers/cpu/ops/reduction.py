"""Reductions (ReduceSum, ReduceMean, ... ReduceLogSumExp) and ArgMax/ArgMin.

`axes` is an attribute until opset 13 for ReduceSum and opset 18 for the others, then an
optional int64 input; with the input form an empty/absent `axes` reduces everything unless
`noop_with_empty_axes` is set, in which case the data passes through.

Reducing an empty set gives the operation's identity: 0 for sums and norms, 1 for the
product, -inf for the log-sums, -inf (the type's minimum for integers, False for bool) for
ReduceMax and +inf (maximum, True) for ReduceMin; ReduceMean gives NaN.

Floats accumulate in at least float32; integers keep their type (wrapping as C does), and
the float-valued reductions of integers (L2, log-sums) go through float64.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ..registry import kernel
from .elementwise import is_float, truncating_divide, widened
from .float_errors import ignored_float_errors


def normalized_axes(ndim: int, axes, noop_with_empty_axes: int = 0):
    """The sorted tuple of axes to reduce, or None when the reduction is a no-op."""
    if axes is None or len(axes) == 0:
        return None if noop_with_empty_axes else tuple(range(ndim))
    if ndim == 0:
        return ()                # a scalar "reduces" to itself: fn applied to one element
    result = set()
    for a in (int(a) for a in axes):
        if not -ndim <= a < ndim:
            raise ValueError(f"axis {a} is out of range for a tensor of rank {ndim}")
        result.add(a + ndim if a < 0 else a)
    return tuple(sorted(result))


# Row lengths up to which a BLAS matrix-vector product sums float rows: numpy reduces short
# rows one by one (4x slower at 128); past this, its pairwise sum is the more accurate.
_BLAS_SUM_MAX = 4096
_BLAS_SUM_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


@functools.lru_cache(maxsize=64)
def _ones(length: int, dtype) -> np.ndarray:
    ones = np.ones(length, dtype)
    ones.flags.writeable = False
    return ones


def trailing_sum(x: np.ndarray, first_axis: int) -> np.ndarray:
    """The sum of x over axes first_axis..ndim-1, kept as size-1 dimensions."""
    rows = math.prod(x.shape[:first_axis])
    length = math.prod(x.shape[first_axis:])
    kept = x.shape[:first_axis] + (1,) * (x.ndim - first_axis)
    if x.dtype in _BLAS_SUM_DTYPES and 0 < length <= _BLAS_SUM_MAX and rows:
        return (x.reshape(rows, length) @ _ones(length, x.dtype)).reshape(kept)
    return np.sum(x, axis=tuple(range(first_axis, x.ndim)), keepdims=True)


def _is_empty_reduction(x: np.ndarray, axes: tuple) -> bool:
    return any(x.shape[a] == 0 for a in axes)


def _float64_if_integer(x: np.ndarray) -> np.ndarray:
    return x if is_float(x.dtype) else x.astype(np.float64)


# ---- the reductions: fn(x, axes, keepdims) on float32+/float64/integer x ----------------------


def _sum(x, axes, keepdims):
    if x.dtype in _BLAS_SUM_DTYPES:
        return _float_sum(x, axes, keepdims)
    return np.sum(x, axis=axes, keepdims=keepdims, dtype=x.dtype)


def _float_sum(x, axes, keepdims):
    """The sum of float x over sorted, distinct `axes`: trailing ones by BLAS."""
    if axes and axes[0] + len(axes) == x.ndim:
        total = trailing_sum(x, axes[0])
        return total if keepdims else total.reshape(x.shape[:axes[0]])
    return np.add.reduce(x, axis=axes, keepdims=keepdims)


def _mean(x, axes, keepdims):
    """sum / count; integers divide truncating toward zero, an empty float set gives NaN."""
    count = math.prod([x.shape[a] for a in axes])
    if is_float(x.dtype):
        return _float_sum(x, axes, keepdims) / x.dtype.type(count)
    total = np.sum(x, axis=axes, keepdims=keepdims, dtype=np.int64)
    return truncating_divide(total, np.int64(max(count, 1)))


def _extreme_identity(dtype, largest: bool):
    """The value an empty ReduceMax (largest=False) / ReduceMin (largest=True) yields."""
    if dtype == np.bool_:
        return largest
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return info.max if largest else info.min
    return np.inf if largest else -np.inf


def _max(x, axes, keepdims):
    if _is_empty_reduction(x, axes):
        return np.max(x, axis=axes, keepdims=keepdims, initial=_extreme_identity(x.dtype, False))
    return np.max(x, axis=axes, keepdims=keepdims)


def _min(x, axes, keepdims):
    if _is_empty_reduction(x, axes):
        return np.min(x, axis=axes, keepdims=keepdims, initial=_extreme_identity(x.dtype, True))
    return np.min(x, axis=axes, keepdims=keepdims)


def _prod(x, axes, keepdims):
    return np.prod(x, axis=axes, keepdims=keepdims, dtype=x.dtype)


def _l1(x, axes, keepdims):
    return np.sum(np.abs(x), axis=axes, keepdims=keepdims, dtype=x.dtype)


def _l2(x, axes, keepdims):
    x = _float64_if_integer(x)
    return np.sqrt(np.sum(x * x, axis=axes, keepdims=keepdims))


def _sum_square(x, axes, keepdims):
    return np.sum(x * x, axis=axes, keepdims=keepdims, dtype=x.dtype)


def _log_sum(x, axes, keepdims):
    return np.log(np.sum(_float64_if_integer(x), axis=axes, keepdims=keepdims))


def _log_sum_exp(x, axes, keepdims):
    """max + log(sum(exp(x - max))): no overflow; all -inf (or an empty set) gives -inf."""
    x = _float64_if_integer(x)
    if _is_empty_reduction(x, axes) or x.size == 0:
        return np.log(np.sum(np.exp(x), axis=axes, keepdims=keepdims))
    peak = np.max(x, axis=axes, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0)
    result = np.log(np.sum(np.exp(x - peak), axis=axes, keepdims=True)) + peak
    return result if keepdims else np.squeeze(result, axis=axes)


def _reduce(fn, data: np.ndarray, axes, keepdims: int, noop_with_empty_axes: int = 0):
    axes = normalized_axes(data.ndim, axes, noop_with_empty_axes)
    if axes is None:
        if fn in _ONE_ELEMENT_IDENTITY:
            return data
        axes = ()    # no reduction, but the per-element part stays: ReduceL1 gives |x|
    if fn in _ONE_ELEMENT_IDENTITY and all(data.shape[a] == 1 for a in axes):
        shape = data.shape            # each reduced set holds one element: that element
        return data.reshape(shape if keepdims else
                            tuple(d for i, d in enumerate(shape) if i not in axes))
    if fn in _QUIET and data.size and (data.dtype == np.float32 or data.dtype == np.float64):
        result = fn(data, axes, bool(keepdims))     # the common case, without errstate
    else:
        with ignored_float_errors():
            result = fn(widened(data), axes, bool(keepdims))
    return np.asarray(result).astype(data.dtype, copy=False)


# Reductions of non-empty float32/float64 data that never warn (they only compare), so they
# skip the errstate context.
_QUIET = {_max, _min}
# Reductions whose result over a single element is that element.
_ONE_ELEMENT_IDENTITY = {_sum, _mean, _max, _min, _prod}


def _register_reduction(op_type: str, fn, axes_input_since: int) -> None:
    """One kernel for the `axes` attribute opsets, one for the `axes` input opsets."""

    def with_axes_attribute(ctx, data, axes=None, keepdims=1):
        return _reduce(fn, data, axes, keepdims)

    def with_axes_input(ctx, data, axes=None, keepdims=1, noop_with_empty_axes=0):
        axes = None if axes is None else axes.reshape(-1).tolist()
        return _reduce(fn, data, axes, keepdims, noop_with_empty_axes)

    name = "".join("_" + c.lower() if c.isupper() else c for c in op_type).lstrip("_")
    for f, suffix in ((with_axes_attribute, "1"), (with_axes_input, str(axes_input_since))):
        f.__name__ = f.__qualname__ = f"{name}_{suffix}"
    kernel(op_type)(with_axes_attribute)
    kernel(op_type, since=axes_input_since)(with_axes_input)


_register_reduction("ReduceSum", _sum, 13)
_register_reduction("ReduceMean", _mean, 18)
_register_reduction("ReduceMax", _max, 18)
_register_reduction("ReduceMin", _min, 18)
_register_reduction("ReduceProd", _prod, 18)
_register_reduction("ReduceL1", _l1, 18)
_register_reduction("ReduceL2", _l2, 18)
_register_reduction("ReduceLogSum", _log_sum, 18)
_register_reduction("ReduceLogSumExp", _log_sum_exp, 18)
_register_reduction("ReduceSumSquare", _sum_square, 18)


# ---- ArgMax / ArgMin ---------------------------------------------------------------------------


def _arg_extreme(find, data: np.ndarray, axis: int, keepdims: int, select_last_index: int):
    """Index (int64) of the first, or with select_last_index the last, extreme along axis."""
    if not -data.ndim <= axis < data.ndim:
        raise ValueError(f"axis {axis} is out of range for a tensor of rank {data.ndim}")
    axis %= data.ndim
    if data.shape[axis] == 0:
        raise ValueError(f"cannot take the arg-extreme of an empty axis {axis} "
                         f"(shape {data.shape})")
    x = widened(data)
    keepdims = bool(keepdims)
    if select_last_index:
        index = data.shape[axis] - 1 - find(np.flip(x, axis=axis), axis=axis, keepdims=keepdims)
    else:
        index = find(x, axis=axis, keepdims=keepdims)
    return np.asarray(index, dtype=np.int64)


@kernel("ArgMax")
def arg_max(ctx, data, axis=0, keepdims=1, select_last_index=0):
    return _arg_extreme(np.argmax, data, axis, keepdims, select_last_index)


@kernel("ArgMin")
def arg_min(ctx, data, axis=0, keepdims=1, select_last_index=0):
    return _arg_extreme(np.argmin, data, axis, keepdims, select_last_index)
