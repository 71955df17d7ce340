"""Activations: the output has the input's shape and element type."""
from __future__ import annotations

from .. import symbolic
from ..context import tensor
from ..registry import infer
from ._common import same_as_input

ACTIVATIONS = ("Celu", "Elu", "Gelu", "HardSigmoid", "HardSwish", "LeakyRelu", "Mish", "Relu",
               "Selu", "Shrink", "Sigmoid", "Softplus", "Softsign", "Swish", "ThresholdedRelu")


@infer(*ACTIVATIONS)
def activation(ctx):
    return [same_as_input(ctx)]


@infer("PRelu")
def prelu(ctx):
    shape = ctx.shape(0)
    if ctx.shape(0) is not None and ctx.shape(1) is not None:
        shape = symbolic.broadcast_shapes([ctx.shape(0), ctx.shape(1)], ctx.where)
    return [tensor(ctx.elem(0), shape)]
