"""Conv followed by Mul of a per-channel constant becomes a Conv whose weights and bias are
scaled: (W x + b) * s = (s W) x + s b, per output channel (onnxruntime's ConvMulFusion).

Exporters write an inference BatchNormalization as Mul + Add after the Conv (inception_v2 of
the ONNX model zoo: 69 of each); with fuse_conv_add after it, both fold into the Conv, and
the Relu that follows fuses with it. The constant must broadcast along the channel axis only
([M,1,...,1], [1,M,1,...,1] or one value), so the Mul cannot change the output shape.
"""
from __future__ import annotations

from .constant_math import ConstantMath
from .graph_edit import GraphView, PassContext, element_type
from .patterns import fold_into_conv


def fuse_conv_mul(view: GraphView, ctx: PassContext) -> int:
    return fold_into_conv(view, "Mul", _scaled)


def _scaled(view: GraphView, conv, scale, bias) -> list:
    m = ConstantMath(view.ctx)
    w = view.constant(conv.inputs[1])
    stem = conv.name or "conv"
    kind = element_type(w)
    weights = m.cast(m.mul(w, m.reshape(scale, [-1] + [1] * (w.ndim - 1))), kind)
    new_bias = m.cast(m.mul(bias, scale), kind) if len(conv.inputs) > 2 and conv.inputs[2] \
        else None
    inputs = [conv.inputs[0], view.add_constant(f"{stem}_weight_scaled", weights)]
    if new_bias is not None:
        inputs.append(view.add_constant(f"{stem}_bias_scaled", new_bias))
    return inputs
