"""Conv followed by Add of a per-channel constant becomes a Conv with that bias folded in.

The constant must broadcast along the channel axis only (shape [M,1,...,1] or
[1,M,1,...,1], or a single value) so the Add cannot change the output shape.
"""
from __future__ import annotations

from .constant_math import ConstantMath
from .graph_edit import GraphView, PassContext, element_type
from .patterns import fold_into_conv


def fuse_conv_add(view: GraphView, ctx: PassContext) -> int:
    return fold_into_conv(view, "Add", _with_bias_added)


def _with_bias_added(view: GraphView, conv, shift, bias) -> list:
    m = ConstantMath(view.ctx)
    total = m.cast(m.add(shift, bias), element_type(shift))
    return [conv.inputs[0], conv.inputs[1],
            view.add_constant(f"{conv.name or 'conv'}_bias_added", total)]
