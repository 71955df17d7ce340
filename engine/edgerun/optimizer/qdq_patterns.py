"""What the QDQ passes ask of QuantizeLinear and DequantizeLinear nodes: the element types
they write and read, and whether a node quantizes per tensor with constant operands."""
from __future__ import annotations

from .. import ir
from .graph_edit import GraphView, element_type
from .patterns import input_at

FLOAT, UINT8, INT8, INT32 = 1, 2, 3, 6
EIGHT_BIT = (UINT8, INT8)


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
    return code if code in EIGHT_BIT else None


def dequantized_type(view: GraphView, dq: ir.Node):
    """UINT8 or INT8: the type of a DequantizeLinear's input, as its constant zero point
    gives it (the two share a type; the input's producer may be an earlier fusion's node,
    whose type no inference recorded) or as eight_bit finds it; else None."""
    zero = view.constant(input_at(dq, 2)) if input_at(dq, 2) else None
    if zero is not None:
        return element_type(zero) if element_type(zero) in EIGHT_BIT else None
    return eight_bit(view, dq.inputs[0])


def quantized_type(view: GraphView, node: ir.Node):
    """UINT8 or INT8: what a QuantizeLinear with a constant 8-bit zero point writes; else
    None."""
    zero = view.constant(input_at(node, 2)) if input_at(node, 2) else None
    return element_type(zero) if zero is not None and element_type(zero) in EIGHT_BIT else None


def plain_dequantize(node: ir.Node) -> bool:
    """A DequantizeLinear without block quantization, to float32 (no output_dtype)."""
    return not node.attr("block_size", 0) and node.attr("output_dtype", 0) in (0, FLOAT)


def per_tensor_dequantize(view: GraphView, dq: ir.Node) -> bool:
    """One float32 scale and zero point (constants, the zero point possibly absent)."""
    scale = view.constant(input_at(dq, 1))
    zero = view.constant(input_at(dq, 2)) if input_at(dq, 2) else None
    return plain_dequantize(dq) and scale is not None and element_type(scale) == FLOAT and \
        scale.size == 1 and (not input_at(dq, 2) or (zero is not None and zero.size == 1))


def per_tensor_quantize(view: GraphView, node: ir.Node) -> bool:
    """A QuantizeLinear to 8 bits with one float32 scale and a given zero point."""
    scale = view.constant(input_at(node, 1))
    zero = view.constant(input_at(node, 2))
    return scale is not None and element_type(scale) == FLOAT and scale.size == 1 and \
        zero is not None and zero.size == 1 and element_type(zero) in EIGHT_BIT and \
        not node.attr("block_size", 0) and node.attr("output_dtype", 0) in (0, element_type(zero))


def codes_with_zero_point(view: GraphView, dq: ir.Node) -> bool:
    """A per-tensor DequantizeLinear of 8-bit codes whose zero point is given (QLinear
    operators need it as an input)."""
    return bool(input_at(dq, 2)) and per_tensor_dequantize(view, dq) and \
        dequantized_type(view, dq) is not None
