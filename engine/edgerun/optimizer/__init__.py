"""Graph passes, one module per pass, run by `optimize(model, level)` in a fixed order.

Levels are onnxruntime's (session.options.GraphOptimizationLevel): 0 disables everything,
1 (basic) runs the rewrites that keep every operator standard, 2 (extended) adds fusions
into LayerNormalization, Gelu, attention and com.edgerun fused operators, 99 (all) is
extended plus whatever needs known shapes.

Each pass is `fn(view, ctx) -> number of rewrites` over one graph; `optimize` runs it on the
main graph and on every subgraph (If/Loop/Scan bodies), in the order of PASSES:

| order | pass                      | level    | what it does                                   | runs where the graph has |
| ----- | ------------------------- | -------- | ---------------------------------------------- | ------------------------ |
| 1     | constants_to_initializers | basic    | Constant nodes -> initializers                 | Constant                 |
| 2     | eliminate_identity        | basic    | Identity, inference Dropout removed            | Identity, Dropout        |
| 3     | infer_types               | basic    | shape inference, once; operand types checked   | (main graph only)        |
| 4     | fuse_qdq_matmul           | extended | MatMul of DequantizeLinear(8-bit) and constant | DequantizeLinear         |
|       |                           |          | DequantizeLinear(8-bit weights) -> com.micro-  |                          |
|       |                           |          | soft MatMulIntegerToFloat (before folding)     |                          |
| 4b    | fuse_qdq_conv             | extended | QuantizeLinear(Conv of DequantizeLinear(8-bit) | DequantizeLinear         |
|       |                           |          | and constant DequantizeLinear(8-bit weights))  |                          |
|       |                           |          | -> QLinearConv (before folding)                |                          |
| 4c    | fuse_qdq_data_movement    | extended | DequantizeLinear -> MaxPool, Reshape, Resize   | DequantizeLinear         |
|       |                           |          | (nearest), ... -> QuantizeLinear on one grid:  |                          |
|       |                           |          | the op on the codes; Concat of Dequantize-     |                          |
|       |                           |          | Linear outputs: codes requantized by tables    |                          |
| 4d    | fuse_quantized_table      | extended | DequantizeLinear(8-bit) -> elementwise chain   | DequantizeLinear         |
|       |                           |          | -> QuantizeLinear -> com.edgerun LookupTable   |                          |
|       |                           |          | of the 256 codes (where the session's pro-     |                          |
|       |                           |          | viders run it: the CPU's)                      |                          |
| 5     | constant_folding          | basic    | nodes of constants evaluated now               | any node                 |
| 6     | fold_shapes               | basic    | static Shape-derived values -> constants       | (main graph only)        |
| 6b    | hoist_loop_invariants     | basic    | Loop/Scan body nodes that read nothing of the  | Loop, Scan               |
|       |                           |          | iteration -> before the loop, run once         |                          |
| 7     | constant_folding          | basic    | again, over what fold_shapes and hoisting made | any node                 |
|       |                           |          | constant                                       |                          |
| 8     | fuse_conv_bn              | basic    | Conv + BatchNormalization -> Conv              | BatchNormalization       |
| 9     | fuse_conv_mul             | basic    | Conv + per-channel Mul -> Conv, W and B scaled | Conv                     |
| 10    | fuse_conv_add             | basic    | Conv + per-channel Add -> Conv with bias       | Conv                     |
| 11    | fuse_bn_mul_add           | basic    | BatchNorm + per-channel Mul/Add -> BatchNorm   | BatchNormalization       |
| 12    | fuse_matmul_add           | basic    | 2-D MatMul + Add -> Gemm                       | MatMul                   |
| 13    | fold_scaler               | basic    | ML Scaler [+ Cast] + Gemm/Linear* -> one node  | Scaler                   |
| 14    | eliminate_dead            | basic    | unread nodes and initializers removed          | any node                 |
| 15    | fuse_gelu                 | extended | Erf / Tanh GELU formulas -> Gelu               | Erf, Tanh, Pow           |
| 16    | fuse_layer_norm           | extended | ReduceMean ... Add formula -> LayerNorm        | ReduceMean               |
| 17    | fuse_attention            | extended | MatMul/Softmax/MatMul -> Attention             | Softmax                  |
| 18    | fuse_hard_swish           | extended | x * HardSigmoid(x) or x * Clip(x+3,0,6)/6      | HardSigmoid, Clip        |
|       |                           |          | -> HardSwish                                   |                          |
| 18b   | fuse_swish                | extended | x * Sigmoid(x) -> Swish (where the session's   | Sigmoid                  |
|       |                           |          | providers run it where they run the pair)      |                          |
| 19    | fuse_activation           | extended | Conv/Gemm/MatMul + activation -> Fused*        | Conv, Gemm, MatMul       |
| 20    | fuse_matmul_integer_to_float | extended | MatMulInteger + Cast + Mul [+ Add]          | MatMulInteger            |
|       |                           |          | -> com.microsoft MatMulIntegerToFloat          |                          |
| 21    | fuse_quantize_dequantize  | extended | QuantizeLinear -> DequantizeLinear pair ->     | QuantizeLinear           |
|       |                           |          | com.edgerun QuantizeDequantize (where the      |                          |
|       |                           |          | session's providers run it: cpu, wasm, webgpu) |                          |
| 21b   | fuse_quantize_dequantize_ | extended | Conv / BatchNormalization -> QuantizeDequan-   | QuantizeDequantize       |
|       | epilogue                  |          | tize -> FusedConv / FusedBatchNormalization    |                          |
|       |                           |          | with the pair as activation (where the         |                          |
|       |                           |          | session's providers run it: the CPU's)         |                          |
| 21c   | fuse_elementwise_program  | extended | a chain of float32 Add/Sub/Mul/Div (by chain   | Add, Sub, Mul, Div,      |
|       |                           |          | values or scalars) and QuantizeDequantize over | QuantizeDequantize       |
|       |                           |          | one tensor -> com.edgerun ElementwiseProgram,  |                          |
|       |                           |          | one pass (where the session's providers run    |                          |
|       |                           |          | it: the CPU's)                                 |                          |
| 22    | float16_as_float32        | extended | a float16 model computes in float32 between    | (main graph) float16     |
|       |                           |          | its inputs and outputs, as onnxruntime's CPU   |                          |
| 23    | eliminate_dead            | extended | what the fusions left unread                   | any node                 |
| 24    | fuse_dynamic_quantize_    | extended | DynamicQuantizeLinear -> MatMulIntegerToFloat  | DynamicQuantizeLinear    |
|       | matmul                    |          | (its only reader, once the fusions' dead scale |                          |
|       |                           |          | products are gone) -> com.microsoft Dynamic-   |                          |
|       |                           |          | QuantizeMatMul (where the session's providers  |                          |
|       |                           |          | run it: the CPU's)                             |                          |

A pass is skipped on a graph that has none of the operators in its last column: building a
pass's view of a graph costs more than most passes, and models with many small subgraphs
(silero VAD: ~50) would otherwise build hundreds of views.

Subgraphs see the constants of their enclosing graphs: a Slice of an outer weight inside a
Loop body folds like one in the main graph (the result becomes an initializer of the body).

fold_shapes reads infer_types' inference (nothing is folded where inference fails); the ranks
it infers also let fuse_matmul_add and fuse_attention match where declared types say nothing.

Passes read constant values as numpy arrays, or without numpy (a page) as HostTensors: there
constant folding and the fusions that compute new weights (constant_math.py) run the wasm
provider's kernels, the other fusions judge constants by shape, type and scalar value as they
do with numpy, and only fold_scaler (NEED_NUMPY, an ai.onnx.ml pattern) is skipped.

`optimize` edits the model it is given and returns it.
"""
from __future__ import annotations

from typing import Optional

from .. import ir
from .constant_folding import constant_folding
from .constants_to_initializers import constants_to_initializers
from .eliminate_dead import eliminate_dead
from .eliminate_identity import eliminate_identity
from .float16_as_float32 import float16_as_float32, main_graph_with_float16
from .fold_scaler import fold_scaler
from .fold_shapes import fold_shapes
from .infer_types import infer_types
from .fuse_activation import fuse_activation
from .fuse_attention import fuse_attention
from .fuse_bn_mul_add import fuse_bn_mul_add
from .fuse_conv_add import fuse_conv_add
from .fuse_conv_bn import fuse_conv_bn
from .fuse_conv_mul import fuse_conv_mul
from .fuse_elementwise_program import fuse_elementwise_program
from .fuse_gelu import fuse_gelu
from .fuse_hard_swish import fuse_hard_swish
from .fuse_swish import fuse_swish
from .fuse_layer_norm import fuse_layer_norm
from .fuse_matmul_add import fuse_matmul_add
from .fuse_dynamic_quantize_matmul import fuse_dynamic_quantize_matmul
from .fuse_quantize_dequantize_epilogue import fuse_quantize_dequantize_epilogue
from .fuse_qdq_conv import fuse_qdq_conv
from .fuse_qdq_data_movement import fuse_qdq_data_movement
from .fuse_qdq_matmul import fuse_qdq_matmul
from .fuse_matmul_integer_to_float import fuse_matmul_integer_to_float
from .fuse_quantize_dequantize import fuse_quantize_dequantize
from .fuse_quantized_table import fuse_quantized_table
from .graph_edit import GraphView, PassContext, subgraphs
from .hoist_loop_invariants import hoist_loop_invariants

DISABLE_ALL, BASIC, EXTENDED, ALL = 0, 1, 2, 99

MAIN_GRAPH = "main graph"   # trigger of passes that only look at the main graph

# (pass, lowest level that runs it, operator types without which it has nothing to do:
# None = any graph, or a test of (graph, ctx)); the order is the order they run in
PASSES = [
    (constants_to_initializers, BASIC, {"Constant"}),
    (eliminate_identity, BASIC, {"Identity", "Dropout"}),
    (infer_types, BASIC, MAIN_GRAPH),
    (fuse_qdq_matmul, EXTENDED, {"DequantizeLinear"}),
    (fuse_qdq_conv, EXTENDED, {"DequantizeLinear"}),
    (fuse_qdq_data_movement, EXTENDED, {"DequantizeLinear"}),
    (fuse_quantized_table, EXTENDED, {"DequantizeLinear"}),
    (constant_folding, BASIC, None),
    (fold_shapes, BASIC, MAIN_GRAPH),
    (hoist_loop_invariants, BASIC, {"Loop", "Scan"}),
    (constant_folding, BASIC, None),
    (fuse_conv_bn, BASIC, {"BatchNormalization"}),
    (fuse_conv_mul, BASIC, {"Conv"}),
    (fuse_conv_add, BASIC, {"Conv"}),
    (fuse_bn_mul_add, BASIC, {"BatchNormalization"}),
    (fuse_matmul_add, BASIC, {"MatMul"}),
    (fold_scaler, BASIC, {"Scaler"}),
    (eliminate_dead, BASIC, None),
    (fuse_gelu, EXTENDED, {"Erf", "Tanh", "Pow"}),
    (fuse_layer_norm, EXTENDED, {"ReduceMean"}),
    (fuse_attention, EXTENDED, {"Softmax"}),
    (fuse_hard_swish, EXTENDED, {"HardSigmoid", "Clip"}),
    (fuse_swish, EXTENDED, {"Sigmoid"}),
    (fuse_activation, EXTENDED, {"Conv", "Gemm", "MatMul"}),
    (fuse_matmul_integer_to_float, EXTENDED, {"MatMulInteger"}),
    (fuse_quantize_dequantize, EXTENDED, {"QuantizeLinear"}),
    (fuse_quantize_dequantize_epilogue, EXTENDED, {"QuantizeDequantize"}),
    (fuse_elementwise_program, EXTENDED, {"Add", "Sub", "Mul", "Div", "QuantizeDequantize"}),
    (float16_as_float32, EXTENDED, main_graph_with_float16),
    (eliminate_dead, EXTENDED, None),
    (fuse_dynamic_quantize_matmul, EXTENDED, {"DynamicQuantizeLinear"}),
]

# The passes that need numpy for arithmetic on constant values: without numpy (a page) they
# are skipped. Every other pass reads constants as HostTensors there, and computes with the
# evaluator it is given (the wasm provider's kernels in a page; constant_math.py).
NEED_NUMPY = (fold_scaler,)


def optimize(model: ir.Model, level=ALL, report: Optional[dict] = None,
             evaluate=None, providers=None, checked_nodes=None) -> ir.Model:
    """Run every pass up to `level` (an int or GraphOptimizationLevel) over `model`.

    `report`, if given, receives pass name -> number of rewrites. `evaluate(node, opset,
    inputs)` runs one node for constant folding (providers.registry.constant_evaluator());
    without it nothing is folded. `providers` (the session's, in priority order) lets the
    fusions whose kernel only some providers have apply where those providers run them.
    `checked_nodes` (id(node) -> node): nodes whose operand types infer_types checks.
    """
    level = int(level)
    if level <= DISABLE_ALL:
        return model
    ctx = PassContext(model, evaluate, providers, checked_nodes)
    for fn, lowest, trigger in PASSES:
        if level < lowest or (not ctx.has_numpy and fn in NEED_NUMPY):
            continue
        count = _run_everywhere(fn, trigger, model.graph, ctx, {})
        if report is not None:
            report[fn.__name__] = report.get(fn.__name__, 0) + count
    _drop_stale_value_info(model.graph)
    return model


def _run_everywhere(fn, trigger, graph: ir.Graph, ctx: PassContext, outer: dict) -> int:
    """Run pass `fn` on `graph` and its subgraphs; `outer` maps the constant initializers
    of the enclosing graphs visible here to their tensors."""
    count = 0
    if _has_work(trigger, graph, ctx):
        view = GraphView(graph, ctx, outer)
        count = fn(view, ctx)
        view.commit()
    inner = None
    for node in graph.nodes:
        for sub in subgraphs(node):
            if inner is None:
                inner = _visible_constants(graph, ctx, outer)
            count += _run_everywhere(fn, trigger, sub, ctx, inner)
    return count


def _has_work(trigger, graph: ir.Graph, ctx: PassContext) -> bool:
    if trigger is None:
        return bool(graph.nodes) or bool(graph.initializers)
    if callable(trigger):
        return trigger(graph, ctx)
    if trigger == MAIN_GRAPH:
        return graph is ctx.model.graph
    return any(node.op_type in trigger for node in graph.nodes)


def _visible_constants(graph: ir.Graph, ctx: PassContext, outer: dict) -> dict:
    """The constants `graph`'s subgraphs can read: the enclosing ones `graph` does not
    shadow, plus its own initializers that no caller can override."""
    defined = {v.name for v in graph.inputs}
    defined.update(o for n in graph.nodes for o in n.outputs if o)
    visible = {name: t for name, t in outer.items() if name not in defined}
    overridable = defined if (graph is not ctx.model.graph
                              or ctx.inputs_override_initializers) else set()
    for name, t in graph.initializers.items():
        if name not in overridable:
            visible[name] = t
    return visible


def _drop_stale_value_info(graph: ir.Graph) -> None:
    """value_info of values the passes removed or turned into initializers goes."""
    produced = {o for n in graph.nodes for o in n.outputs if o}
    graph.value_info = [v for v in graph.value_info
                        if v.name in produced and v.name not in graph.initializers]
    for node in graph.nodes:
        for sub in subgraphs(node):
            _drop_stale_value_info(sub)


__all__ = ["optimize", "PASSES", "DISABLE_ALL", "BASIC", "EXTENDED", "ALL"]
