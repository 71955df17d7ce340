"""DynamicQuantizeLinear -> com.microsoft MatMulIntegerToFloat becomes com.microsoft
DynamicQuantizeMatMul where the product is the quantized values' only reader: one node, and
natively one call that quantizes A straight into the product's operand (onnxruntime's graph
optimizer fuses the same way). quantize_dynamic writes a DynamicQuantizeLinear before every
MatMul whose input no other MatMul shares (int8 MiniLM: 18 of its 24); one shared by several
products (attention's Q, K and V) stays.

The fused node's values are the two nodes' own: A quantized as DynamicQuantizeLinear does,
then the product scaled by that scale times b_scale. The pass applies where the session's
providers run the fused node, the quantizer and the product on the same provider
(`PassContext.runs_like`: the CPU's).
"""
from __future__ import annotations

from .. import ir
from .graph_edit import GraphView, PassContext, is_onnx
from .patterns import input_at, without_absent_tail

MICROSOFT = "com.microsoft"


def fuse_dynamic_quantize_matmul(view: GraphView, ctx: PassContext) -> int:
    count = 0
    for quantizer in view.live_nodes():
        if view.is_dead(quantizer) or not is_onnx(quantizer, "DynamicQuantizeLinear") or \
                len(quantizer.outputs) != 3:
            continue
        product = _only_product(view, quantizer)
        if product is None:
            continue
        inputs = without_absent_tail([quantizer.inputs[0], product.inputs[1],
                                      product.inputs[3], input_at(product, 5),
                                      input_at(product, 6)])
        fused = ir.Node(op_type="DynamicQuantizeMatMul", domain=MICROSOFT, name=product.name,
                        inputs=inputs, outputs=list(product.outputs))
        if not ctx.runs_like(fused, [quantizer, product]):
            continue
        view.replace([quantizer, product], fused)
        count += 1
    return count


def _only_product(view: GraphView, quantizer: ir.Node):
    """The MatMulIntegerToFloat that alone reads the quantizer's three outputs, as its A,
    a_scale and a_zero_point, else None."""
    y, scale, zero_point = quantizer.outputs
    product = view.only_reader(y)
    if product is None or product.op_type != "MatMulIntegerToFloat" or \
            product.domain != MICROSOFT or len(product.inputs) < 5 or \
            product.inputs[0] != y or product.inputs[2] != scale or \
            product.inputs[4] != zero_point or product.inputs.count(y) != 1:
        return None
    if any(view.only_reader(name) is not product for name in (scale, zero_point)):
        return None
    return product
