"""Reductions and ArgMax/ArgMin: axes from the attribute (older opsets) or the input."""
from __future__ import annotations

from ...ir import dtypes
from .. import symbolic
from ..context import tensor
from ..registry import infer
from ._common import reduced_shape, unknown_dims

REDUCTIONS = ("ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax",
              "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare")

_FOLDS = {"ReduceProd": symbolic.product, "ReduceSum": symbolic.total}


@infer(*REDUCTIONS)
def reduce(ctx):
    s = ctx.shape(0)
    keepdims = bool(ctx.attr("keepdims", 1))
    axes = ctx.ints_or_attr(1, "axes")
    if ctx.has(1) and axes is None:                 # axes computed at run time
        rank = None if s is None else (len(s) if keepdims else None)
        return [tensor(ctx.elem(0), unknown_dims(rank))]
    if not axes:
        if ctx.attr("noop_with_empty_axes", 0):
            return [tensor(ctx.elem(0), s)]
        axes = None
    out = reduced_shape(s, axes, keepdims, ctx.where)
    fold = _FOLDS.get(ctx.node.op_type)
    if fold and s is not None and len(s) == 1 and ctx.value(0) is not None \
            and ctx.dims(0) == ctx.value(0):
        ctx.set_value(0, [fold(ctx.value(0))])
    return [tensor(ctx.elem(0), out)]


@infer("ArgMax", "ArgMin")
def arg_reduce(ctx):
    s = ctx.shape(0)
    out = reduced_shape(s, [ctx.attr("axis", 0)], bool(ctx.attr("keepdims", 1)), ctx.where)
    return [tensor(dtypes.INT64, out)]
