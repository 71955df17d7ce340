"""Cumulative kernels: CumSum and CumProd along one axis, optionally exclusive (each
output leaves out its own element) and/or reversed (accumulating from the end).
"""
import numpy as np

from ..registry import kernel


def _accumulate(x, axis, exclusive: int, reverse: int, ufunc, identity: int):
    axis_value = int(np.asarray(axis).reshape(-1)[0])
    if not -x.ndim <= axis_value < x.ndim:
        raise ValueError(f"axis {axis_value} is out of range for rank {x.ndim}")
    axis_value %= x.ndim
    data = np.flip(x, axis_value) if reverse else x
    if exclusive:
        # Shift by one along the axis, filling the front with the identity element.
        front = np.full_like(np.take(data, [0], axis=axis_value), identity)
        rest = np.take(data, np.arange(data.shape[axis_value] - 1), axis=axis_value)
        data = np.concatenate([front, rest], axis=axis_value)
    # Accumulate in the input type (numpy would widen small ints); formats numpy cannot
    # accumulate natively (bfloat16 and other ml_dtypes) go through float32.
    if x.dtype.kind in "iufc":
        out = ufunc.accumulate(data, axis=axis_value, dtype=x.dtype)
    else:
        out = ufunc.accumulate(data.astype(np.float32), axis=axis_value).astype(x.dtype)
    return np.flip(out, axis_value) if reverse else out


@kernel("CumSum", since=11)
def cum_sum(ctx, x, axis, exclusive=0, reverse=0):
    return _accumulate(x, axis, exclusive, reverse, np.add, 0)


@kernel("CumProd", since=26)
def cum_prod(ctx, x, axis, exclusive=0, reverse=0):
    return _accumulate(x, axis, exclusive, reverse, np.multiply, 1)
