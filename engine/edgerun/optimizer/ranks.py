"""The rank of a value when it is known without running the model.

From declared types (graph inputs, value_info, outputs), constants, and a few operators
whose output rank follows from their inputs or attributes. Passes that need a rank (MatMul
into Gemm, attention) ask here and leave the pattern alone when the answer is None.
"""
from __future__ import annotations

from .graph_edit import GraphView

_SAME_RANK = {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Cast", "Clip", "Neg", "Abs", "Exp",
              "Log", "Sqrt", "Erf", "Softmax", "LogSoftmax", "HardSigmoid", "Gelu",
              "Identity", "Dropout", "BatchNormalization", "LayerNormalization", "Elu",
              "Selu", "HardSwish", "Softplus", "Mish"}
_SAME_RANK_ML = {"Scaler", "Normalizer", "Imputer", "Binarizer"}
_BROADCAST = {"Add", "Sub", "Mul", "Div", "Pow", "Where", "Max", "Min"}
_MAX_DEPTH = 32


def known_rank(view: GraphView, name: str, depth: int = 0):
    declared = _declared_rank(view, name)
    if declared is not None:
        return declared
    const = view.constant(name)
    if const is not None:
        return const.ndim
    node = view.producer.get(name)
    if node is None or depth > _MAX_DEPTH or not node.inputs:
        return None
    if node.domain == "ai.onnx.ml" and node.op_type in _SAME_RANK_ML:
        return known_rank(view, node.inputs[0], depth + 1)
    if node.domain not in ("", "ai.onnx"):
        return None
    op = node.op_type
    if op in ("Gemm", "Flatten"):
        return 2
    if op == "Transpose" and node.attr("perm") is not None:
        return len(node.attr("perm"))
    if op == "Reshape" and len(node.inputs) > 1:
        shape = view.constant(node.inputs[1])
        return None if shape is None else int(shape.size)
    if op in _SAME_RANK and node.outputs[0] == name:
        return known_rank(view, node.inputs[0], depth + 1)
    if op in _BROADCAST or op == "MatMul":
        ranks = [known_rank(view, n, depth + 1) for n in node.inputs if n]
        if any(r is None for r in ranks):
            return None
        return max(ranks)
    return None


def _declared_rank(view: GraphView, name: str):
    inferred = view.ctx.inferred_types.get(name)
    if inferred is not None and inferred.kind == "tensor" and inferred.shape is not None:
        return len(inferred.shape)
    for v in _value_infos(view):
        if v.name == name and v.type is not None and v.type.kind == "tensor" \
                and v.type.shape is not None:
            return len(v.type.shape)
    return None


def _value_infos(view: GraphView):
    g = view.graph
    yield from g.inputs
    yield from g.value_info
    yield from g.outputs
