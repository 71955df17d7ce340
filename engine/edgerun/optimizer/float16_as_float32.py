"""A float16 model computes in float32 between its inputs and outputs, as onnxruntime's CPU
provider runs it.

No CPU kernel here (numpy, wasm) computes in float16: each widens its float16 operands to
float32 and narrows its result back, so a float16 graph pays two or three conversions per
node (MiniLM: 315 a run, more than its Add, Mul and Softmax together) and rounds every
intermediate value to float16. onnxruntime's CPU provider inserts Casts around the nodes it
has no float16 kernel for and removes the pairs that cancel, so its float16 models compute in
float32 throughout; this pass gives the same graph directly:

- float16 weights become float32 weights (converted once, at load);
- a float16 graph input is cast to float32 where it enters, a float16 graph output cast back
  where it leaves (so the model's signature is unchanged);
- Cast(to=float16) becomes Cast(to=float32), a ConstantOfShape filling float16 fills float32,
  and declared value types follow.

Every other operator takes float32 wherever it takes float16. The model is left as it is
when a float16 value comes from somewhere this does not retype: a subgraph (If/Loop/Scan), a
node of another domain than ai.onnx / com.microsoft / com.edgerun, an attribute naming
float16 as an output type (dtype, RandomNormal...), a sparse initializer, a weight that is
also a graph input, an output that no node computes.
Results differ from strict float16 arithmetic by its intermediate roundings: they are
closer to the exact values (and to onnxruntime's).
"""
from __future__ import annotations

from .. import ir
from ..ir import dtypes
from .constant_math import ConstantMath, Unfoldable
from .graph_edit import GraphView, PassContext, attr_int, subgraphs, tensor_of

HALF, SINGLE = dtypes.FLOAT16, dtypes.FLOAT
RETYPED_DOMAINS = ("", "ai.onnx", "com.microsoft", "com.edgerun")


def float16_as_float32(view: GraphView, ctx: PassContext) -> int:
    graph = view.graph
    if not _retypable(graph):
        return 0
    math = ConstantMath(ctx)
    try:
        weights = {name: math.cast(view.constant(name), SINGLE)
                   for name, t in graph.initializers.items() if t.elem_type == HALF}
    except Unfoldable:
        return 0
    for name, value in weights.items():
        view.set_constant(name, value)
    for node in list(graph.nodes):
        if node.op_type == "Cast" and node.attr("to") == HALF:
            node.attributes["to"] = attr_int("to", SINGLE)
        elif node.op_type == "ConstantOfShape":
            value = node.attr("value")
            if value is not None and value.elem_type == HALF:
                wide = math.cast(ctx.array_of(value), SINGLE)
                node.attributes["value"] = ir.Attribute("value", ir.AttrType.TENSOR,
                                                        tensor_of(wide, value.name))
    first = graph.nodes[0] if graph.nodes else None
    for v in graph.inputs:
        if _is_half(v) and v.name not in graph.initializers and first is not None:
            wide = ctx.fresh_name(f"{v.name}_float32")
            readers = view.readers(v.name)
            view.insert(_cast(v.name, wide, SINGLE, ctx), first)
            for node in readers:
                node.inputs = [wide if n == v.name else n for n in node.inputs]
    for v in graph.outputs:
        if _is_half(v):
            _narrow_output(view, v.name, ctx)
    for v in graph.value_info:
        if _is_half(v):
            v.type.elem_type = SINGLE
    return 1


def _narrow_output(view: GraphView, name: str, ctx: PassContext) -> None:
    """Graph output `name` is computed as `name`_float32 and cast back to float16 last."""
    producer = view.producer[name]
    wide = ctx.fresh_name(f"{name}_float32")
    producer.outputs = [wide if o == name else o for o in producer.outputs]
    view.producer[wide] = producer
    for node in view.readers(name):
        node.inputs = [wide if n == name else n for n in node.inputs]
    view.graph.nodes.append(_cast(wide, name, HALF, ctx))


def _cast(source: str, target: str, to: int, ctx: PassContext) -> ir.Node:
    return ir.Node("Cast", [source], [target], {"to": attr_int("to", to)},
                   name=ctx.fresh_name(f"{target}_cast"))


def _is_half(v: ir.ValueInfo) -> bool:
    return v.type is not None and v.type.kind == "tensor" and v.type.elem_type == HALF


def main_graph_with_float16(graph: ir.Graph, ctx: PassContext) -> bool:
    """The pass's trigger: the main graph, where float16 appears and converting can save
    conversions: float16 weights, or values passed between nodes (a lone node without
    weights converts its operands and result once either way)."""
    if graph is not ctx.model.graph or not _has_float16(graph):
        return False
    return len(graph.nodes) > 1 or any(t.elem_type == HALF
                                       for t in graph.initializers.values())


def _has_float16(graph: ir.Graph) -> bool:
    return any(_is_half(v) for v in graph.inputs + graph.outputs) or \
        any(t.elem_type == HALF for t in graph.initializers.values()) or \
        any(n.op_type == "Cast" and n.attr("to") == HALF for n in graph.nodes)


def _retypable(graph: ir.Graph) -> bool:
    """Whether every float16 value of `graph` comes from a source this pass retypes."""
    if graph.sparse_initializers:
        return False
    inputs = {v.name for v in graph.inputs}
    produced = {o for n in graph.nodes for o in n.outputs if o}
    if any(_is_half(v) and v.name not in produced for v in graph.outputs):
        return False                        # an output that is an input or a weight
    if any(t.elem_type == HALF and name in inputs for name, t in graph.initializers.items()):
        return False                        # a weight the caller may feed as float16
    for node in graph.nodes:
        if node.domain not in RETYPED_DOMAINS or any(True for _ in subgraphs(node)):
            return False
        if node.op_type in ("Cast", "ConstantOfShape"):
            continue
        for attr in node.attributes.values():
            if attr.name in ("dtype", "to", "output_dtype") and attr.value == HALF:
                return False
            if attr.type == ir.AttrType.TENSOR and attr.value.elem_type == HALF:
                return False
    return all(v.type is not None for v in graph.outputs)
