"""ONNX nodes -> QNN ops (package qti.aisw): one capability check and one lowering per ONNX
operator.

Conventions (QnnOpDef.h 1.27 and the op definitions of the QNN SDK documentation):
- Conv2d / DepthWiseConv2d / PoolMax2d / PoolAvg2d / Lrn take NHWC activations; Conv2d
  weights are [filter_height, filter_width, in_channels / group, out_channels] (HWIO),
  DepthWiseConv2d weights [filter_height, filter_width, 1, channels]; bias [out_channels].
- Spatial params are tensor params of UINT_32: stride [2] (h, w), dilation [2],
  pad_amount [2, 2] ((top, bottom), (left, right)); filter_size [2] for pools.
- FullyConnected weights are [units, in]; MatMul has transpose_in0 / transpose_in1.
- There are no fused activations: Relu / ReluMinMax / Sigmoid ... are their own ops.
- Static data (weights, shapes) are STATIC tensors: ONNX inputs carrying them must be
  constants.
"""
from __future__ import annotations

import re

import numpy as np

from ...ir.unary_ops import FLOAT32_MAX
from ..edge_common import (EDGE_FAMILIES, NCHW_TO_NHWC, EdgeBuilder, attr_str, clip_bounds,
                           device_array, ints, reduce_axes, rule_table)
from ..edge_params import (batch_norm_affine, conv_params, gemm_lower,
                           gemm_problem, pad_amounts, pool_problem, pool_window, slice_problem,
                           slice_ranges)
from . import spec
from .graph import QnnGraph, QnnOp, QnnParam, QnnTensor

_QNN_TYPE = {np.dtype(np.float32): "QNN_DATATYPE_FLOAT_32",
             np.dtype(np.float16): "QNN_DATATYPE_FLOAT_16",
             np.dtype(np.int32): "QNN_DATATYPE_INT_32", np.dtype(np.bool_): "QNN_DATATYPE_BOOL_8",
             np.dtype(np.uint32): "QNN_DATATYPE_UINT_32"}
_NUMPY_OF = {v: k for k, v in _QNN_TYPE.items()}


def _u32(values):
    """A UINT_32 tensor param (stride, pad_amount, perm ...)."""
    return np.array(values, np.uint32)


class Builder(EdgeBuilder):
    """Builds one QnnGraph for one partition with concrete input shapes."""
    platform = "QNN"

    def __init__(self, graph, types: dict, constants, backend: str, fp16: bool = False):
        super().__init__(types, constants)
        self.graph = QnnGraph(name=_sanitize(graph.name), backend=backend, fp16_precision=fp16)
        self._ids = 0

    def fully_connected(self, x: str, weights, bias, y: str) -> None:
        out_shape = self.shape(y)
        inputs = [self.get(x), self.static(np.ascontiguousarray(weights)),
                  self.static(np.array(bias))]
        out = self.op("FullyConnected", inputs, out_shape, self.dtype(y),
                      {"keep_dims": len(out_shape) != 2}, base=y)
        self.define(y, out, "nchw")

    def reshape_tensor(self, tensor, dims, name: str):
        return self.op("Reshape", [tensor], tuple(dims), self.dtype(name), base=name)

    def input_tensor(self, name: str, shape) -> str:
        return self.tensor(name, self.dtype(name), shape, "APP_WRITE")

    def mark_output(self, tensor: str) -> None:
        if self.graph.tensors[tensor].type == "NATIVE":
            self.graph.tensors[tensor].type = "APP_READ"

    def program(self) -> QnnGraph:
        self.graph.inputs = [tensor for _, tensor, _ in self.inputs]
        self.graph.input_positions = [position for _, _, position in self.inputs]
        self.graph.outputs = [tensor for _, tensor in self.outputs]
        return self.graph

    # ---- tensors and ops -------------------------------------------------------------

    def tensor(self, base: str, dtype, dims, kind="NATIVE", data=None) -> str:
        name = _sanitize(base) or "t"
        while name in self.graph.tensors:
            name = f"{_sanitize(base)}_{self._ids}"
            self._ids += 1
        self.graph.tensors[name] = QnnTensor(name, len(self.graph.tensors), kind,
                                             _QNN_TYPE[np.dtype(dtype)], tuple(int(d) for d in dims),
                                             data)
        return name

    def static(self, array, base="const") -> str:
        array = device_array(array)
        return self.tensor(base, array.dtype, array.shape, "STATIC", array)

    def op(self, type_: str, inputs: list, out_dims, out_dtype, params=None, base="") -> str:
        out = self.tensor(base or type_.lower(), out_dtype, out_dims)
        name = f"{type_}_{len(self.graph.ops)}"
        qparams = []
        for k, v in (params or {}).items():
            if isinstance(v, np.ndarray):
                qparams.append(QnnParam(k, v, _QNN_TYPE[v.dtype]))
            elif isinstance(v, bool):
                qparams.append(QnnParam(k, v, "QNN_DATATYPE_BOOL_8"))
            elif isinstance(v, float):
                qparams.append(QnnParam(k, v, "QNN_DATATYPE_FLOAT_32"))
            else:
                qparams.append(QnnParam(k, int(v), "QNN_DATATYPE_UINT_32"))
        self.graph.ops.append(QnnOp(name, type_, list(inputs), [out], qparams))
        return out

    def dims(self, tensor: str) -> tuple:
        return self.graph.tensors[tensor].dims

    def _transpose(self, src: str, perm, out_dims) -> str:
        t = self.graph.tensors[src]
        if t.type == "STATIC":
            return self.static(np.transpose(t.data, perm), src)
        return self.op("Transpose", [src], out_dims, _NUMPY_OF[t.data_type],
                       {"perm": _u32(perm)}, base=src)

    # ---- EdgeBuilder's hooks -----------------------------------------------------------

    def constant_tensor(self, array, name: str) -> str:
        return self.static(array, name)

    def numpy_dtype_of(self, tensor: str):
        return _NUMPY_OF[self.graph.tensors[tensor].data_type]


def _sanitize(name: str) -> str:
    """QNN tensor names end up as C identifiers in model.cpp."""
    clean = re.sub(r"[^A-Za-z0-9_]", "_", name or "")
    return ("_" + clean) if clean[:1].isdigit() else clean


# ---------------------------------------------------------------- capability helpers


def backend_lacks(view, op_type: str, what: str) -> str:
    backend = view.provider.backend
    if op_type in spec.BACKEND_LACKS[backend]:
        return f"{what} ({op_type}) is not run by the QNN {backend.upper()} backend"
    return ""


def _same_layout_unary(b: Builder, x: str, y: str, type_: str, params=None) -> None:
    layout = b.layouts.preferred(x) if x in b.layouts.tensors else "nchw"
    src = b.get(x, layout)
    b.define(y, b.op(type_, [src], b.dims(src), b.dtype(y), params, base=y), layout,
             b.shape(x))


# ---------------------------------------------------------------- convolution and pooling


def _conv_check(view, node, opset) -> str:
    rank = view.rank(node.inputs[0])
    if rank not in (3, 4):
        return f"Conv on rank-{rank} input: lowered for 1-D and 2-D convolutions only"
    return ""


def _conv_lower(b: Builder, node) -> None:
    x_name, y = node.inputs[0], node.outputs[0]
    p = conv_params(b, node)
    if p.one_d:       # QNN's Conv1d exists too; [N, C, 1, W] keeps one code path
        n, c, width = b.shape(x_name)
        tmp = x_name + "/as_2d"
        b.define(tmp, b.op("Reshape", [b.get(x_name)], (n, c, 1, width), b.dtype(x_name),
                           base=tmp), "nchw", (n, c, 1, width))
        x_name = tmp
    n, c, h, width = b.shape(x_name)
    group = node.attr("group", 1)
    w, bias = p.weights, p.bias
    m = w.shape[0]
    (top, bottom, left, right), (oh, ow) = p.explicit_pads(
        (h, width), attr_str(node, "auto_pad", "NOTSET"))
    params = {"stride": _u32(p.strides), "pad_amount": _u32([[top, bottom], [left, right]]),
              "dilation": _u32(p.dilations)}
    if group == c and m == c and group > 1:
        op, weights = "DepthWiseConv2d", w.transpose(2, 3, 1, 0)      # [h, w, 1, C]
    else:
        op, weights = "Conv2d", w.transpose(2, 3, 1, 0)               # [h, w, C/g, M]
        params["group"] = group
    inputs = [b.get(x_name, "nhwc"), b.static(weights, node.inputs[1]), b.static(bias)]
    out = b.op(op, inputs, (n, oh, ow, m), b.dtype(x_name), params, base=y)
    if p.one_d:
        tmp = y + "/as_2d"
        b.define(tmp, out, "nhwc", (n, m, 1, ow))
        b.define(y, b.op("Reshape", [b.get(tmp, "nchw")], (n, m, ow), b.dtype(y), base=y),
                 "nchw")
        return
    b.define(y, out, "nhwc", (n, m, oh, ow))


def _pool_check(view, node, opset) -> str:
    why = pool_problem(view, node, "QNN")
    if why:
        return why
    if node.attr("count_include_pad", 0) and node.attr("ceil_mode", 0):
        return ("AveragePool count_include_pad=1 with ceil_mode=1: the ceil padding would be "
                "counted too")
    return ""


def _pool_lower(b: Builder, node) -> None:
    x_name, y = node.inputs[0], node.outputs[0]
    n, c, h, w = b.shape(x_name)
    # pool_window turns ceil_mode into extra bottom/right padding, excluded from both pools' windows
    kernel, strides, (top, bottom, left, right), (oh, ow) = pool_window(node, h, w)
    params = {"filter_size": _u32(kernel), "stride": _u32(strides),
              "pad_amount": _u32([[top, bottom], [left, right]]),
              "rounding_mode": spec.POOL_ROUNDING_FLOOR}
    if "Max" in node.op_type:
        op = "PoolMax2d"
    else:
        op = "PoolAvg2d"
        params["count_pad_for_edges"] = bool(node.attr("count_include_pad", 0))
    out = b.op(op, [b.get(x_name, "nhwc")], (n, oh, ow, c), b.dtype(x_name), params, base=y)
    b.define(y, out, "nhwc", (n, c, oh, ow))


def _lrn_check(view, node, opset) -> str:
    if view.rank(node.inputs[0]) != 4:
        return "LRN on a non-4-D input is not lowered"
    if node.attr("size") % 2 == 0:
        return f"LRN size {node.attr('size')} is even: QNN's window is 2*radius+1 channels"
    return backend_lacks(view, "Lrn", "LRN")


def _lrn_lower(b: Builder, node) -> None:
    x, y = node.inputs[0], node.outputs[0]
    size = node.attr("size")
    n, c, h, w = b.shape(x)
    params = {"alpha": float(node.attr("alpha", 1e-4)) / size,
              "beta": float(node.attr("beta", 0.75)), "bias": float(node.attr("bias", 1.0)),
              "radius": (size - 1) // 2, "region": spec.LRN_ACROSS_CHANNEL}
    b.define(y, b.op("Lrn", [b.get(x, "nhwc")], (n, h, w, c), b.dtype(x), params, base=y),
             "nhwc")


# ---------------------------------------------------------------- elementwise


_BINARY = {"Add": "ElementWiseAdd", "Sub": "ElementWiseSubtract", "Mul": "ElementWiseMultiply",
           "Div": "ElementWiseDivide", "Max": "ElementWiseMaximum",
           "Min": "ElementWiseMinimum", "Sum": "ElementWiseAdd", "Pow": "ElementWisePower"}
_UNARY = {"Relu": "Relu", "Sigmoid": "Sigmoid", "Tanh": "Tanh", "Exp": "ElementWiseExp",
          "Log": "ElementWiseLog", "Sqrt": "ElementWiseSquareRoot", "Abs": "ElementWiseAbs",
          "Neg": "ElementWiseNeg", "Floor": "ElementWiseFloor"}


def _binary_check(view, node, opset) -> str:
    return backend_lacks(view, _BINARY[node.op_type], node.op_type)


def _layout_for(b: Builder, names: list, out_shape) -> str:
    live = [n for n in names if b.const(n) is None]
    if len(out_shape) != 4 or not live or any(b.shape(n) != tuple(out_shape) for n in live):
        return "nchw"
    return "nhwc" if any(b.layouts.has(n, "nhwc") for n in live) else "nchw"


def _binary_lower(b: Builder, node) -> None:
    y = node.outputs[0]
    names = list(node.inputs)
    out_shape = b.shape(y)
    if len(names) == 1:
        b.get(names[0])
        b.layouts.alias(y, names[0])
        return
    layout = _layout_for(b, names, out_shape)
    dims = tuple(out_shape[i] for i in NCHW_TO_NHWC) if layout == "nhwc" else out_shape
    acc = b.get_broadcast(names[0], layout, len(out_shape))
    for other in names[1:]:
        acc = b.op(_BINARY[node.op_type], [acc, b.get_broadcast(other, layout, len(out_shape))],
                   dims, b.dtype(y), base=y)
    b.define(y, acc, layout, out_shape)


def _unary_check(view, node, opset) -> str:
    return backend_lacks(view, _UNARY[node.op_type], node.op_type)


def _unary_lower(b: Builder, node) -> None:
    _same_layout_unary(b, node.inputs[0], node.outputs[0], _UNARY[node.op_type])


def _clip_lower(b: Builder, node) -> None:
    lo, hi = clip_bounds(b, node, b.opset)
    lo = -FLOAT32_MAX if lo is None else float(lo)
    hi = FLOAT32_MAX if hi is None else float(hi)
    _same_layout_unary(b, node.inputs[0], node.outputs[0], "ReluMinMax",
                       {"min_value": lo, "max_value": hi})


def _hard_sigmoid_check(view, node, opset) -> str:
    return backend_lacks(view, "ElementWiseNeuron", "HardSigmoid")


def _hard_sigmoid_lower(b: Builder, node) -> None:
    _same_layout_unary(b, node.inputs[0], node.outputs[0], "ElementWiseNeuron", {
        "operation": spec.NEURON_HARD_SIGMOID, "alpha": float(node.attr("alpha", 0.2)),
        "beta": float(node.attr("beta", 0.5))})


def _reciprocal_lower(b: Builder, node) -> None:
    x, y = node.inputs[0], node.outputs[0]
    layout = b.layouts.preferred(x)
    src = b.get(x, layout)
    one = b.static(np.ones(1, b.dtype(x)), "one")
    b.define(y, b.op("ElementWiseDivide", [one, src], b.dims(src), b.dtype(y), base=y),
             layout, b.shape(x))


def _hard_swish_check(view, node, opset) -> str:
    return backend_lacks(view, "HardSwish", "HardSwish")


def _hard_swish_lower(b: Builder, node) -> None:
    """HardSwish (ONNX 14, or com.edgerun's for older opsets) is QNN's HardSwish op:
    y = x * clamp(x/6 + 1/2, 0, 1), no params."""
    _same_layout_unary(b, node.inputs[0], node.outputs[0], "HardSwish")


def _batch_norm_check(view, node, opset) -> str:
    if len([o for o in node.outputs if o]) > 1 or node.attr("training_mode", 0):
        return "BatchNormalization in training mode has no QNN equivalent"
    if view.rank(node.inputs[0]) != 4:
        return "BatchNormalization on a non-4-D input is not lowered (Batchnorm is NHWC)"
    return ""


def _batch_norm_lower(b: Builder, node) -> None:
    x, y = node.inputs[0], node.outputs[0]
    mult, shift = batch_norm_affine(b, node)
    n, c, h, w = b.shape(x)
    dtype = b.dtype(x)
    out = b.op("Batchnorm", [b.get(x, "nhwc"), b.static(mult.astype(dtype)),
                             b.static(shift.astype(dtype))], (n, h, w, c), dtype, base=y)
    b.define(y, out, "nhwc", (n, c, h, w))


# ---------------------------------------------------------------- matrix products


def _gemm_check(view, node, opset) -> str:
    return gemm_problem(view, node, "FullyConnected")


_gemm_lower = gemm_lower


def _matmul_check(view, node, opset) -> str:
    ra, rw = view.rank(node.inputs[0]), view.rank(node.inputs[1])
    if ra < 2 or rw < 2:
        return f"MatMul of rank {ra} by rank {rw}: 1-D operands are not lowered"
    return ""


def _matmul_lower(b: Builder, node) -> None:
    a, w, y = node.inputs[0], node.inputs[1], node.outputs[0]
    if b.const(w) is not None and len(b.shape(w)) == 2:
        weights = b.const(w).T.astype(np.float32)
        b.fully_connected(a, weights, np.zeros(weights.shape[0], np.float32), y)
        return
    out = b.op("MatMul", [b.get(a), b.get(w)], b.shape(y), b.dtype(y),
               {"transpose_in0": False, "transpose_in1": False}, base=y)
    b.define(y, out, "nchw")


def _softmax_lower(b: Builder, node) -> None:
    src, axis, dims = b.softmax_input(node)
    y = node.outputs[0]
    b.define_softmax(y, b.op("Softmax", [src], dims, b.dtype(y), {"axis": axis, "beta": 1.0},
                             base=y), dims)


# ---------------------------------------------------------------- shape operations


def _reshape_lower(b: Builder, node) -> None:
    x, y = node.inputs[0], node.outputs[0]
    b.define(y, b.op("Reshape", [b.get(x)], b.shape(y), b.dtype(y), base=y), "nchw")


def _concat_lower(b: Builder, node) -> None:
    y = node.outputs[0]
    inputs, layout, axis, dims = b.concat_inputs(node)
    b.define(y, b.op("Concat", inputs, dims, b.dtype(y), {"axis": axis}, base=y), layout,
             b.shape(y))


def _transpose_lower(b: Builder, node) -> None:
    x, y = node.inputs[0], node.outputs[0]
    perm = ints(node.attr("perm"), list(range(len(b.shape(x))))[::-1])
    b.define(y, b.op("Transpose", [b.get(x)], b.shape(y), b.dtype(y), {"perm": _u32(perm)},
                     base=y), "nchw")


_REDUCE = {"ReduceMean": "ReduceMean", "ReduceSum": "ReduceSum", "ReduceMax": "ReduceMax",
           "ReduceMin": "ReduceMin"}


def _reduce_check(view, node, opset) -> str:
    if node.attr("noop_with_empty_axes", 0):
        return f"{node.op_type} noop_with_empty_axes=1 is not lowered"
    return ""


def _reduce_lower(b: Builder, node) -> None:
    x, y = node.inputs[0], node.outputs[0]
    axes = reduce_axes(node, b.opset, b, len(b.shape(x)))
    out = b.op(_REDUCE[node.op_type], [b.get(x)], b.shape(y), b.dtype(y),
               {"axes": _u32(axes), "keep_dims": bool(node.attr("keepdims", 1))}, base=y)
    b.define(y, out, "nchw")


_PAD_SCHEMES = {"constant": spec.PAD_SCHEME_CONSTANT, "reflect": spec.PAD_SCHEME_MIRROR_REFLECT,
                "edge": spec.PAD_SCHEME_EDGE}


def _pad_check(view, node, opset) -> str:
    mode = attr_str(node, "mode", "constant")
    if mode not in _PAD_SCHEMES:
        return f"Pad mode '{mode}' has no QNN scheme"
    if opset >= 11 and len(node.inputs) > 3 and node.inputs[3]:
        return "Pad with axes input is not lowered"
    pads = (np.asarray(view.constant(node.inputs[1])).reshape(-1) if opset >= 11
            else np.array(ints(node.attr("pads"))))
    if (pads < 0).any():
        return f"Pad with negative pads {pads.tolist()} (a crop) is not lowered"
    return ""


def _pad_lower(b: Builder, node) -> None:
    x, y = node.inputs[0], node.outputs[0]
    amounts, value = pad_amounts(b, node, len(b.shape(x)))
    params = {"scheme": _PAD_SCHEMES[attr_str(node, "mode", "constant")],
              "pad_amount": _u32(amounts), "pad_constant_value": value}
    b.define(y, b.op("Pad", [b.get(x)], b.shape(y), b.dtype(y), params, base=y), "nchw")


_slice_check = slice_problem


def _slice_lower(b: Builder, node) -> None:
    x, y = node.inputs[0], node.outputs[0]
    ranges = slice_ranges(b, node, b.shape(x))
    b.define(y, b.op("StridedSlice", [b.get(x)], b.shape(y), b.dtype(y),
                     {"ranges": np.array(ranges, np.int32)}, base=y), "nchw")


# ---------------------------------------------------------------- com.edgerun fused operators


RULES = rule_table(globals(), {**EDGE_FAMILIES, **dict.fromkeys(_UNARY, "unary"),
                              **dict.fromkeys(_BINARY, "binary"),
                              **dict.fromkeys(_REDUCE, "reduce")})
