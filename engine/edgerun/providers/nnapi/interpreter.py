"""A reference interpreter for the NNAPI model form: runs an NnapiModel with numpy.

It follows NNAPI's semantics, not ONNX's: NHWC activations, [out, h, w, in] filters,
explicit (left, right, top, bottom) padding, FuseCode activations, AVERAGE_POOL_2D that
excludes padding, LOCAL_RESPONSE_NORMALIZATION over the last axis with 2*radius+1 channels.
Where the arithmetic is the same as an ONNX operator, that operator computes it on transposed
data (edge_common.run_onnx_op, the CPU kernels), so what this checks is the lowering, not a
second set of kernels.
"""
from __future__ import annotations

import numpy as np

from ..edge_common import bind_inputs, run_onnx_op
from . import spec


def _act(y, code):
    if code == spec.FUSE_RELU:
        return np.maximum(y, 0).astype(y.dtype)
    if code == spec.FUSE_RELU1:
        return np.clip(y, -1, 1).astype(y.dtype)
    if code == spec.FUSE_RELU6:
        return np.clip(y, 0, 6).astype(y.dtype)
    return y


def _nchw(x):
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


def _nhwc(x):
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1))


def _binary(fn):
    def run(a, b, fuse=spec.FUSE_NONE):
        return [_act(fn(a, b).astype(a.dtype), fuse)]
    return run


def _conv_common(x, w_oihw, bias, pads, strides, dil, group, fuse):
    left, right, top, bottom = pads
    y = run_onnx_op("Conv", [_nchw(x), w_oihw, bias], 11, pads=[top, left, bottom, right],
                    strides=[strides[1], strides[0]], dilations=[dil[1], dil[0]], group=group)
    return [_act(_nhwc(y), fuse)]


def _dilation(rest):
    return (rest[1], rest[2]) if len(rest) >= 3 else (1, 1)


def conv_2d(x, filt, bias, pl, pr, pt, pb, sw, sh, fuse, *rest):
    return _conv_common(x, filt.transpose(0, 3, 1, 2), bias, (pl, pr, pt, pb), (sw, sh),
                        _dilation(rest), 1, fuse)


def depthwise_conv_2d(x, filt, bias, pl, pr, pt, pb, sw, sh, multiplier, fuse, *rest):
    w = filt.transpose(3, 0, 1, 2)                      # [1, h, w, M] -> [M, 1, h, w]
    return _conv_common(x, w, bias, (pl, pr, pt, pb), (sw, sh), _dilation(rest), x.shape[3],
                        fuse)


def grouped_conv_2d(x, filt, bias, pl, pr, pt, pb, sw, sh, groups, fuse, *rest):
    return _conv_common(x, filt.transpose(0, 3, 1, 2), bias, (pl, pr, pt, pb), (sw, sh),
                        (1, 1), groups, fuse)


def _pool(kind):
    def run(x, pl, pr, pt, pb, sw, sh, fw, fh, fuse, *rest):
        args = dict(kernel_shape=[fh, fw], pads=[pt, pl, pb, pr], strides=[sh, sw])
        if kind == "max":
            y = run_onnx_op("MaxPool", [_nchw(x)], 12, **args)
        else:
            y = run_onnx_op("AveragePool", [_nchw(x)], 19, count_include_pad=0, **args)
        return [_act(_nhwc(y), fuse)]
    return run


def local_response_normalization(x, radius, bias, alpha, beta, axis=-1):
    moved = np.moveaxis(x, axis, -1).astype(np.float32)
    squares = np.pad(moved * moved, [(0, 0)] * (moved.ndim - 1) + [(radius, radius)])
    depth = moved.shape[-1]
    total = sum(squares[..., j:j + depth] for j in range(2 * radius + 1))
    y = moved / (bias + alpha * total) ** beta
    return [np.moveaxis(y, -1, axis).astype(x.dtype)]


def softmax(x, beta, axis=-1):
    z = beta * (x - x.max(axis=axis, keepdims=True))
    e = np.exp(z)
    return [(e / e.sum(axis=axis, keepdims=True)).astype(x.dtype)]


def fully_connected(x, weights, bias, fuse):
    flat = x.reshape(-1, weights.shape[1])
    return [_act((flat @ weights.T + bias).astype(x.dtype), fuse)]


def strided_slice(x, begin, end, strides, begin_mask, end_mask, shrink):
    index = tuple(slice(int(b), int(e), int(s)) for b, e, s in zip(begin, end, strides))
    return [x[index]]


def _pad(x, paddings, value=0.0):
    return [np.pad(x, [tuple(p) for p in paddings], constant_values=value).astype(x.dtype)]


def batch_matmul(a, b, adj_x=False, adj_y=False):
    a = np.swapaxes(a, -1, -2) if adj_x else a
    b = np.swapaxes(b, -1, -2) if adj_y else b
    return [np.matmul(a, b).astype(a.dtype)]


def _unary(fn):
    return lambda x: [fn(x).astype(x.dtype)]


OPERATIONS = {
    "ADD": _binary(np.add), "SUB": _binary(np.subtract), "MUL": _binary(np.multiply),
    "DIV": _binary(np.divide), "MAXIMUM": _binary(np.maximum),
    "MINIMUM": _binary(np.minimum), "POW": _binary(np.power),
    "CONV_2D": conv_2d, "DEPTHWISE_CONV_2D": depthwise_conv_2d,
    "GROUPED_CONV_2D": grouped_conv_2d,
    "MAX_POOL_2D": _pool("max"), "AVERAGE_POOL_2D": _pool("average"),
    "LOCAL_RESPONSE_NORMALIZATION": local_response_normalization,
    "SOFTMAX": softmax, "FULLY_CONNECTED": fully_connected,
    "RESHAPE": lambda x, shape: [x.reshape([int(d) for d in shape])],
    "TRANSPOSE": lambda x, perm=None: [np.ascontiguousarray(np.transpose(x, perm))],
    "CONCATENATION": lambda *args: [np.concatenate(args[:-1], axis=args[-1])],
    "MEAN": lambda x, axes, keep: [x.mean(axis=tuple(int(a) for a in axes),
                                          keepdims=bool(keep)).astype(x.dtype)],
    **{f"REDUCE_{k.upper()}": (lambda fn: lambda x, axes, keep: [
        fn(x, axis=tuple(int(a) for a in axes), keepdims=bool(keep)).astype(x.dtype)])(fn)
       for k, fn in (("sum", np.sum), ("max", np.max), ("min", np.min), ("prod", np.prod))},
    "PAD": _pad, "PAD_V2": _pad, "STRIDED_SLICE": strided_slice,
    "BATCH_MATMUL": batch_matmul,
    "RELU": _unary(lambda x: np.maximum(x, 0)), "RELU1": _unary(lambda x: np.clip(x, -1, 1)),
    "RELU6": _unary(lambda x: np.clip(x, 0, 6)),
    "LOGISTIC": _unary(lambda x: 0.5 * (1 + np.tanh(0.5 * x))), "TANH": _unary(np.tanh),
    "EXP": _unary(np.exp), "LOG": _unary(np.log), "SQRT": _unary(np.sqrt),
    "RSQRT": _unary(lambda x: 1 / np.sqrt(x)), "ABS": _unary(np.abs),
    "NEG": _unary(np.negative), "FLOOR": _unary(np.floor),
    "HARD_SWISH": _unary(lambda x: x * np.clip(x * x.dtype.type(1 / 6) + x.dtype.type(0.5),
                                               0, 1)),
}


def run(model, inputs: list) -> list:
    """Execute `model` (an NnapiModel) on host arrays given in model-input order."""
    values: list = [None] * len(model.operands)
    for i, operand in enumerate(model.operands):
        if operand.lifetime == "CONSTANT_COPY":
            values[i] = operand.value
    bind_inputs(values, model.inputs, inputs, lambda i: model.operands[i].dims,
                lambda i: f"NNAPI input operand {i} ('{model.operands[i].name}')")
    for op in model.operations:
        impl = OPERATIONS.get(op.type)
        if impl is None:
            raise NotImplementedError(f"the reference interpreter has no {op.type}")
        results = impl(*[values[i] for i in op.inputs])
        for index, value in zip(op.outputs, results):
            want = tuple(model.operands[index].dims)
            if tuple(value.shape) != want:
                raise ValueError(f"{op.type} produced operand {index} "
                                 f"('{model.operands[index].name}') with dimensions "
                                 f"{list(value.shape)}; the model declares {list(want)}")
            values[index] = value
    return [values[i] for i in model.outputs]
