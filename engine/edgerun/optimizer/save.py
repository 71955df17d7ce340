"""Write an optimized model as an ONNX file onnxruntime loads (`optimized_model_filepath`).

The com.edgerun operators the fusions introduce exist only in edgerun, so a copy of the model
is rewritten first (`portable_model`), one table entry per operator:

| com.edgerun          | written as                                                       |
| -------------------- | ---------------------------------------------------------------- |
| FusedConv            | com.microsoft FusedConv (same activation, activation_params);    |
|                      | QuantizeDequantize: Conv, QuantizeLinear and DequantizeLinear    |
| FusedGemm            | com.microsoft FusedGemm (activation_alpha/beta); Clip, HardSwish: |
|                      | Gemm and the activation                                          |
| FusedMatMul          | MatMul + the activation                                          |
| FusedBatchNormaliza- | BatchNormalization + the activation (QuantizeDequantize: its     |
| tion                 | QuantizeLinear and DequantizeLinear)                             |
| LayerNormalization   | LayerNormalization in the ONNX domain (onnxruntime registers it  |
|                      | for every opset, and writes it so itself before opset 17)        |
| Gelu                 | com.microsoft Gelu, or FastGelu for approximate="tanh"           |
| Attention            | Transpose, MatMul, Mul, [Add], Softmax, MatMul                   |
| HardSwish            | HardSigmoid (alpha 1/6, beta 1/2) and Mul                        |
| Swish                | Sigmoid and Mul (a Mul by alpha first where it is not 1); a      |
|                      | fused node with a Swish activation: its base operator and these  |
| QuantizeDequantize   | QuantizeLinear and DequantizeLinear                              |
| ElementwiseProgram   | its instructions' nodes: Add, Sub, Mul, Div (scalars as          |
|                      | initializers), QuantizeLinear and DequantizeLinear               |
| LookupTable          | Cast to int32 and Gather from the table (an int8 code's negative |
|                      | index reads the table's upper half, as its byte does)            |

Models of IR version < 4 must list every initializer as a graph input: initializers the
passes created are added to the inputs.
"""
from __future__ import annotations

import copy

from .. import ir
from ..onnx.writer import save_model
from .fuse_elementwise_program import ARITHMETIC, QUANTIZE_DEQUANTIZE
from .graph_edit import EDGERUN_DOMAIN, attr_float, attr_int, attr_ints, attr_text, subgraphs
from .qdq_patterns import FLOAT, INT8, INT32, UINT8

MICROSOFT = "com.microsoft"


def save_optimized(model: ir.Model, path: str) -> None:
    save_model(portable_model(model), path)


def portable_model(model: ir.Model) -> ir.Model:
    """A copy of `model` with only operators onnxruntime knows."""
    out = copy.deepcopy(model)
    state = {"microsoft": False, "counter": 0, "opset": out.opset_imports.get("", 0)}
    _rewrite_graph(out.graph, state)
    out.opset_imports.pop(EDGERUN_DOMAIN, None)
    if state["microsoft"]:
        out.opset_imports.setdefault(MICROSOFT, 1)
    if out.ir_version < 4:
        _list_initializers_as_inputs(out.graph)
    return out


def _rewrite_graph(graph: ir.Graph, state: dict) -> None:
    nodes = []
    for node in graph.nodes:
        for sub in subgraphs(node):
            _rewrite_graph(sub, state)
        if node.domain == EDGERUN_DOMAIN:
            rewrite = REWRITES.get(node.op_type)
            if rewrite is None:
                raise ValueError(f"node '{node.name}': no portable form for "
                                 f"com.edgerun::{node.op_type}")
            nodes += rewrite(node, graph, state)
        else:
            nodes.append(node)
    graph.nodes = nodes


def _fresh(graph: ir.Graph, state: dict, base: str) -> str:
    state["counter"] += 1
    return f"{base}__portable{state['counter']}"


def _activation_nodes(node: ir.Node, x: str, y: str, graph: ir.Graph, state: dict) -> list:
    name = attr_text(node, "activation")
    params = list(node.attr("activation_params") or [])
    if name == "QuantizeDequantize":
        return _grid_pair(node.name, x, y, params, graph, state)
    if name == "Swish":
        return _swish_pair(node.name, x, y, params[0] if params else 1.0, graph, state)
    act = ir.Node(op_type=name, inputs=[x], outputs=[y], name=_fresh(graph, state, node.name))
    if name == "LeakyRelu":
        act.attributes["alpha"] = attr_float("alpha", params[0])
    elif name == "HardSigmoid":
        act.attributes["alpha"] = attr_float("alpha", params[0])
        act.attributes["beta"] = attr_float("beta", params[1])
    elif name == "Clip":
        if state["opset"] < 11:
            act.attributes["min"] = attr_float("min", params[0])
            act.attributes["max"] = attr_float("max", params[1])
        else:
            for i, value in enumerate(params[:2]):
                bound = _fresh(graph, state, f"{node.name}_clip{i}")
                graph.initializers[bound] = _f32_scalar(bound, value)
                act.inputs.append(bound)
    return [act]


def _grid_pair(name: str, x: str, y: str, params: list, graph: ir.Graph,
               state: dict) -> list:
    """The QuantizeDequantize activation [scale, zero point, low, high] as its QDQ pair,
    named after `name`."""
    scale, point, low = params[0], int(params[1]), params[2]
    scale_name = _fresh(graph, state, f"{name}_scale")
    point_name = _fresh(graph, state, f"{name}_zero_point")
    graph.initializers[scale_name] = _f32_scalar(scale_name, scale)
    graph.initializers[point_name] = ir.Tensor(name=point_name, elem_type=UINT8 if low == 0
                                               else INT8, dims=(), raw=bytes([point & 0xFF]))
    pair = ir.Node(op_type="QuantizeDequantize", domain=EDGERUN_DOMAIN,
                   inputs=[x, scale_name, point_name], outputs=[y], name=name)
    return _quantize_dequantize(pair, graph, state)


def _base_attributes(node: ir.Node) -> dict:
    return {k: v for k, v in node.attributes.items()
            if k not in ("activation", "activation_params")}


def _unfused(op_type: str):
    def rewrite(node, graph, state):
        mid = _fresh(graph, state, node.outputs[0])
        base = ir.Node(op_type=op_type, inputs=list(node.inputs), outputs=[mid],
                       attributes=_base_attributes(node), name=node.name)
        return [base] + _activation_nodes(node, mid, node.outputs[0], graph, state)
    return rewrite


def _fused_conv(node, graph, state):
    if attr_text(node, "activation") in ("QuantizeDequantize", "Swish"):   # not FusedConv's
        return _unfused("Conv")(node, graph, state)
    state["microsoft"] = True
    return [ir.Node(op_type="FusedConv", domain=MICROSOFT, inputs=list(node.inputs),
                    outputs=list(node.outputs), attributes=dict(node.attributes),
                    name=node.name)]


def _fused_gemm(node, graph, state):
    activation = attr_text(node, "activation")
    if activation in ("Clip", "HardSwish", "Swish"):     # not among FusedGemm's activations
        return _unfused("Gemm")(node, graph, state)
    state["microsoft"] = True
    attributes = _base_attributes(node)
    attributes["activation"] = node.attributes["activation"]
    params = list(node.attr("activation_params") or [])
    for key, value in zip(("activation_alpha", "activation_beta"), params):
        attributes[key] = attr_float(key, value)
    return [ir.Node(op_type="FusedGemm", domain=MICROSOFT, inputs=list(node.inputs),
                    outputs=list(node.outputs), attributes=attributes, name=node.name)]


def _layer_norm(node, graph, state):
    return [ir.Node(op_type="LayerNormalization", inputs=list(node.inputs),
                    outputs=list(node.outputs), attributes=dict(node.attributes),
                    name=node.name)]


def _gelu(node, graph, state):
    state["microsoft"] = True
    op = "FastGelu" if attr_text(node, "approximate", "none") == "tanh" else "Gelu"
    return [ir.Node(op_type=op, domain=MICROSOFT, inputs=list(node.inputs),
                    outputs=list(node.outputs), name=node.name)]


def _attention(node, graph, state):
    q, k, v = node.inputs[:3]
    mask = node.inputs[3] if len(node.inputs) > 3 else ""
    name = node.name or "attention"
    kt, scores, scaled, logits, probs = (_fresh(graph, state, f"{name}_{s}")
                                         for s in ("kt", "scores", "scaled", "logits", "probs"))
    scale = _fresh(graph, state, f"{name}_scale")
    graph.initializers[scale] = _f32_scalar(scale, node.attr("scale"))
    nodes = [
        ir.Node(op_type="Transpose", inputs=[k], outputs=[kt],
                attributes={"perm": attr_ints("perm", [0, 1, 3, 2])}),
        ir.Node(op_type="MatMul", inputs=[q, kt], outputs=[scores]),
        ir.Node(op_type="Mul", inputs=[scores, scale], outputs=[scaled]),
    ]
    if mask:
        nodes.append(ir.Node(op_type="Add", inputs=[scaled, mask], outputs=[logits]))
    else:
        logits = scaled
    nodes += [ir.Node(op_type="Softmax", inputs=[logits], outputs=[probs],
                      attributes={"axis": attr_int("axis", -1)}),
              ir.Node(op_type="MatMul", inputs=[probs, v], outputs=list(node.outputs))]
    for n in nodes:
        n.name = _fresh(graph, state, name)
    return nodes


def _hard_swish(node, graph, state):
    x = node.inputs[0]
    gate = _fresh(graph, state, node.outputs[0])
    return [ir.Node(op_type="HardSigmoid", inputs=[x], outputs=[gate],
                    attributes={"alpha": attr_float("alpha", 1 / 6),
                                "beta": attr_float("beta", 0.5)},
                    name=_fresh(graph, state, node.name or "hard_swish")),
            ir.Node(op_type="Mul", inputs=[x, gate], outputs=list(node.outputs),
                    name=_fresh(graph, state, node.name or "hard_swish"))]


def _swish(node, graph, state):
    return _swish_pair(node.name, node.inputs[0], node.outputs[0], node.attr("alpha", 1.0),
                       graph, state)


def _swish_pair(name: str, x: str, y: str, alpha: float, graph: ir.Graph, state: dict) -> list:
    """x * Sigmoid(alpha x) as Sigmoid and Mul (a Mul by alpha first where it is not 1)."""
    name = name or "swish"
    nodes, scaled = [], x
    if alpha != 1.0:
        factor, scaled = _fresh(graph, state, f"{name}_alpha"), _fresh(graph, state, y)
        graph.initializers[factor] = _f32_scalar(factor, alpha)
        nodes.append(ir.Node(op_type="Mul", inputs=[x, factor], outputs=[scaled],
                             name=_fresh(graph, state, name)))
    gate = _fresh(graph, state, y)
    return nodes + [ir.Node(op_type="Sigmoid", inputs=[scaled], outputs=[gate],
                            name=_fresh(graph, state, name)),
                    ir.Node(op_type="Mul", inputs=[x, gate], outputs=[y],
                            name=_fresh(graph, state, name))]


def _quantize_dequantize(node, graph, state):
    quantized = _fresh(graph, state, node.outputs[0])
    name = node.name or "quantize_dequantize"
    dequantize_attributes = {k: v for k, v in node.attributes.items()
                             if k in ("axis", "block_size")}
    return [ir.Node(op_type="QuantizeLinear", inputs=list(node.inputs), outputs=[quantized],
                    attributes=dict(node.attributes), name=_fresh(graph, state, name)),
            ir.Node(op_type="DequantizeLinear", inputs=[quantized] + list(node.inputs[1:]),
                    outputs=list(node.outputs), attributes=dequantize_attributes,
                    name=_fresh(graph, state, name))]


def _elementwise_program(node, graph, state):
    ops = list(node.attr("ops"))
    operands, constants = list(node.attr("operands")), list(node.attr("constants"))
    name = node.name or "elementwise_program"
    registers, nodes = [node.inputs[0]], []
    for i, op in enumerate(ops):
        out = node.outputs[0] if i == len(ops) - 1 else _fresh(graph, state, f"{name}_{i}")
        a, b = registers[operands[2 * i]], operands[2 * i + 1]
        if op == QUANTIZE_DEQUANTIZE:
            nodes += _grid_pair(_fresh(graph, state, name), a, out,
                                constants[4 * i:4 * i + 4], graph, state)
        else:
            op_type, scalar_first = ARITHMETIC[op]
            if b >= 0:
                inputs = [a, registers[b]]
            else:
                scalar = _fresh(graph, state, f"{name}_scalar")
                graph.initializers[scalar] = _f32_scalar(scalar, constants[4 * i])
                inputs = [scalar, a] if scalar_first else [a, scalar]
            nodes.append(ir.Node(op_type=op_type, inputs=inputs, outputs=[out],
                                 name=_fresh(graph, state, name)))
        registers.append(out)
    return nodes


def _lookup_table(node, graph, state):
    name = node.name or "lookup_table"
    index = _fresh(graph, state, f"{name}_index")
    return [ir.Node(op_type="Cast", inputs=[node.inputs[0]], outputs=[index],
                    attributes={"to": attr_int("to", INT32)}, name=_fresh(graph, state, name)),
            ir.Node(op_type="Gather", inputs=[node.inputs[1], index], outputs=list(node.outputs),
                    attributes={"axis": attr_int("axis", 0)}, name=_fresh(graph, state, name))]


def _f32_scalar(name: str, value: float) -> ir.Tensor:
    import struct

    return ir.Tensor(name=name, elem_type=FLOAT, dims=(), raw=struct.pack("<f", float(value)))


def _list_initializers_as_inputs(graph: ir.Graph) -> None:
    listed = {v.name for v in graph.inputs}
    for name, t in graph.initializers.items():
        if name not in listed:
            graph.inputs.append(ir.ValueInfo(name=name, type=ir.TypeInfo(
                elem_type=t.elem_type, shape=tuple(t.dims))))


REWRITES = {
    "FusedConv": _fused_conv,
    "FusedGemm": _fused_gemm,
    "FusedMatMul": _unfused("MatMul"),
    "FusedBatchNormalization": _unfused("BatchNormalization"),
    "LayerNormalization": _layer_norm,
    "Gelu": _gelu,
    "HardSwish": _hard_swish,
    "Swish": _swish,
    "Attention": _attention,
    "QuantizeDequantize": _quantize_dequantize,
    "ElementwiseProgram": _elementwise_program,
    "LookupTable": _lookup_table,
}
