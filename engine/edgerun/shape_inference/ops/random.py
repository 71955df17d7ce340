"""Random generators and Dropout: shapes from attributes or the input, dtype attribute."""
from __future__ import annotations

from ...ir import dtypes
from ..context import tensor
from ..registry import infer
from ._common import same_as_input


@infer("RandomNormal", "RandomUniform")
def random_from_attributes(ctx):
    return [tensor(ctx.attr("dtype", dtypes.FLOAT), tuple(ctx.attr("shape")))]


@infer("RandomNormalLike", "RandomUniformLike", "Bernoulli")
def random_like(ctx):
    return [same_as_input(ctx, elem_type=ctx.attr("dtype") or None)]


@infer("Multinomial")
def multinomial(ctx):
    s = ctx.shape(0)
    batch = s[0] if s is not None else None
    return [tensor(ctx.attr("dtype", dtypes.INT32), (batch, ctx.attr("sample_size", 1)))]


@infer("Dropout")
def dropout(ctx):
    mask = dtypes.BOOL if ctx.opset >= 10 else None     # the input's type before opset 10
    return [same_as_input(ctx), same_as_input(ctx, elem_type=mask)]
