"""A QDQ model's MatMul of two DequantizeLinear outputs, the second of constant 8-bit weights,
becomes com.microsoft MatMulIntegerToFloat over the 8-bit values: what onnxruntime's QDQ
selectors make of it, so the product runs on the integer kernels (the CPU's VNNI/AVX2 8-bit
products) instead of a float32 product of the dequantized values.

    MatMul(DequantizeLinear(qa, sa, za), DequantizeLinear(W, sb, zb))
      -> MatMulIntegerToFloat(qa, W, sa, sb, za, zb)

qa is any 8-bit tensor (a QuantizeLinear's output in quantize_static's files) with one scale
and zero point; W a constant 8-bit [K, N] matrix with one scale and zero point or one per
column (DequantizeLinear's axis 1). The result is float32(integer product) * (sa * sb): the
dequantized product's value, rounded once instead of per term (the spread between
onnxruntime's optimized and unoptimized runs of the same file). The DequantizeLinear nodes
stay for their other readers (eliminate_dead drops the rest).

It runs before constant folding, which would turn DequantizeLinear(W) into float weights,
and only where the session's providers run the fused node as they would the MatMul
(`PassContext.runs_like`).
"""
from __future__ import annotations

from .. import ir
from .graph_edit import GraphView, PassContext, element_type, is_onnx
from .patterns import input_at, without_absent_tail
from .qdq_patterns import (FLOAT, INT8, UINT8, dequantized_type, per_tensor_dequantize,
                           plain_dequantize)

MICROSOFT = "com.microsoft"


def fuse_qdq_matmul(view: GraphView, ctx: PassContext) -> int:
    count = 0
    for product in view.live_nodes():
        if view.is_dead(product) or not is_onnx(product, "MatMul") or \
                len(product.inputs) != 2:
            continue
        left = view.produced_by(product.inputs[0], "DequantizeLinear")
        right = view.produced_by(product.inputs[1], "DequantizeLinear")
        if left is None or right is None or not per_tensor_dequantize(view, left) or \
                not _constant_weights(view, right):
            continue
        if dequantized_type(view, left) is None:
            continue
        inputs = without_absent_tail([left.inputs[0], right.inputs[0], left.inputs[1],
                                      right.inputs[1], input_at(left, 2), input_at(right, 2)])
        fused = ir.Node(op_type="MatMulIntegerToFloat", domain=MICROSOFT, name=product.name,
                        inputs=inputs, outputs=list(product.outputs))
        ctx.opsets.setdefault(MICROSOFT, 1)
        if not ctx.runs_like(fused, [product]):
            continue
        view.replace([product], fused)
        count += 1
    return count


def _constant_weights(view: GraphView, dq: ir.Node) -> bool:
    """Constant 8-bit [K, N] weights with one float32 scale (and zero point) or one per
    column: B's dequantization."""
    weights = view.constant(input_at(dq, 0))
    scale = view.constant(input_at(dq, 1))
    if weights is None or weights.ndim != 2 or element_type(weights) not in (UINT8, INT8) or \
            scale is None or element_type(scale) != FLOAT or not plain_dequantize(dq):
        return False
    columns = weights.shape[1]
    per_column = scale.ndim == 1 and scale.size == columns and dq.attr("axis", 1) in (1, -1)
    if scale.size != 1 and not per_column:
        return False
    if not input_at(dq, 2):
        return True
    zero = view.constant(input_at(dq, 2))
    return zero is not None and element_type(zero) == element_type(weights) and \
        zero.size == scale.size
