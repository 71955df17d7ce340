"""Conv followed by BatchNormalization (inference) becomes one Conv with new weights:

    W' = W * s[:, None, ...]      B' = (B - mean) * s + beta      s = gamma / sqrt(var + eps)

Only when the Conv output feeds nothing else, every tensor involved is a constant float
initializer, and the BatchNormalization is in inference form (one output, no training_mode,
spatial=1). The fused Conv writes the BatchNormalization's output name.
"""
from __future__ import annotations

from .graph_edit import GraphView, PassContext, is_onnx
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
    import numpy as np

    if not is_inference_batch_norm(bn):
        return None
    w = view.constant(conv.inputs[1])
    params = [view.constant(n) for n in bn.inputs[1:5]]
    b = conv_bias(view, conv)
    if w is None or any(p is None for p in params) or w.dtype.kind != "f" or b is None:
        return None
    gamma, beta, mean, var = (p.astype(np.float64).reshape(-1) for p in params)
    channels = w.shape[0]
    if any(p.size != channels for p in (gamma, beta, mean, var)):
        return None
    scale = gamma / np.sqrt(var + bn.attr("epsilon", 1e-5))
    bias = np.broadcast_to(np.asarray(b, np.float64).reshape(-1), (channels,))
    new_w = (w.astype(np.float64) * scale.reshape((-1,) + (1,) * (w.ndim - 1))).astype(w.dtype)
    new_b = ((bias - mean) * scale + beta).astype(w.dtype)
    return new_w, new_b


def _conv_with(view: GraphView, conv, weight, bias, output: str):
    from .. import ir

    w_name = view.add_constant(f"{conv.inputs[1]}_folded", weight)
    b_name = view.add_constant(f"{conv.name or 'conv'}_bias_folded", bias)
    return ir.Node(op_type="Conv", domain=conv.domain, inputs=[conv.inputs[0], w_name, b_name],
                   outputs=[output], attributes=dict(conv.attributes), name=conv.name)
