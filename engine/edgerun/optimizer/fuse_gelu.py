"""GELU written out in primitives becomes one Gelu node.

    erf form:   y = x * 0.5 * (1 + erf(x / sqrt(2)))          (x / 1.41421 or x * 0.70711)
    tanh form:  y = x * 0.5 * (1 + tanh(0.79788 * (x + 0.044715 * x^3)))

in the operand orders PyTorch exports (0.5 applied last or to x first, constants on either
side of commutative operators). Gelu is standard from opset 20; older models get
com.edgerun Gelu with the same meaning. Float32 and float16 (whose constants match within
their own rounding); the fused result differs from the primitive chain by float rounding (a
few ulp of float32; float16 models compute it in float32 and round once).
"""
from __future__ import annotations

import math

from .. import ir
from .graph_edit import EDGERUN_DOMAIN, GraphView, PassContext, attr_string
from .patterns import (const_side, constant_close_to, intermediate, other_input,
                       single_reader_of)

FLOAT, FLOAT16 = 1, 10
SQRT2 = math.sqrt(2.0)
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def fuse_gelu(view: GraphView, ctx: PassContext) -> int:
    count = 0
    for node in view.live_nodes():
        if view.is_dead(node) or node.domain not in ("", "ai.onnx"):
            continue
        if node.op_type == "Erf":
            match, approximate = _erf_form(view, node), "none"
        elif node.op_type == "Tanh":
            match, approximate = _tanh_form(view, node), "tanh"
        else:
            continue
        if match is None:
            continue
        nodes, x, y = match
        standard = ctx.opset() >= 20
        gelu = ir.Node(op_type="Gelu", domain="" if standard else EDGERUN_DOMAIN,
                       inputs=[x], outputs=[y], name=node.name)
        if approximate != "none":
            gelu.attributes["approximate"] = attr_string("approximate", approximate)
        if not standard:
            ctx.use_edgerun_domain()
        view.replace(nodes, gelu)
        count += 1
    return count


def _erf_form(view: GraphView, erf):
    scale = intermediate(view, erf.inputs[0], "Div", "Mul")
    if scale is None:
        return None
    if scale.op_type == "Div":
        if not constant_close_to(view, scale.inputs[1], SQRT2):
            return None
        x = scale.inputs[0]
    else:
        _, x = const_side(view, scale, 1 / SQRT2)
        if x is None:
            return None
    return _tail(view, [scale, erf], erf, x)


def _tanh_form(view: GraphView, tanh):
    outer = intermediate(view, tanh.inputs[0], "Mul")
    if outer is None:
        return None
    _, inner_name = const_side(view, outer, SQRT_2_OVER_PI)
    inner = intermediate(view, inner_name, "Add") if inner_name else None
    if inner is None:
        return None
    for cube_side in (0, 1):
        cube_term = intermediate(view, inner.inputs[cube_side], "Mul")
        if cube_term is None:
            continue
        _, cube_name = const_side(view, cube_term, 0.044715)
        cube = _cube(view, cube_name) if cube_name else None
        if cube is None:
            continue
        cube_nodes, x = cube
        if inner.inputs[1 - cube_side] != x:
            continue
        return _tail(view, cube_nodes + [cube_term, inner, outer, tanh], tanh, x)
    return None


def _cube(view: GraphView, name: str):
    """(nodes, x) for name = Pow(x, 3) or Mul(Mul(x, x), x)."""
    power = intermediate(view, name, "Pow")
    if power is not None and view.scalar(power.inputs[1]) == 3.0:
        return [power], power.inputs[0]
    outer = intermediate(view, name, "Mul")
    if outer is None:
        return None
    for side in (0, 1):
        square = intermediate(view, outer.inputs[side], "Mul")
        if square is not None and square.inputs[0] == square.inputs[1] == outer.inputs[1 - side]:
            return [square, outer], square.inputs[0]
    return None


def _tail(view: GraphView, nodes: list, head, x: str):
    """From `head` (Erf or Tanh): Add 1, then multiply by x and by 0.5 in either order."""
    plus_one = single_reader_of(view, head, "Add")
    if plus_one is None or const_side(view, plus_one, 1.0)[0] is None:
        return None
    if view.elem_type_of_constant(_constant_input(view, plus_one)) not in (FLOAT, FLOAT16):
        return None
    times = single_reader_of(view, plus_one, "Mul")
    if times is None:
        return None
    other = other_input(times, plus_one.outputs[0])
    if other == x:                                  # (x * (1 + erf)) * 0.5
        half = single_reader_of(view, times, "Mul")
        if half is None or const_side(view, half, 0.5)[0] is None:
            return None
        return nodes + [plus_one, times, half], x, half.outputs[0]
    half_x = intermediate(view, other, "Mul") if other else None     # (x * 0.5) * (1 + erf)
    if half_x is None or const_side(view, half_x, 0.5)[1] != x:
        return None
    return [half_x] + nodes + [plus_one, times], x, times.outputs[0]


def _constant_input(view: GraphView, node) -> str:
    return next((n for n in node.inputs if view.constant(n) is not None), "")
