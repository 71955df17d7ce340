"""ReduceSum/Mean/Max/Min/SumSquare/Prod/L1/L2/LogSum/LogSumExp over any axes: adjacent axes
fold into one (outer, R, inner) pass; others are transposed to the end first. ArgMax/ArgMin
over one axis. Float tensors run the float32 kernels (other float types widened); integer and
bool tensors run er_reduce_int / er_argmax_int in their own type."""
from __future__ import annotations

from . import operator
from ....ir import dtypes
from .common import float_or_refused, normalize_axis, product
from .tensor import transpose
from ..device import INT_FORMATS

REDUCE = {"ReduceSum": 0, "ReduceMean": 1, "ReduceMax": 2, "ReduceMin": 3,
          "ReduceSumSquare": 4, "ReduceProd": 5, "ReduceL1": 6, "ReduceL2": 7,
          "ReduceLogSum": 8, "ReduceLogSumExp": 9}
# reductions whose result over one element is that element (noop_with_empty_axes returns x;
# the others keep their per-element part: |x|, x * x, log x)
ONE_ELEMENT_IDENTITY = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                        "ReduceLogSumExp"}
AXES_INPUT_SINCE = {"ReduceSum": 13}     # the others take axes as an input from opset 18


@operator(*REDUCE)
def bind_reduce(dev, node, opset):
    code = REDUCE[node.op_type]
    keepdims = int(node.attr("keepdims", 1))
    noop_empty = int(node.attr("noop_with_empty_axes", 0))
    axes_from_input = opset >= AXES_INPUT_SINCE.get(node.op_type, 18)
    attr_axes = node.attr("axes")

    def run(ctx, x, axes_t=None, **_):
        axes = dev.ints(axes_t) if axes_from_input else attr_axes
        rank = len(x.shape)
        if not axes and noop_empty:
            if node.op_type in ONE_ELEMENT_IDENTITY:
                return x
            y = dev.empty(list(x.shape), x.elem_type)   # no reduction: each element's own part
            if y.size:
                _reduce_call(dev, code, x, y, y.size, 1, 1)
            return y
        return reduce_axes(dev, x, code, axes or range(rank), keepdims)
    return integers_as_they_are(run, float_or_refused(dev, node, opset, run, float_inputs=[0]))


def integers_as_they_are(run, on_floats):
    """`run` itself for integer and bool data (the kernels take their type), `on_floats`
    (float32, or widened, or refused) for the rest."""
    def dispatch(ctx, x, *rest, **attrs):
        if x.elem_type in INT_FORMATS:
            return run(ctx, x, *rest)
        return on_floats(ctx, x, *rest, **attrs)
    return dispatch


def _reduce_call(dev, code: int, src, y, outer: int, r: int, inner: int) -> None:
    if src.elem_type in INT_FORMATS:
        dev.call("er_reduce_int", code, src.elem_type, src.ptr, y.ptr, outer, r, inner)
    else:
        dev.call("er_reduce", code, src.ptr, y.ptr, outer, r, inner)


def reduce_axes(dev, x, code: int, axes, keepdims: bool):
    """Reduction `code` of `x` (float32, integer or bool) over `axes` (adjacent ones in one
    pass, others moved last first)."""
    rank = len(x.shape)
    axes = sorted({normalize_axis(int(a), rank, "reduce axis") for a in axes})
    if not axes:                       # a scalar: its one element's own part
        y = dev.empty(x.shape, x.elem_type)
        _reduce_call(dev, code, x, y, 1, 1, 1)
        return y
    out_full = [1 if i in axes else d for i, d in enumerate(x.shape)]
    out_shape = out_full if keepdims else [d for i, d in enumerate(x.shape) if i not in axes]
    y = dev.empty(out_shape, x.elem_type)
    if y.size == 0:
        return y
    src, shape = x, x.shape
    if axes != list(range(axes[0], axes[-1] + 1)):     # not adjacent: move them last
        keep = [i for i in range(rank) if i not in axes]
        src = transpose(dev, x, keep + axes)
        axes = list(range(len(keep), rank))
        shape = src.shape
    outer = product(shape[:axes[0]])
    r = product(shape[axes[0]:axes[-1] + 1])
    inner = product(shape[axes[-1] + 1:])
    _reduce_call(dev, code, src, y, outer, r, inner)
    return y


@operator("ArgMax", "ArgMin")
def bind_arg_reduce(dev, node, opset):
    axis_attr = int(node.attr("axis", 0))
    keepdims = int(node.attr("keepdims", 1))
    select_last = int(node.attr("select_last_index", 0))
    is_min = int(node.op_type == "ArgMin")

    def run(ctx, x, **_):
        rank = len(x.shape)
        axis = normalize_axis(axis_attr, max(rank, 1))
        shape = list(x.shape) or [1]
        if shape[axis] == 0:
            raise ValueError(f"{node.op_type} over an empty axis {axis}")
        out = shape[:axis] + ([1] if keepdims else []) + shape[axis + 1:]
        y = dev.empty(out, dtypes.INT64)
        if not y.size:
            return y
        sizes = (product(shape[:axis]), shape[axis], product(shape[axis + 1:]), is_min,
                 select_last)
        if x.elem_type in INT_FORMATS:
            dev.call("er_argmax_int", x.elem_type, x.ptr, y.ptr, *sizes)
        else:
            dev.call("er_argmax", x.ptr, y.ptr, *sizes)
        return y
    return integers_as_they_are(run, float_or_refused(dev, node, opset, run))
