"""Pooling: sliding-window sizes (with ceil_mode), global pools, MaxUnpool, LRN."""
from __future__ import annotations

from .. import symbolic
from ..context import tensor
from ..registry import infer
from ._common import int64, same_as_input
from .conv import sliding_sizes


@infer("AveragePool", "MaxPool", "LpPool")
def pool(ctx):
    x = ctx.shape(0)
    out = None
    if x is not None:
        kernel = ctx.attr("kernel_shape")
        out = tuple(x[:2]) + tuple(sliding_sizes(ctx, x[2:], kernel,
                                                 bool(ctx.attr("ceil_mode", 0))))
    return [tensor(ctx.elem(0), out), int64(out)]


@infer("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
def global_pool(ctx):
    x = ctx.shape(0)
    out = None if x is None else tuple(x[:2]) + (1,) * (len(x) - 2)
    return [tensor(ctx.elem(0), out)]


@infer("LRN")
def lrn(ctx):
    return [same_as_input(ctx)]


@infer("MaxUnpool")
def max_unpool(ctx):
    x = ctx.shape(0)
    if ctx.has(2):
        dims = ctx.dims(2)
        return [tensor(ctx.elem(0), None if dims is None else tuple(dims))]
    if x is None:
        return [tensor(ctx.elem(0), None)]
    n = len(x) - 2
    kernel = ctx.attr("kernel_shape")
    strides = ctx.attr("strides") or [1] * n
    pads = ctx.attr("pads") or [0] * (2 * n)
    sizes = [symbolic.add(symbolic.mul(symbolic.sub(d, 1), strides[i]),
                          kernel[i] - pads[i] - pads[i + n]) for i, d in enumerate(x[2:])]
    return [tensor(ctx.elem(0), tuple(x[:2]) + tuple(sizes))]
