"""onnxruntime's contrib operators (com.microsoft), each defined once as standard ONNX nodes.

onnxruntime's transformer optimizer, its quantizers and some exporters write operators of the
com.microsoft domain (SkipLayerNormalization, BiasGelu, MatMulNBits, ...). Rather than one
kernel per provider, each is expanded here into operators every provider runs, the way ONNX
function bodies are (ir/inline_functions.py): the session does this before optimizing, at every
optimization level and without numpy, so wasm and WebGPU in a page run these models too.
The optimizer then fuses the expanded forms where it has fused kernels (Gelu, LayerNorm,
Conv/Gemm + activation) and folds constant work away (MatMulNBits' dequantization of constant
weights becomes one float weight at load time; so do MatMulIntegerToFloat's and
DynamicQuantizeMatMul's 8-bit weights, which are computed on as integers held in float32).

Families: layer norms and Gelus; BERT's Attention, MultiHeadAttention and
EmbedLayerNormalization (attention through com.edgerun Attention, which every provider has);
decoder LLMs' RotaryEmbedding and GroupQueryAttention (grouped KV heads, KV caches with
right padding, rotary positions, local windows, softcap; ai.onnx RotaryEmbedding from opset 23);
the quantizer's QuantizeLinear/DequantizeLinear and QLinear* (dequantize -> float operator ->
quantize: onnxruntime's integer kernels round a few values one step the other way); FusedConv,
FusedGemm and NhwcConv. Forms an expansion cannot express (attention caches shared with
past_sequence_length, rotary attention, packed QKV, ...) raise InvalidGraph naming the
feature, as do models whose ai.onnx opset lacks an operator the expansion needs.

Semantics follow onnxruntime's ContribOperators documentation and are checked against
onnxruntime's own kernels (tests/test_contrib_ops.py). EXPANSIONS maps op_type to a function
`expand(node, b) -> None` that emits nodes through the Builder `b`.
"""
from __future__ import annotations

import math
import struct

from .. import ir
from ..errors import InvalidGraph
from .graph_edit import (
    EDGERUN_DOMAIN,
    PassContext,
    attr_float,
    attr_int,
    attr_ints,
    attr_string,
    attr_text,
    subgraphs,
)
from .patterns import without_absent_tail

MICROSOFT = "com.microsoft"
FLOAT, UINT8, INT8, INT32, INT64 = 1, 2, 3, 6, 7
_FORMATS = {FLOAT: "f", UINT8: "B", INT8: "b", INT32: "i", INT64: "q"}
FLOAT_LOWEST = -3.4028234663852886e38


class Builder:
    """Emits the nodes of one expansion into a graph: fresh value names, scalar constants
    as initializers, opset-dependent spellings (ReduceMean's axes, LayerNormalization)."""

    def __init__(self, graph: ir.Graph, model: ir.Model, names, prefix: str, ranks=None):
        self.graph, self.model, self.names, self.prefix = graph, model, names, prefix
        self.opset = model.opset_imports.get("", 1)
        self.nodes: list = []
        self.ranks = {} if ranks is None else ranks     # ranks of values expansions made

    def fresh(self, hint: str) -> str:
        return self.names(f"{self.prefix}/{hint}")

    def op(self, op_type: str, inputs: list, outputs=None, domain: str = "", **attrs) -> str:
        """Add a node; returns its first output (a fresh name unless given)."""
        outputs = list(outputs) if outputs else [self.fresh(op_type.lower())]
        self.nodes.append(ir.Node(op_type=op_type, inputs=list(inputs), outputs=outputs,
                                  attributes={k: v if isinstance(v, ir.Attribute) else
                                              _attribute(k, v) for k, v in attrs.items()},
                                  domain=domain, name=self.fresh(op_type)))
        return outputs[0]

    def const(self, values, elem_type: int = FLOAT, hint: str = "c") -> str:
        """A constant initializer (float32, (u)int8, int32 or int64) of `values`: a number
        gives a scalar, a list a vector."""
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

    def declared_shape(self, name: str):
        """The dims the graph declares for `name` (ints, symbolic names or None), or None."""
        if name in self.graph.initializers:
            return list(self.graph.initializers[name].dims)
        for v in list(self.graph.inputs) + list(self.graph.value_info) + list(self.graph.outputs):
            if v.name == name and v.type is not None and v.type.kind == "tensor" \
                    and v.type.shape is not None:
                return list(v.type.shape)
        return None

    def rank_of(self, name: str, depth: int = 0):
        """The rank of `name` when known without running the model: declared, made by an
        earlier expansion, or through Cast/Identity and ReduceSum(keepdims=0); else None."""
        if name in self.ranks:
            return self.ranks[name]
        shape = self.declared_shape(name)
        if shape is not None:
            return len(shape)
        node = next((n for n in self.graph.nodes if name in n.outputs), None)
        if node is None or depth > 8 or node.domain not in ("", "ai.onnx") or not node.inputs:
            return None
        if node.op_type in ("Cast", "Identity"):
            return self.rank_of(node.inputs[0], depth + 1)
        if node.op_type == "ReduceSum" and not node.attr("keepdims", 1):
            axes = node.attr("axes")
            if axes is None and len(node.inputs) > 1 and node.inputs[1] in self.graph.initializers:
                dims = self.graph.initializers[node.inputs[1]].dims
                axes = [0] * (dims[0] if dims else 1)          # only their count matters
            rank = self.rank_of(node.inputs[0], depth + 1)
            return None if rank is None or axes is None else rank - len(axes)
        return None

    def need_opset(self, node: ir.Node, version: int, what: str) -> None:
        if self.opset < version:
            raise InvalidGraph(f"{node.name or node.op_type}: {node.op_type} needs {what}, in "
                               f"ai.onnx opset {version} or later (the model has {self.opset})")

    def unsqueeze(self, x: str, axes: list) -> str:
        if self.opset >= 13:
            return self.op("Unsqueeze", [x, self.const(list(axes), INT64, hint="axes")])
        return self.op("Unsqueeze", [x], axes=list(axes))

    def unsqueeze_last(self, x: str) -> str:
        return self.unsqueeze(x, [-1])

    def reduce_sum(self, x: str, axes: list, keepdims: int = 1) -> str:
        if self.opset >= 13:
            return self.op("ReduceSum", [x, self.const(list(axes), INT64, hint="axes")],
                           keepdims=keepdims)
        return self.op("ReduceSum", [x], axes=list(axes), keepdims=keepdims)

    def split(self, x: str, sizes, count: int, axis: int) -> list:
        """x cut into `count` parts along `axis`: of `sizes`, or equal without them."""
        outputs = [self.fresh("part") for _ in range(count)]
        if sizes and self.opset >= 13:
            self.op("Split", [x, self.const(list(sizes), INT64, hint="split")], outputs,
                    axis=axis)
        elif sizes:
            self.op("Split", [x], outputs, axis=axis, split=list(sizes))
        elif self.opset >= 18:
            self.op("Split", [x], outputs, axis=axis, num_outputs=count)
        else:
            self.op("Split", [x], outputs, axis=axis)
        return outputs

    def dim(self, x: str, axis: int, scalar: bool = False) -> str:
        """x's size along `axis` (int64): a scalar, or a vector of one."""
        index = self.const(axis, INT64) if scalar else self.const([axis], INT64)
        return self.op("Gather", [self.op("Shape", [x]), index], axis=0)

    def clip(self, x: str, low: float, high: float, outputs=None) -> str:
        if self.opset >= 11:
            return self.op("Clip", [x, self.const(low), self.const(high)], outputs)
        return self.op("Clip", [x], outputs, min=float(low), max=float(high))

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


def gather_block_quantized(node: ir.Node, b: Builder) -> None:
    """Gather(dequantize(data), indices, gather_axis), dequantizing only the gathered part:
    codes, scales and zero points are gathered first, then (code - zero point) * scale per
    block of block_size along quantize_axis (the last axis). data is int4/uint4, or uint8
    with `bits` 4 (two codes a byte, low bits first, so the last axis doubles) or 8; zero
    points are packed the same way; absent, 8 (uint8, 4 bits), 128 (uint8, 8 bits) or 0
    (int4, uint4), as onnxruntime.
    The output has the scales' type."""
    data, indices, scales, zero_points = _inputs(node, 4)
    rank = b.rank_of(data)
    gather_axis, quantize_axis = int(node.attr("gather_axis", 0)), int(node.attr("quantize_axis", 1))
    block, bits = int(node.attr("block_size", 128)), int(node.attr("bits", 4))
    code_type = b.elem_type_of(data)
    if rank is None:
        raise InvalidGraph(f"{node.name or node.op_type}: GatherBlockQuantized of data of "
                           f"unknown rank")
    gather_axis, quantize_axis = gather_axis % rank, quantize_axis % rank
    _refuse(node, quantize_axis != rank - 1, "quantize_axis other than the last axis")
    _refuse(node, gather_axis == quantize_axis, "gather_axis equal to quantize_axis")
    _refuse(node, block < 16 or block & (block - 1), f"block_size {block}")
    packed = code_type == UINT8 and bits == 4
    _refuse(node, code_type == UINT8 and bits not in (4, 8), f"bits={bits}")
    indices_rank = b.rank_of(indices)
    _refuse(node, indices_rank is None, "indices of unknown rank")
    rank_out = rank - 1 + indices_rank

    def codes(x: str) -> str:       # gathered codes as float32, packed bytes unpacked
        x = b.op("Gather", [x, indices], axis=gather_axis)
        if packed:
            byte = b.unsqueeze_last(x)
            low = b.op("Mod", [byte, b.const(16, UINT8)])
            high = b.op("Div", [byte, b.const(16, UINT8)])
            x = b.op("Reshape", [b.op("Concat", [low, high], axis=-1),
                                 b.const([0] * (rank_out - 1) + [-1], INT64, hint="shape")])
        return b.op("Cast", [x], to=FLOAT)

    values = codes(data)                                      # [..., L]
    per_block = b.unsqueeze_last(b.op("Cast", [b.op("Gather", [scales, indices],
                                                      axis=gather_axis)], to=FLOAT))
    if zero_points:
        zp = b.unsqueeze_last(codes(zero_points))            # [..., blocks (padded), 1]
        blocks = b.dim(per_block, rank_out - 1)
        zp = b.op("Slice", [zp, b.const([0], INT64), blocks, b.const([rank_out - 1], INT64)])
    else:
        zp = b.const(float(0 if code_type != UINT8 else 128 if bits == 8 else 8))
    # [..., L] -> [..., blocks, block]: L is a whole number of blocks
    blocked = b.op("Reshape", [values, b.op("Concat", [
        b.op("Slice", [b.op("Shape", [per_block]), b.const([0], INT64),
                       b.const([rank_out - 1], INT64)]),
        b.const([-1, block], INT64)], axis=0)])
    real = b.op("Mul", [b.op("Sub", [blocked, zp]), per_block])
    out_type = b.elem_type_of(scales)
    shape = b.op("Shape", [values])
    if out_type not in (FLOAT, None):
        b.op("Cast", [b.op("Reshape", [real, shape])], [node.outputs[0]], to=out_type)
    else:
        b.op("Reshape", [real, shape], [node.outputs[0]])


LSTM_ATTRIBUTES = ("activation_alpha", "activation_beta", "activations", "clip", "direction",
                   "hidden_size", "input_forget")


def dynamic_quantize_lstm(node: ir.Node, b: Builder) -> None:
    """LSTM with 8-bit weights (what quantize_dynamic makes of an LSTM): W [D, input, 4H] and
    R [D, H, 4H], transposed against LSTM's, with a scale and zero point per direction ([D])
    or per gate column ([D, 4H]). The weights are dequantized (once, when constant and the
    optimizer runs) and the LSTM runs in float; onnxruntime's kernel also quantizes X and
    H at each step, so its outputs differ from these by that rounding (about one activation
    quantization step)."""
    x, w, r, bias, lengths, initial_h, initial_c, peepholes, w_scale, w_zp, r_scale, r_zp = \
        _inputs(node, 12)

    def weights(q: str, scale: str, zero_point: str) -> str:
        def per_direction(v: str) -> str:      # [D] -> [D, 1, 1]; [D, 4H] -> [D, 1, 4H]
            column = b.rank_of(v) == 1
            v = b.op("Cast", [v], to=FLOAT)
            if column:
                return b.op("Reshape", [v, b.const([-1, 1, 1], INT64, hint="shape")])
            return b.unsqueeze(v, [1])
        real = b.op("Cast", [q], to=FLOAT)
        if zero_point:
            real = b.op("Sub", [real, per_direction(zero_point)])
        real = b.op("Mul", [real, per_direction(scale)])
        return b.op("Transpose", [real], perm=[0, 2, 1])

    inputs = [x, weights(w, w_scale, w_zp), weights(r, r_scale, r_zp), bias, lengths,
              initial_h, initial_c, peepholes]
    while not inputs[-1]:
        inputs.pop()
    b.op("LSTM", inputs, node.outputs, **_copied(node, LSTM_ATTRIBUTES))


# ---- attention (BERT, GPT-2, Whisper) ------------------------------------------------------

def _refuse(node: ir.Node, condition, feature: str) -> None:
    if condition:
        raise InvalidGraph(f"{node.name or node.op_type}: {node.op_type} with {feature} is "
                           f"not supported")


def _num_heads(node: ir.Node) -> int:
    heads = int(node.attr("num_heads", 0))
    if heads <= 0:
        raise InvalidGraph(f"{node.name or node.op_type}: {node.op_type} needs a positive "
                           f"num_heads attribute")
    return heads


def _split_heads(b: Builder, x: str, heads: int) -> str:
    """[B, S, heads * D] -> [B, heads, S, D]."""
    split = b.op("Reshape", [x, b.const([0, 0, heads, -1], INT64, hint="shape")])
    return b.op("Transpose", [split], perm=[0, 2, 1, 3])


def _merge_heads(b: Builder, x: str, output: str) -> None:
    """[B, heads, S, D] -> [B, S, heads * D]."""
    merged = b.op("Transpose", [x], perm=[0, 2, 1, 3])
    b.op("Reshape", [merged, b.const([0, 0, -1], INT64, hint="shape")], [output])


def _positions(b: Builder, heads_tensor: str) -> str:
    """0, 1, ... along axis 2 (the sequence) of a [B, heads, S, D] value, as float32."""
    count = b.dim(heads_tensor, 2, scalar=True)
    return b.op("Cast", [b.op("Range", [b.const(0, INT64), count, b.const(1, INT64)])],
                to=FLOAT)


def _key_padding(node: ir.Node, b: Builder, mask: str, q: str, k: str) -> str:
    """The additive mask [B, 1, 1 or S, T] of onnxruntime's mask forms: mask_filter_value
    where a raw mask ([B, T] or [B, S, T]) is not above 0, or, for a 1-D mask, at keys from
    the row's end on and, with [2B] (ends then starts), before its start."""
    rank = b.rank_of(mask)
    hidden = _float(node, "mask_filter_value", -10000.0)
    if rank in (2, 3):
        b.need_opset(node, 9, "Where for a raw mask")
        keep = b.op("Greater", [b.op("Cast", [mask], to=FLOAT), b.const(0.0)])
        additive = b.op("Where", [keep, b.const(0.0), b.const(hidden)])
        return b.unsqueeze(additive, [1, 2] if rank == 2 else [1])
    if rank != 1:
        _refuse(node, rank is not None, f"a {rank}-D mask")
        raise InvalidGraph(f"{node.name or node.op_type}: {node.op_type}'s mask "
                           f"'{mask}' has an unknown rank (1-D lengths or a 2-D/3-D raw mask "
                           f"decide its meaning): declare its shape in the graph")
    b.need_opset(node, 11, "Range for a 1-D mask_index")
    # [B] or [2B] -> rows [1 or 2, B]: ends, and ends + starts summed over the rows
    shape = b.op("Concat", [b.const([-1], INT64), b.dim(q, 0)], axis=0)
    rows = b.op("Reshape", [b.op("Cast", [mask], to=FLOAT), shape])
    end = b.op("Gather", [rows, b.const(0, INT64)], axis=0)
    start = b.op("Sub", [b.reduce_sum(rows, [0], keepdims=0), end])
    keys = _positions(b, k)
    keep = b.op("And", [b.op("Less", [keys, b.unsqueeze_last(end)]),
                        b.op("Not", [b.op("Less", [keys, b.unsqueeze_last(start)])])])
    additive = b.op("Where", [keep, b.const(0.0), b.const(hidden)])
    return b.unsqueeze(additive, [1, 2])


def _causal(node: ir.Node, b: Builder, q: str, k: str) -> str:
    """[S, T] additive: the lowest float32 where key j comes after query i (j > i + T - S,
    the past keys all visible), 0 elsewhere."""
    b.need_opset(node, 11, "Range for unidirectional")
    queries, keys = _positions(b, q), _positions(b, k)
    past = b.op("Sub", [b.op("Cast", [b.dim(k, 2)], to=FLOAT),
                        b.op("Cast", [b.dim(q, 2)], to=FLOAT)])
    last_visible = b.op("Add", [b.unsqueeze_last(queries), past])
    after = b.op("Greater", [keys, last_visible])
    return b.op("Where", [after, b.const(FLOAT_LOWEST), b.const(0.0)])


def _attend(node: ir.Node, b: Builder, q: str, k: str, v: str, mask_index: str,
            attention_bias: str, output: str) -> None:
    """merge_heads(softmax(scale * Q K^T + masks) V) through com.edgerun Attention, the masks
    being mask_index's, the causal one (unidirectional) and attention_bias, summed."""
    terms = [_key_padding(node, b, mask_index, q, k) if mask_index else "",
             _causal(node, b, q, k) if node.attr("unidirectional", 0) else "", attention_bias]
    mask = ""
    for term in filter(None, terms):
        mask = b.op("Add", [mask, term]) if mask else term
    scale = _float(node, "scale", 0.0)
    b.model.opset_imports.setdefault(EDGERUN_DOMAIN, 1)
    y = b.op("Attention", [q, k, v] + ([mask] if mask else []), domain=EDGERUN_DOMAIN,
             **({"scale": scale} if scale else {}))
    _merge_heads(b, y, output)


def _qkv_sizes(node: ir.Node, b: Builder, weights: str):
    """qkv_hidden_sizes, or thirds of the weights' columns when they are known (None: let
    Split cut equal thirds)."""
    sizes = list(node.attr("qkv_hidden_sizes") or [])
    if sizes:
        if len(sizes) != 3:
            raise InvalidGraph(f"{node.name or node.op_type}: qkv_hidden_sizes needs 3 values, "
                               f"got {sizes}")
        return sizes
    shape = b.declared_shape(weights)
    if shape and len(shape) == 2 and isinstance(shape[1], int):
        return [shape[1] // 3] * 3
    return None


def attention(node: ir.Node, b: Builder) -> None:
    """onnxruntime's Attention (BERT, GPT-2). With Q|K|V = input @ weights (+ bias) split by
    qkv_hidden_sizes (thirds without it), each cut into num_heads heads [B, N, S, D]:

        Y = merge_heads(softmax(scale * Q K^T + mask + attention_bias) V)

    scale defaulting to 1/sqrt(D). With past [2, B, N, P, D], K and V follow past's keys and
    values; present is [K, V] stacked. mask: mask_filter_value (-10000) where mask_index
    hides a key (raw 0/1 mask [B, T] or [B, S, T]: 0 hides; 1-D [B] right-padding lengths,
    [2B] ends then starts), plus the lowest float32 after the diagonal when unidirectional.
    Not supported: past_present_share_buffer (past_sequence_length), do_rotary, 4-D masks."""
    x, weights, bias, mask, past, attention_bias, past_length = _inputs(node, 7)
    _refuse(node, past_length or node.attr("past_present_share_buffer", 0),
            "past_present_share_buffer (past_sequence_length)")
    _refuse(node, node.attr("do_rotary", 0), "do_rotary")
    heads = _num_heads(node)
    qkv = b.op("MatMul", [x, weights])
    if bias:
        qkv = b.op("Add", [qkv, bias])
    q, k, v = (_split_heads(b, part, heads)
               for part in b.split(qkv, _qkv_sizes(node, b, weights), 3, axis=-1))
    if past:
        k, v = (b.op("Concat", [b.op("Gather", [past, b.const(i, INT64)], axis=0), new],
                     axis=2) for i, new in ((0, k), (1, v)))
    present = _outputs(node, 2)[1]
    if present:
        b.op("Concat", [b.unsqueeze(k, [0]), b.unsqueeze(v, [0])], [present], axis=0)
    _attend(node, b, q, k, v, mask, attention_bias, node.outputs[0])


def multi_head_attention(node: ir.Node, b: Builder) -> None:
    """onnxruntime's MultiHeadAttention with separate 3-D query [B, S, H], key [B, L, H] and
    value [B, L, Hv], bias [H + H + Hv] added to them, each cut into num_heads heads:

        Y = merge_heads(softmax(scale * Q K^T + mask + attention_bias) V)

    mask from key_padding_mask as Attention's mask_index ([B] lengths, [B, T] or [B, S, T]
    raw), plus the causal one when unidirectional; present_key/present_value are K and V's
    heads. Not supported: packed QKV or KV, past_key/past_value (a 4-D key), cache_indirection,
    the qk output."""
    query, key, value, bias, padding, attention_bias = _inputs(node, 6)
    _refuse(node, not key or not value, "packed QKV (no key/value input)")
    _refuse(node, any(_inputs(node, 10)[6:]), "past_key/past_value or cache_indirection")
    _refuse(node, _outputs(node, 4)[3], "the qk output")
    for name in (query, key, value):
        rank = b.rank_of(name)
        _refuse(node, rank not in (None, 3), f"a {rank}-D '{name}' (packed QKV/KV or a "
                                             f"past key/value cache)")
    heads = _num_heads(node)
    if bias:
        parts = _bias_parts(node, b, bias, query, value)
        query, key, value = (b.op("Add", [x, p]) for x, p in zip((query, key, value), parts))
    q, k, v = (_split_heads(b, x, heads) for x in (query, key, value))
    present_key, present_value = _outputs(node, 3)[1:]
    for source, out in ((k, present_key), (v, present_value)):
        if out:
            b.op("Identity", [source], [out])
    _attend(node, b, q, k, v, padding, attention_bias, node.outputs[0])


def _bias_parts(node: ir.Node, b: Builder, bias: str, query: str, value: str) -> list:
    """bias [H + H + Hv] cut into Q's, K's and V's parts: by the declared hidden sizes, else
    by query's and value's sizes at run time."""
    shapes = [b.declared_shape(n) for n in (query, value)]
    sizes = [s[-1] for s in shapes if s and isinstance(s[-1], int)]
    if len(sizes) == 2:
        return b.split(bias, [sizes[0], sizes[0], sizes[1]], 3, axis=0)
    b.need_opset(node, 10, "Slice with inputs (cutting bias by the hidden sizes)")
    hidden = b.dim(query, 2)
    ends = [hidden, b.op("Add", [hidden, hidden]), b.const([(1 << 62)], INT64)]
    starts = [b.const([0], INT64)] + ends[:2]
    return [b.op("Slice", [bias, start, end]) for start, end in zip(starts, ends)]


def embed_layer_normalization(node: ir.Node, b: Builder) -> None:
    """BERT's embeddings: with sum = word_embedding[input_ids] + position_embedding[position_ids
    (0..S-1 without them)] (+ segment_embedding[segment_ids]),

        output = LayerNorm(sum) * gamma + beta  (last axis, epsilon 1e-12 by default)
        mask_index = count of ones in each row of mask (int32 [B]; zeros without a mask)
        embedding_sum = sum"""
    ids, segment_ids, words, positions, segments, gamma, beta, mask, position_ids = \
        _inputs(node, 9)
    out, mask_index, embedding_sum = _outputs(node, 3)
    if position_ids:
        position = b.op("Gather", [positions, position_ids], axis=0)
    else:
        b.need_opset(node, 10, "Slice with inputs (position_embedding's first S rows)")
        position = b.op("Slice", [positions, b.const([0], INT64), b.dim(ids, 1),
                                  b.const([0], INT64)])
    total = b.op("Add", [b.op("Gather", [words, ids], axis=0), position])
    if segment_ids and segments:
        total = b.op("Add", [total, b.op("Gather", [segments, segment_ids], axis=0)])
    if embedding_sum:
        b.op("Identity", [total], [embedding_sum])
    b.layer_norm(total, gamma, beta, [out], _float(node, "epsilon", 1e-12))
    if mask_index:
        _mask_index(b, ids, mask, mask_index)


def _mask_index(b: Builder, ids: str, mask: str, output: str) -> None:
    """The count of ones in each row of mask, as int32 [B] (zeros without mask)."""
    if mask:
        ones = b.op("Cast", [b.op("Equal", [mask, b.const(1, INT32)])], to=FLOAT)
        b.op("Cast", [b.reduce_sum(ones, [1], keepdims=0)], [output], to=INT32)
    else:
        first = b.op("Gather", [ids, b.const(0, INT64)], axis=1)
        b.op("Cast", [b.op("Mul", [b.op("Cast", [first], to=FLOAT), b.const(0.0)])], [output],
             to=INT32)
    b.ranks[output] = 1


# ---- decoder LLMs (onnxruntime-genai, transformers.js): rotary embeddings, grouped-query ----

SLICE_END = 1 << 62


def _vec(b: Builder, value) -> str:
    """An int64 [1] input: a constant from an int, else the value itself."""
    return b.const([value], INT64) if isinstance(value, int) else value


def _slice_last(b: Builder, x: str, start, end) -> str:
    """x[..., start:end]; start and end ints or int64 [1] values."""
    return b.op("Slice", [x, _vec(b, start), _vec(b, end), b.const([-1], INT64)])


def _shape_vec(b: Builder, parts: list) -> str:
    """A shape (int64 [n]) from ints and int64 [1] values, in order."""
    if all(isinstance(p, int) for p in parts):
        return b.const(list(parts), INT64, hint="shape")
    pieces, ints = [], []
    for p in parts:
        if isinstance(p, int):
            ints.append(p)
            continue
        if ints:
            pieces.append(b.const(ints, INT64, hint="shape"))
            ints = []
        pieces.append(p)
    if ints:
        pieces.append(b.const(ints, INT64, hint="shape"))
    return b.op("Concat", pieces, axis=0)


def _last_dim(b: Builder, name: str):
    """The declared size of `name`'s last axis when it is a number, else None."""
    shape = b.declared_shape(name)
    return shape[-1] if shape and isinstance(shape[-1], int) else None


def _rotate(b: Builder, x: str, cos: str, sin: str, half, head_size, interleaved: bool,
            output=None) -> str:
    """Rotary embedding of 4-D x [..., D] in its first 2h values (h = `half`, an int or an
    int64 [1] value), cos and sin broadcasting against x[..., :h], the rest of x kept:

        halves (x1 = x[:h], x2 = x[h:2h]):   [x1 cos - x2 sin,  x2 cos + x1 sin]
        interleaved (pairs x[2i], x[2i+1]):   x[2i] cos_i - x[2i+1] sin_i,
                                              x[2i+1] cos_i + x[2i] sin_i

    head_size (D) is an int when known: without it x[2h:] is cut and concatenated back even
    if empty."""
    rotary = 2 * half if isinstance(half, int) else b.op("Mul", [half, b.const([2], INT64)])
    partial = not (isinstance(half, int) and head_size == 2 * half)
    part = _slice_last(b, x, 0, rotary) if partial else x
    if interleaved:
        pairs = b.op("Reshape", [part, b.const([0, 0, 0, -1, 2], INT64, hint="shape")])
        first, second = b.split(pairs, [1, 1], 2, axis=-1)
        cos, sin = b.unsqueeze_last(cos), b.unsqueeze_last(sin)
    else:
        first, second = _slice_last(b, part, 0, half), _slice_last(b, part, half, SLICE_END)
    turned = [b.op("Sub", [b.op("Mul", [first, cos]), b.op("Mul", [second, sin])]),
              b.op("Add", [b.op("Mul", [second, cos]), b.op("Mul", [first, sin])])]
    done = not partial and not interleaved
    y = b.op("Concat", turned, [output] if done and output else None, axis=-1)
    if interleaved:
        y = b.op("Reshape", [y, b.const([0, 0, 0, -1], INT64, hint="shape")],
                 [output] if not partial and output else None)
    if partial:
        y = b.op("Concat", [y, _slice_last(b, x, rotary, SLICE_END)],
                 [output] if output else None, axis=-1)
    return y


def _rotary_positions(b: Builder, position_ids: str, x: str, seq_axis: int) -> str:
    """RotaryEmbedding's positions: position_ids [B, S] as they are, a scalar or [1] offset
    p as p + (0, 1, ..., S-1) ([S]); of unknown rank, chosen by its size at run time."""
    rank = b.rank_of(position_ids)
    if rank == 2:
        return position_ids
    offset = b.op("Gather", [b.op("Reshape", [position_ids, b.const([-1], INT64)]),
                             b.const(0, INT64)], axis=0)
    steps = b.op("Range", [b.const(0, INT64), b.dim(x, seq_axis, scalar=True),
                           b.const(1, INT64)])
    shifted = b.op("Add", [b.op("Cast", [offset], to=INT64), steps])
    if rank in (0, 1):
        return shifted
    one = b.op("Equal", [b.op("Size", [position_ids]), b.const(1, INT64)])
    return b.op("Where", [one, shifted, b.op("Cast", [position_ids], to=INT64)])


def _cached(b: Builder, cos_cache: str, sin_cache: str, positions: str, axis: int) -> tuple:
    """cos_cache and sin_cache rows at `positions` ([..., S] -> [..., S, h]), unsqueezed at
    the negative `axis` to broadcast against the heads."""
    return tuple(b.unsqueeze(b.op("Gather", [cache, positions], axis=0), [axis])
                 for cache in (cos_cache, sin_cache))


def _standard_rotary(b: Builder, x: str, cos_cache: str, sin_cache: str, positions: str,
                     heads: int, rotary: int, interleaved: bool, output=None) -> str:
    """ai.onnx RotaryEmbedding (opset 23), the same computation in one operator: x 3-D
    with `heads` heads or 4-D [B, N, S, D], positions int64 [B, S], rotary the rotated
    size (0: the whole head)."""
    attrs: dict = {"interleaved": int(interleaved)}
    if heads:
        attrs["num_heads"] = heads
    if rotary:
        attrs["rotary_embedding_dim"] = rotary
    return b.op("RotaryEmbedding", [x, cos_cache, sin_cache, positions],
                [output] if output else None, **attrs)


def rotary_embedding(node: ir.Node, b: Builder) -> None:
    """onnxruntime's RotaryEmbedding on input [B, S, hidden] (heads side by side) or
    [B, N, S, head_size]: token (b, s) at position p = position_ids[b, s] (or offset + s for
    a scalar/[1] position_ids) has every head rotated by _rotate with cos = cos_cache[p],
    sin = sin_cache[p] ([rotary_dim / 2] each) over its first rotary_dim values, the rest
    kept. rotary_dim = rotary_embedding_dim (with num_heads), or without it the head size,
    2 * the caches' width. `scale` is ignored, as onnxruntime's CPU kernel does; the caches'
    width must be rotary_dim / 2. Not supported: is_packed_batching."""
    x, position_ids, cos_cache, sin_cache = node.inputs[:4]
    _refuse(node, node.attr("is_packed_batching", 0), "is_packed_batching")
    rank = b.rank_of(x)
    if rank not in (3, 4):
        _refuse(node, rank is not None, f"a {rank}-D input")
        raise InvalidGraph(f"{node.name or node.op_type}: RotaryEmbedding's input '{x}' has an "
                           f"unknown rank (3-D [B, S, hidden] and 4-D [B, N, S, head_size] "
                           f"differ): declare its shape in the graph")
    b.need_opset(node, 11, "Range and Slice with inputs")
    rotary, heads = int(node.attr("rotary_embedding_dim", 0)), int(node.attr("num_heads", 0))
    if rotary and not heads:
        raise InvalidGraph(f"{node.name or node.op_type}: RotaryEmbedding with "
                           f"rotary_embedding_dim needs num_heads")
    width = _last_dim(b, cos_cache)
    half = rotary // 2 if rotary else width if width is not None else b.dim(cos_cache, 1)
    positions = _rotary_positions(b, position_ids, x, 2 if rank == 4 else 1)
    interleaved = bool(node.attr("interleaved", 0))
    out = node.outputs[0]
    b.ranks[out] = rank
    hidden = _last_dim(b, x)
    if not heads and rank == 3 and hidden is not None and isinstance(half, int):
        heads = hidden // (2 * half)
    if b.opset >= 23 and (heads or rank == 4):
        if b.rank_of(positions) != 2:
            batch_steps = b.op("Concat", [b.dim(x, 0), b.dim(x, 2 if rank == 4 else 1)],
                               axis=0)
            positions = b.op("Expand", [positions, batch_steps])
        _standard_rotary(b, x, cos_cache, sin_cache, positions, heads, rotary, interleaved,
                         out)
        return
    cos, sin = _cached(b, cos_cache, sin_cache, positions, -3 if rank == 4 else -2)
    if rank == 4:
        _rotate(b, x, cos, sin, half, _last_dim(b, x), interleaved, out)
        return
    if rotary:
        head_size = hidden // heads if hidden is not None else None
        split = b.op("Reshape", [x, b.const([0, 0, heads, -1], INT64, hint="shape")])
    else:                                   # the head is the rotated part, 2 * the width
        head_size = 2 * half if isinstance(half, int) else None
        size = head_size if head_size is not None else b.op("Mul", [half, b.const([2], INT64)])
        split = b.op("Reshape", [x, _shape_vec(b, [0, 0, -1, size])])
    y = _rotate(b, split, cos, sin, half, head_size, interleaved)
    b.op("Reshape", [y, b.op("Shape", [x])], [out])


# GroupQueryAttention inputs and attributes beyond what the expansion does
GQA_INPUTS = {9: "position_ids", 10: "attention_bias", 11: "head_sink",
              12: "k_scale (a quantized KV cache)", 13: "v_scale (a quantized KV cache)",
              14: "q_norm_weight (per-head QK RMS norm)", 15: "k_norm_weight (per-head QK RMS "
              "norm)", 16: "query_seqlens"}


def _refuse_gqa_forms(node: ir.Node) -> None:
    inputs = _inputs(node, 17)
    for index, feature in GQA_INPUTS.items():
        _refuse(node, inputs[index], feature)
    _refuse(node, _outputs(node, 4)[3] or node.attr("qk_output", 0), "the output_qk output")
    _refuse(node, node.attr("smooth_softmax", -1) == 1, "smooth_softmax")
    _refuse(node, not node.attr("causal", 1), "causal=0 (bidirectional attention)")
    _refuse(node, node.attr("sliding_window_cache", 0), "sliding_window_cache")
    _refuse(node, node.attr("kv_cache_bit_width", 0) or any(
        attr_text(node, name, "NONE") != "NONE" for name in ("k_quant_type", "v_quant_type")),
        "a quantized KV cache")
    _refuse(node, node.attr("local_window_size", -1) == 0, "local_window_size=0 (no key "
                                                          "visible)")
    _refuse(node, bool(inputs[3]) != bool(inputs[4]), "only one of past_key and past_value")
    if node.attr("do_rotary", 0):
        _refuse(node, not inputs[7] or not inputs[8], "do_rotary without cos_cache/sin_cache")


def _gqa_heads(node: ir.Node, b: Builder, heads: int, kv_heads: int) -> tuple:
    """Q [B, S, heads, D] and K, V [B, S, kv_heads, D] from query, key, value, or from the
    packed query [B, S, (heads + 2 kv_heads) D] without key and value."""
    query, key, value = _inputs(node, 3)
    _refuse(node, bool(key) != bool(value), "only one of key and value")
    if key:
        return tuple(b.op("Reshape", [x, b.const([0, 0, n, -1], INT64, hint="shape")])
                     for x, n in ((query, heads), (key, kv_heads), (value, kv_heads)))
    packed = b.op("Reshape", [query, b.const([0, 0, heads + 2 * kv_heads, -1], INT64,
                                             hint="shape")])
    return tuple(b.split(packed, [heads, kv_heads, kv_heads], 3, axis=2))


def _gqa_head_size(node: ir.Node, b: Builder, heads: int, kv_heads: int):
    """The head size D when the declared query (or key) shape tells it, else None."""
    query, key = _inputs(node, 2)
    hidden = _last_dim(b, query)
    if hidden is not None:
        return hidden // (heads if key else heads + 2 * kv_heads)
    hidden = _last_dim(b, key) if key else None
    return hidden // kv_heads if hidden is not None else None


def _gqa_rotary(node: ir.Node, b: Builder, q: str, k: str, positions: str, heads: int,
                kv_heads: int, head_size) -> tuple:
    """Q and K ([B, S, N, D]) rotated at `positions` [B, S] over 2 * the caches' width:
    by ai.onnx RotaryEmbedding from opset 23 when the sizes are declared, else by _rotate."""
    cos_cache, sin_cache = _inputs(node, 9)[7:]
    interleaved = bool(node.attr("rotary_interleaved", 0))
    width = _last_dim(b, cos_cache)
    if b.opset >= 23 and width is not None and head_size is not None:
        flat = b.const([0, 0, -1], INT64, hint="shape")
        return tuple(b.op("Reshape", [_standard_rotary(
            b, b.op("Reshape", [x, flat]), cos_cache, sin_cache, positions, n, 2 * width,
            interleaved), b.const([0, 0, n, -1], INT64, hint="shape")])
            for x, n in ((q, heads), (k, kv_heads)))
    half = width if width is not None else b.dim(cos_cache, 1)
    cos, sin = _cached(b, cos_cache, sin_cache, positions, -2)
    return tuple(_rotate(b, x, cos, sin, half, head_size, interleaved) for x in (q, k))


def _cache_index(b: Builder, row_start: str, keys: str, past_length: str, steps: str,
                 expand_to: str) -> tuple:
    """Where each position j of onnxruntime's present cache [B, Hkv, T', D] comes from in
    concat(past, new) along the sequence (T' = max(total, P), past_length = P): row b holds
    past[j] for j < start_b, new[j - start_b] for start_b <= j < start_b + S, zeros after
    (row_start: start_b as [B, 1]). Returns (indices expanded to [B, Hkv, T', D], where j
    holds a key [B, 1, T', 1])."""
    from_past = b.op("Less", [keys, row_start])                                # [B, T']
    index = b.op("Where", [from_past, keys, b.op("Add", [b.op("Sub", [keys, row_start]),
                                                         past_length])])
    inside = b.op("Less", [keys, b.op("Add", [row_start, steps])])
    index = b.op("Where", [inside, index, b.const(0, INT64)])
    return (b.op("Expand", [b.unsqueeze(index, [1, 3]), expand_to]),
            b.unsqueeze(inside, [1, 3]))


def _present(b: Builder, past: str, new: str, index: tuple, output: str) -> str:
    """The present cache of past and new by _cache_index's `index`: concat(past, new) when
    every row is full."""
    gathered = b.op("GatherElements", [b.op("Concat", [past, new], axis=2), index[0]], axis=2)
    return b.op("Where", [index[1], gathered, b.const(0.0)], [output] if output else None)


def _gqa_mask(b: Builder, query_positions: str, keys: str, lengths: str, group: int,
              window: int) -> str:
    """Additive [B, 1, G S, T'] (row g S + s is query s of the group's g-th head): 0 where
    key j is visible to the query at absolute position q (j <= q, j < seqlens_k[b] + 1 and,
    with a local window w, j > q - w), the lowest float32 elsewhere."""
    rows = b.op("Tile", [query_positions, b.const([1, group], INT64)]) if group > 1 else \
        query_positions
    rows = b.unsqueeze_last(rows)                                               # [B, GS, 1]
    visible = b.op("And", [b.op("Not", [b.op("Greater", [keys, rows])]),
                           b.op("Less", [keys, b.unsqueeze(lengths, [1, 2])])])
    if window > 0:
        earliest = b.op("Sub", [rows, b.const(window, INT64)])
        visible = b.op("And", [visible, b.op("Greater", [keys, earliest])])
    additive = b.op("Where", [visible, b.const(0.0), b.const(FLOAT_LOWEST)])
    return b.unsqueeze(additive, [1])


def _softcapped_attention(b: Builder, q: str, k: str, v: str, mask: str, scale,
                          softcap: float) -> str:
    """softmax(softcap tanh(scale Q K^T / softcap) + mask) V, written out."""
    scores = b.op("Mul", [b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 1, 3, 2])]),
                          scale])
    capped = b.op("Mul", [b.op("Tanh", [b.op("Div", [scores, b.const(softcap)])]),
                          b.const(softcap)])
    probs = b.op("Softmax", [b.op("Add", [capped, mask])], axis=-1)
    return b.op("MatMul", [probs, v])


def group_query_attention(node: ir.Node, b: Builder) -> None:
    """onnxruntime's GroupQueryAttention: query [B, S, Hq D], key and value [B, S, Hkv D]
    (or packed in query), each KV head serving G = Hq / Hkv query heads (query head h reads
    KV head h // G). With L_b = seqlens_k[b] + 1 and T = total_sequence_length, the new tokens
    of row b start at a_b = 0 for a first prompt (S == T), else L_b - S; query s sits at
    a_b + s. do_rotary rotates Q and K at those positions (cos_cache/sin_cache, as
    RotaryEmbedding with rotary_interleaved). present_key/present_value [B, Hkv, max(T, P), D]
    hold past's first a_b keys, then the new ones, then zeros (see _cache_index; without past,
    the new keys). Then

        Y = merge_heads(softmax(cap(scale Q K^T) + mask) V)

    scale defaulting to 1/sqrt(D), cap(x) = softcap tanh(x / softcap) when softcap > 0, the
    mask hiding key j from query q unless j <= q, j < L_b and (local_window_size w > 0)
    j > q - w. Outputs of a first prompt's padding rows (s >= L_b) are whatever the mask
    gives (onnxruntime leaves them unspecified). Not supported (named): position_ids,
    attention_bias, head_sink, quantized KV caches, QK norm weights, query_seqlens,
    smooth_softmax, the output_qk output, causal=0, sliding_window_cache,
    local_window_size=0."""
    _refuse_gqa_forms(node)
    heads = _num_heads(node)
    kv_heads = int(node.attr("kv_num_heads", 0))
    if kv_heads <= 0 or heads % kv_heads:
        raise InvalidGraph(f"{node.name or node.op_type}: GroupQueryAttention needs "
                           f"kv_num_heads > 0 dividing num_heads ({heads}), got {kv_heads}")
    b.need_opset(node, 11, "Range and GatherElements")
    query = node.inputs[0]
    past_key, past_value, seqlens_k, total, cos_cache, sin_cache = _inputs(node, 9)[3:]
    group, head_size = heads // kv_heads, _gqa_head_size(node, b, heads, kv_heads)
    q, k, v = _gqa_heads(node, b, heads, kv_heads)                       # [B, S, N, D]
    size = head_size if head_size is not None else b.dim(q, 3)
    # where the new tokens sit
    steps = b.dim(query, 1, scalar=True)
    total = b.op("Reshape", [b.op("Cast", [total], to=INT64), b.const([], INT64)])
    lengths = b.op("Add", [b.op("Cast", [seqlens_k], to=INT64), b.const(1, INT64)])
    start = b.unsqueeze(b.op("Where", [b.op("Equal", [steps, total]), b.const(0, INT64),
                                       b.op("Sub", [lengths, steps])]), [1])      # [B, 1]
    query_positions = b.op("Add", [start, b.op(
        "Range", [b.const(0, INT64), steps, b.const(1, INT64)])])               # [B, S]
    if node.attr("do_rotary", 0):
        q, k = _gqa_rotary(node, b, q, k, query_positions, heads, kv_heads, head_size)
    k, v = (b.op("Transpose", [x], perm=[0, 2, 1, 3]) for x in (k, v))       # [B, Hkv, S, D]
    present_key, present_value = _outputs(node, 3)[1:]
    if past_key:
        past_length = b.dim(past_key, 2, scalar=True)
        keys = b.op("Range", [b.const(0, INT64), b.op("Max", [total, past_length]),
                              b.const(1, INT64)])
        index = _cache_index(b, start, keys, past_length, steps,
                             _shape_vec(b, [1, kv_heads, 1, size]))
        k, v = (_present(b, past, new, index, out) for past, new, out in (
            (past_key, k, present_key), (past_value, v, present_value)))
    else:
        keys = b.op("Range", [b.const(0, INT64), steps, b.const(1, INT64)])
        for source, out in ((k, present_key), (v, present_value)):
            if out:
                b.op("Identity", [source], [out])
    for out in (present_key, present_value):
        b.ranks[out] = 4
    mask = _gqa_mask(b, query_positions, keys, lengths, group,
                     int(node.attr("local_window_size", -1)))
    # query heads grouped by their KV head: [B, Hkv, G S, D]
    if group > 1:
        q = b.op("Reshape", [q, b.const([0, 0, kv_heads, group, -1], INT64, hint="shape")])
        q = b.op("Transpose", [q], perm=[0, 2, 3, 1, 4])
        q = b.op("Reshape", [q, _shape_vec(b, [0, 0, -1, size])])
    else:
        q = b.op("Transpose", [q], perm=[0, 2, 1, 3])
    scale, softcap = _float(node, "scale", 0.0), _float(node, "softcap", 0.0)
    if softcap > 0:
        factor = b.const(scale) if scale else b.const(1.0 / float(head_size) ** 0.5) \
            if head_size is not None else b.op("Reciprocal", [b.op("Sqrt", [
                b.op("Cast", [size], to=FLOAT)])])
        y = _softcapped_attention(b, q, k, v, mask, factor, softcap)
    else:
        b.model.opset_imports.setdefault(EDGERUN_DOMAIN, 1)
        y = b.op("Attention", [q, k, v, mask], domain=EDGERUN_DOMAIN,
                 **({"scale": scale} if scale else {}))
    out = node.outputs[0]
    b.ranks[out] = 3
    if group > 1:           # [B, Hkv, G, S, D] -> [B, S, Hkv, G, D] -> [B, S, Hq D]
        y = b.op("Reshape", [y, _shape_vec(b, [0, 0, group, -1, size])])
        y = b.op("Transpose", [y], perm=[0, 3, 1, 2, 4])
        b.op("Reshape", [y, b.const([0, 0, -1], INT64, hint="shape")], [out])
    else:
        _merge_heads(b, y, out)


# ---- quantization (onnxruntime's quantizer) ------------------------------------------------

def quantize_linear(node: ir.Node, b: Builder) -> None:
    """ai.onnx QuantizeLinear: y = saturate(round_half_even(x / y_scale) + y_zero_point)."""
    _standard_q_dq(node, b)


def dequantize_linear(node: ir.Node, b: Builder) -> None:
    """ai.onnx DequantizeLinear: y = (x - x_zero_point) * x_scale."""
    _standard_q_dq(node, b)


def _standard_q_dq(node: ir.Node, b: Builder) -> None:
    """The com.microsoft spelling as the standard operator (axis from opset 13)."""
    b.need_opset(node, 10, node.op_type)
    attrs: dict = {}
    if node.attr("axis") is not None:
        b.need_opset(node, 13, f"{node.op_type}'s axis attribute")
        attrs["axis"] = int(node.attr("axis"))
    b.op(node.op_type, list(node.inputs), node.outputs[:1], **attrs)


def _dequantize(node: ir.Node, b: Builder, x: str, scale: str, zero_point: str) -> str:
    b.need_opset(node, 10, "DequantizeLinear")
    return b.op("DequantizeLinear", [x, scale] + ([zero_point] if zero_point else []))


def _quantize(node: ir.Node, b: Builder, y: str, scale: str, zero_point: str, like: str,
              output: str) -> None:
    """QuantizeLinear into the element type of `like` (the operator's quantized input) when the
    zero point is absent (QuantizeLinear alone would give uint8)."""
    if not zero_point:
        zero_point = _zero_point_like(node, b, like)
    b.op("QuantizeLinear", [y, scale, zero_point], [output])


def _zero_point_like(node: ir.Node, b: Builder, x: str) -> str:
    elem = b.elem_type_of(x)
    if elem in (UINT8, INT8):
        return b.const(0, elem, hint="zero_point")
    if b.opset >= 15:
        return b.op("CastLike", [b.const(0.0), x])
    raise InvalidGraph(f"{node.name or node.op_type}: {node.op_type} without an output zero "
                       f"point needs the element type of '{x}' declared (or ai.onnx opset 15 "
                       f"for CastLike)")


def _qlinear_binary(op_type: str):
    def expand(node: ir.Node, b: Builder) -> None:
        a, a_scale, a_zero, other, o_scale, o_zero, c_scale, c_zero = _inputs(node, 8)
        y = b.op(op_type, [_dequantize(node, b, a, a_scale, a_zero),
                           _dequantize(node, b, other, o_scale, o_zero)])
        _quantize(node, b, y, c_scale, c_zero, a, node.outputs[0])
    expand.__doc__ = (f"C = quantize(dequantize(A) {'+' if op_type == 'Add' else '*'} "
                      f"dequantize(B), C_scale, C_zero_point), broadcasting.")
    return expand


qlinear_add, qlinear_mul = _qlinear_binary("Add"), _qlinear_binary("Mul")


def _qlinear_unary(node: ir.Node, b: Builder, op_type: str, **attrs) -> None:
    """Y = quantize(op(dequantize(X)), Y_scale, Y_zero_point)."""
    x, x_scale, x_zero, y_scale, y_zero = _inputs(node, 5)
    y = b.op(op_type, [_dequantize(node, b, x, x_scale, x_zero)], **attrs)
    _quantize(node, b, y, y_scale, y_zero, x, node.outputs[0])


def qlinear_sigmoid(node: ir.Node, b: Builder) -> None:
    """Y = quantize(Sigmoid(dequantize(X)))."""
    _qlinear_unary(node, b, "Sigmoid")


def qlinear_leaky_relu(node: ir.Node, b: Builder) -> None:
    """Y = quantize(LeakyRelu(dequantize(X), alpha))."""
    _qlinear_unary(node, b, "LeakyRelu", alpha=_float(node, "alpha", 0.01))


def qlinear_global_average_pool(node: ir.Node, b: Builder) -> None:
    """Y = quantize(mean of dequantize(X) over the spatial axes), which are the axes after
    the channels, or, with channels_last, those between the batch and the channels
    (Y keeps X's rank, its spatial dims 1)."""
    x, x_scale, x_zero, y_scale, y_zero = _inputs(node, 5)
    real = _dequantize(node, b, x, x_scale, x_zero)
    if not node.attr("channels_last", 0):
        pooled = b.op("GlobalAveragePool", [real])
    else:                      # [N, ..., C] -> [N, -1, C], mean over axis 1, back to rank
        shape = b.op("Shape", [x])
        batch, channels = b.dim(x, 0), b.dim(x, -1)
        flat = b.op("Reshape", [real, b.op("Concat", [batch, b.const([-1], INT64), channels],
                                             axis=0)])
        ones = b.op("Add", [b.op("Mul", [_slice_1d(b, shape, 1, -1), b.const(0, INT64)]),
                            b.const(1, INT64)])
        pooled = b.op("Reshape", [b.reduce_mean(flat, [1]),
                                  b.op("Concat", [batch, ones, channels], axis=0)])
    _quantize(node, b, pooled, y_scale, y_zero, x, node.outputs[0])


def _slice_1d(b: Builder, x: str, start: int, end: int) -> str:
    return b.op("Slice", [x, b.const([start], INT64), b.const([end], INT64),
                          b.const([0], INT64)])


POOL_ATTRIBUTES = ("auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads",
                   "strides")


def qlinear_average_pool(node: ir.Node, b: Builder) -> None:
    """Y = quantize(AveragePool(dequantize(X))) with AveragePool's attributes; channels_last
    transposes X to channels-first around the pool. With ceil_mode and count_include_pad,
    onnxruntime divides the windows that overhang the padded input by the whole kernel; this
    divides by the part within input and pads, as AveragePool (and PyTorch) do."""
    x, x_scale, x_zero, y_scale, y_zero = _inputs(node, 5)
    real = _dequantize(node, b, x, x_scale, x_zero)
    attrs = _copied(node, POOL_ATTRIBUTES)
    if node.attr("channels_last", 0):
        rank = len(node.attr("kernel_shape") or []) + 2
        real = b.op("Transpose", [real], perm=[0, rank - 1] + list(range(1, rank - 1)))
        pooled = b.op("Transpose", [b.op("AveragePool", [real], **attrs)],
                      perm=[0] + list(range(2, rank)) + [1])
    else:
        pooled = b.op("AveragePool", [real], **attrs)
    _quantize(node, b, pooled, y_scale, y_zero, x, node.outputs[0])


def qlinear_concat(node: ir.Node, b: Builder) -> None:
    """Y = quantize(Concat(dequantize(X_i, scale_i, zero_point_i)...), Y_scale, Y_zero_point);
    inputs Y_scale, Y_zero_point, then (X, scale, zero point) per tensor."""
    y_scale, y_zero = node.inputs[:2]
    triples = node.inputs[2:]
    if not triples or len(triples) % 3:
        raise InvalidGraph(f"{node.name or node.op_type}: QLinearConcat takes (tensor, scale, "
                           f"zero point) triples after Y_scale and Y_zero_point")
    parts = [_dequantize(node, b, *triples[i:i + 3]) for i in range(0, len(triples), 3)]
    y = b.op("Concat", parts, axis=int(node.attr("axis")))
    _quantize(node, b, y, y_scale, y_zero, triples[0], node.outputs[0])


# ---- integer matrix products (onnxruntime's dynamic quantization) ---------------------------

def _centered(b: Builder, x: str, zero_point: str) -> str:
    """Cast(x) - Cast(zero_point): integer values held in float32."""
    real = b.op("Cast", [x], to=FLOAT)
    return b.op("Sub", [real, b.op("Cast", [zero_point], to=FLOAT)]) if zero_point else real


def _scaled_product(b: Builder, a: str, bmat: str, scale: str, bias: str, output: str) -> None:
    """(a @ bmat) * scale (+ bias); a and bmat hold integers, so the float32 product is exact
    while its partial sums stay below 2^24 (onnxruntime accumulates in int32)."""
    product = b.op("Mul", [b.op("MatMul", [a, bmat]), scale], None if bias else [output])
    if bias:
        b.op("Add", [product, bias], [output])


def _check_scalar(node: ir.Node, b: Builder, name: str, what: str) -> None:
    """Refuse a value declared with more than one element."""
    shape = b.declared_shape(name) or []
    _refuse(node, any(isinstance(d, int) and d > 1 for d in shape), f"a non-scalar {what}")


def matmul_integer_to_float(node: ir.Node, b: Builder) -> None:
    """Y = ((A - a_zero_point) @ (B - b_zero_point)) * (a_scale * b_scale) + bias, B's scale
    and zero point per tensor or per column (a_scale per tensor). Kept as the node where its
    operands have the form every provider's integer kernel takes (see _integer_kernel_form);
    otherwise computed on integers held in float32, which every provider runs."""
    a, bmat, a_scale, b_scale, a_zero, b_zero, bias = _inputs(node, 7)
    if _integer_kernel_form(b, bmat, a_scale, b_scale, a_zero, b_zero, bias):
        b.op("MatMulIntegerToFloat", list(node.inputs), list(node.outputs), domain=MICROSOFT)
        return
    _check_scalar(node, b, a_scale, "a_scale")
    scale = b.op("Mul", [a_scale, b_scale])
    _scaled_product(b, _centered(b, a, a_zero), _centered(b, bmat, b_zero), scale, bias,
                    node.outputs[0])


def dynamic_quantize_matmul(node: ir.Node, b: Builder) -> None:
    """A quantized to uint8 as DynamicQuantizeLinear does (scale = (max(A, 0) - min(A, 0)) /
    255, zero point = round(-min / scale), q = clip(round(A / scale) + zero point, 0, 255)),
    then MatMulIntegerToFloat's formula with B, b_scale, b_zero_point, bias: as those two
    nodes where the product has the integer kernels' form, else in float32."""
    a, bmat, b_scale, b_zero, bias = _inputs(node, 5)
    if b.opset >= 11 and _integer_kernel_form(b, bmat, "", b_scale, "", b_zero, bias):
        q, a_scale, a_zero = (b.fresh(hint) for hint in ("quantized", "scale", "zero_point"))
        b.op("DynamicQuantizeLinear", [a], [q, a_scale, a_zero])
        b.op("MatMulIntegerToFloat",
             without_absent_tail([q, bmat, a_scale, b_scale, a_zero, b_zero, bias]),
             [node.outputs[0]], domain=MICROSOFT)
        return
    b.need_opset(node, 11, "Round")
    low = b.op("Min", [b.op("ReduceMin", [a], keepdims=0), b.const(0.0)])
    high = b.op("Max", [b.op("ReduceMax", [a], keepdims=0), b.const(0.0)])
    # an all-zero A has range 0: any positive scale quantizes it to the zero point
    a_scale = b.op("Max", [b.op("Div", [b.op("Sub", [high, low]), b.const(255.0)]),
                           b.const(1.1754943508222875e-38)])
    zero = b.op("Round", [b.op("Neg", [b.op("Div", [low, a_scale])])])
    quantized = b.op("Round", [b.op("Div", [a, a_scale])])
    centered = b.op("Sub", [b.clip(b.op("Add", [quantized, zero]), 0.0, 255.0), zero])
    _scaled_product(b, centered, _centered(b, bmat, b_zero), b.op("Mul", [a_scale, b_scale]),
                    bias, node.outputs[0])


def _integer_kernel_form(b: Builder, bmat: str, a_scale: str, b_scale: str, a_zero: str,
                         b_zero: str, bias: str) -> bool:
    """Whether a MatMulIntegerToFloat of these operands runs on every provider's integer
    kernel (cpu, wasm and webgpu take the same forms): B a constant 8-bit matrix [K, N]; its
    scale and zero point constants of one value or N; a float32 bias [N] or none; a_scale
    and a_zero_point one value each ('' for a DynamicQuantizeLinear the caller makes)."""
    weight = b.graph.initializers.get(bmat)
    if weight is None or len(weight.dims) != 2 or weight.elem_type not in (UINT8, INT8):
        return False
    n = weight.dims[1]

    def constant(name: str, elem_type: int, sizes: tuple, ranks: tuple = (0, 1)) -> bool:
        t = b.graph.initializers.get(name)
        return t is not None and t.elem_type == elem_type and len(t.dims) in ranks and \
            math.prod(t.dims) in sizes

    return constant(b_scale, FLOAT, (1, n)) and \
        (not b_zero or constant(b_zero, weight.elem_type, (1, n))) and \
        (not bias or constant(bias, FLOAT, (n,), ranks=(1,))) and \
        all(not name or _one_value(b, name) for name in (a_scale, a_zero))


def _one_value(b: Builder, name: str) -> bool:
    """Whether `name` holds one value: declared so, or a DynamicQuantizeLinear's scale or zero
    point."""
    shape = b.declared_shape(name)
    if shape is not None:
        return all(d == 1 for d in shape)
    producer = next((n for n in b.graph.nodes if name in n.outputs), None)
    return producer is not None and producer.op_type == "DynamicQuantizeLinear" and \
        producer.domain in ("", "ai.onnx") and name in producer.outputs[1:]


# ---- convolutions and Gemm with an activation ----------------------------------------------

CONV_ATTRIBUTES = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")
GEMM_ATTRIBUTES = ("alpha", "beta", "transA", "transB")
# onnxruntime's fused activations -> their parameters' defaults, in order
ACTIVATIONS = {"Relu": (), "Sigmoid": (), "Tanh": (), "LeakyRelu": (0.01,),
               "HardSigmoid": (0.2, 0.5), "Clip": (FLOAT_LOWEST, -FLOAT_LOWEST)}


def _activation(node: ir.Node, b: Builder, x: str, kind: str, params: list,
                output: str) -> None:
    """onnxruntime's fused activation: Relu, Sigmoid, Tanh, LeakyRelu (alpha), HardSigmoid
    (alpha, beta), Clip (min, max), params in that order; none (Identity) without one."""
    if kind in ("", "Identity"):
        b.op("Identity", [x], [output])
        return
    if kind not in ACTIVATIONS:
        _refuse(node, True, f"activation '{kind}' (supported: {', '.join(ACTIVATIONS)})")
    defaults = ACTIVATIONS[kind]
    values = [float(p) for p in params[:len(defaults)]] + list(defaults[len(params):])
    if kind == "Clip":
        b.clip(x, values[0], values[1], [output])
    elif kind == "LeakyRelu":
        b.op(kind, [x], [output], alpha=values[0])
    elif kind == "HardSigmoid":
        b.op(kind, [x], [output], alpha=values[0], beta=values[1])
    else:
        b.op(kind, [x], [output])


def _copied(node: ir.Node, names) -> dict:
    return {k: node.attributes[k] for k in names if k in node.attributes}


def fused_conv(node: ir.Node, b: Builder) -> None:
    """Y = activation(Conv(X, W, B) (+ Z)), `activation` with `activation_params`."""
    x, w, bias, z = _inputs(node, 4)
    conv = b.op("Conv", [x, w] + ([bias] if bias else []), **_copied(node, CONV_ATTRIBUTES))
    if z:
        conv = b.op("Add", [conv, z])
    _activation(node, b, conv, attr_text(node, "activation", ""),
                list(node.attr("activation_params") or []), node.outputs[0])


def fused_gemm(node: ir.Node, b: Builder) -> None:
    """Y = activation(Gemm(A, B, C)), `activation` with activation_alpha (and _beta)."""
    gemm = b.op("Gemm", [n for n in node.inputs[:3] if n], **_copied(node, GEMM_ATTRIBUTES))
    params = []
    for name in ("activation_alpha", "activation_beta"):
        if node.attr(name) is None:
            break
        params.append(node.attr(name))
    _activation(node, b, gemm, attr_text(node, "activation", ""), params, node.outputs[0])


def nhwc_conv(node: ir.Node, b: Builder) -> None:
    """Conv on channels-last X [N, ..., C] and W [M, ..., C / group], giving [N, ..., M]:
    both transposed to channels-first around a standard Conv."""
    x, w, bias = _inputs(node, 3)
    kernel = node.attr("kernel_shape")
    shape = b.declared_shape(w)
    rank = len(kernel) + 2 if kernel else len(shape) if shape else None
    if rank is None:
        raise InvalidGraph(f"{node.name or node.op_type}: NhwcConv needs kernel_shape or W's "
                           f"declared shape (for its rank)")
    first = [0, rank - 1] + list(range(1, rank - 1))
    conv = b.op("Conv", [b.op("Transpose", [x], perm=first), b.op("Transpose", [w], perm=first)]
                + ([bias] if bias else []), **_copied(node, CONV_ATTRIBUTES))
    b.op("Transpose", [conv], [node.outputs[0]], perm=[0] + list(range(2, rank)) + [1])


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
    "GatherBlockQuantized": gather_block_quantized,
    "DynamicQuantizeLSTM": dynamic_quantize_lstm,
    "Attention": attention,
    "MultiHeadAttention": multi_head_attention,
    "EmbedLayerNormalization": embed_layer_normalization,
    "RotaryEmbedding": rotary_embedding,
    "GroupQueryAttention": group_query_attention,
    "QuantizeLinear": quantize_linear,
    "DequantizeLinear": dequantize_linear,
    "QLinearAdd": qlinear_add,
    "QLinearMul": qlinear_mul,
    "QLinearSigmoid": qlinear_sigmoid,
    "QLinearLeakyRelu": qlinear_leaky_relu,
    "QLinearGlobalAveragePool": qlinear_global_average_pool,
    "QLinearAveragePool": qlinear_average_pool,
    "QLinearConcat": qlinear_concat,
    "MatMulIntegerToFloat": matmul_integer_to_float,
    "DynamicQuantizeMatMul": dynamic_quantize_matmul,
    "FusedConv": fused_conv,
    "FusedGemm": fused_gemm,
    "NhwcConv": nhwc_conv,
}

# contrib operators onnxruntime registers in the ai.onnx domain (no standard op has the name)
ONNX_DOMAIN_CONTRIB = {"SimplifiedLayerNormalization"}


def expand_contrib_ops(model: ir.Model) -> int:
    """Replace every com.microsoft node that EXPANSIONS defines, in every graph of the model;
    returns how many. Nodes of other com.microsoft operators stay (a provider may still run
    them, else the session names them). A model without any costs one walk over its nodes:
    the model-wide name table is built only when there is something to expand."""
    if not _has_expansion(model.graph):
        return 0
    return _expand_graph(model.graph, model, PassContext(model), {})


def _expansion_of(node: ir.Node):
    if node.domain == MICROSOFT or node.domain in ("", "ai.onnx") and \
            node.op_type in ONNX_DOMAIN_CONTRIB:
        return EXPANSIONS.get(node.op_type)
    return None


def _has_expansion(graph: ir.Graph) -> bool:
    return any(_expansion_of(node) is not None or any(_has_expansion(g) for g in subgraphs(node))
               for node in graph.nodes)


def _expand_graph(graph: ir.Graph, model: ir.Model, ctx, ranks: dict) -> int:
    count, nodes = 0, []
    for node in graph.nodes:
        for g in subgraphs(node):
            count += _expand_graph(g, model, ctx, ranks)
        expand = _expansion_of(node)
        if expand is None:
            nodes.append(node)
            continue
        b = Builder(graph, model, ctx.fresh_name, node.name or node.op_type, ranks)
        expand(node, b)
        nodes += b.nodes
        count += 1
    graph.nodes = nodes
    return count
