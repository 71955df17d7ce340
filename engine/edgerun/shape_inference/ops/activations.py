"""PRelu: the input's type, its shape broadcast with the slope's. (The one-input
activations are ir/unary_ops.py's rows: elementwise.py.)"""
from __future__ import annotations

from .. import symbolic
from ..context import tensor
from ..registry import infer


@infer("PRelu")
def prelu(ctx):
    shape = ctx.shape(0)
    if ctx.shape(0) is not None and ctx.shape(1) is not None:
        shape = symbolic.broadcast_shapes([ctx.shape(0), ctx.shape(1)], ctx.where)
    return [tensor(ctx.elem(0), shape)]
