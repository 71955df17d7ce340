"""Conv followed by Add of a per-channel constant becomes a Conv with that bias folded in.

The constant must broadcast along the channel axis only (shape [M,1,...,1] or
[1,M,1,...,1], or a single value) so the Add cannot change the output shape.
"""
from __future__ import annotations

from .. import ir
from .graph_edit import GraphView, PassContext, is_onnx


def fuse_conv_add(view: GraphView, ctx: PassContext) -> int:
    count = 0
    for add in view.live_nodes():
        if view.is_dead(add) or not is_onnx(add, "Add") or len(add.inputs) != 2:
            continue
        for side in (0, 1):
            conv = view.produced_by(add.inputs[side], "Conv")
            if conv is None or view.only_reader(conv.outputs[0]) is not add:
                continue
            bias = _channel_bias(view, conv, add.inputs[1 - side])
            if bias is None:
                continue
            b_name = view.add_constant(f"{conv.name or 'conv'}_bias_added", bias)
            fused = ir.Node(op_type="Conv", domain=conv.domain,
                            inputs=[conv.inputs[0], conv.inputs[1], b_name],
                            outputs=[add.outputs[0]], attributes=dict(conv.attributes),
                            name=conv.name)
            view.replace([conv, add], fused)
            count += 1
            break
    return count


def _channel_bias(view: GraphView, conv, name: str):
    w = view.constant(conv.inputs[1])
    c = view.constant(name)
    if w is None or c is None or c.dtype != w.dtype or w.dtype.kind != "f":
        return None
    channels, rank = w.shape[0], w.ndim
    shape = list(c.shape)
    if len(shape) > rank or (len(shape) == rank and shape[0] != 1):
        return None
    padded = [1] * (rank - len(shape)) + shape
    if any(d != 1 for i, d in enumerate(padded) if i != 1) or padded[1] not in (1, channels):
        return None
    if len(conv.inputs) > 2 and conv.inputs[2]:
        old = view.constant(conv.inputs[2])
        if old is None:
            return None
    else:
        old = 0
    import numpy as np

    return (np.broadcast_to(c.reshape(-1), (channels,)) + old).astype(w.dtype)
