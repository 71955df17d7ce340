"""Shape and type inference of the model, once, before constant folding evaluates anything:
fold_shapes reads it (the passes between keep every surviving name's type and value), and
the session's nodes (`ctx.checked_nodes`, the model's own) are refused here when their
inputs have types their operators do not take (shape_inference/type_check.py), before a
kernel computes something else from them. Runs after Constant and Identity nodes are gone,
which cost inference time and change no type. Where inference fails (it is stricter than
onnxruntime about declared shapes), it leaves `ctx.inferred` None: then nothing is checked
or folded from shapes.
"""
from __future__ import annotations

from ..shape_inference.type_check import inferred_and_checked
from .graph_edit import GraphView, PassContext


def infer_types(view: GraphView, ctx: PassContext) -> int:
    if view.graph is not ctx.model.graph:
        return 0
    ctx.inferred = inferred_and_checked(ctx.model, ctx.checked_nodes)
    return 0
