"""Losses: a scalar when reduced, the target's shape with reduction='none'."""
from __future__ import annotations

from ..context import tensor
from ..registry import infer
from ._common import same_as_input


def _loss_shape(ctx):
    if ctx.attr("reduction", "mean") != "none":
        return ()
    return ctx.shape(1)


@infer("NegativeLogLikelihoodLoss")
def nll_loss(ctx):
    return [tensor(ctx.elem(0), _loss_shape(ctx))]


@infer("SoftmaxCrossEntropyLoss")
def softmax_cross_entropy_loss(ctx):
    return [tensor(ctx.elem(0), _loss_shape(ctx)), same_as_input(ctx)]
