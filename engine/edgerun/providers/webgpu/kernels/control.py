"""If: control flow decided on the host, its branch's nodes placed like any others.

The condition is almost always shape arithmetic (a sample rate, a sequence length), which
stays on the host; a condition computed on the GPU is read back (one small readback: the
branch cannot be chosen otherwise). The chosen branch runs through the executor, so its
nodes run on whichever provider claimed them, the GPU included.
"""
from __future__ import annotations

from .. import host_values
from .registry import gpu_op


@gpu_op("If", host_only=True)
def if_(gpu, ctx, cond, then_branch, else_branch):
    items = host_values.values(gpu.host_values(cond))
    if len(items) != 1:
        raise ValueError(f"If: the condition must hold one element, got {len(items)}")
    return tuple(ctx.run_graph(then_branch if items[0] else else_branch, []))
