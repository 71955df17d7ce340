"""Conv followed by Mul of a per-channel constant becomes a Conv whose weights and bias are
scaled: (W x + b) * s = (s W) x + s b, per output channel (onnxruntime's ConvMulFusion).

Exporters write an inference BatchNormalization as Mul + Add after the Conv (inception_v2 of
the ONNX model zoo: 69 of each); with fuse_conv_add after it, both fold into the Conv, and
the Relu that follows fuses with it. The constant must broadcast along the channel axis only
([M,1,...,1], [1,M,1,...,1] or one value), so the Mul cannot change the output shape.
"""
from __future__ import annotations

from .. import ir
from .graph_edit import GraphView, PassContext, is_onnx
from .patterns import conv_bias, conv_channel_constant


def fuse_conv_mul(view: GraphView, ctx: PassContext) -> int:
    count = 0
    for mul in view.live_nodes():
        if view.is_dead(mul) or not is_onnx(mul, "Mul") or len(mul.inputs) != 2:
            continue
        for side in (0, 1):
            conv = view.produced_by(mul.inputs[side], "Conv")
            if conv is None or view.only_reader(conv.outputs[0]) is not mul:
                continue
            scale = conv_channel_constant(view, conv, mul.inputs[1 - side])
            bias = conv_bias(view, conv)
            w = view.constant(conv.inputs[1])
            if scale is None or bias is None:
                continue
            stem = conv.name or "conv"
            inputs = [conv.inputs[0], view.add_constant(
                f"{stem}_weight_scaled", (w * scale.reshape((-1,) + (1,) * (w.ndim - 1)))
                .astype(w.dtype))]
            if len(conv.inputs) > 2 and conv.inputs[2]:
                inputs.append(view.add_constant(f"{stem}_bias_scaled",
                                                (bias * scale).astype(w.dtype)))
            fused = ir.Node(op_type="Conv", domain=conv.domain, inputs=inputs,
                            outputs=[mul.outputs[0]], attributes=dict(conv.attributes),
                            name=conv.name)
            view.replace([conv, mul], fused)
            count += 1
            break
    return count
