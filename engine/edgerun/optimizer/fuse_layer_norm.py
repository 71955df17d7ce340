"""Layer normalization written out in primitives (PyTorch's pre-opset-17 export) becomes one
LayerNormalization node:

    mean = ReduceMean(X, trailing axes)     d = Sub(X, mean)
    var  = ReduceMean(Pow(d, 2) or Mul(d, d), same axes)
    Y    = Div(d, Sqrt(Add(var, eps))) * gamma [+ beta]

LayerNormalization is standard from opset 17; older models get com.edgerun
LayerNormalization with the same meaning. Float32 only; the fused kernel computes the same
formula in a different order (results differ by float rounding, ~1e-6 relative).
"""
from __future__ import annotations

from .. import ir
from ..ir.host_tensor import flat_values
from .graph_edit import EDGERUN_DOMAIN, GraphView, PassContext, attr_float, attr_int
from .patterns import const_side, intermediate, single_reader_of

FLOAT = 1


def fuse_layer_norm(view: GraphView, ctx: PassContext) -> int:
    count = 0
    for div in view.live_nodes():
        if view.is_dead(div) or div.domain not in ("", "ai.onnx") or div.op_type != "Div":
            continue
        match = _match(view, ctx, div)
        if match is None:
            continue
        nodes, x, gamma, beta, axis, eps, y = match
        standard = ctx.opset() >= 17
        ln = ir.Node(op_type="LayerNormalization", domain="" if standard else EDGERUN_DOMAIN,
                     inputs=[x, gamma] + ([beta] if beta else []), outputs=[y],
                     attributes={"axis": attr_int("axis", axis),
                                 "epsilon": attr_float("epsilon", eps)}, name=div.name)
        if not standard:
            ctx.use_edgerun_domain()
        view.replace(nodes, ln)
        count += 1
    return count


def _match(view: GraphView, ctx: PassContext, div):
    centered = div.inputs[0]
    sub = view.produced_by(centered, "Sub")
    if sub is None or centered in view.output_names or len(view.readers(centered)) != 2:
        return None
    mean = intermediate(view, sub.inputs[1], "ReduceMean")
    x = sub.inputs[0]
    if mean is None or mean.inputs[0] != x:
        return None
    root = intermediate(view, div.inputs[1], "Sqrt")
    plus_eps = intermediate(view, root.inputs[0], "Add") if root else None
    if plus_eps is None:
        return None
    eps, var_name = const_side(view, plus_eps)
    var = intermediate(view, var_name, "ReduceMean") if var_name else None
    square = intermediate(view, var.inputs[0], "Pow", "Mul") if var else None
    if square is None or not _is_square_of(view, square, centered):
        return None
    axes = _axes(view, ctx, mean)
    if axes is None or axes != _axes(view, ctx, var):
        return None
    scale = single_reader_of(view, div, "Mul")
    gamma, _ = _constant_operand(view, scale, div.outputs[0]) if scale else (None, None)
    if gamma is None or view.constant(gamma).ndim != len(axes):
        return None
    if view.elem_type_of_constant(gamma) != FLOAT:
        return None
    nodes = [mean, sub, square, var, plus_eps, root, div, scale]
    shift = single_reader_of(view, scale, "Add")
    beta, _ = _constant_operand(view, shift, scale.outputs[0]) if shift else (None, None)
    if beta is not None and view.constant(beta).ndim <= len(axes) \
            and view.elem_type_of_constant(beta) == FLOAT:
        nodes.append(shift)
    else:
        beta = None
    return nodes, x, gamma, beta, -len(axes), eps, nodes[-1].outputs[0]


def _is_square_of(view: GraphView, node, name: str) -> bool:
    if node.op_type == "Pow":
        return node.inputs[0] == name and view.scalar(node.inputs[1]) == 2.0
    return node.inputs == [name, name]


def _axes(view: GraphView, ctx: PassContext, reduce):
    """The reduced axes as negative indices if they are the trailing axes, else None."""
    if reduce.attr("keepdims", 1) != 1:
        return None
    if len(reduce.inputs) > 1 and reduce.inputs[1]:
        value = view.constant(reduce.inputs[1])
        axes = None if value is None else [int(a) for a in flat_values(value)]
    else:
        axes = reduce.attr("axes")
    if not axes or any(a >= 0 for a in axes):
        return None     # non-negative axes need the rank, which is not known here
    axes = sorted(axes)
    return axes if axes == list(range(-len(axes), 0)) else None


def _constant_operand(view: GraphView, node, name: str):
    """(constant input name, other) of a two-input node whose other input is `name`."""
    if len(node.inputs) != 2 or name not in node.inputs:
        return None, None
    other = node.inputs[1] if node.inputs[0] == name else node.inputs[0]
    return (other, name) if view.constant(other) is not None else (None, None)
