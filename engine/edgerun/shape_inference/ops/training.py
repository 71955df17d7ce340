"""Optimizers (ai.onnx.preview.training): each new tensor is shaped like the one it updates.

Inputs are R, T, then groups of n tensors; the outputs repeat some of those groups."""
from __future__ import annotations

from ..registry import infer
from ._common import same_as_input

# op -> (number of input groups after R and T, which groups the outputs repeat)
_GROUPS = {"Adagrad": (3, (0, 2)), "Momentum": (3, (0, 2)), "Adam": (4, (0, 2, 3))}


@infer("Adagrad", "Adam", "Momentum", domain="ai.onnx.preview.training")
def optimizer(ctx):
    groups, repeated = _GROUPS[ctx.node.op_type]
    n = (ctx.num_inputs - 2) // groups
    return [same_as_input(ctx, 2 + g * n + i) for g in repeated for i in range(n)]
