"""Cast, CastLike, BitCast: the input's shape with another element type."""
from __future__ import annotations

from .. import values as V
from ..registry import infer
from ._common import same_as_input


def _cast_value(ctx, to: int):
    if ctx.value(0) is not None:
        ctx.set_value(0, V.cast(ctx.value(0), to))


@infer("Cast")
def cast(ctx):
    to = int(ctx.attr("to"))
    _cast_value(ctx, to)
    return [same_as_input(ctx, elem_type=to)]


@infer("CastLike")
def cast_like(ctx):
    to = ctx.elem(1)
    if to:
        _cast_value(ctx, to)
    return [same_as_input(ctx, elem_type=to or None)]


@infer("BitCast")
def bit_cast(ctx):
    return [same_as_input(ctx, elem_type=int(ctx.attr("to")))]
