"""BatchNormalization followed by Mul and Add of per-channel constants becomes one
BatchNormalization with its scale and bias rewritten:

    (gamma * x̂ + beta) * s + t  =  (gamma * s) * x̂ + (beta * s + t)

Caffe2 exports of DenseNet write each pre-activation BatchNormalization as BN -> Mul -> Add
(densenet121: 58 such chains that follow a Concat, where no Conv can absorb them; the ones
after a Conv are folded by fuse_conv_bn, fuse_conv_mul and fuse_conv_add). Only inference
BatchNormalization (one output, no training_mode, spatial=1) with constant scale and bias
is rewritten, only through a chain whose every value has no other reader, and only with
constants that broadcast along the channel axis alone (the input's rank must be known).
"""
from __future__ import annotations

from .. import ir
from .constant_math import ConstantMath, Unfoldable
from .graph_edit import FLOAT_TYPES, GraphView, PassContext, element_type, is_onnx
from .patterns import is_inference_batch_norm, other_input, per_channel_constant
from .ranks import known_rank


def fuse_bn_mul_add(view: GraphView, ctx: PassContext) -> int:
    count = 0
    for bn in view.live_nodes():
        if view.is_dead(bn) or not is_inference_batch_norm(bn):
            continue
        scale, bias = view.constant(bn.inputs[1]), view.constant(bn.inputs[2])
        if scale is None or bias is None or element_type(scale) not in FLOAT_TYPES or \
                scale.ndim != 1:
            continue
        rank = known_rank(view, bn.inputs[0])
        try:
            chain, scale, bias = _absorbed_chain(view, bn, scale, bias, rank)
        except Unfoldable:
            continue
        if not chain:
            continue
        stem = bn.name or "bn"
        inputs = list(bn.inputs)
        inputs[1] = view.add_constant(f"{stem}_scale_absorbed", scale)
        inputs[2] = view.add_constant(f"{stem}_bias_absorbed", bias)
        fused = ir.Node(op_type="BatchNormalization", domain=bn.domain, inputs=inputs,
                        outputs=[chain[-1].outputs[0]], attributes=dict(bn.attributes),
                        name=bn.name)
        view.replace([bn] + chain, fused)
        count += 1
    return count


def _absorbed_chain(view: GraphView, bn, scale, bias, rank):
    """(the Mul/Add nodes after `bn` it absorbs, in order; the scale and bias with them
    folded in)."""
    m = ConstantMath(view.ctx)
    kind = element_type(scale)
    chain = []
    value = bn.outputs[0]
    while True:
        node = view.only_reader(value)
        if node is None or not is_onnx(node, "Mul", "Add") or len(node.outputs) != 1:
            break
        constant = per_channel_constant(view, other_input(node, value), scale.size, rank, kind)
        if constant is None:
            break
        if node.op_type == "Mul":
            scale = m.cast(m.mul(scale, constant), kind)
            bias = m.cast(m.mul(bias, constant), kind)
        else:
            bias = m.cast(m.add(bias, constant), kind)
        chain.append(node)
        value = node.outputs[0]
    return chain, scale, bias
