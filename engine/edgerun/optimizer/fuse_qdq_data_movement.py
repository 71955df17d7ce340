"""A QDQ model's data-movement nodes run on the 8-bit codes: DequantizeLinear -> op ->
QuantizeLinear back onto the same grid (scale and zero point) becomes the op on the codes,
as onnxruntime's QDQ transformer drops such pairs. Exact: these ops only move or select
values (MaxPool: the largest of a window, and dequantizing keeps order for a positive
scale), so the codes they give are the ones QuantizeLinear would make again.

    QuantizeLinear(op(DequantizeLinear(q, s, z)), s, z)  ->  op(q)

op is MaxPool (one output, a positive scale: dequantizing keeps the codes' order), Reshape,
Transpose, Flatten, Squeeze, Unsqueeze, Slice, DepthToSpace, SpaceToDepth or Resize choosing
nearest values (not tf_crop_and_resize, whose extrapolation value is no code); its other
inputs (shapes, axes, scales) stay as they are. GlobalMaxPool is not taken: ONNX types it
for floats only.

Concat of DequantizeLinear outputs, quantized once after it, becomes a Concat of codes: an
input on another grid than the output's is first requantized by a com.edgerun LookupTable
of its 256 codes (QuantizeLinear(DequantizeLinear(code)) on the output's grid, computed by
the nodes' own kernels: the same bytes), as onnxruntime's QLinearConcat requantizes.

The pass applies where the session's providers run the rewritten nodes as they ran the
originals (`PassContext.runs_like`); uint8/int8 MaxPool needs opset 12.
"""
from __future__ import annotations

from .. import ir
from ..ir.host_tensor import flat_values
from .fuse_quantized_table import table_of
from .qdq_patterns import (codes_with_zero_point, dequantized_type, per_tensor_quantize,
                           quantized_type)
from .graph_edit import EDGERUN_DOMAIN, GraphView, PassContext, attr_text, is_onnx

MOVERS = {"MaxPool", "Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Slice",
          "DepthToSpace", "SpaceToDepth", "Resize"}


def fuse_qdq_data_movement(view: GraphView, ctx: PassContext) -> int:
    count = 0
    for rounding in view.live_nodes():
        if view.is_dead(rounding) or not is_onnx(rounding, "QuantizeLinear") or \
                not per_tensor_quantize(view, rounding):
            continue
        op = view.produced_by(rounding.inputs[0], *MOVERS, "Concat")
        if op is None or view.only_reader(op.outputs[0]) is not rounding or \
                len([o for o in op.outputs if o]) != 1:
            continue
        done = _concat(view, ctx, op, rounding) if op.op_type == "Concat" else \
            _mover(view, ctx, op, rounding)
        count += done
    return count


def _mover(view: GraphView, ctx: PassContext, op: ir.Node, rounding: ir.Node) -> int:
    dq = _source(view, op.inputs[0])
    if dq is None or not _same_grid(view, dq, rounding) or not _moves_exactly(view, op, dq, ctx):
        return 0
    moved = ir.Node(op_type=op.op_type, domain=op.domain, name=op.name,
                    inputs=[dq.inputs[0]] + list(op.inputs[1:]), outputs=list(rounding.outputs),
                    attributes=dict(op.attributes))
    if not ctx.runs_like(moved, [op, rounding]):
        return 0
    view.replace([op, rounding], moved)
    return 1


def _concat(view: GraphView, ctx: PassContext, op: ir.Node, rounding: ir.Node) -> int:
    sources = [_source(view, name) for name in op.inputs]
    if not sources or any(dq is None for dq in sources):
        return 0
    code = quantized_type(view, rounding)
    if any(dequantized_type(view, dq) != code for dq in sources):
        return 0
    inputs, tables = [], []
    for dq in sources:
        if _same_grid(view, dq, rounding):
            inputs.append(dq.inputs[0])
            continue
        table = _requantization_table(view, ctx, dq, rounding)
        if table is None:
            return 0
        name = ctx.fresh_name(f"{dq.inputs[0]}_requantized")
        tables.append(ir.Node(op_type="LookupTable", domain=EDGERUN_DOMAIN, name=name,
                              inputs=[dq.inputs[0], view.add_constant(f"{name}_table", table)],
                              outputs=[name]))
        inputs.append(name)
    moved = ir.Node(op_type="Concat", name=op.name, inputs=inputs,
                    outputs=list(rounding.outputs), attributes=dict(op.attributes))
    if not ctx.runs_like(moved, [op, rounding]) or \
            any(not ctx.runs_like(t, [rounding]) for t in tables):
        return 0
    if tables:
        ctx.use_edgerun_domain()
    for table_node in tables:
        view.insert(table_node, before=op)
    view.replace([op, rounding], moved)
    return 1


def _source(view: GraphView, name: str):
    """The per-tensor DequantizeLinear of 8-bit codes producing `name`, else None."""
    dq = view.produced_by(name, "DequantizeLinear")
    return dq if dq is not None and codes_with_zero_point(view, dq) else None


def _same_grid(view: GraphView, dq: ir.Node, rounding: ir.Node) -> bool:
    """One scale and zero point (values and zero point type) on both sides."""
    return view.scalar(dq.inputs[1]) == view.scalar(rounding.inputs[1]) and \
        dequantized_type(view, dq) == quantized_type(view, rounding) and \
        flat_values(view.constant(dq.inputs[2])) == flat_values(view.constant(rounding.inputs[2]))


def _moves_exactly(view: GraphView, op: ir.Node, dq: ir.Node, ctx: PassContext) -> bool:
    """Ops that give the same codes on codes: one-output MaxPool of opset 12 on (8-bit
    inputs) over a positive scale, Resize choosing nearest values inside its input, the rest
    always."""
    if op.op_type == "MaxPool":
        return ctx.opset("") >= 12 and len([o for o in op.outputs if o]) == 1 and \
            (view.scalar(dq.inputs[1]) or 0.0) > 0
    if op.op_type == "Resize":
        return ctx.opset("") >= 11 and attr_text(op, "mode", "nearest") == "nearest" and \
            attr_text(op, "coordinate_transformation_mode") != "tf_crop_and_resize"
    return True


def _requantization_table(view: GraphView, ctx: PassContext, dq: ir.Node, rounding: ir.Node):
    """QuantizeLinear(DequantizeLinear(code)) onto the rounding's grid for the 256 codes."""
    requantize = ir.Node(op_type="QuantizeLinear", name=rounding.name,
                         inputs=[dq.outputs[0]] + list(rounding.inputs[1:]),
                         outputs=[f"{dq.outputs[0]}__requantized"],
                         attributes=dict(rounding.attributes))
    return table_of(view, ctx, dq, [requantize])
