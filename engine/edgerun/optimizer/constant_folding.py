"""Nodes whose inputs are all constants are run once, now; their outputs become initializers.

The optimizer sits below the providers and does not import them: whoever calls optimize()
passes the function that runs one node (`evaluate`; the session passes
providers.registry.constant_evaluator(): the CPU provider's kernels on numpy arrays, or in a
page, where there is no numpy, the wasm provider's on HostTensors). Without one, nothing is
folded.

Skipped: random operators (each run must draw anew), nodes with subgraphs, operators of
domains other than ONNX's, outputs that are not plain tensors, and results so large that
folding would grow the model by more than MAX_GROWTH_BYTES beyond what the inputs hold
(e.g. an Expand to a huge shape). Below that, folding pays: the runtime would otherwise
rebuild the same tensor on every run (models that store weights as ConstantOfShape), and
onnxruntime folds them too.
"""
from __future__ import annotations

from ..ir.host_tensor import HostTensor
from .graph_edit import GraphView, PassContext, subgraphs

MAX_GROWTH_BYTES = 64 << 20
RANDOM_OPS = {"Bernoulli", "RandomNormal", "RandomNormalLike", "RandomUniform",
              "RandomUniformLike", "Multinomial", "Dropout"}
FOLDABLE_DOMAINS = ("", "ai.onnx", "ai.onnx.ml")


def constant_folding(view: GraphView, ctx: PassContext) -> int:
    count = 0
    for node in view.live_nodes():
        if view.is_dead(node) or not _foldable(view, node):
            continue
        outputs = _evaluate(view, ctx, node)
        if outputs is None:
            continue
        view.remove(node)
        for name, value in zip(node.outputs, outputs):
            if name:
                view.set_constant(name, value)
        count += 1
    return count


def _foldable(view: GraphView, node) -> bool:
    if node.domain not in FOLDABLE_DOMAINS or node.op_type in RANDOM_OPS:
        return False
    if node.op_type == "Constant" or any(True for _ in subgraphs(node)):
        return False
    inputs = [n for n in node.inputs if n]
    if not inputs:
        return False   # EyeLike-free sources like RandomX; Constant is handled elsewhere
    return all(view.constant(n) is not None for n in inputs)


def _evaluate(view: GraphView, ctx: PassContext, node):
    if ctx.evaluate is None:
        return None
    args = [view.constant(n) if n else None for n in node.inputs]
    try:
        result = ctx.evaluate(node, ctx.opset(node.domain), args)
    except Exception:   # noqa: BLE001 - no kernel, or a node that fails now (it fails the
        return None     # same way at run time)
    if isinstance(result, tuple) or (isinstance(result, list) and len(node.outputs) > 1):
        values = [_tensor_value(v) for v in result]
    else:
        values = [_tensor_value(result)]
    if len(values) < len([o for o in node.outputs if o]):
        return None
    if any(v is None for v, name in zip(values, node.outputs) if name):
        return None
    in_bytes = sum(_nbytes(a) for a in args if a is not None)
    out_bytes = sum(_nbytes(v) for v, name in zip(values, node.outputs) if name)
    if out_bytes > in_bytes + MAX_GROWTH_BYTES:
        return None
    return values


def _tensor_value(value):
    """A kernel's result as a constant value (numpy array or HostTensor); None for what no
    initializer can hold (sequences, maps, empty optionals)."""
    if value is None or isinstance(value, (list, dict)):
        return None
    if isinstance(value, HostTensor) or hasattr(value, "nbytes"):
        return value
    import numpy as np

    return np.asarray(value)     # a numpy scalar or Python number from a CPU kernel


def _nbytes(value) -> int:
    return len(value.data) if isinstance(value, HostTensor) else value.nbytes
