"""ONNX nodes -> NNAPI operations: one capability check and one lowering per ONNX operator.

Conventions (NeuralNetworks.h, feature level 8 documentation):
- 4-D activations of CONV_2D, DEPTHWISE_CONV_2D, GROUPED_CONV_2D, *_POOL_2D and
  LOCAL_RESPONSE_NORMALIZATION are NHWC; filters are [depth_out, h, w, depth_in]
  (depthwise: [1, h, w, depth_out]); bias is required ([depth_out]); padding is given
  explicitly (left, right, top, bottom) followed by strides (width, height).
- ADD/MUL/SUB/DIV, convolutions, pools and FULLY_CONNECTED end with a FuseCode operand;
  a following Relu/Clip(0,6)/Clip(-1,1) folds into it.
- Parameters (shapes, axes, paddings, weights) are constant operands: the ONNX inputs
  carrying them must be constants.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..edge_common import (EDGE_FAMILIES, NCHW_TO_NHWC, EdgeBuilder, attr_str, clip_bounds,
                           device_array, ints, reduce_axes, rule_table,
                           softmax_axis)
from ..edge_params import (batch_norm_affine, conv_params, gemm_lower,
                           gemm_problem, pad_amounts, pool_problem, pool_window, slice_problem,
                           slice_ranges)
from . import spec
from .model import NnapiModel, Operand, Operation

_TENSOR_TYPES = {np.dtype(np.float32): "TENSOR_FLOAT32", np.dtype(np.int32): "TENSOR_INT32",
                 np.dtype(np.bool_): "TENSOR_BOOL8", np.dtype(np.float16): "TENSOR_FLOAT16"}
_FUSE_OF = {"Relu": spec.FUSE_RELU}


class Builder(EdgeBuilder):
    """Builds one NnapiModel for one partition with concrete input shapes."""
    platform = "NNAPI"

    def __init__(self, graph, types: dict, constants, level: int, relax: bool = False):
        super().__init__(types, constants)
        self.graph = graph
        self.model = NnapiModel(feature_level=level, relax_float32_to_float16=relax)
        self.fusable: dict = {}                  # value name -> fuse operand index

    def fully_connected(self, x: str, weights, bias, y: str) -> None:
        fuse: Optional[int] = _fuse(self)
        out_shape = self.shape(y)
        batch = int(np.prod(out_shape[:-1])) if len(out_shape) > 1 else 1
        inputs = [self.get(x), self.const_tensor(weights),
                  self.const_tensor(np.ascontiguousarray(bias)), fuse]
        out = self.emit("FULLY_CONNECTED", inputs, (batch, weights.shape[0]), self.dtype(y))
        if len(out_shape) != 2:
            out = self.reshape_tensor(out, out_shape, y)
            fuse = None
        self.define(y, out, "nchw")
        if fuse is not None:
            self.fuse_slot(y, fuse)

    def reshape_tensor(self, tensor, dims, name: str):
        return self.emit("RESHAPE", [tensor, self.const_tensor(np.array(dims, np.int32))],
                         tuple(dims), self.dtype(name))

    def input_tensor(self, name: str, shape) -> int:
        return self.add_operand(_TENSOR_TYPES[self.dtype(name)], shape, name=name,
                                lifetime="MODEL_INPUT")

    def mark_output(self, tensor: int) -> None:
        if self.model.operands[tensor].lifetime == "TEMPORARY_VARIABLE":
            self.model.operands[tensor].lifetime = "MODEL_OUTPUT"

    def program(self) -> NnapiModel:
        model = self.model
        model.input_names, model.inputs, model.input_positions = \
            (list(column) for column in zip(*self.inputs)) if self.inputs else ([], [], [])
        model.output_names = [name for name, _ in self.outputs]
        model.outputs = [tensor for _, tensor in self.outputs]
        return model

    # ---- operands --------------------------------------------------------------------

    def add_operand(self, type_: str, dims=(), value=None, name="", lifetime=None) -> int:
        lifetime = lifetime or ("CONSTANT_COPY" if value is not None else "TEMPORARY_VARIABLE")
        self.model.operands.append(Operand(type_, tuple(int(d) for d in dims), lifetime,
                                           value, name))
        return len(self.model.operands) - 1

    def tensor(self, dtype, dims, name="") -> int:
        return self.add_operand(_TENSOR_TYPES[np.dtype(dtype)], dims, name=name)

    def const_tensor(self, array, name="") -> int:
        array = device_array(array)
        return self.add_operand(_TENSOR_TYPES[array.dtype], array.shape, array, name)

    def i32(self, v) -> int:
        return self.add_operand("INT32", (), int(v))

    def f32(self, v) -> int:
        return self.add_operand("FLOAT32", (), float(v))

    def flag(self, v) -> int:
        return self.add_operand("BOOL", (), bool(v))

    def emit(self, op: str, inputs: list, out_dims, out_dtype, name="") -> int:
        out = self.tensor(out_dtype, out_dims, name)
        self.model.operations.append(Operation(op, list(inputs), [out]))
        return out

    def _transpose(self, src: int, perm, out_dims) -> int:
        operand = self.model.operands[src]
        if operand.value is not None and operand.dims:     # constants are permuted here
            return self.const_tensor(np.transpose(operand.value, perm), operand.name)
        dtype = _dtype_of(operand.type)
        return self.emit("TRANSPOSE", [src, self.const_tensor(np.array(perm, np.int32))],
                         out_dims, dtype, operand.name)

    # ---- EdgeBuilder's hooks -----------------------------------------------------------

    def constant_tensor(self, array, name: str) -> int:
        return self.const_tensor(array, name)

    def numpy_dtype_of(self, operand: int):
        return _dtype_of(self.model.operands[operand].type)

    def name_tensor(self, operand: int, name: str) -> None:
        self.model.operands[operand].name = name

    def fuse_slot(self, name: str, operand: int) -> None:
        """`name` came from an operation whose FuseCode operand is `operand`."""
        self.fusable[name] = operand


def _dtype_of(operand_type: str):
    return {v: k for k, v in _TENSOR_TYPES.items()}[operand_type]


# ---------------------------------------------------------------- capability helpers


def needs(level_needed: int, what: str, view) -> str:
    target = view.provider.feature_level
    if target < level_needed:
        return f"{what} needs NNAPI feature level {level_needed}, target is {target}"
    return ""


def op_level(operation: str, view, what: str = "") -> str:
    return needs(spec.level_of(operation), what or operation, view)


def _fuse_into_producer(b: Builder, src: str, dst: str, code: int) -> bool:
    """Relu after an operation with a FuseCode: set the code instead of adding RELU."""
    slot = b.fusable.get(src)
    if slot is None or b.readers.get(src, 0) != 1:
        return False
    operand = b.model.operands[slot]
    if operand.value != spec.FUSE_NONE:
        return False
    operand.value = code
    del b.fusable[src]
    b.layouts.alias(dst, src)
    return True


def _fuse(b: Builder) -> int:
    return b.i32(spec.FUSE_NONE)


# ---------------------------------------------------------------- convolution and pooling


def _conv_check(view, node, opset) -> str:
    x, w = node.inputs[0], node.inputs[1]
    rank = view.rank(x)
    if rank not in (3, 4):
        return f"Conv on rank-{rank} input: NNAPI has 2-D convolutions (1-D via reshape) only"
    group = node.attr("group", 1)
    wshape = view.shape(w)
    c_in = wshape[1] * group
    dil = ints(node.attr("dilations"), [1] * (rank - 2))
    why = op_level("TRANSPOSE", view, "Conv (TRANSPOSE to NNAPI's NHWC)")
    if why:
        return why
    if any(d != 1 for d in dil):
        if group not in (1, c_in):
            return f"Conv with group {group} and dilations {dil}: GROUPED_CONV_2D has no dilation"
        why = needs(3, f"Conv with dilations {dil}", view)
    elif group != 1 and group != c_in:
        why = needs(3, f"Conv with group {group} (GROUPED_CONV_2D)", view)
    return why


def _conv_lower(b: Builder, node) -> None:
    x_name = node.inputs[0]
    p = conv_params(b, node)
    if p.one_d:      # [N, C, W] -> [N, C, 1, W] with a (1, k) kernel
        n, c, width = b.shape(x_name)
        tmp = x_name + "/as_2d"
        b.define(tmp, b.emit("RESHAPE", [b.get(x_name), b.const_tensor(np.array(
            [n, c, 1, width], np.int32))], (n, c, 1, width), b.dtype(x_name)), "nchw",
            (n, c, 1, width))
        x_name = tmp
    n, c, h, width = b.shape(x_name)
    group = node.attr("group", 1)
    w, bias, strides, dil = p.weights, p.bias, p.strides, p.dilations
    m = w.shape[0]
    (top, bottom, left, right), (oh, ow) = p.explicit_pads(
        (h, width), attr_str(node, "auto_pad", "NOTSET"))
    x = b.get(x_name, "nhwc")
    padding = [b.i32(left), b.i32(right), b.i32(top), b.i32(bottom),
               b.i32(strides[1]), b.i32(strides[0])]
    dilated = any(d != 1 for d in dil)
    tail = [b.flag(False), b.i32(dil[1]), b.i32(dil[0])] if dilated else []
    fuse = _fuse(b)
    if group == 1:
        op, filt, extra = "CONV_2D", w.transpose(0, 2, 3, 1), []
    elif group == c:
        op, filt, extra = "DEPTHWISE_CONV_2D", w.transpose(1, 2, 3, 0), [b.i32(m // c)]
    else:
        op, filt, extra = "GROUPED_CONV_2D", w.transpose(0, 2, 3, 1), [b.i32(group)]
        tail = [b.flag(False)]
    inputs = [x, b.const_tensor(filt), b.const_tensor(bias)] + padding + extra + [fuse] + tail
    out = b.emit(op, inputs, (n, oh, ow, m), b.dtype(x_name))
    y = node.outputs[0]
    if p.one_d:
        tmp = y + "/as_2d"
        b.define(tmp, out, "nhwc", (n, m, 1, ow))
        b.define(y, b.emit("RESHAPE", [b.get(tmp, "nchw"), b.const_tensor(np.array(
            [n, m, ow], np.int32))], (n, m, ow), b.dtype(x_name)), "nchw")
        return
    b.define(y, out, "nhwc", (n, m, oh, ow))
    b.fuse_slot(y, fuse)


def _pool_check(view, node, opset) -> str:
    why = pool_problem(view, node, "NNAPI")
    if why:
        return why
    if node.op_type == "AveragePool" and node.attr("count_include_pad", 0):
        if any(ints(node.attr("pads"), [])) or attr_str(node, "auto_pad", "NOTSET") != "NOTSET" \
                or node.attr("ceil_mode", 0):
            return ("AveragePool count_include_pad=1 with padding: NNAPI's AVERAGE_POOL_2D "
                    "excludes padding from the average")
    return op_level("TRANSPOSE", view, f"{node.op_type} (TRANSPOSE to NNAPI's NHWC)")


def _pool_lower(b: Builder, node) -> None:
    x_name = node.inputs[0]
    n, c, h, w = b.shape(x_name)
    kernel, strides, (top, bottom, left, right), (oh, ow) = pool_window(node, h, w)
    op = "MAX_POOL_2D" if "Max" in node.op_type else "AVERAGE_POOL_2D"
    fuse = _fuse(b)
    inputs = [b.get(x_name, "nhwc"), b.i32(left), b.i32(right), b.i32(top), b.i32(bottom),
              b.i32(strides[1]), b.i32(strides[0]), b.i32(kernel[1]), b.i32(kernel[0]), fuse]
    out = b.emit(op, inputs, (n, oh, ow, c), b.dtype(x_name))
    b.define(node.outputs[0], out, "nhwc", (n, c, oh, ow))
    b.fuse_slot(node.outputs[0], fuse)


def _lrn_check(view, node, opset) -> str:
    if view.rank(node.inputs[0]) != 4:
        return "LRN on a non-4-D input: LOCAL_RESPONSE_NORMALIZATION here works on NHWC"
    size = node.attr("size")
    if size % 2 == 0:
        return f"LRN size {size} is even: NNAPI's window is 2*radius+1 channels"
    return op_level("TRANSPOSE", view, "LRN (TRANSPOSE to NNAPI's NHWC)")


def _lrn_lower(b: Builder, node) -> None:
    size = node.attr("size")
    x = node.inputs[0]
    inputs = [b.get(x, "nhwc"), b.i32((size - 1) // 2), b.f32(node.attr("bias", 1.0)),
              b.f32(node.attr("alpha", 1e-4) / size), b.f32(node.attr("beta", 0.75))]
    n, c, h, w = b.shape(x)
    b.define(node.outputs[0], b.emit("LOCAL_RESPONSE_NORMALIZATION", inputs, (n, h, w, c),
                                     b.dtype(x)), "nhwc")


# ---------------------------------------------------------------- elementwise


_BINARY = {"Add": "ADD", "Sub": "SUB", "Mul": "MUL", "Div": "DIV", "Max": "MAXIMUM",
           "Min": "MINIMUM", "Sum": "ADD", "Pow": "POW"}
_UNARY = {"Relu": "RELU", "Sigmoid": "LOGISTIC", "Tanh": "TANH", "Exp": "EXP", "Log": "LOG",
          "Sqrt": "SQRT", "Abs": "ABS", "Neg": "NEG", "Floor": "FLOOR"}


def _binary_check(view, node, opset) -> str:
    op = _BINARY[node.op_type]
    if node.op_type == "Pow" and view.is_constant(node.inputs[1]):
        exponent = np.asarray(view.constant(node.inputs[1]))
        if exponent.size == 1 and float(exponent.reshape(-1)[0]) in (1.0, 2.0):
            return ""                      # x*x: MUL
    if node.op_type in ("Max", "Min", "Sum") and len(node.inputs) < 2:
        return ""
    return op_level(op, view, f"{node.op_type} ({op})")


def _layout_for(b: Builder, names: list, out_shape) -> str:
    """NHWC when every non-constant input is a rank-4 tensor of the output's shape and one
    already exists in NHWC (so no transpose is added); else NCHW."""
    live = [n for n in names if b.const(n) is None]
    if len(out_shape) != 4 or not live:
        return "nchw"
    if any(b.shape(n) != tuple(out_shape) for n in live):
        return "nchw"
    return "nhwc" if any(b.layouts.has(n, "nhwc") for n in live) else "nchw"


def _emit_binary(b: Builder, op: str, a: int, c: int, out_dims, dtype) -> tuple:
    fuse = None
    inputs = [a, c]
    if op in spec.FUSABLE:
        fuse = _fuse(b)
        inputs.append(fuse)
    return b.emit(op, inputs, out_dims, dtype), fuse


def _binary_lower(b: Builder, node) -> None:
    y = node.outputs[0]
    out_shape = b.shape(y)
    names = list(node.inputs)
    if len(names) == 1:
        b.layouts.alias(y, names[0]) if names[0] in b.layouts.tensors else b.define(
            y, b.get(names[0]), "nchw")
        return
    layout = _layout_for(b, names, out_shape)
    dims = tuple(out_shape[i] for i in NCHW_TO_NHWC) if layout == "nhwc" else out_shape
    op = _BINARY[node.op_type]
    if node.op_type == "Pow":
        exponent = float(np.asarray(b.const(names[1])).reshape(-1)[0]) \
            if b.const(names[1]) is not None and np.size(b.const(names[1])) == 1 else None
        if exponent in (1.0, 2.0):
            x = b.get_broadcast(names[0], layout, len(out_shape))
            if exponent == 1.0:
                b.layouts.set(y, x, layout, out_shape)
                return
            out, _ = _emit_binary(b, "MUL", x, x, dims, b.dtype(y))
            b.define(y, out, layout, out_shape)
            return
    acc = b.get_broadcast(names[0], layout, len(out_shape))
    fuse = None
    for other in names[1:]:
        acc, fuse = _emit_binary(b, op, acc, b.get_broadcast(other, layout, len(out_shape)),
                                 dims, b.dtype(y))
    b.define(y, acc, layout, out_shape)
    if fuse is not None:
        b.fuse_slot(y, fuse)


def _unary_check(view, node, opset) -> str:
    op = _UNARY[node.op_type]
    return op_level(op, view, f"{node.op_type} ({op})")


def _unary_lower(b: Builder, node) -> None:
    x, y = node.inputs[0], node.outputs[0]
    if node.op_type in _FUSE_OF and _fuse_into_producer(b, x, y, _FUSE_OF[node.op_type]):
        return
    layout = b.layouts.preferred(x) if x in b.layouts.tensors else "nchw"
    src = b.get(x, layout)
    dims = b.model.operands[src].dims
    b.define(y, b.emit(_UNARY[node.op_type], [src], dims, b.dtype(y)), layout, b.shape(x))


_RELU_FORMS = {(0.0, 6.0): ("RELU6", spec.FUSE_RELU6), (-1.0, 1.0): ("RELU1", spec.FUSE_RELU1),
               (0.0, None): ("RELU", spec.FUSE_RELU)}


def _clip_check(view, node, opset) -> str:
    lo, hi = clip_bounds(view, node, opset)
    key = (None if lo is None else float(lo), None if hi is None else float(hi))
    if key in _RELU_FORMS:
        return ""
    return needs(3, f"Clip({lo}, {hi}) (MAXIMUM/MINIMUM)", view)


def _clip_lower(b: Builder, node) -> None:
    lo, hi = clip_bounds(b, node, b.opset)
    key = (None if lo is None else float(lo), None if hi is None else float(hi))
    x, y = node.inputs[0], node.outputs[0]
    if key in _RELU_FORMS:
        op, code = _RELU_FORMS[key]
        if _fuse_into_producer(b, x, y, code):
            return
    layout = b.layouts.preferred(x)
    src = b.get(x, layout)
    dims, dtype = b.model.operands[src].dims, b.dtype(y)
    if key in _RELU_FORMS:
        b.define(y, b.emit(_RELU_FORMS[key][0], [src], dims, dtype), layout, b.shape(x))
        return
    if lo is not None:
        src = b.emit("MAXIMUM", [src, b.const_tensor(np.array([lo], dtype))], dims, dtype)
    if hi is not None:
        src = b.emit("MINIMUM", [src, b.const_tensor(np.array([hi], dtype))], dims, dtype)
    b.define(y, src, layout, b.shape(x))


def _hard_sigmoid_check(view, node, opset) -> str:
    return needs(3, "HardSigmoid (MUL, ADD, MAXIMUM, MINIMUM)", view)


def _hard_sigmoid_lower(b: Builder, node) -> None:
    x, y = node.inputs[0], node.outputs[0]
    layout = b.layouts.preferred(x)
    src = b.get(x, layout)
    dims, dtype = b.model.operands[src].dims, b.dtype(y)
    scaled = b.emit("MUL", [src, b.const_tensor(np.array([node.attr("alpha", 0.2)], dtype)),
                            _fuse(b)], dims, dtype)
    shifted = b.emit("ADD", [scaled, b.const_tensor(np.array([node.attr("beta", 0.5)], dtype)),
                             _fuse(b)], dims, dtype)
    low = b.emit("MAXIMUM", [shifted, b.const_tensor(np.array([0], dtype))], dims, dtype)
    b.define(y, b.emit("MINIMUM", [low, b.const_tensor(np.array([1], dtype))], dims, dtype),
             layout, b.shape(x))


def _hard_swish_check(view, node, opset) -> str:
    return ""       # HARD_SWISH from feature level 4; below it ADD/MUL, which every level has


def _hard_swish_lower(b: Builder, node) -> None:
    """HardSwish (ONNX 14, or com.edgerun's for older opsets): y = x * clamp(x/6 + 1/2, 0, 1).
    HARD_SWISH where the target has it, else x * (relu6(x + 3) * 1/6): ADD with FuseCode
    RELU6, then two MULs (feature level 1)."""
    x, y = node.inputs[0], node.outputs[0]
    layout = b.layouts.preferred(x) if x in b.layouts.tensors else "nchw"
    src = b.get(x, layout)
    dims, dtype = b.model.operands[src].dims, b.dtype(y)
    if b.model.feature_level >= spec.level_of("HARD_SWISH"):
        b.define(y, b.emit("HARD_SWISH", [src], dims, dtype), layout, b.shape(x))
        return
    gate = b.emit("ADD", [src, b.const_tensor(np.array([3], dtype)), b.i32(spec.FUSE_RELU6)],
                  dims, dtype)
    gate = b.emit("MUL", [gate, b.const_tensor(np.array([1 / 6], dtype)), _fuse(b)], dims,
                  dtype)
    b.define(y, b.emit("MUL", [src, gate, _fuse(b)], dims, dtype), layout, b.shape(x))


def _batch_norm_check(view, node, opset) -> str:
    if len([o for o in node.outputs if o]) > 1:
        return "BatchNormalization training outputs have no NNAPI equivalent"
    if node.attr("training_mode", 0):
        return "BatchNormalization training_mode=1 has no NNAPI equivalent"
    return ""


def _batch_norm_lower(b: Builder, node) -> None:
    x, y = node.inputs[0], node.outputs[0]
    mult, shift = batch_norm_affine(b, node)
    shape = b.shape(x)
    layout = b.layouts.preferred(x) if len(shape) == 4 else "nchw"
    per_channel = (-1,) if layout == "nhwc" else (-1,) + (1,) * (len(shape) - 2)
    dtype = b.dtype(x)
    src = b.get(x, layout)
    dims = b.model.operands[src].dims
    scaled = b.emit("MUL", [src, b.const_tensor(mult.astype(dtype).reshape(per_channel)),
                            _fuse(b)], dims, dtype)
    fuse = _fuse(b)
    out = b.emit("ADD", [scaled, b.const_tensor(shift.astype(dtype).reshape(per_channel)),
                         fuse], dims, dtype)
    b.define(y, out, layout, shape)
    b.fuse_slot(y, fuse)


# ---------------------------------------------------------------- matrix products


def _gemm_check(view, node, opset) -> str:
    return gemm_problem(view, node, "FULLY_CONNECTED")


_gemm_lower = gemm_lower


def _matmul_check(view, node, opset) -> str:
    a, w = node.inputs
    if view.is_constant(w) and view.rank(w) == 2 and view.rank(a) >= 2:
        return ""
    ra, rw = view.rank(a), view.rank(w)
    if ra < 2 or ra != rw:
        return f"MatMul of rank {ra} by rank {rw}: BATCH_MATMUL needs equal ranks >= 2"
    return op_level("BATCH_MATMUL", view, "MatMul with a non-constant B (BATCH_MATMUL)")


def _matmul_lower(b: Builder, node) -> None:
    a, w, y = node.inputs[0], node.inputs[1], node.outputs[0]
    if b.const(w) is not None and len(b.shape(w)) == 2:
        weights = np.ascontiguousarray(b.const(w).T.astype(np.float32))
        b.fully_connected(a, weights, np.zeros(weights.shape[0], np.float32), y)
        return
    out = b.emit("BATCH_MATMUL", [b.get(a), b.get(w), b.flag(False), b.flag(False)],
                 b.shape(y), b.dtype(y))
    b.define(y, out, "nchw")


def _softmax_check(view, node, opset) -> str:
    rank = view.rank(node.inputs[0])
    axis = softmax_axis(node, opset, rank)
    if opset < 13 and axis != rank - 1:
        return op_level("RESHAPE", view)      # coerced to 2-D by RESHAPE, always available
    if axis != rank - 1 or rank not in (2, 4):
        return needs(3, f"Softmax on axis {axis} of a rank-{rank} tensor", view)
    return ""


def _softmax_lower(b: Builder, node) -> None:
    src, axis, dims = b.softmax_input(node)
    inputs = [src, b.f32(1.0)]
    if axis != len(dims) - 1 or len(dims) not in (2, 4):
        inputs.append(b.i32(axis))
    b.define_softmax(node.outputs[0], b.emit("SOFTMAX", inputs, dims, b.dtype(node.outputs[0])),
                     dims)


# ---------------------------------------------------------------- shape operations


def _reshape_lower(b: Builder, node) -> None:
    x, y = node.inputs[0], node.outputs[0]
    shape = b.shape(y)
    out = b.emit("RESHAPE", [b.get(x), b.const_tensor(np.array(shape, np.int32))], shape,
                 b.dtype(y))
    b.define(y, out, "nchw")


def _concat_lower(b: Builder, node) -> None:
    y = node.outputs[0]
    inputs, layout, axis, dims = b.concat_inputs(node)
    b.define(y, b.emit("CONCATENATION", inputs + [b.i32(axis)], dims, b.dtype(y)), layout,
             b.shape(y))


def _transpose_check(view, node, opset) -> str:
    return op_level("TRANSPOSE", view)


def _transpose_lower(b: Builder, node) -> None:
    x, y = node.inputs[0], node.outputs[0]
    perm = ints(node.attr("perm"), list(range(len(b.shape(x))))[::-1])
    out = b.emit("TRANSPOSE", [b.get(x), b.const_tensor(np.array(perm, np.int32))],
                 b.shape(y), b.dtype(y))
    b.define(y, out, "nchw")


def _mean_check(view, node, opset) -> str:
    if len(node.inputs) > 1 and node.inputs[1] and not view.is_constant(node.inputs[1]):
        return "ReduceMean axes must be a constant for NNAPI MEAN"
    return op_level("MEAN", view, "ReduceMean (MEAN)")


def _mean_lower(b: Builder, node) -> None:
    x, y = node.inputs[0], node.outputs[0]
    axes = reduce_axes(node, b.opset, b, len(b.shape(x)))
    out = b.emit("MEAN", [b.get(x), b.const_tensor(np.array(axes, np.int32)),
                          b.i32(node.attr("keepdims", 1))], b.shape(y), b.dtype(y))
    b.define(y, out, "nchw")


_REDUCE = {"ReduceSum": "REDUCE_SUM", "ReduceMax": "REDUCE_MAX", "ReduceMin": "REDUCE_MIN",
           "ReduceProd": "REDUCE_PROD"}


def _reduce_check(view, node, opset) -> str:
    if len(node.inputs) > 1 and node.inputs[1] and not view.is_constant(node.inputs[1]):
        return f"{node.op_type} axes must be a constant for NNAPI {_REDUCE[node.op_type]}"
    if node.attr("noop_with_empty_axes", 0):
        return f"{node.op_type} noop_with_empty_axes=1 is not lowered"
    return op_level(_REDUCE[node.op_type], view, f"{node.op_type} ({_REDUCE[node.op_type]})")


def _reduce_lower(b: Builder, node) -> None:
    x, y = node.inputs[0], node.outputs[0]
    axes = reduce_axes(node, b.opset, b, len(b.shape(x)))
    out = b.emit(_REDUCE[node.op_type], [b.get(x), b.const_tensor(np.array(axes, np.int32)),
                                         b.flag(node.attr("keepdims", 1))],
                 b.shape(y), b.dtype(y))
    b.define(y, out, "nchw")


def _reciprocal_check(view, node, opset) -> str:
    return op_level("DIV", view, "Reciprocal (DIV)")


def _reciprocal_lower(b: Builder, node) -> None:
    x, y = node.inputs[0], node.outputs[0]
    layout = b.layouts.preferred(x)
    src = b.get(x, layout)
    one = b.const_tensor(np.ones(1, b.dtype(x)))
    out = b.emit("DIV", [one, src, _fuse(b)], b.model.operands[src].dims, b.dtype(y))
    b.define(y, out, layout, b.shape(x))


def _pad_check(view, node, opset) -> str:
    mode = attr_str(node, "mode", "constant")
    if mode != "constant":
        return f"Pad mode '{mode}': NNAPI pads with a constant only (MIRROR_PAD is level 7)"
    if opset >= 11:
        if len(node.inputs) > 3 and node.inputs[3]:
            return "Pad with axes input is not lowered"
        value = node.inputs[2] if len(node.inputs) > 2 else ""
        if value and float(np.asarray(view.constant(value)).reshape(-1)[0]) != 0.0:
            return needs(3, "Pad with a nonzero value (PAD_V2)", view)
    elif node.attr("value", 0.0) != 0.0:
        return needs(3, "Pad with a nonzero value (PAD_V2)", view)
    return op_level("PAD", view, "Pad (PAD)")


def _pad_lower(b: Builder, node) -> None:
    x, y = node.inputs[0], node.outputs[0]
    paddings, value = pad_amounts(b, node, len(b.shape(x)))
    if any(p < 0 for axis in paddings for p in axis):
        raise ValueError(f"Pad '{node.name}': negative pads {paddings} are crops, not lowered")
    inputs = [b.get(x), b.const_tensor(np.array(paddings, np.int32))]
    op = "PAD"
    if value != 0.0:
        op = "PAD_V2"
        inputs.append(b.f32(value))
    b.define(y, b.emit(op, inputs, b.shape(y), b.dtype(y)), "nchw")


def _slice_check(view, node, opset) -> str:
    return (slice_problem(view, node, opset)
            or op_level("STRIDED_SLICE", view, "Slice (STRIDED_SLICE)"))


def _slice_lower(b: Builder, node) -> None:
    x, y = node.inputs[0], node.outputs[0]
    begin, end, stride = np.array(slice_ranges(b, node, b.shape(x)), np.int32).T
    inputs = [b.get(x)] + [b.const_tensor(v) for v in (begin, end, stride)]
    inputs += [b.i32(0), b.i32(0), b.i32(0)]
    b.define(y, b.emit("STRIDED_SLICE", inputs, b.shape(y), b.dtype(y)), "nchw")


# ---------------------------------------------------------------- com.edgerun fused operators


RULES = rule_table(globals(), {**EDGE_FAMILIES, **dict.fromkeys(_UNARY, "unary"),
                              **dict.fromkeys(_BINARY, "binary"),
                              **dict.fromkeys(_REDUCE, "reduce")})
