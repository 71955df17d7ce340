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

MICROSOFT = "com.microsoft"
FLOAT, UINT8, INT8 = 1, 2, 3


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


def eight_bit(view: GraphView, name: str):
    """UINT8 or INT8 when `name` is known to hold 8-bit integers (a constant, a declared or
    inferred type, or a QuantizeLinear with a zero point), else None."""
    code = None
    if view.constant(name) is not None:
        code = view.elem_type_of_constant(name)
    else:
        code = view.declared_elem_type(name)
        producer = view.produced_by(name, "QuantizeLinear")
        if code is None and producer is not None and input_at(producer, 2):
            zero = view.constant(input_at(producer, 2))
            code = element_type(zero) if zero is not None else None
    return code if code in (UINT8, INT8) else None


def dequantized_type(view: GraphView, dq: ir.Node):
    """UINT8 or INT8: the type of a DequantizeLinear's input, as its constant zero point
    gives it (the two share a type; the input's producer may be an earlier fusion's node,
    whose type no inference recorded) or as eight_bit finds it; else None."""
    zero = view.constant(input_at(dq, 2)) if input_at(dq, 2) else None
    if zero is not None:
        return element_type(zero) if element_type(zero) in (UINT8, INT8) else None
    return eight_bit(view, dq.inputs[0])


def plain_dequantize(node: ir.Node) -> bool:
    """A DequantizeLinear without block quantization, to float32 (no output_dtype)."""
    return not node.attr("block_size", 0) and node.attr("output_dtype", 0) in (0, FLOAT)


def per_tensor_dequantize(view: GraphView, dq: ir.Node) -> bool:
    """One float32 scale and zero point (constants): A's dequantization."""
    scale = view.constant(input_at(dq, 1))
    zero = view.constant(input_at(dq, 2)) if input_at(dq, 2) else None
    return plain_dequantize(dq) and scale is not None and element_type(scale) == FLOAT and \
        scale.size == 1 and (not input_at(dq, 2) or (zero is not None and zero.size == 1))


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
