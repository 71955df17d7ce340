"""Hard-swish written out in primitives becomes one HardSwish node: y = x * relu6(x + 3) / 6.

    clip form:  Add(x, 3) -> Clip(0, 6) -> Mul(x, .) -> Div(., 6) or Mul(., 1/6)
                Add(x, 3) -> Clip(0, 6) -> Div(., 6) or Mul(., 1/6) -> Mul(x, .)
    sigmoid form: Mul(x, HardSigmoid(x, alpha=1/6, beta=0.5))

as MobileNetV3-style exports (PaddleOCR, timm) write it; constants may sit on either side of
Add and Mul. HardSwish is standard from opset 14; older models get com.edgerun HardSwish
with the same meaning. Float32 only: the fused kernel rounds once where the chain rounds
after every step (a few ulp apart).
"""
from __future__ import annotations

from .. import ir
from .graph_edit import EDGERUN_DOMAIN, GraphView, PassContext, is_onnx
from .patterns import close_to, const_side, intermediate, other_input, single_reader_of

FLOAT = 1


def fuse_hard_swish(view: GraphView, ctx: PassContext) -> int:
    count = 0
    for node in view.live_nodes():
        if view.is_dead(node):
            continue
        if is_onnx(node, "Clip"):
            match = _clip_form(view, node)
        elif is_onnx(node, "HardSigmoid"):
            match = _sigmoid_form(view, node)
        else:
            continue
        if match is None:
            continue
        nodes, x, y = match
        standard = ctx.opset() >= 14
        fused = ir.Node(op_type="HardSwish", domain="" if standard else EDGERUN_DOMAIN,
                        inputs=[x], outputs=[y], name=node.name)
        if not standard:
            ctx.use_edgerun_domain()
        view.replace(nodes, fused)
        count += 1
    return count


def _clip_form(view: GraphView, clip):
    if _clip_bounds(view, clip) != (0.0, 6.0):
        return None
    plus = intermediate(view, clip.inputs[0], "Add")
    if plus is None:
        return None
    three, x = const_side(view, plus, 3.0)
    if x is None or not _is_float32(view, plus):
        return None
    after = single_reader_of(view, clip, "Mul", "Div")
    if after is None:
        return None
    if after.op_type == "Mul" and other_input(after, clip.outputs[0]) == x:   # x * clip, / 6
        scale = single_reader_of(view, after, "Mul", "Div")
        if scale is None or not _divides_by_six(view, scale, after.outputs[0]):
            return None
        return [plus, clip, after, scale], x, scale.outputs[0]
    if not _divides_by_six(view, after, clip.outputs[0]):                   # clip / 6, * x
        return None
    times = single_reader_of(view, after, "Mul")
    if times is None or other_input(times, after.outputs[0]) != x:
        return None
    return [plus, clip, after, times], x, times.outputs[0]


def _sigmoid_form(view: GraphView, hard_sigmoid):
    if not (close_to(hard_sigmoid.attr("alpha", 0.2), 1 / 6)
            and close_to(hard_sigmoid.attr("beta", 0.5), 0.5)):
        return None
    x = hard_sigmoid.inputs[0]
    times = single_reader_of(view, hard_sigmoid, "Mul")
    if times is None or other_input(times, hard_sigmoid.outputs[0]) != x:
        return None
    if not _declared_float32(view, x):
        return None
    return [hard_sigmoid, times], x, times.outputs[0]


def _clip_bounds(view: GraphView, clip):
    if "min" in clip.attributes or "max" in clip.attributes:         # opset < 11
        return (clip.attr("min", None), clip.attr("max", None))
    if len(clip.inputs) != 3:
        return None
    return (view.scalar(clip.inputs[1]), view.scalar(clip.inputs[2]))


def _divides_by_six(view: GraphView, node, name: str) -> bool:
    """`node` is name / 6 or name * (1/6)."""
    if node.op_type == "Div":
        return node.inputs[0] == name and close_to(view.scalar(node.inputs[1]), 6.0)
    value, other = const_side(view, node, 1 / 6)
    return other == name


def _is_float32(view: GraphView, plus) -> bool:
    """Judged by the constant 3 of the Add: numpy would promote a float32 x otherwise."""
    constant = next((n for n in plus.inputs if view.constant(n) is not None), "")
    return view.elem_type_of_constant(constant) == FLOAT


def _declared_float32(view: GraphView, name: str) -> bool:
    return view.declared_elem_type(name) == FLOAT
