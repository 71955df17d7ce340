"""Conv followed by BatchNormalization (inference) becomes one Conv with new weights:

    W' = W * s[:, None, ...]      B' = (B - mean) * s + beta      s = gamma / sqrt(var + eps)

Only when the Conv output feeds nothing else, every tensor involved is a constant float
initializer, and the BatchNormalization is in inference form (one output, no training_mode,
spatial=1). The fused Conv writes the BatchNormalization's output name.
"""
from __future__ import annotations

from ..ir.dtypes import DOUBLE
from .constant_math import ConstantMath, Unfoldable
from .graph_edit import FLOAT_TYPES, GraphView, PassContext, element_type, is_onnx
from .patterns import conv_bias, is_inference_batch_norm


def fuse_conv_bn(view: GraphView, ctx: PassContext) -> int:
    count = 0
    for bn in view.live_nodes():
        if view.is_dead(bn) or not is_onnx(bn, "BatchNormalization"):
            continue
        conv = view.produced_by(bn.inputs[0], "Conv")
        if conv is None or view.only_reader(conv.outputs[0]) is not bn:
            continue
        folded = _folded_weights(view, conv, bn)
        if folded is None:
            continue
        weight, bias = folded
        fused = _conv_with(view, conv, weight, bias, bn.outputs[0])
        view.replace([conv, bn], fused)
        count += 1
    return count


def _folded_weights(view: GraphView, conv, bn):
    """(W', B') computed in float64, or None when the pattern does not fold."""
    if not is_inference_batch_norm(bn):
        return None
    w = view.constant(conv.inputs[1])
    params = [view.constant(n) for n in bn.inputs[1:5]]
    b = conv_bias(view, conv)
    if w is None or any(p is None for p in params) or element_type(w) not in FLOAT_TYPES \
            or b is None:
        return None
    channels = w.shape[0]
    if any(p.size != channels for p in params):
        return None
    m = ConstantMath(view.ctx)
    try:
        gamma, beta, mean, var = (m.reshape(m.cast(p, DOUBLE), [-1]) for p in params)
        scale = m.div(gamma, m.sqrt(m.add(var, bn.attr("epsilon", 1e-5))))
        bias = m.per_channel(m.cast(b, DOUBLE) if hasattr(b, "shape") else m.like(b, scale),
                             channels)
        new_w = m.mul(m.cast(w, DOUBLE), m.reshape(scale, [-1] + [1] * (w.ndim - 1)))
        new_b = m.add(m.mul(m.sub(bias, mean), scale), beta)
        return m.cast(new_w, element_type(w)), m.cast(new_b, element_type(w))
    except Unfoldable:
        return None


def _conv_with(view: GraphView, conv, weight, bias, output: str):
    from .. import ir

    w_name = view.add_constant(f"{conv.inputs[1]}_folded", weight)
    b_name = view.add_constant(f"{conv.name or 'conv'}_bias_folded", bias)
    return ir.Node(op_type="Conv", domain=conv.domain, inputs=[conv.inputs[0], w_name, b_name],
                   outputs=[output], attributes=dict(conv.attributes), name=conv.name)
