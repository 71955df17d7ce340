"""quantize_static in the QDQ format: onnxruntime's QDQQuantizer, step for step.

Calibration (calibrate.py) gives each float input and output of the nodes to quantize a range;
each op type then marks what it wants quantized, as onnxruntime's QDQ operator classes do:

- MatMul: every input and output; a float initializer input is a weight (per channel on
  axis 1 with per_channel);
- Gemm, Conv, ConvTranspose: input, output, weight (per channel on the output-channel axis),
  and a constant bias quantized to int32 with scale input_scale * weight_scale (* beta);
- Relu, Clip: removed when their input is quantized (the producer writes their output, whose
  range excludes negatives); Reshape, Transpose, Squeeze, Unsqueeze, Flatten, Slice, TopK,
  AveragePool, MaxPool, Resize, Split, Gather: the output shares the input's scale;
- Pad, Where and the normalizations as onnxruntime; any other op type asked for (Add, Mul,
  Softmax, ArgMax, Concat, ...): every float input and output.

Then each marked activation gets QuantizeLinear -> DequantizeLinear after its producer (named
`{tensor}_QuantizeLinear`, `..._DequantizeLinear`, scale `{tensor}_scale`, zero point
`{tensor}_zero_point`), each weight is stored quantized (`{weight}_quantized`) behind a
DequantizeLinear, and each bias as int32 (`{bias}_quantized`).
"""
from __future__ import annotations

import logging
import warnings
from typing import ClassVar, Optional

from .. import ir
from ..ir import dtypes
from . import arith
from .calibrate import MinMaxCalibrater, TensorData, value_types
from .graph_tools import (check_output_format, consumers, float_scalar, floats_tensor, ints_tensor,
                         load_input, node, opset_version, remove_unused_initializers, replace_input,
                         replace_output, save_output, tensor_floats, topological_sort)
from .quant_types import CalibrationMethod, QuantFormat, QuantType, element_type

MS_DOMAIN = "com.microsoft"
log = logging.getLogger(__name__)

# onnxruntime's QLinearOpsRegistry and QDQRegistry keys: what quantize_static quantizes by
# default (their union)
QLINEAR_OPS = ["ArgMax", "Conv", "Gemm", "MatMul", "Add", "Mul", "Relu", "Clip", "LeakyRelu",
               "Sigmoid", "MaxPool", "GlobalAveragePool", "Split", "Pad", "Reshape", "Squeeze",
               "Unsqueeze", "Flatten", "Resize", "AveragePool", "Concat", "Softmax", "Where",
               "Gather", "Transpose", "EmbedLayerNormalization"]
QDQ_OPS = ["Conv", "ConvTranspose", "Gemm", "Clip", "Relu", "Reshape", "Transpose", "Squeeze",
           "Unsqueeze", "Flatten", "Resize", "MaxPool", "AveragePool", "Slice", "Pad", "MatMul",
           "Split", "Gather", "GatherElements", "Where", "InstanceNormalization",
           "LayerNormalization", "BatchNormalization", "TopK", "CumSum"]
DEFAULT_OP_TYPES = sorted(set(QLINEAR_OPS + QDQ_OPS))

_UNSUPPORTED_OPTIONS = ("DedicatedQDQPair", "TensorQuantOverrides", "SmoothQuant",
                        "ActivationRestrictedAsymmetric", "CalibStridedMinMax", "BlockSize",
                        "EnableSubgraph")


def quantize_static(model_input, model_output, calibration_data_reader=None,
                    quant_format=QuantFormat.QDQ, op_types_to_quantize=None, per_channel=False,
                    reduce_range=False, activation_type=QuantType.QInt8,
                    weight_type=QuantType.QInt8, nodes_to_quantize=None, nodes_to_exclude=None,
                    use_external_data_format=False, calibrate_method=CalibrationMethod.MinMax,
                    calibration_providers=None, extra_options=None,
                    calibration_cache_path=None):
    """Calibrate on `calibration_data_reader`'s batches (MinMax, the model run in edgerun),
    then write the QDQ model: onnxruntime.quantization.quantize_static's arguments and
    defaults (activation_type QInt8 as in onnxruntime 1.32). `model_input`: a path, bytes, an
    onnx ModelProto or an ir.Model; `model_output`: a path, or None to only return the file's
    bytes (which are always returned). `calibration_providers` are edgerun providers."""
    check_output_format(use_external_data_format)
    extra = dict(extra_options or {})
    bad = [k for k in _UNSUPPORTED_OPTIONS if extra.get(k)]
    if bad:
        raise NotImplementedError(f"extra_options {bad} are not supported by "
                                  f"edgerun.quantization")
    if quant_format is not QuantFormat.QDQ:
        raise NotImplementedError(f"quant_format={quant_format}: edgerun.quantization writes "
                                  f"QuantFormat.QDQ (QOperator's QLinear* nodes: not yet)")
    if calibrate_method is not CalibrationMethod.MinMax:
        raise NotImplementedError(f"calibrate_method={calibrate_method}: only "
                                  f"CalibrationMethod.MinMax")
    if calibration_cache_path is not None:
        raise NotImplementedError("calibration_cache_path is not supported")
    if calibration_data_reader is None:
        raise ValueError("calibration_data_reader is required")
    if activation_type == QuantType.QInt8 and weight_type == QuantType.QUInt8:
        raise ValueError("ONNXRuntime quantization doesn't support data format:"
                         "activation_type=QuantType.QInt8, weight_type=QuantType.QUInt8")
    activation_qtype = element_type(activation_type, "activation_type")
    weight_qtype = element_type(weight_type, "weight_type")
    op_types = list(op_types_to_quantize or DEFAULT_OP_TYPES)

    model = load_input(model_input)
    opset = opset_version(model)
    if opset < 10:
        raise NotImplementedError(f"opset {opset}: QuantizeLinear needs opset 10 (onnxruntime "
                                  f"converts the model to opset 11 first; convert it)")
    types = value_types(model)
    calibrator = MinMaxCalibrater(
        model, op_types, symmetric=extra.get("CalibTensorRangeSymmetric", False),
        moving_average=extra.get("CalibMovingAverage", False),
        averaging_constant=extra.get("CalibMovingAverageConstant", 0.01),
        providers=calibration_providers, types=types)
    calibrator.collect_data(calibration_data_reader)
    tensors_range = calibrator.compute_data()

    quantizer = QDQQuantizer(model, types, tensors_range, per_channel, reduce_range,
                             weight_qtype, activation_qtype, nodes_to_quantize or [],
                             nodes_to_exclude or [], op_types, extra)
    quantizer.quantize_model()
    return save_output(model, model_output, use_external_data_format)


class _Marked:
    """A tensor marked for quantization: activation or weight, per-channel axis, or the
    (input, node name) whose scale and zero point it shares."""
    __slots__ = ("axis", "provider", "weight")

    def __init__(self, weight=False, axis=None, provider=None):
        self.weight, self.axis, self.provider = weight, axis, provider


class _QValue:
    __slots__ = ("axis", "q_name", "scale_name", "zp_name")

    def __init__(self, q_name, scale_name, zp_name, axis=None):
        self.q_name, self.scale_name, self.zp_name, self.axis = q_name, scale_name, zp_name, axis


class QDQQuantizer:
    def __init__(self, model: ir.Model, types: dict, tensors_range, per_channel, reduce_range,
                 weight_qtype, activation_qtype, nodes_to_quantize, nodes_to_exclude, op_types,
                 extra):
        self.model = model
        self.g = model.graph
        self.opset = opset_version(model)
        self.types = types
        self.tensors_range = tensors_range
        self.per_channel = per_channel
        self.reduce_range = reduce_range
        self.weight_qtype = weight_qtype
        self.activation_qtype = activation_qtype
        self.nodes_to_quantize = set(nodes_to_quantize)
        self.nodes_to_exclude = set(nodes_to_exclude)
        self.op_types = set(op_types)
        self.weight_symmetric_option = extra.get("WeightSymmetric")
        self.activation_symmetric = bool(extra.get("ActivationSymmetric", False))
        self.min_real_range = extra.get("MinimumRealRange")
        self.force_no_input_check = bool(extra.get("ForceQuantizeNoInputCheck", False))
        self.no_output_ops = set(extra.get("OpTypesToExcludeOutputQuantization", []))
        self.add_qdq_pair_to_weight = bool(extra.get("AddQDQPairToWeight", False))
        self.quantize_bias = extra.get("QuantizeBias", True)
        self.axis_by_op = dict(extra.get("QDQOpTypePerChannelSupportToAxis", {}))
        self.keep_removable = bool(extra.get("QDQKeepRemovableActivations", False))
        self.no_weight_adjust = bool(extra.get("QDQDisableWeightAdjustForInt32Bias", False))
        self.qdq_domain = MS_DOMAIN if extra.get("UseQDQContribOps", False) else ""
        self.graph_inputs = {v.name for v in self.g.inputs}
        self.graph_outputs = {v.name for v in self.g.outputs}

        self.marked: dict = {}              # tensor -> _Marked, in marking order
        self.biases: dict = {}              # bias -> (node name, input, weight, beta)
        self.nodes_to_remove: list = []
        self.quantized: dict = {}           # tensor -> _QValue
        self.producing_dq: dict = {}        # tensor -> DequantizeLinear already in the model
        self.params = self._graph_quant_params()
        self.initializer_params: dict = {}

    # -- ranges -> activation parameters ----------------------------------------------------

    def _should_quantize_node(self, n: ir.Node) -> bool:
        if self.nodes_to_quantize and n.name not in self.nodes_to_quantize:
            return False
        if n.op_type not in self.op_types or n.op_type in ("QuantizeLinear", "DequantizeLinear"):
            return False
        return n.name not in self.nodes_to_exclude

    def _adjust_tensor_ranges(self) -> None:
        if self.tensors_range is None:
            return
        readers = consumers(self.g)
        for n in self.g.nodes:
            if n.op_type in ("Clip", "Relu"):
                if not self._should_quantize_node(n) or not n.inputs:
                    continue
                if len(readers.get(n.inputs[0], [])) != 1:
                    continue
                if n.inputs[0] not in self.tensors_range or n.outputs[0] not in self.tensors_range:
                    continue
                self.tensors_range[n.inputs[0]] = self.tensors_range[n.outputs[0]]
            elif n.op_type == "Softmax":
                if not self._should_quantize_node(n):
                    continue
                self.tensors_range[n.outputs[0]] = TensorData(0.0, 1.0)

    def _graph_quant_params(self) -> dict:
        if self.tensors_range is None:
            return {}
        self._adjust_tensor_ranges()
        out = {}
        for name, td in self.tensors_range.items():
            rmin, rmax = td.range_value
            qmin, qmax = arith.qrange(self.activation_qtype, False, self.activation_symmetric)
            zp, scale = arith.compute_scale_zp(rmin, rmax, qmin, qmax, self.activation_symmetric,
                                               self.min_real_range)
            out[name] = (zp, scale)
        return out

    # -- marking ----------------------------------------------------------------------------

    def _is_initializer(self, name: str) -> bool:
        return name in self.g.initializers

    def _quantizable(self, name: str) -> bool:
        t = self.g.initializers.get(name)
        if t is not None:
            return t.elem_type == dtypes.FLOAT
        if name in self.types:
            return self.types[name] == dtypes.FLOAT
        if name:
            log.warning("failed to infer the type of tensor: %s. Skip to quantize it.", name)
        return False

    def _mark(self, name: str, provider=None, weight=False) -> None:
        if not self._quantizable(name):
            return
        if provider is not None:
            self.marked[name] = _Marked(weight=weight, provider=provider)
        elif name not in self.marked:
            self.marked[name] = _Marked(weight=weight)

    def activation(self, name: str) -> None:
        self._mark(name)

    def same_as_input(self, output: str, input_name: str, node_name: str) -> None:
        self._mark(output, provider=(input_name, node_name))

    def weight(self, name: str) -> None:
        self._mark(name, weight=True)

    def weight_per_channel(self, name: str, axis: int) -> None:
        t = self.g.initializers.get(name)
        if t is not None:
            if t.elem_type == dtypes.FLOAT:
                if self.opset < 13:
                    # onnxruntime writes DequantizeLinear's axis anyway: a file that does not load
                    raise NotImplementedError(
                        f"per_channel needs opset 13 (DequantizeLinear's axis); the model has "
                        f"opset {self.opset}")
                self.marked[name] = _Marked(weight=True, axis=axis)
        else:
            log.warning("only support per-channel quantization on weight. Tensor: %s is not "
                        "quantized.", name)

    def is_quantized(self, name: str) -> bool:
        return name in self.marked or name in self.biases

    def per_channel_axis(self, name: str, default_axis: int, op_type: str | None = None):
        """The channel axis when `name` is a weight to quantize per channel, else None."""
        t = self.g.initializers.get(name)
        if t is None or not self.per_channel:
            return None
        axis = self.axis_by_op.get(op_type, default_axis) if op_type else default_axis
        rank = len(t.dims)
        if not -rank <= axis < rank:
            log.warning("Axis %s is out-of-range for weight '%s' with rank %s", axis, name, rank)
            return None
        return axis % rank

    def weight_maybe_per_channel(self, name: str, default_axis: int, op_type: str | None = None):
        axis = self.per_channel_axis(name, default_axis, op_type)
        if axis is not None:
            self.weight_per_channel(name, axis)
        else:
            self.weight(name)

    def bias(self, node_name: str, bias: str, input_name: str, weight: str, beta=1.0) -> None:
        t = self.g.initializers.get(bias)
        if t is None:
            log.warning("Expected bias '%s' to be an initializer", bias)
            return
        if t.elem_type != dtypes.FLOAT:
            return
        actual = bias
        if bias in self.biases:
            # a bias read by two nodes: each gets its own copy (its scale is the node's)
            suffix = -1
            for name in self.g.initializers:
                if name.startswith(bias):
                    try:
                        suffix = max(suffix, int(name[len(bias):]))
                    except ValueError:
                        continue
            actual = f"{bias}{suffix + 1}"
            self.g.initializers[actual] = ir.Tensor(name=actual, elem_type=t.elem_type,
                                                    dims=tuple(t.dims), raw=t.raw)
            for n in self.g.nodes:
                if n.name == node_name:
                    n.inputs = [actual if i == bias else i for i in n.inputs]
        self.biases[actual] = (node_name, input_name, weight, beta)

    # -- op types (onnxruntime's QDQ operator classes) -----------------------------------------

    def _outputs_too(self, n: ir.Node) -> bool:
        return n.op_type not in self.no_output_ops

    def _op_base(self, n: ir.Node) -> None:
        names = list(n.inputs) + (list(n.outputs) if self._outputs_too(n) else [])
        for name in names:
            self.activation(name)

    def _op_matmul(self, n: ir.Node) -> None:
        names = list(n.inputs) + (list(n.outputs) if self._outputs_too(n) else [])
        for name in names:
            if self._is_initializer(name):
                self.weight_maybe_per_channel(name, 1, n.op_type)
            else:
                self.activation(name)

    def _op_gemm(self, n: ir.Node) -> None:
        self.activation(n.inputs[0])
        if self._outputs_too(n):
            self.activation(n.outputs[0])
        self.weight_maybe_per_channel(n.inputs[1], 0 if n.attr("transB", 0) > 0 else 1)
        if len(n.inputs) == 3:
            if self._is_initializer(n.inputs[2]):
                self.bias(n.name, n.inputs[2], n.inputs[0], n.inputs[1], n.attr("beta", 1.0))
                if "beta" in n.attributes:
                    n.attributes["beta"] = ir.Attribute("beta", ir.AttrType.FLOAT, 1.0)
            else:
                log.warning("Bias of Gemm node '%s' is not constant. Please exclude this node "
                            "for better performance.", n.name)

    def _op_conv(self, n: ir.Node) -> None:
        self.activation(n.inputs[0])
        if self._outputs_too(n):
            self.activation(n.outputs[0])
        self.weight_maybe_per_channel(n.inputs[1], 0 if n.op_type == "Conv" else 1)
        if len(n.inputs) == 3:
            self.bias(n.name, n.inputs[2], n.inputs[0], n.inputs[1])

    def _op_removable_activation(self, n: ir.Node) -> None:
        if not self.is_quantized(n.inputs[0]):
            return
        if (not self.activation_symmetric and not self.keep_removable
                and self._try_replacing_upstream_output(n.inputs[0], n.outputs[0])):
            self.nodes_to_remove.append(n)
        else:
            self.activation(n.inputs[0])
        if self._outputs_too(n):
            self.activation(n.outputs[0])

    def _try_replacing_upstream_output(self, upstream: str, output: str) -> bool:
        if (output in self.params and upstream in self.params
                and len(consumers(self.g).get(upstream, [])) == 1
                and upstream not in self.graph_outputs and upstream not in self.graph_inputs):
            replace_output(self.g.nodes, upstream, output)
            self.marked.pop(upstream, None)
            return True
        return False

    def _op_direct8bit(self, n: ir.Node) -> None:
        if self.force_no_input_check:
            self.activation(n.inputs[0])
            if self._outputs_too(n):
                self.same_as_input(n.outputs[0], n.inputs[0], n.name)
        elif self.is_quantized(n.inputs[0]) and self._outputs_too(n):
            self.same_as_input(n.outputs[0], n.inputs[0], n.name)

    def _op_maxpool(self, n: ir.Node) -> None:
        if self.opset >= 12:
            self._op_direct8bit(n)

    def _op_resize(self, n: ir.Node) -> None:
        if self.opset >= 11:
            self._op_direct8bit(n)

    def _op_split(self, n: ir.Node) -> None:
        if not self.is_quantized(n.inputs[0]):
            self.activation(n.inputs[0])
        if self._outputs_too(n):
            for out in n.outputs:
                self.same_as_input(out, n.inputs[0], n.name)

    def _op_gather(self, n: ir.Node) -> None:
        data = n.inputs[0]
        t = self.g.initializers.get(data)
        if (t is not None and t.elem_type == dtypes.FLOAT) or self.force_no_input_check:
            self.activation(data)
            self.same_as_input(n.outputs[0], data, n.name)
        elif self.is_quantized(data):
            self.same_as_input(n.outputs[0], data, n.name)

    def _op_where(self, n: ir.Node) -> None:
        if self.force_no_input_check:
            for name in n.inputs[1:3]:
                if not self.is_quantized(name):
                    self.activation(name)
            if self._outputs_too(n):
                for out in n.outputs:
                    self.activation(out)
        elif (self.is_quantized(n.inputs[1]) and self.is_quantized(n.inputs[2])
              and self._outputs_too(n)):
            for out in n.outputs:
                self.activation(out)

    def _op_pad(self, n: ir.Node) -> None:
        for name in n.inputs:
            if name:
                self.activation(name)
        if not self._outputs_too(n):
            return
        if self._pad_keeps_range(n):
            self.same_as_input(n.outputs[0], n.inputs[0], n.name)
        else:
            self.activation(n.outputs[0])

    def _pad_keeps_range(self, n: ir.Node) -> bool:
        mode = n.attr("mode", b"constant")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        if mode in ("reflect", "edge", "wrap"):
            return True
        if mode != "constant" or self.types.get(n.inputs[0]) != dtypes.FLOAT:
            return False
        if self.opset < 11:
            return float(n.attr("value", 0.0)) == 0.0
        if len(n.inputs) >= 3 and n.inputs[2]:
            value = self._constant(n.inputs[2])
            if value is None or value.elem_type != dtypes.FLOAT or value.size != 1:
                return False
            return arith.floats(value.raw)[0] == 0.0
        return True

    def _constant(self, name: str):
        for n in self.g.nodes:
            if n.op_type == "Constant" and n.outputs and n.outputs[0] == name:
                return n.attr("value")
        return self.g.initializers.get(name)

    def _op_norm(self, n: ir.Node) -> None:
        self.activation(n.inputs[0])
        scale = n.inputs[1]
        axis = self.per_channel_axis(scale, 1, n.op_type)
        if axis is not None:
            self.weight_per_channel(scale, axis)
        elif self._is_initializer(scale):
            self.weight(scale)
        else:
            self.activation(scale)
        if len(n.inputs) > 2 and n.inputs[2]:
            self.bias(n.name, n.inputs[2], n.inputs[0], n.inputs[1])
        if self._outputs_too(n):
            for out in n.outputs:
                self.activation(out)

    HANDLERS: ClassVar[dict] = {
        "MatMul": "_op_matmul", "Gemm": "_op_gemm", "Conv": "_op_conv",
        "ConvTranspose": "_op_conv", "Relu": "_op_removable_activation",
        "Clip": "_op_removable_activation", "Reshape": "_op_direct8bit",
        "Transpose": "_op_direct8bit", "Squeeze": "_op_direct8bit",
        "Unsqueeze": "_op_direct8bit", "Flatten": "_op_direct8bit",
        "AveragePool": "_op_direct8bit", "Slice": "_op_direct8bit", "TopK": "_op_direct8bit",
        "MaxPool": "_op_maxpool", "Resize": "_op_resize", "Split": "_op_split",
        "Gather": "_op_gather", "GatherElements": "_op_gather", "Where": "_op_where",
        "Pad": "_op_pad", "InstanceNormalization": "_op_norm",
        "LayerNormalization": "_op_norm", "BatchNormalization": "_op_norm",
    }

    # -- the pass ---------------------------------------------------------------------------

    def quantize_model(self) -> None:
        for n in list(self.g.nodes):
            if self._should_quantize_node(n):
                getattr(self, self.HANDLERS.get(n.op_type, "_op_base"))(n)
            if n.op_type == "DequantizeLinear":
                for out in n.outputs:
                    self.producing_dq[out] = n
        self.initializer_params = self._initializer_quant_params()
        self._adjust_weight_params_for_bias()
        self._quantize_normal_tensors()
        self._quantize_sharing_param_tensors()
        if self.quantize_bias:
            self._quantize_bias_tensors()
        gone = {id(n) for n in self.nodes_to_remove}
        self.g.nodes = [n for n in self.g.nodes if id(n) not in gone]
        if not self.add_qdq_pair_to_weight:
            remove_unused_initializers(self.g)
        if self.qdq_domain:
            self.model.opset_imports[MS_DOMAIN] = 1
        topological_sort(self.g)

    def _weight_symmetric(self, qtype: int) -> bool:
        if self.weight_symmetric_option is not None:
            return bool(self.weight_symmetric_option)
        return qtype == dtypes.INT8

    def _initializer_quant_params(self) -> dict:
        out = {}
        for name, info in self.marked.items():
            t = self.g.initializers.get(name)
            if t is None:
                continue
            qtype = self.weight_qtype if info.weight else self.activation_qtype
            symmetric = info.axis is not None or (
                self._weight_symmetric(qtype) if info.weight else self.activation_symmetric)
            values = tensor_floats(t)
            if info.axis is None:
                lo, hi = arith.min_max(values)
                zp, scale = arith.data_quant_params(lo, hi, len(values), qtype, symmetric,
                                                    self.reduce_range, self.min_real_range)
                out[name] = {"zp": [zp], "scale": [scale], "qtype": qtype, "axis": None,
                             "values": values}
            else:
                count = len(values) // t.dims[info.axis] if t.dims[info.axis] else 0
                params = [arith.data_quant_params(lo, hi, count, qtype, symmetric,
                                                  self.reduce_range, self.min_real_range)
                          for lo, hi in arith.channel_min_max(values, t.dims, info.axis)]
                out[name] = {"zp": [p[0] for p in params], "scale": [p[1] for p in params],
                             "qtype": qtype, "axis": info.axis, "values": values}
        return out

    def _adjust_weight_params_for_bias(self) -> None:
        """onnxruntime's _adjust_weight_scale_for_int32_bias: a weight scale so small that
        input_scale * weight_scale cannot hold the bias in int32 is raised."""
        if self.no_weight_adjust:
            return
        qrange = float(arith.INT32_MAX) - float(arith.INT32_MIN + 1)
        for bias, (_node, input_name, weight, _beta) in self.biases.items():
            if (input_name not in self.params or input_name not in self.marked
                    or weight not in self.initializer_params):
                continue
            wp = self.initializer_params[weight]
            if wp["qtype"] != dtypes.INT8 or any(wp["zp"]):
                continue
            input_scale = self.params[input_name][1]
            values = [float(v) for v in tensor_floats(self.g.initializers[bias])]
            if not wp["scale"]:
                continue
            if wp["axis"] is None:
                if not values:
                    continue
                rmin = min(min(values), 0.0)
                rmax = max(max(values), 0.0)
                absmax = max(abs(rmin), abs(rmax))
                wp["scale"][0] = _raised_scale(input_scale, wp["scale"][0], absmax, qrange)
            else:
                for i in range(len(wp["scale"])):
                    wp["scale"][i] = _raised_scale(input_scale, wp["scale"][i], abs(values[i]),
                                                   qrange)

    def _quantize_normal_tensors(self) -> None:
        for name, info in list(self.marked.items()):
            if name in self.quantized or info.provider is not None:
                continue
            if self._is_initializer(name):
                self._add_qdq_for_initializer(name)
            else:
                if name in self.producing_dq:
                    del self.marked[name]
                    continue
                if name not in self.params:
                    raise ValueError(f"Quantization parameters are not specified for param "
                                     f"{name}. In static mode quantization params for inputs "
                                     f"and outputs of nodes to be quantized are required.")
                zp, scale = self.params[name]
                scale_name, zp_name = self._scale_zp_initializers(
                    name, [scale], [zp], self.activation_qtype, None)
                self._add_qdq_pair_for_activation(name, scale_name, zp_name)
            del self.marked[name]

    def _quantize_sharing_param_tensors(self) -> None:
        while self.marked:
            progressed = False
            for name, info in list(self.marked.items()):
                provider = info.provider
                if provider is None or provider[0] not in self.quantized:
                    continue
                del self.marked[name]
                progressed = True
                if self._is_initializer(name):
                    raise ValueError("Quantization parameter shared mode is not supported for "
                                     "weight yet")
                if name in self.producing_dq:
                    raise ValueError(f"Quantization parameter sharing is invalid for tensor "
                                     f"{name} because it has already been quantized")
                shared = self.quantized[provider[0]]
                self._add_qdq_pair_for_activation(name, shared.scale_name, shared.zp_name)
            if not progressed:
                warnings.warn(f"left in float (the tensors they share parameters with are not "
                              f"quantized): {sorted(self.marked)}", RuntimeWarning, stacklevel=2)
                self.marked.clear()

    def _scale_zp_initializers(self, name, scales, zps, qtype, axis, suffix="") -> tuple:
        zp_name, scale_name = f"{name}_zero_point{suffix}", f"{name}_scale{suffix}"
        dims = [] if axis is None else [len(scales)]
        self.g.initializers[zp_name] = ints_tensor(zp_name, qtype, zps, dims)
        self.g.initializers[scale_name] = (float_scalar(scale_name, scales[0]) if axis is None
                                           else floats_tensor(scale_name, scales, dims))
        return scale_name, zp_name

    def _q(self, inputs, output, name, axis=None) -> ir.Node:
        return node("QuantizeLinear", inputs, [output], name, domain=self.qdq_domain, axis=axis)

    def _dq(self, inputs, output, name, axis=None) -> ir.Node:
        return node("DequantizeLinear", inputs, [output], name, domain=self.qdq_domain,
                    axis=axis)

    def _add_qdq_for_initializer(self, name: str) -> None:
        if name in self.quantized:
            return
        p = self.initializer_params[name]
        axis = p["axis"]
        scale_name, zp_name = self._scale_zp_initializers(name, p["scale"], p["zp"], p["qtype"],
                                                          axis)
        dq_out = name + "_DequantizeLinear_Output"
        replace_input(self.g.nodes, name, dq_out)
        q_name = None
        if self.add_qdq_pair_to_weight:
            q_out = name + "_QuantizeLinear_Output"
            self.g.nodes.append(self._q([name, scale_name, zp_name], q_out,
                                        name + "_QuantizeLinear", axis))
            self.g.nodes.append(self._dq([q_out, scale_name, zp_name], dq_out,
                                         name + "_DequantizeLinear", axis))
        else:
            t = self.g.initializers[name]
            q_name = name + "_quantized"
            if axis is None:
                raw = arith.quantize(p["values"], p["scale"][0], p["zp"][0], p["qtype"])
            else:
                raw = arith.quantize_per_channel(p["values"], t.dims, axis, p["scale"], p["zp"],
                                                 p["qtype"])
            self.g.initializers[q_name] = ir.Tensor(name=q_name, elem_type=p["qtype"],
                                                    dims=tuple(t.dims), raw=raw)
            self.g.nodes.append(self._dq([q_name, scale_name, zp_name], dq_out,
                                         name + "_DequantizeLinear", axis))
        self.quantized[name] = _QValue(q_name, scale_name, zp_name, axis)

    def _add_qdq_pair_for_activation(self, name: str, scale_name: str, zp_name: str) -> None:
        q_input, dq_output = name, name + "_DequantizeLinear_Output"
        if name in self.graph_outputs:
            q_input, dq_output = name + "_QuantizeLinear_Input", name
            replace_output(self.g.nodes, name, q_input)
        else:
            replace_input(self.g.nodes, name, dq_output)
        q_out = name + "_QuantizeLinear_Output"
        self.g.nodes.append(self._q([q_input, scale_name, zp_name], q_out,
                                    name + "_QuantizeLinear"))
        self.g.nodes.append(self._dq([q_out, scale_name, zp_name], dq_output,
                                     name + "_DequantizeLinear"))
        self.quantized[name] = _QValue(dq_output, scale_name, zp_name)

    def _scale_of(self, name: str) -> Optional[list]:
        qv = self.quantized.get(name)
        scale_name = qv.scale_name if qv is not None else None
        if scale_name is None and name in self.producing_dq:
            scale_name = self.producing_dq[name].inputs[1]
        t = self.g.initializers.get(scale_name) if scale_name else None
        return None if t is None else [float(v) for v in tensor_floats(t)]

    def _quantize_bias_tensors(self) -> None:
        for bias, (node_name, input_name, weight, beta) in self.biases.items():
            if bias in self.quantized:
                continue
            weight_scale = self._scale_of(weight)
            if weight_scale is None:
                raise ValueError(f"Unable to get valid quantization scale for weight input "
                                 f"'{weight}' when quantizing bias '{bias}' to int32.")
            input_scale = self._scale_of(input_name)
            if input_scale is None:
                raise ValueError(f"Unable to get valid quantization scale for input "
                                 f"'{input_name}' when quantizing bias '{bias}' to int32.")
            t = self.g.initializers[bias]
            values = [float(v) for v in tensor_floats(t)]
            if beta == 0:
                values = [0.0] * len(values)
                beta = 1.0
            # numpy float32: input_scale * weight_scale, then * beta (a Python float)
            scales = [arith.f32(arith.f32(input_scale[0] * w) * beta) for w in weight_scale]
            q_name = bias + "_quantized"
            self.g.initializers[q_name] = ir.Tensor(name=q_name, elem_type=dtypes.INT32,
                                                    dims=tuple(t.dims),
                                                    raw=arith.quantize_bias(values, scales))
            scale_name, zp_name = q_name + "_scale", q_name + "_zero_point"
            self.g.initializers[scale_name] = floats_tensor(scale_name, scales, [len(scales)])
            if len(scales) > 1:
                self.g.initializers[zp_name] = ints_tensor(zp_name, dtypes.INT32,
                                                           [0] * len(scales), [len(scales)])
            else:
                self.g.initializers[zp_name] = ints_tensor(zp_name, dtypes.INT32, [0], [])
            del self.g.initializers[bias]
            axis = 0 if len(scales) > 1 else None
            self.g.nodes.append(self._dq([q_name, scale_name, zp_name], bias,
                                         bias + "_DequantizeLinear", axis))
            self.quantized[bias] = _QValue(q_name, scale_name, zp_name, axis)


def _raised_scale(input_scale: float, weight_scale: float, bias_absmax: float,
                  qrange: float) -> float:
    smallest = 1.0001 * (2.0 * bias_absmax) / qrange
    candidate = input_scale * weight_scale
    if 0.0 < candidate < smallest:
        return arith.f32(weight_scale * (smallest / candidate))
    return weight_scale
