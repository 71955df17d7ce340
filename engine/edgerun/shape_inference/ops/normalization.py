"""Normalizations: Y like X; LayerNormalization's statistics keep the leading axes."""
from __future__ import annotations

from ..context import tensor
from ..registry import infer
from ._common import same_as_input


@infer("GroupNormalization", "InstanceNormalization", "LpNormalization",
       "MeanVarianceNormalization", "RMSNormalization")
def same(ctx):
    return [same_as_input(ctx)]


@infer("BatchNormalization")
def batch_normalization(ctx):
    # training mode (opset 14+) adds running_mean and running_var, shaped like mean and var
    return [same_as_input(ctx), same_as_input(ctx, 3), same_as_input(ctx, 4)]


@infer("LayerNormalization")
def layer_normalization(ctx):
    shape = ctx.shape(0)
    stats = None
    if shape is not None:
        axis = ctx.axis(ctx.attr("axis", -1), len(shape))
        stats = tuple(d if i < axis else 1 for i, d in enumerate(shape))
    stash = ctx.attr("stash_type", 1)
    return [same_as_input(ctx), tensor(stash, stats), tensor(stash, stats)]
