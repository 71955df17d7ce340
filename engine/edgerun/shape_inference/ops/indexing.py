"""Gather/Scatter/Slice and the data-dependent selections (NonZero, Compress, TopK, Unique)."""
from __future__ import annotations

from .. import symbolic, values as V
from ..context import tensor
from ..registry import infer
from ._common import int64, same_as_input, unknown_dims, with_dim

INT_MAX = 2 ** 31 - 1     # Slice ends at or past this mean "to the end"


@infer("Gather")
def gather(ctx):
    data, idx = ctx.shape(0), ctx.shape(1)
    if data is None or idx is None:
        return [tensor(ctx.elem(0), None)]
    axis = ctx.axis(ctx.attr("axis", 0), len(data))
    out = tuple(data[:axis]) + tuple(idx) + tuple(data[axis + 1:])
    values, indices = ctx.value(0), ctx.ints(1)
    if len(data) == 1 and values is not None and indices is not None:
        n = len(values)
        if all(-n <= i < n for i in indices):
            ctx.set_value(0, [values[i] for i in indices])
    return [tensor(ctx.elem(0), out)]


@infer("GatherElements")
def gather_elements(ctx):
    return [tensor(ctx.elem(0), ctx.shape(1))]


@infer("GatherND")
def gather_nd(ctx):
    data, idx = ctx.shape(0), ctx.shape(1)
    if data is None or idx is None or not symbolic.is_int(idx[-1]):
        return [tensor(ctx.elem(0), None)]
    b = ctx.attr("batch_dims", 0)
    return [tensor(ctx.elem(0), tuple(idx[:-1]) + tuple(data[b + idx[-1]:]))]


@infer("Scatter", "ScatterElements", "ScatterND", "TensorScatter", "ReverseSequence")
def like_data(ctx):
    return [same_as_input(ctx)]


@infer("Slice")
def slice_(ctx):
    s = ctx.shape(0)
    if s is None:
        return [tensor(ctx.elem(0), None)]
    rank = len(s)
    if ctx.opset < 10 or ctx.has_attr("starts"):
        starts, ends = ctx.attr("starts"), ctx.attr("ends")
        axes, steps = ctx.attr("axes"), None
    else:
        starts, ends = ctx.ints(1), ctx.ints(2)
        axes = ctx.ints(3) if ctx.has(3) else None
        steps = ctx.ints(4) if ctx.has(4) else None
        if (ctx.has(3) and axes is None) or (ctx.has(4) and steps is None):
            starts = None
    if starts is None or ends is None:
        return [tensor(ctx.elem(0), _unknown_sliced(ctx, s))]
    axes = list(axes) if axes is not None else list(range(len(starts)))
    steps = list(steps) if steps is not None else [1] * len(starts)
    out = list(s)
    ranges = {}
    for a, b, e, st in zip(axes, starts, ends, steps):
        a = ctx.axis(a, rank)
        if st == 0:
            ctx.fail("Slice step 0")
        out[a], ranges[a] = _sliced_dim(s[a], b, e, st)
    if ctx.value(0) is not None and symbolic.is_known(s) and all(ranges.values()):
        picks = [list(range(*ranges[a])) if a in ranges else list(range(d))
                 for a, d in enumerate(s)]
        ctx.set_value(0, V.take(ctx.value(0), s, picks))
    return [tensor(ctx.elem(0), tuple(out))]


def _unknown_sliced(ctx, s):
    """Without constant starts/ends, only axes that are not sliced keep their size."""
    axes = None
    if ctx.opset >= 10 and ctx.has(3):
        axes = ctx.ints(3)
    elif ctx.has_attr("axes"):
        axes = ctx.attr("axes")
    if axes is None:
        return unknown_dims(len(s))
    sliced = {ctx.axis(a, len(s)) for a in axes}
    return tuple(None if i in sliced else d for i, d in enumerate(s))


def _sliced_dim(dim, start, end, step):
    """(output size, python slice bounds or None) for one axis."""
    if symbolic.is_int(dim):
        b, e, st = _clamped(dim, start, end, step)
        return len(range(b, e, st)), (b, e, st)
    if step == 1 and start >= 0 and end >= INT_MAX:
        return symbolic.sub(dim, start), None
    if step == 1 and start < 0 and end >= INT_MAX:
        return -start, None           # assumes the axis is at least -start long
    if step == 1 and start >= 0 and -INT_MAX < end < 0:
        return symbolic.sub(symbolic.add(dim, end), start), None
    if step == 1 and 0 <= start <= end < INT_MAX and dim is not None:
        return None, None
    return None, None


def _clamped(dim, start, end, step):
    def clamp(i, low, high):
        if i < 0:
            i += dim
        return min(max(i, low), high)
    if step > 0:
        return clamp(start, 0, dim), clamp(end, 0, dim), step
    return clamp(start, -1, dim - 1), clamp(end, -1, dim - 1), step   # -1: before index 0


@infer("Compress")
def compress(ctx):
    s = ctx.shape(0)
    cond = ctx.ints(1)
    count = sum(1 for c in cond if c) if cond is not None else ctx.fresh()
    axis = ctx.attr("axis")
    if axis is None:
        if symbolic.is_int(count) and s is not None and symbolic.is_known(s):
            count = min(count, symbolic.product(s))
        return [tensor(ctx.elem(0), (count,))]
    if s is None:
        return [tensor(ctx.elem(0), None)]
    axis = ctx.axis(axis, len(s))
    if symbolic.is_int(count) and symbolic.is_int(s[axis]):
        count = min(count, s[axis])
    return [tensor(ctx.elem(0), with_dim(s, axis, count))]


@infer("NonZero")
def non_zero(ctx):
    rank = ctx.rank(0)
    return [int64((rank, ctx.fresh()))]


@infer("TopK")
def top_k(ctx):
    s = ctx.shape(0)
    k = ctx.attr("k") if ctx.has_attr("k") else ctx.scalar(1)
    if not (symbolic.is_int(k) or isinstance(k, str)):
        k = ctx.fresh()
    if s is None:
        return [tensor(ctx.elem(0), None), int64(None)]
    axis = ctx.axis(ctx.attr("axis", -1), len(s))
    out = with_dim(s, axis, k)
    return [tensor(ctx.elem(0), out), int64(out)]


@infer("Unique")
def unique(ctx):
    s = ctx.shape(0)
    n = ctx.fresh()
    axis = ctx.attr("axis")
    if axis is None:
        y = (n,)
        inverse = (symbolic.product(s),) if s is not None else (None,)
    elif s is None:
        y, inverse = None, (None,)
    else:
        axis = ctx.axis(axis, len(s))
        y, inverse = with_dim(s, axis, n), (s[axis],)
    return [tensor(ctx.elem(0), y), int64((n,)), int64(inverse), int64((n,))]

