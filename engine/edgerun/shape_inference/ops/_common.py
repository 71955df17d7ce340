"""Small pieces many rules share."""
from __future__ import annotations

from typing import Optional

from ...ir import dtypes
from .. import symbolic
from ..context import tensor


def same_as_input(ctx, i: int = 0, elem_type: Optional[int] = None):
    """The input's own type (shape and element type), optionally with another element type."""
    t = ctx.type(i)
    if t is not None and t.kind != "tensor" and elem_type is None:
        return t
    return tensor(elem_type or ctx.elem(i), ctx.shape(i))


def scalar(elem_type: int):
    return tensor(elem_type, ())


def int64(shape):
    return tensor(dtypes.INT64, shape)


def reduced_shape(shape, axes, keepdims: bool, where: str):
    """`shape` with `axes` removed (or set to 1 with keepdims); None axes reduce all."""
    if shape is None:
        return None
    rank = len(shape)
    if axes is None:
        axes = range(rank)
    axes = {symbolic.normalize_axis(a, rank, where) for a in axes}
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def with_dim(shape, axis: int, dim):
    if shape is None:
        return None
    out = list(shape)
    out[axis] = dim
    return tuple(out)


def unknown_dims(rank):
    return None if rank is None else (None,) * rank
