"""Small matching helpers the fusion passes share."""
from __future__ import annotations

from typing import Optional

from ..ir import dtypes
from .constant_math import ConstantMath, Unfoldable
from .graph_edit import FLOAT_TYPES, GraphView, element_type, is_onnx


def other_input(node, name: str):
    """For a two-input node reading `name`, its other input (None if it does not read it)."""
    if len(node.inputs) != 2:
        return None
    a, b = node.inputs
    if a == name:
        return b
    if b == name:
        return a
    return None


def input_at(node, index: int) -> str:
    """The node's input `index`, '' where it is absent."""
    return node.inputs[index] if len(node.inputs) > index else ""


def without_absent_tail(names: list) -> list:
    """Input names without the trailing '' of absent optional inputs (a fused node's list)."""
    names = list(names)
    while names and names[-1] == "":
        names.pop()
    return names


def close_to(value, target: float, rel: float = 1e-4) -> bool:
    return value is not None and abs(value - target) <= rel * abs(target)


def constant_close_to(view: GraphView, name: str, target: float) -> bool:
    """A scalar constant equal to `target` as its type holds it: within 1e-4 relative, or
    1e-3 for a 16-bit float (whose rounding alone moves a value up to 4.9e-4)."""
    value = view.scalar(name)
    if value is None:
        return False
    bits = dtypes.elem_type(view.elem_type_of_constant(name)).bits
    rel = 1e-3 if bits == 16 else 1e-4
    return close_to(value, target, rel)


def const_side(view: GraphView, node, target: Optional[float] = None):
    """(constant value, other input) of a two-input node with one scalar constant input;
    with `target`, only when the constant is close to it."""
    if len(node.inputs) != 2:
        return None, None
    for i in (1, 0):
        value = view.scalar(node.inputs[i])
        if value is not None and (target is None or
                                  constant_close_to(view, node.inputs[i], target)):
            return value, node.inputs[1 - i]
    return None, None


def single_reader_of(view: GraphView, node, *op_types: str):
    """The one ONNX node of `op_types` reading `node`'s only output, else None."""
    if len(node.outputs) != 1:
        return None
    reader = view.only_reader(node.outputs[0])
    if reader is None or reader.domain not in ("", "ai.onnx") or reader.op_type not in op_types:
        return None
    return reader


def intermediate(view: GraphView, name: str, *op_types: str):
    """The producer of `name` if it is one of `op_types` and `name` has no other reader."""
    node = view.produced_by(name, *op_types)
    if node is None or len(view.readers(name)) != 1 or name in view.output_names:
        return None
    return node


def fed_by(view: GraphView, node, op_type: str):
    """For a two-input `node`, each (producer, other input) where one input is the output of
    an `op_type` node that nothing else reads: the pairs a "producer + node" fusion tries."""
    if len(node.inputs) != 2:
        return
    for side in (0, 1):
        producer = intermediate(view, node.inputs[side], op_type)
        if producer is not None and producer.outputs[0] == node.inputs[side]:
            yield producer, node.inputs[1 - side]


def per_channel_constant(view: GraphView, name: str, channels: int, rank: int,
                         elem_type: int):
    """The constant `name` as one value per channel of a rank-`rank` (N, C, ...) tensor (an
    (channels,) vector), when it has `elem_type` and broadcasts along the channel axis only
    ([C,1,...,1], [1,C,1,...,1] or one value), so an Add or Mul of it cannot change the
    tensor's shape; else None."""
    c = view.constant(name)
    if c is None or element_type(c) != elem_type or rank is None or rank < 2:
        return None
    shape = list(c.shape)
    if len(shape) > rank or (len(shape) == rank and shape[0] != 1):
        return None
    padded = [1] * (rank - len(shape)) + shape
    if any(d != 1 for i, d in enumerate(padded) if i != 1) or padded[1] not in (1, channels):
        return None
    return ConstantMath(view.ctx).per_channel(c, channels)


def conv_channel_constant(view: GraphView, conv, name: str):
    """per_channel_constant for the output of `conv` (whose float weights give the channel
    count, rank and dtype), or None."""
    w = view.constant(conv.inputs[1])
    if w is None or element_type(w) not in FLOAT_TYPES:
        return None
    return per_channel_constant(view, name, w.shape[0], w.ndim, element_type(w))


def fold_into_conv(view: GraphView, op_type: str, fold) -> int:
    """Every `op_type` node (Mul, Add) applying a per-channel constant to a Conv's unshared
    output is folded into that Conv: fold(view, conv, constant (M,), bias (M,) or 0) gives the
    new Conv's inputs. Returns how many were folded."""
    from .. import ir

    count = 0
    for node in view.live_nodes():
        if view.is_dead(node) or not is_onnx(node, op_type):
            continue
        for conv, other in fed_by(view, node, "Conv"):
            constant = conv_channel_constant(view, conv, other)
            bias = None if constant is None else conv_bias(view, conv)
            if bias is None:
                continue
            try:
                inputs = fold(view, conv, constant, bias)
            except Unfoldable:
                continue
            fused = ir.Node(op_type="Conv", domain=conv.domain,
                            inputs=inputs, outputs=[node.outputs[0]],
                            attributes=dict(conv.attributes), name=conv.name)
            view.replace([conv, node], fused)
            count += 1
            break
    return count


def is_inference_batch_norm(node) -> bool:
    """A BatchNormalization in inference form: one output, no training_mode, spatial=1, and
    its four parameter inputs."""
    return (is_onnx(node, "BatchNormalization") and len(node.inputs) >= 5
            and len([o for o in node.outputs if o]) == 1 and not node.attr("training_mode", 0)
            and node.attr("spatial", 1) == 1)


def conv_bias(view: GraphView, conv):
    """The conv's constant bias, 0 when it has none, None when its bias is not a constant."""
    if len(conv.inputs) > 2 and conv.inputs[2]:
        return view.constant(conv.inputs[2])
    return 0
