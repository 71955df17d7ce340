"""Conv followed by Add of a per-channel constant becomes a Conv with that bias folded in.

The constant must broadcast along the channel axis only (shape [M,1,...,1] or
[1,M,1,...,1], or a single value) so the Add cannot change the output shape.
"""
from __future__ import annotations

from .. import ir
from .graph_edit import GraphView, PassContext, is_onnx
from .patterns import conv_bias, conv_channel_constant


def fuse_conv_add(view: GraphView, ctx: PassContext) -> int:
    count = 0
    for add in view.live_nodes():
        if view.is_dead(add) or not is_onnx(add, "Add") or len(add.inputs) != 2:
            continue
        for side in (0, 1):
            conv = view.produced_by(add.inputs[side], "Conv")
            if conv is None or view.only_reader(conv.outputs[0]) is not add:
                continue
            shift = conv_channel_constant(view, conv, add.inputs[1 - side])
            old = conv_bias(view, conv)
            if shift is None or old is None:
                continue
            bias = (shift + old).astype(shift.dtype)
            b_name = view.add_constant(f"{conv.name or 'conv'}_bias_added", bias)
            fused = ir.Node(op_type="Conv", domain=conv.domain,
                            inputs=[conv.inputs[0], conv.inputs[1], b_name],
                            outputs=[add.outputs[0]], attributes=dict(conv.attributes),
                            name=conv.name)
            view.replace([conv, add], fused)
            count += 1
            break
    return count
