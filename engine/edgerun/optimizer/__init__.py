"""Graph passes, one module per pass, run by `optimize(model, level)` in a fixed order.

Levels are onnxruntime's (session.options.GraphOptimizationLevel): 0 disables everything,
1 (basic) runs the rewrites that keep every operator standard, 2 (extended) adds fusions
into LayerNormalization, Gelu, attention and com.edgerun fused operators, 99 (all) is
extended plus whatever needs known shapes.

Each pass is `fn(view, ctx) -> number of rewrites` over one graph; `optimize` runs it on the
main graph and on every subgraph (If/Loop/Scan bodies), in the order of PASSES:

| order | pass                      | level    | what it does                                   |
| ----- | ------------------------- | -------- | ---------------------------------------------- |
| 1     | constants_to_initializers | basic    | Constant nodes -> initializers                 |
| 2     | eliminate_identity        | basic    | Identity, inference Dropout removed            |
| 3     | constant_folding          | basic    | nodes of constants evaluated now               |
| 4     | fold_shapes               | basic    | static Shape-derived values -> constants       |
| 5     | constant_folding          | basic    | again, over what fold_shapes made constant     |
| 6     | fuse_conv_bn              | basic    | Conv + BatchNormalization -> Conv              |
| 7     | fuse_conv_add             | basic    | Conv + per-channel Add -> Conv with bias       |
| 8     | fuse_matmul_add           | basic    | 2-D MatMul + Add -> Gemm                       |
| 9     | eliminate_dead            | basic    | unread nodes and initializers removed          |
| 10    | fuse_gelu                 | extended | Erf / Tanh GELU formulas -> Gelu               |
| 11    | fuse_layer_norm           | extended | ReduceMean ... Add formula -> LayerNorm        |
| 12    | fuse_attention            | extended | MatMul/Softmax/MatMul -> Attention             |
| 13    | fuse_activation           | extended | Conv/Gemm/MatMul + activation -> Fused*        |
| 14    | eliminate_dead            | extended | what the fusions left unread                   |

fold_shapes needs edgerun.shape_inference (it does nothing without it); the ranks it infers
also let fuse_matmul_add and fuse_attention match where declared types say nothing.

`optimize` edits the model it is given and returns it.
"""
from __future__ import annotations

from .. import ir
from .constant_folding import constant_folding
from .constants_to_initializers import constants_to_initializers
from .eliminate_dead import eliminate_dead
from .eliminate_identity import eliminate_identity
from .fold_shapes import fold_shapes
from .fuse_activation import fuse_activation
from .fuse_attention import fuse_attention
from .fuse_conv_add import fuse_conv_add
from .fuse_conv_bn import fuse_conv_bn
from .fuse_gelu import fuse_gelu
from .fuse_layer_norm import fuse_layer_norm
from .fuse_matmul_add import fuse_matmul_add
from .graph_edit import GraphView, PassContext, subgraphs

DISABLE_ALL, BASIC, EXTENDED, ALL = 0, 1, 2, 99

# (pass, lowest level that runs it); the order is the order they run in
PASSES = [
    (constants_to_initializers, BASIC),
    (eliminate_identity, BASIC),
    (constant_folding, BASIC),
    (fold_shapes, BASIC),
    (constant_folding, BASIC),
    (fuse_conv_bn, BASIC),
    (fuse_conv_add, BASIC),
    (fuse_matmul_add, BASIC),
    (eliminate_dead, BASIC),
    (fuse_gelu, EXTENDED),
    (fuse_layer_norm, EXTENDED),
    (fuse_attention, EXTENDED),
    (fuse_activation, EXTENDED),
    (eliminate_dead, EXTENDED),
]


def optimize(model: ir.Model, level=ALL, report: dict = None) -> ir.Model:
    """Run every pass up to `level` (an int or GraphOptimizationLevel) over `model`.

    `report`, if given, receives pass name -> number of rewrites.
    """
    level = int(level)
    if level <= DISABLE_ALL:
        return model
    if not _numpy_available():
        return model      # every pass reads constant values with numpy
    ctx = PassContext(model)
    for fn, lowest in PASSES:
        if level < lowest:
            continue
        count = _run_everywhere(fn, model.graph, ctx)
        if report is not None:
            report[fn.__name__] = report.get(fn.__name__, 0) + count
    _drop_stale_value_info(model.graph)
    return model


def _run_everywhere(fn, graph: ir.Graph, ctx: PassContext) -> int:
    view = GraphView(graph, ctx)
    count = fn(view, ctx)
    view.commit()
    for node in graph.nodes:
        for sub in subgraphs(node):
            count += _run_everywhere(fn, sub, ctx)
    return count


def _drop_stale_value_info(graph: ir.Graph) -> None:
    """value_info of values the passes removed or turned into initializers goes."""
    produced = {o for n in graph.nodes for o in n.outputs if o}
    graph.value_info = [v for v in graph.value_info
                        if v.name in produced and v.name not in graph.initializers]
    for node in graph.nodes:
        for sub in subgraphs(node):
            _drop_stale_value_info(sub)


def _numpy_available() -> bool:
    try:
        import numpy  # noqa: F401
    except ImportError:
        return False
    return True


__all__ = ["optimize", "PASSES", "DISABLE_ALL", "BASIC", "EXTENDED", "ALL"]
