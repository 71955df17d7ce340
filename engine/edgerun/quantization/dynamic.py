"""quantize_dynamic: onnxruntime's IntegerOps output for MatMul (Gemm first becomes MatMul+Add
as onnxruntime rewrites it), Conv, Gather and Transpose, with constant float weights.

For each quantized MatMul (names as onnxruntime writes them):

    A -> DynamicQuantizeLinear -> A_quantized, A_scale, A_zero_point          (uint8, at run time)
    W (float initializer) -> W_quantized, W_scale, W_zero_point               (int8 or uint8)
    MatMulInteger(A_quantized, W_quantized, A_zero_point, W_zero_point) -> Cast(float)
    Mul(A_scale, W_scale) -> Mul with the cast -> the MatMul's output (a following Add stays)

Conv becomes ConvInteger the same way, its bias added after a Reshape to [1, -1, 1, ...].
Gather from a float initializer gathers from its uint8 form, and Transpose of such a value
transposes the 8-bit data; their outputs feed a following MatMulInteger as they are, and a
DequantizeLinear before any float reader or graph output.
"""
from __future__ import annotations

import warnings

from .. import ir
from ..ir import dtypes
from . import arith
from .graph_tools import (all_names, check_output_format, float_scalar, floats_tensor, ints_tensor,
                         load_input, node, opset_version, remove_unused_initializers, save_output,
                         tensor_floats, topological_sort, transposed_2d)
from .quant_types import QuantType, element_type

# onnxruntime's IntegerOpsRegistry: what quantize_dynamic quantizes by default
DEFAULT_OP_TYPES = ["Conv", "MatMul", "Attention", "LSTM", "Gather", "Transpose",
                    "EmbedLayerNormalization"]
IMPLEMENTED = {"MatMul", "Conv", "Gather", "Transpose"}


def quantize_dynamic(model_input, model_output, op_types_to_quantize=None, per_channel=False,
                     reduce_range=False, weight_type=QuantType.QInt8, nodes_to_quantize=None,
                     nodes_to_exclude=None, use_external_data_format=False, extra_options=None):
    """Quantize the weights of MatMul (and Gemm), Conv and Gather to 8 bits; activations are
    quantized at run time (DynamicQuantizeLinear). onnxruntime.quantization.quantize_dynamic's
    arguments and output. `model_input`: a path, bytes, an onnx ModelProto or an ir.Model;
    `model_output`: a path, or None to only return the file's bytes (which are always
    returned)."""
    check_output_format(use_external_data_format)
    extra = dict(extra_options or {})
    op_types = list(op_types_to_quantize or DEFAULT_OP_TYPES)
    unsupported = sorted(k for k in ("EnableSubgraph", "TensorQuantOverrides",
                                     "ForceQuantizeNoInputCheck") if extra.get(k))
    if unsupported:
        raise NotImplementedError(f"extra_options {unsupported} are not supported by "
                                  f"edgerun.quantization")
    model = load_input(model_input)
    opset = opset_version(model)
    if opset < 11:
        raise NotImplementedError(f"opset {opset}: DynamicQuantizeLinear needs opset 11 "
                                  f"(onnxruntime converts the model first; convert it to "
                                  f"opset 11 or later)")
    skipped = sorted({n.op_type for n in model.graph.nodes} & set(op_types) - IMPLEMENTED)
    if skipped:
        warnings.warn(f"edgerun.quantization.quantize_dynamic quantizes MatMul (and Gemm, as "
                      f"MatMul), Conv, Gather and Transpose; left in float: {skipped}",
                      RuntimeWarning, stacklevel=2)
    quantizer = DynamicQuantizer(model, op_types, per_channel, reduce_range,
                                 element_type(weight_type, "weight_type"),
                                 nodes_to_quantize or [], nodes_to_exclude or [], extra)
    quantizer.run()
    return save_output(model, model_output, use_external_data_format)


class DynamicQuantizer:
    def __init__(self, model: ir.Model, op_types, per_channel, reduce_range, weight_qtype,
                 nodes_to_quantize, nodes_to_exclude, extra):
        self.model = model
        self.g = model.graph
        self.op_types = set(op_types)
        self.per_channel = per_channel
        self.reduce_range = reduce_range
        self.weight_qtype = weight_qtype
        self.activation_qtype = dtypes.UINT8         # DynamicQuantizeLinear's only type
        self.nodes_to_quantize = set(nodes_to_quantize)
        self.nodes_to_exclude = set(nodes_to_exclude)
        self.weight_symmetric_option = extra.get("WeightSymmetric")
        self.weight_symmetric = self._weight_symmetric(weight_qtype)
        self.activation_symmetric = bool(extra.get("ActivationSymmetric", False))
        self.min_real_range = extra.get("MinimumRealRange")
        self.matmul_const_b_only = extra.get("MatMulConstBOnly", True)
        # value -> (quantized name, zero point name, scale name, axis): quantized weights, and
        # values Gather and Transpose produce in 8 bits (onnxruntime's quantized_value_map)
        self.quantized: dict = {}
        self.new_nodes: list = []
        self.by_name: dict = {}  # names of the nodes written so far (onnxruntime looks them up)
        self._types: dict = {}   # value -> element type (for MatMul with a computed B)
        initializers = set(self.g.initializers)
        # values some node writes (or graph inputs): a quantized one needs no DequantizeLinear
        self.generated = {v.name for v in self.g.inputs if v.name not in initializers}

    # -- driver ---------------------------------------------------------------------------

    def run(self) -> None:
        self._replace_gemm_with_matmul()
        if not self.matmul_const_b_only:        # before any node is rewritten
            from .calibrate import value_types

            self._types = value_types(self.model)
        handlers = {"MatMul": self._matmul, "Conv": self._conv, "Gather": self._gather,
                    "Transpose": self._transpose}
        for n in self.g.nodes:
            handler = handlers.get(n.op_type)
            if handler is None or not self._should_quantize(n) or not handler(n):
                self._dequantize_inputs(n)
                self._emit([n])
        for v in self.g.outputs:             # graph outputs left quantized are read back
            self._dequantize(v.name)
        self.g.nodes = self.new_nodes
        remove_unused_initializers(self.g)
        topological_sort(self.g)

    def _emit(self, nodes) -> None:
        for n in nodes:
            self.new_nodes.append(n)
            self.generated.update(o for o in n.outputs if o)
            if n.name:
                self.by_name.setdefault(n.name, n)

    def _should_quantize(self, n: ir.Node) -> bool:
        if self.nodes_to_quantize and n.name not in self.nodes_to_quantize:
            return False
        if n.op_type not in self.op_types or n.op_type in ("QuantizeLinear", "DequantizeLinear"):
            return False
        return n.name not in self.nodes_to_exclude

    def _is_float(self, name: str) -> bool:
        """onnxruntime's is_float_tensor: a float initializer, or a value inferred float."""
        if name in self.g.initializers:
            return self._is_float_initializer(name)
        return self._types.get(name) == dtypes.FLOAT

    def _is_float_initializer(self, name: str) -> bool:
        t = self.g.initializers.get(name)
        return t is not None and t.elem_type == dtypes.FLOAT

    # -- Gemm -> MatMul (+ Add), as onnxruntime's ONNXModel.replace_gemm_with_matmul ---------

    def _replace_gemm_with_matmul(self) -> None:
        names = all_names(self.g)
        transposed = {}
        nodes = []
        for n in self.g.nodes:
            if n.op_type != "Gemm" or n.domain not in ("", "ai.onnx"):
                nodes.append(n)
                continue
            alpha, beta = n.attr("alpha", 1.0), n.attr("beta", 1.0)
            if not (alpha == 1.0 and beta == 1.0 and n.attr("transA", 0) == 0):
                nodes.append(n)
                continue
            b = n.inputs[1]
            if n.attr("transB", 0) == 1:
                t = self.g.initializers.get(b)
                if t is not None and t.elem_type == dtypes.FLOAT and len(t.dims) == 2:
                    if b not in transposed:
                        name, suffix = b + "_Transposed", 0
                        while any(name + s in names
                                  for s in ("", "_quantized", "_scale", "_zero_point")):
                            suffix += 1
                            name = f"{b}_Transposed_{suffix}"
                        names.update(name + s for s in ("", "_quantized", "_scale", "_zero_point"))
                        self.g.initializers[name] = transposed_2d(t, name)
                        transposed[b] = name
                    b = transposed[b]
                else:
                    nodes.append(node("Transpose", [b], [b + "_Transposed"],
                                      n.name + "_Transpose" if n.name else ""))
                    b += "_Transposed"
            has_bias = len(n.inputs) > 2 and n.inputs[2]
            out = n.outputs[0]
            nodes.append(node("MatMul", [n.inputs[0], b], [out + "_MatMul" if has_bias else out],
                              n.name + "_MatMul" if n.name else ""))
            if has_bias:
                nodes.append(node("Add", [out + "_MatMul", n.inputs[2]], [out],
                                  n.name + "_Add" if n.name else ""))
        self.g.nodes = nodes

    # -- operators --------------------------------------------------------------------------

    def _matmul(self, n: ir.Node) -> bool:
        a, b = n.inputs[0], n.inputs[1]
        if self.matmul_const_b_only and b not in self.g.initializers:
            return False
        if b in self.g.initializers and not self._is_float_initializer(b):
            return False
        if a in self.g.initializers and not self._is_float_initializer(a):
            return False
        if b not in self.g.initializers and not (self._is_float(a) or self._is_float(b)):
            return False
        nodes: list = []
        qa = self._quantize_input(a, nodes, as_weight=False)
        qb = self._quantize_input(b, nodes, as_weight=True, per_channel_axis=-1,
                                  reduce_range=True)
        out = n.outputs[0]
        name = n.name + "_quant" if n.name else ""
        integer_out = out + "_output_quantized"
        nodes.append(node("MatMulInteger", [qa[0], qb[0], qa[1], qb[1]], [integer_out], name))
        nodes.append(node("Cast", [integer_out], [integer_out + "_cast_output"],
                          integer_out + "_cast", to=dtypes.FLOAT))
        scales = self._scales_mul(name, qa[2], qb[2], nodes)
        nodes.append(node("Mul", [integer_out + "_cast_output", scales], [out],
                          name + "_output_scale_mul" if name else ""))
        self._emit(nodes)
        return True

    def _conv(self, n: ir.Node) -> bool:
        x, w = n.inputs[0], n.inputs[1]
        if x in self.g.initializers and not self._is_float_initializer(x):
            return False
        has_bias = len(n.inputs) == 3 and n.inputs[2]
        if w in self.g.initializers:
            if not self._is_float_initializer(w):
                return False
        elif has_bias:
            # onnxruntime refuses this (the bias reshape needs the weight's rank): kept float
            return False
        nodes: list = []
        qx = self._quantize_input(x, nodes, as_weight=False)
        qw = self._quantize_input(w, nodes, as_weight=True, reduce_range=self.reduce_range)
        out = n.outputs[0]
        name = n.name + "_quant" if n.name else ""
        integer_out = out + "_output_quantized"
        conv = node("ConvInteger", [qx[0], qw[0], qx[1], qw[1]], [integer_out], name)
        conv.attributes = dict(n.attributes)
        nodes.append(conv)
        nodes.append(node("Cast", [integer_out], [integer_out + "_cast_output"],
                          integer_out + "_cast", to=dtypes.FLOAT))
        scales = self._scales_mul(name, qx[2], qw[2], nodes)
        scaled = out + "quant_scaled_output" if has_bias else out
        nodes.append(node("Mul", [integer_out + "_cast_output", scales], [scaled],
                          name + "_output_scale_mul" if name else ""))
        if has_bias:
            rank = len(self.g.initializers[w].dims)
            shape_name = out + "_bias_reshape_shape"
            self.g.initializers[shape_name] = ints_tensor(
                shape_name, dtypes.INT64, [1, -1] + [1] * (rank - 2), [rank])
            nodes.append(node("Reshape", [n.inputs[2], shape_name],
                              [out + "_bias_reshape_output"]))
            nodes.append(node("Add", [scaled, out + "_bias_reshape_output"], [out],
                              out + "_bias_add"))
        self._emit(nodes)
        return True

    def _gather(self, n: ir.Node) -> bool:
        """onnxruntime's GatherQuant: a float initializer gathered in 8 bits (the activation
        type), its output left quantized for the next quantized node or a DequantizeLinear."""
        data = n.inputs[0]
        if not self._is_float_initializer(data):
            return False
        nodes: list = []
        q_data, zp_name, scale_name = self._quantize_input(data, nodes, as_weight=False)
        out = n.outputs[0]
        self.quantized[out] = (out + "_quantized", zp_name, scale_name, None)
        n.inputs = [q_data] + list(n.inputs[1:])
        n.outputs = [out + "_quantized"] + list(n.outputs[1:])
        nodes.append(n)
        self._emit(nodes)
        return True

    def _transpose(self, n: ir.Node) -> bool:
        """onnxruntime's Direct8BitOp: an input already quantized is transposed as it is."""
        source = self.quantized.get(n.inputs[0])
        if source is None or source[3] is not None:
            return False
        out = n.outputs[0]
        self.quantized[out] = (out + "_quantized", source[1], source[2], None)
        n.inputs = [source[0]] + list(n.inputs[1:])
        n.outputs = [out + "_quantized"] + list(n.outputs[1:])
        self._emit([n])
        return True

    def _scales_mul(self, name: str, scale_a: str, scale_b: str, nodes: list) -> str:
        mul_name = name + "_scales_mul" if name else f"{scale_a}_{scale_b}_mul"
        existing = self.by_name.get(mul_name) or next(
            (m for m in nodes if m.name == mul_name), None)
        if existing is not None:
            return existing.outputs[0]
        nodes.append(node("Mul", [scale_a, scale_b], [mul_name + ":0"], mul_name))
        return mul_name + ":0"

    # -- inputs ---------------------------------------------------------------------------

    def _quantize_input(self, name: str, nodes: list, as_weight: bool,
                        per_channel_axis: int | None = None, reduce_range: bool = False) -> tuple:
        """(quantized name, zero point name, scale name) of one input, adding what it needs."""
        if name in self.quantized:
            return self.quantized[name][:3]
        qtype = self.weight_qtype if as_weight else self.activation_qtype
        if name in self.g.initializers:
            if self.per_channel and per_channel_axis is not None:
                return self._quantize_per_channel(name, qtype, per_channel_axis, reduce_range)
            return self._quantize_initializer(name, qtype, reduce_range)
        dql_name = name + "_QuantizeLinear"
        dql = self.by_name.get(dql_name) or next((m for m in nodes if m.name == dql_name), None)
        if dql is None:
            dql = node("DynamicQuantizeLinear", [name],
                       [name + "_quantized", name + "_scale", name + "_zero_point"], dql_name)
            nodes.append(dql)
        return dql.outputs[0], dql.outputs[2], dql.outputs[1]

    def _weight_symmetric(self, qtype: int) -> bool:
        """onnxruntime's is_weight_symmetric: the WeightSymmetric option, else signed types."""
        if self.weight_symmetric_option is not None:
            return bool(self.weight_symmetric_option)
        return qtype == dtypes.INT8

    def _symmetric(self, qtype: int) -> bool:
        return self.weight_symmetric if qtype == self.weight_qtype else self.activation_symmetric

    def _quantize_initializer(self, name: str, qtype: int, reduce_range: bool) -> tuple:
        t = self.g.initializers[name]
        values = tensor_floats(t)
        lo, hi = arith.min_max(values)
        zp, scale = arith.data_quant_params(lo, hi, len(values), qtype, self._symmetric(qtype),
                                            self.reduce_range and reduce_range,
                                            self.min_real_range)
        q_name, zp_name, scale_name = name + "_quantized", name + "_zero_point", name + "_scale"
        self.g.initializers[scale_name] = float_scalar(scale_name, scale)
        self.g.initializers[zp_name] = ints_tensor(zp_name, qtype, [zp], [])
        self.g.initializers[q_name] = ir.Tensor(name=q_name, elem_type=qtype, dims=tuple(t.dims),
                                                raw=arith.quantize(values, scale, zp, qtype))
        self.quantized[name] = (q_name, zp_name, scale_name, None)
        return q_name, zp_name, scale_name

    def _quantize_per_channel(self, name: str, qtype: int, axis: int, reduce_range: bool) -> tuple:
        t = self.g.initializers[name]
        rank = len(t.dims)
        if not -rank <= axis < rank:
            raise ValueError(f"weight {name} has a per-channel axis {axis} out of bounds for "
                             f"rank {rank}")
        axis %= rank
        values = tensor_floats(t)
        symmetric = self._weight_symmetric(qtype)
        channels = arith.channel_min_max(values, t.dims, axis)
        count = len(values) // t.dims[axis] if t.dims[axis] else 0
        params = [arith.data_quant_params(lo, hi, count, qtype, symmetric,
                                          self.reduce_range and reduce_range,
                                          self.min_real_range) for lo, hi in channels]
        zps = [p[0] for p in params]
        scales = [p[1] for p in params]
        q_name, zp_name, scale_name = name + "_quantized", name + "_zero_point", name + "_scale"
        self.g.initializers[scale_name] = floats_tensor(scale_name, scales, [t.dims[axis]])
        self.g.initializers[zp_name] = ints_tensor(zp_name, qtype, zps, [t.dims[axis]])
        self.g.initializers[q_name] = ir.Tensor(
            name=q_name, elem_type=qtype, dims=tuple(t.dims),
            raw=arith.quantize_per_channel(values, t.dims, axis, scales, zps, qtype))
        self.quantized[name] = (q_name, zp_name, scale_name, axis)
        return q_name, zp_name, scale_name

    def _dequantize_inputs(self, n: ir.Node) -> None:
        for name in n.inputs:
            self._dequantize(name)

    def _dequantize(self, name: str) -> None:
        """A float reader of a quantized value reads it back through DequantizeLinear
        (onnxruntime's _dequantize_value). A weight quantized for another node loses its float
        initializer, which the DequantizeLinear now writes."""
        if name not in self.quantized or name in self.generated:
            return
        dq_name = name + "_DequantizeLinear"
        if dq_name in self.by_name:
            return
        q_name, zp_name, scale_name, axis = self.quantized[name]
        self.g.initializers.pop(name, None)
        self._emit([node("DequantizeLinear", [q_name, scale_name, zp_name], [name], dq_name,
                         axis=axis)])
