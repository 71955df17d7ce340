"""MatMulInteger -> Cast(float) -> Mul(scale) [-> Add(bias)] becomes com.microsoft
MatMulIntegerToFloat: the form onnxruntime's quantize_dynamic writes for every MatMul (and
onnxruntime's own graph optimizer fuses the same way). One kernel turns the int32 product into
float32, scaled and biased, in one pass instead of three nodes of passes over the result.

The Mul's other operand must hold one value or one per column. Where it is itself the Mul of
a dynamic per-tensor scale by a constant (quantize_dynamic's a_scale * w_scale), the fused
node takes the two as a_scale and b_scale, and that Mul goes once nothing else reads it;
a constant scale is b_scale with a_scale = 1. Every provider's kernel multiplies a_scale by
b_scale first, so the result is the unfused chain's, float for float: float32(int32
product) * (a_scale * w_scale), then + bias. A bias is taken when it is a constant of one
value or one per column.
"""
from __future__ import annotations

from .. import ir
from ..ir.host_tensor import HostTensor
from .graph_edit import GraphView, PassContext, element_type, is_onnx
from .patterns import input_at, other_input, single_reader_of, without_absent_tail
from .ranks import known_rank

MICROSOFT = "com.microsoft"
FLOAT = 1


def fuse_matmul_integer_to_float(view: GraphView, ctx: PassContext) -> int:
    count = 0
    for product in view.live_nodes():
        if view.is_dead(product) or not is_onnx(product, "MatMulInteger"):
            continue
        cast = single_reader_of(view, product, "Cast")
        if cast is None or cast.attr("to") != FLOAT:
            continue
        scaled = single_reader_of(view, cast, "Mul")
        scale = scaled and other_input(scaled, cast.outputs[0])
        columns = _columns(view, product)
        if scale is None or not _per_column(view, scale, columns):
            continue
        nodes, output, bias = [product, cast, scaled], scaled.outputs[0], ""
        add = single_reader_of(view, scaled, "Add")
        bias_name = add and other_input(add, output)
        if bias_name and _constant_per_column(view, bias_name, columns):
            nodes, output, bias = nodes + [add], add.outputs[0], bias_name
        a_scale, b_scale = _scale_factors(view, product, scale)
        fused = ir.Node(op_type="MatMulIntegerToFloat", domain=MICROSOFT, name=product.name,
                        inputs=without_absent_tail([
                            product.inputs[0], product.inputs[1], a_scale, b_scale,
                            input_at(product, 2), input_at(product, 3), bias]),
                        outputs=[output])
        ctx.opsets.setdefault(MICROSOFT, 1)
        view.replace(nodes, fused)
        count += 1
    return count


def _scale_factors(view: GraphView, product, scale: str) -> tuple:
    """(a_scale, b_scale) of a scale that _per_column accepted: a constant as b_scale (with a
    unit a_scale), a dynamic scalar times a constant as its two factors."""
    if view.constant(scale) is not None:
        return view.add_constant(product.name + "/unit_scale", _unit_scale()), scale
    mul = view.produced_by(scale, "Mul")
    constant = next(n for n in mul.inputs if view.constant(n) is not None)
    dynamic = next(n for n in mul.inputs if view.constant(n) is None)
    return dynamic, constant


def _unit_scale():
    return HostTensor.from_values(FLOAT, (), [1.0])


def _columns(view: GraphView, product):
    """N of a MatMulInteger whose B is a 2-D constant, else None."""
    b = view.constant(product.inputs[1])
    return b.shape[1] if b is not None and b.ndim == 2 else None


def _per_column(view: GraphView, name: str, columns) -> bool:
    """`name` is float32 of one value or one per column: a constant, or the Mul of a
    dynamic per-tensor scale (DynamicQuantizeLinear's) by a constant one."""
    if columns is None:
        return False
    if view.constant(name) is not None:
        return _constant_per_column(view, name, columns)
    mul = view.produced_by(name, "Mul")
    if mul is None or len(mul.inputs) != 2:
        return False
    constants = [n for n in mul.inputs if view.constant(n) is not None]
    dynamic = [n for n in mul.inputs if view.constant(n) is None]
    return len(constants) == 1 and len(dynamic) == 1 and \
        _constant_per_column(view, constants[0], columns) and \
        _is_dynamic_scalar(view, dynamic[0])


def _constant_per_column(view: GraphView, name: str, columns: int) -> bool:
    value = view.constant(name)
    return value is not None and element_type(value) == FLOAT and \
        value.ndim <= 1 and value.size in (1, columns)


def _is_dynamic_scalar(view: GraphView, name: str) -> bool:
    """A per-tensor scale computed at run time: DynamicQuantizeLinear's y_scale (rank 0 by
    the spec), or a value of known rank 0."""
    producer = view.produced_by(name, "DynamicQuantizeLinear")
    if producer is not None and producer.outputs[1:2] == [name]:
        return True
    return known_rank(view, name) == 0
