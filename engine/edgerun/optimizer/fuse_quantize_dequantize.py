"""A QDQ model's QuantizeLinear -> DequantizeLinear pair becomes one com.edgerun
QuantizeDequantize node: y = DequantizeLinear(QuantizeLinear(x, s, z), s, z).

onnxruntime's quantize_static (QDQ format) writes such a pair on every activation: the value is
rounded to its 8-bit grid and read back as float, 200 pairs in a small CNN. Run as two
kernels, each pair makes an 8-bit tensor and passes over the data nine times; fused, the CPU
computes the same float32 values in five passes. Each DequantizeLinear reading the
QuantizeLinear (with the same scale and zero point) becomes its own fused node; the
QuantizeLinear goes once nothing reads it.

The CPU provider computes the pair in one native pass and WebGPU in one dispatch; wasm runs
the fused node as its two kernels (so a page's WebGPU session can hand it back). The pass
applies where the session's providers would run both nodes of the pair and the fused node on
the same provider (`PassContext.runs_like`): NNAPI/QNN, which lower QDQ models themselves,
keep the pair.
"""
from __future__ import annotations

from .. import ir
from .graph_edit import EDGERUN_DOMAIN, GraphView, PassContext, is_onnx


def fuse_quantize_dequantize(view: GraphView, ctx: PassContext) -> int:
    count = 0
    for quantize in view.live_nodes():
        if view.is_dead(quantize) or not is_onnx(quantize, "QuantizeLinear"):
            continue
        q = quantize.outputs[0]
        readers = view.readers(q)
        if q in view.output_names or not readers or \
                not all(_dequantizes_alike(view, quantize, r) for r in readers):
            continue
        fused_nodes = [_fused(quantize, r) for r in readers]
        if not ctx.runs_like(fused_nodes[0], [quantize, *readers]):
            continue
        ctx.use_edgerun_domain()
        for dequantize, fused in zip(readers, fused_nodes):
            view.replace([dequantize], fused)
        view.remove(quantize)
        count += len(readers)
    return count


def _dequantizes_alike(view: GraphView, quantize: ir.Node, node: ir.Node) -> bool:
    """`node` is a DequantizeLinear of `quantize`'s output with its scale and zero point,
    along the same axis and blocks, giving the scale's type."""
    if not is_onnx(node, "DequantizeLinear") or node.inputs[0] != quantize.outputs[0] or \
            node.attr("output_dtype", 0):
        return False
    if not all(_same_parameter(view, a, b) for a, b in
               zip(_parameters(quantize), _parameters(node))):
        return False
    if node.attr("block_size", 0) != quantize.attr("block_size", 0):
        return False
    per_tensor = view.constant(quantize.inputs[1])
    return (per_tensor is not None and per_tensor.size == 1) or \
        node.attr("axis", 1) == quantize.attr("axis", 1)


def _parameters(node: ir.Node) -> list:
    """[scale, zero point] names ('' for an absent zero point)."""
    return [node.inputs[1], node.inputs[2] if len(node.inputs) > 2 else ""]


def _same_parameter(view: GraphView, a: str, b: str) -> bool:
    if a == b:
        return True
    x, y = view.scalar(a), view.scalar(b)
    return x is not None and x == y and \
        view.elem_type_of_constant(a) == view.elem_type_of_constant(b)


def _fused(quantize: ir.Node, dequantize: ir.Node) -> ir.Node:
    return ir.Node(op_type="QuantizeDequantize", domain=EDGERUN_DOMAIN,
                   inputs=list(quantize.inputs), outputs=[dequantize.outputs[0]],
                   attributes=dict(quantize.attributes), name=dequantize.name)
