"""onnxruntime's contrib operators (com.microsoft), each defined once as standard ONNX nodes.

onnxruntime's transformer optimizer, its quantizers and some exporters write operators of the
com.microsoft domain (SkipLayerNormalization, BiasGelu, MatMulNBits, ...). Rather than one
kernel per provider, each is expanded here into operators every provider runs, the way ONNX
function bodies are (inline_functions.py): the session does this before optimizing, at every
optimization level and without numpy, so wasm and WebGPU in a page run these models too.
The optimizer then fuses the expanded forms where it has fused kernels (Gelu, LayerNorm) and
folds constant work away (MatMulNBits' dequantization of constant weights becomes one float
weight at load time).

Semantics follow onnxruntime's ContribOperators documentation and are checked against
onnxruntime's own kernels (tests/test_contrib_ops.py). EXPANSIONS maps op_type to a function
`expand(node, b) -> None` that emits nodes through the Builder `b`.
"""
from __future__ import annotations

import struct

from .. import ir
from ..errors import InvalidGraph
from .graph_edit import EDGERUN_DOMAIN, attr_float, attr_int, attr_ints, attr_string

MICROSOFT = "com.microsoft"
FLOAT, UINT8, INT64 = 1, 2, 7
_FORMATS = {FLOAT: "f", UINT8: "B", INT64: "q"}


class Builder:
    """Emits the nodes of one expansion into a graph: fresh value names, scalar constants
    as initializers, opset-dependent spellings (ReduceMean's axes, LayerNormalization)."""

    def __init__(self, graph: ir.Graph, model: ir.Model, names, prefix: str):
        self.graph, self.model, self.names, self.prefix = graph, model, names, prefix
        self.opset = model.opset_imports.get("", 1)
        self.nodes: list = []

    def fresh(self, hint: str) -> str:
        return self.names(f"{self.prefix}/{hint}")

    def op(self, op_type: str, inputs: list, outputs=None, domain: str = "", **attrs) -> str:
        """Add a node; returns its first output (a fresh name unless given)."""
        outputs = list(outputs) if outputs else [self.fresh(op_type.lower())]
        self.nodes.append(ir.Node(op_type=op_type, inputs=list(inputs), outputs=outputs,
                                  attributes={k: _attribute(k, v) for k, v in attrs.items()},
                                  domain=domain, name=self.fresh(op_type)))
        return outputs[0]

    def const(self, values, elem_type: int = FLOAT, hint: str = "c") -> str:
        """A constant initializer (float32, uint8 or int64) of `values`: a number gives a
        scalar, a list a vector."""
        flat = values if isinstance(values, (list, tuple)) else [values]
        dims = (len(flat),) if isinstance(values, (list, tuple)) else ()
        name = self.fresh(hint)
        raw = struct.pack(f"<{len(flat)}{_FORMATS[elem_type]}", *flat)
        self.graph.initializers[name] = ir.Tensor(name, elem_type, dims, raw=raw)
        return name

    def elem_type_of(self, name: str):
        """The element type of a value this graph declares (initializer, input, value_info),
        or None."""
        if name in self.graph.initializers:
            return self.graph.initializers[name].elem_type
        for v in list(self.graph.inputs) + list(self.graph.value_info):
            if v.name == name and v.type is not None:
                return v.type.elem_type
        return None

    def unsqueeze_last(self, x: str) -> str:
        if self.opset >= 13:
            return self.op("Unsqueeze", [x, self.const([-1], INT64, hint="axes")])
        return self.op("Unsqueeze", [x], axes=[-1])

    def reduce_mean(self, x: str, axes: list) -> str:
        if self.opset >= 18:
            return self.op("ReduceMean", [x, self.const(list(axes), INT64, hint="axes")],
                           keepdims=1)
        return self.op("ReduceMean", [x], axes=list(axes), keepdims=1)

    def layer_norm(self, x: str, scale: str, bias: str, outputs: list, epsilon: float) -> None:
        """LayerNormalization over the last axis: ai.onnx from opset 17, edgerun's own below."""
        domain = "" if self.opset >= 17 else EDGERUN_DOMAIN
        if domain:
            self.model.opset_imports.setdefault(EDGERUN_DOMAIN, 1)
        self.op("LayerNormalization", [x, scale] + ([bias] if bias else []), outputs,
                domain=domain, axis=-1, epsilon=epsilon)

    def gelu(self, x: str, output: str, approximate: str) -> None:
        """Gelu: ai.onnx from opset 20, edgerun's own below."""
        domain = "" if self.opset >= 20 else EDGERUN_DOMAIN
        if domain:
            self.model.opset_imports.setdefault(EDGERUN_DOMAIN, 1)
        self.op("Gelu", [x], [output], domain=domain, approximate=approximate)


def _attribute(name: str, value) -> ir.Attribute:
    if isinstance(value, str):
        return attr_string(name, value)
    if isinstance(value, float):
        return attr_float(name, value)
    if isinstance(value, (list, tuple)):
        return attr_ints(name, value)
    return attr_int(name, value)


def _inputs(node: ir.Node, count: int) -> list:
    """The node's first `count` inputs, '' for the absent ones."""
    return [node.inputs[i] if i < len(node.inputs) else "" for i in range(count)]


def _outputs(node: ir.Node, count: int) -> list:
    return [node.outputs[i] if i < len(node.outputs) else "" for i in range(count)]


def _float(node: ir.Node, name: str, default: float) -> float:
    return float(node.attr(name, default))


# ---- the expansions ------------------------------------------------------------------------

def _skip_sum(node: ir.Node, b: Builder, bias_index: int) -> str:
    """input + skip (+ bias): SkipLayerNormalization's and SkipSimplified's first step."""
    x, skip = node.inputs[0], node.inputs[1]
    total = b.op("Add", [x, skip])
    bias = _inputs(node, bias_index + 1)[bias_index]
    return b.op("Add", [total, bias]) if bias else total


def _pass_sum(node: ir.Node, b: Builder, total: str) -> None:
    """Output 3, input_skip_bias_sum, when the graph reads it."""
    summed = _outputs(node, 4)[3]
    if summed:
        b.op("Identity", [total], [summed])


def skip_layer_normalization(node: ir.Node, b: Builder) -> None:
    """LayerNorm(input + skip + bias) * gamma + beta over the last axis; outputs
    (output, mean, inv_std_var, input_skip_bias_sum), the middle two as LayerNormalization's."""
    total = _skip_sum(node, b, 4)
    gamma, beta = _inputs(node, 4)[2:4]
    out, mean, inv_std = _outputs(node, 3)
    outputs = [out] + ([mean, inv_std] if mean or inv_std else [])
    b.layer_norm(total, gamma, beta, [o or b.fresh("unused") for o in outputs],
                 _float(node, "epsilon", 1e-12))
    _pass_sum(node, b, total)


def _rms_norm(b: Builder, x: str, scale: str, axes: list, epsilon: float, output: str,
              inv_std: str = "") -> None:
    """x / sqrt(mean(x^2 over axes) + epsilon) * scale."""
    mean_square = b.reduce_mean(b.op("Mul", [x, x]), axes)
    inv = b.op("Reciprocal", [b.op("Sqrt", [b.op("Add", [mean_square, b.const(epsilon)])])],
               [inv_std] if inv_std else None)
    b.op("Mul", [b.op("Mul", [x, inv]), scale], [output])


def simplified_layer_normalization(node: ir.Node, b: Builder) -> None:
    """RMS normalization over the axes from `axis` on; output 1 is inv_std_var. The axes are
    those of the scale's rank when the input rank is unknown: `axis` must be negative then."""
    axis = int(node.attr("axis", -1))
    if axis >= 0:
        raise InvalidGraph(f"{node.name or node.op_type}: SimplifiedLayerNormalization with "
                           f"a non-negative axis ({axis}) is not supported; use a negative one")
    out, _, inv_std = (_outputs(node, 3) + [""])[:3] if len(node.outputs) > 2 else \
        (node.outputs[0], "", _outputs(node, 2)[1])
    _rms_norm(b, node.inputs[0], node.inputs[1], list(range(axis, 0)),
              _float(node, "epsilon", 1e-5), out, inv_std)


def skip_simplified_layer_normalization(node: ir.Node, b: Builder) -> None:
    """RMS normalization of input + skip (+ bias) over the last axis, times gamma; outputs
    (output, mean (unused), inv_std_var, input_skip_bias_sum)."""
    total = _skip_sum(node, b, 3)
    out, _, inv_std = _outputs(node, 3)
    _rms_norm(b, total, node.inputs[2], [-1], _float(node, "epsilon", 1e-12), out, inv_std)
    _pass_sum(node, b, total)


def bias_gelu(node: ir.Node, b: Builder) -> None:
    """Gelu(A + B), the erf form."""
    b.gelu(b.op("Add", node.inputs[:2]), node.outputs[0], "none")


def fast_gelu(node: ir.Node, b: Builder) -> None:
    """Gelu(X (+ bias)), the tanh approximation."""
    x, bias = _inputs(node, 2)
    b.gelu(b.op("Add", [x, bias]) if bias else x, node.outputs[0], "tanh")


def microsoft_gelu(node: ir.Node, b: Builder) -> None:
    b.gelu(node.inputs[0], node.outputs[0], "none")


def quick_gelu(node: ir.Node, b: Builder) -> None:
    """x * sigmoid(alpha * x)."""
    x = node.inputs[0]
    gate = b.op("Sigmoid", [b.op("Mul", [x, b.const(_float(node, "alpha", 1.702))])])
    b.op("Mul", [x, gate], [node.outputs[0]])


def bias_add(node: ir.Node, b: Builder) -> None:
    """X + bias + skip."""
    x, bias, skip = node.inputs[:3]
    b.op("Add", [b.op("Add", [x, bias]), skip], [node.outputs[0]])


def fused_matmul(node: ir.Node, b: Builder) -> None:
    """alpha * op(A) @ op(B), op transposing the last two axes where transA/transB say."""
    if node.attr("transBatchA", 0) or node.attr("transBatchB", 0):
        raise InvalidGraph(f"{node.name or node.op_type}: FusedMatMul with transBatchA/B is "
                           f"not supported")
    a, bmat = node.inputs[:2]
    if node.attr("transA", 0):
        a = _swap_last(b, a)
    if node.attr("transB", 0):
        bmat = _swap_last(b, bmat)
    alpha = _float(node, "alpha", 1.0)
    if alpha == 1.0:
        b.op("MatMul", [a, bmat], [node.outputs[0]])
    else:
        b.op("Mul", [b.op("MatMul", [a, bmat]), b.const(alpha)], [node.outputs[0]])


def _swap_last(b: Builder, x: str) -> str:
    """x with its last two axes swapped, whatever its rank (Einsum's ellipsis)."""
    if b.opset < 12:
        raise InvalidGraph("FusedMatMul with transA/transB needs ai.onnx opset 12 or later")
    return b.op("Einsum", [x], equation="...ij->...ji")


def matmul_nbits(node: ir.Node, b: Builder) -> None:
    """A @ dequantize(B)^T (+ bias). B holds N rows of K weights quantized in blocks of
    block_size along K, `bits` each, packed low bits first into uint8 [N, blocks, blob];
    scales [N * blocks] (or [N, blocks]); zero points packed the same way per row (uint8) or
    in the scales' type; absent, 2^(bits - 1). Every step is a standard op, so constant
    weights fold into one float matrix when the optimizer runs (in a page without numpy
    they are dequantized on every run)."""
    a, packed, scales, zero_points, g_idx, bias = _inputs(node, 6)
    if g_idx:
        raise InvalidGraph(f"{node.name or node.op_type}: MatMulNBits with g_idx (act-order) "
                           f"is not supported")
    k, n = int(node.attr("K")), int(node.attr("N"))
    bits, block = int(node.attr("bits", 4)), int(node.attr("block_size"))
    if bits not in (2, 4, 8) or block < 16 or block & (block - 1):
        raise InvalidGraph(f"{node.name or node.op_type}: MatMulNBits bits={bits}, "
                           f"block_size={block} (bits 2, 4 or 8; block a power of 2 >= 16)")
    blocks = (k + block - 1) // block
    values = b.op("Cast", [_unpack_codes(b, packed, bits, [n, blocks, block])], to=FLOAT)
    if not zero_points:
        zp = b.const(float(1 << (bits - 1)))
    elif b.elem_type_of(zero_points) in (UINT8, None):            # packed codes
        row = (blocks * bits + 7) // 8 * (8 // bits)
        codes = _first_columns(b, _unpack_codes(b, zero_points, bits, [n, row]), blocks)
        zp = b.op("Reshape", [b.op("Cast", [codes], to=FLOAT),
                              b.const([n, blocks, 1], INT64, hint="shape")])
    else:                                                          # in the scales' type
        zp = b.op("Reshape", [b.op("Cast", [zero_points], to=FLOAT),
                              b.const([n, blocks, 1], INT64, hint="shape")])
    per_block = b.op("Reshape", [b.op("Cast", [scales], to=FLOAT),
                                 b.const([n, blocks, 1], INT64, hint="shape")])
    weights = b.op("Mul", [b.op("Sub", [values, zp]), per_block])
    weights = b.op("Reshape", [weights, b.const([n, blocks * block], INT64, hint="shape")])
    weights = _first_columns(b, weights, k)
    weights = b.op("Transpose", [weights], perm=[1, 0])
    out_type = b.elem_type_of(scales)
    if out_type not in (FLOAT, None):              # float16/bfloat16 models: A's type
        weights = b.op("Cast", [weights], to=out_type)
    product = b.op("MatMul", [a, weights], None if bias else [node.outputs[0]])
    if bias:
        b.op("Add", [product, bias], [node.outputs[0]])


def _first_columns(b: Builder, x: str, count: int) -> str:
    """x[:, :count] of a 2-D value (the padding of the last block cut off)."""
    return b.op("Slice", [x, b.const([0], INT64), b.const([count], INT64),
                          b.const([1], INT64), b.const([1], INT64)])


def _unpack_codes(b: Builder, packed: str, bits: int, shape: list) -> str:
    """uint8 bytes -> one code per element (low bits first), reshaped to `shape`, through Div
    and Mod by powers of two (BitShift and BitwiseAnd need newer opsets)."""
    per_byte = 8 // bits
    if per_byte > 1:
        byte = b.unsqueeze_last(packed)
        parts = [b.op("Mod", [b.op("Div", [byte, b.const(1 << (bits * i), UINT8)]) if i
                              else byte, b.const(1 << bits, UINT8)]) for i in range(per_byte)]
        packed = b.op("Concat", parts, axis=-1)
    return b.op("Reshape", [packed, b.const(shape, INT64, hint="shape")])


EXPANSIONS = {
    "SkipLayerNormalization": skip_layer_normalization,
    "SkipSimplifiedLayerNormalization": skip_simplified_layer_normalization,
    "SimplifiedLayerNormalization": simplified_layer_normalization,
    "BiasGelu": bias_gelu,
    "FastGelu": fast_gelu,
    "Gelu": microsoft_gelu,
    "QuickGelu": quick_gelu,
    "BiasAdd": bias_add,
    "FusedMatMul": fused_matmul,
    "MatMulNBits": matmul_nbits,
}

# contrib operators onnxruntime registers in the ai.onnx domain (no standard op has the name)
ONNX_DOMAIN_CONTRIB = {"SimplifiedLayerNormalization"}


def expand_contrib_ops(model: ir.Model) -> int:
    """Replace every com.microsoft node that EXPANSIONS defines, in every graph of the model;
    returns how many. Nodes of other com.microsoft operators stay (a provider may still run
    them, else the session names them)."""
    from .graph_edit import PassContext

    ctx = PassContext(model)
    return _expand_graph(model.graph, model, ctx)


def _expand_graph(graph: ir.Graph, model: ir.Model, ctx) -> int:
    count, nodes = 0, []
    for node in graph.nodes:
        for a in node.attributes.values():
            for g in (a.value if isinstance(a.value, list) else [a.value]):
                if isinstance(g, ir.Graph):
                    count += _expand_graph(g, model, ctx)
        expand = EXPANSIONS.get(node.op_type) if node.domain == MICROSOFT or \
            node.domain in ("", "ai.onnx") and node.op_type in ONNX_DOMAIN_CONTRIB else None
        if expand is None:
            nodes.append(node)
            continue
        b = Builder(graph, model, ctx.fresh_name, node.name or node.op_type)
        expand(node, b)
        nodes += b.nodes
        count += 1
    graph.nodes = nodes
    return count
