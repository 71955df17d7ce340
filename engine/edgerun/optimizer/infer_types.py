"""Shape and type inference of the model, once, before constant folding evaluates anything:
fold_shapes reads it (the passes between keep every surviving name's type and value), and
the session's nodes (`ctx.checked_nodes`, the model's own) are refused here when their
inputs have types their operators do not take (shape_inference/type_check.py), before a
kernel computes something else from them. Runs after Constant and Identity nodes are gone,
which cost inference time and change no type. Without edgerun.shape_inference, or where
inference fails (it is stricter than onnxruntime about declared shapes), it leaves
`ctx.inferred` None: then nothing is checked or folded from shapes.
"""
from __future__ import annotations

from .graph_edit import GraphView, PassContext


def infer_types(view: GraphView, ctx: PassContext) -> int:
    if view.graph is not ctx.model.graph:
        return 0
    try:
        from ..shape_inference import infer_shapes
        from ..shape_inference.type_check import check_types
    except ImportError:
        return 0
    try:
        ctx.inferred = infer_shapes(ctx.model)
    except Exception:   # noqa: BLE001 - an inference failure only means nothing is checked
        return 0
    if ctx.checked_nodes is not None:
        check_types(ctx.model.graph, ctx.inferred, ctx.opsets, only=ctx.checked_nodes)
    return 0
