"""A reference interpreter for the QNN graph form: runs a QnnGraph with numpy.

It follows the QNN op definitions, not ONNX: NHWC activations, HWIO weights, pad_amount as
((top, bottom), (left, right)), PoolAvg2d's count_pad_for_edges, Lrn's radius, StridedSlice
ranges, ReluMinMax. Where the arithmetic equals an ONNX operator's, that operator runs on
transposed data (edge_common.run_onnx_op, the CPU kernels). `fp16=True` rounds every op's float result to float16, the way
the HTP backend computes float graphs with htp_fp16_precision.
"""
from __future__ import annotations

import numpy as np

from ..edge_common import bind_inputs, run_onnx_op
from . import spec


def _nchw(x):
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


def _nhwc(x):
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1))


def _spatial(op):
    (top, bottom), (left, right) = op.param("pad_amount").tolist()
    return [int(v) for v in op.param("stride")], [top, left, bottom, right]


def conv2d(op, x, w, b=None):
    strides, pads = _spatial(op)
    group = int(op.param("group", 1))
    weights = w.transpose(3, 2, 0, 1)                 # HWIO -> OIHW
    y = run_onnx_op("Conv", [_nchw(x), weights, b], 11, pads=pads, strides=strides,
                    dilations=[int(d) for d in op.param("dilation")], group=group)
    return _nhwc(y)


def depthwise_conv2d(op, x, w, b=None):
    strides, pads = _spatial(op)
    weights = w.transpose(3, 2, 0, 1)                 # [h, w, 1, C] -> [C, 1, h, w]
    y = run_onnx_op("Conv", [_nchw(x), weights, b], 11, pads=pads, strides=strides,
                    dilations=[int(d) for d in op.param("dilation")], group=x.shape[3])
    return _nhwc(y)


def pool(kind):
    def run(op, x):
        strides, pads = _spatial(op)
        args = dict(kernel_shape=[int(k) for k in op.param("filter_size")], pads=pads,
                    strides=strides, ceil_mode=int(op.param("rounding_mode", 0)))
        if kind == "max":
            return _nhwc(run_onnx_op("MaxPool", [_nchw(x)], 12, **args))
        include = int(bool(op.param("count_pad_for_edges", False)))
        return _nhwc(run_onnx_op("AveragePool", [_nchw(x)], 19, count_include_pad=include,
                                 **args))
    return run


def lrn(op, x):
    radius = int(op.param("radius"))
    squares = np.pad(x.astype(np.float32) ** 2, [(0, 0)] * (x.ndim - 1) + [(radius, radius)])
    depth = x.shape[-1]
    total = sum(squares[..., j:j + depth] for j in range(2 * radius + 1))
    y = x / (op.param("bias") + op.param("alpha") * total) ** op.param("beta")
    return y.astype(x.dtype)


def batchnorm(op, x, weights, bias):
    return (x * weights + bias).astype(x.dtype)


def fully_connected(op, x, weights, bias=None):
    flat = x.reshape(-1, weights.shape[1])
    y = flat @ weights.T + (0 if bias is None else bias)
    if op.param("keep_dims", False):
        return y.reshape(x.shape[:-1] + (weights.shape[0],))
    return y


def matmul(op, a, b):
    a = np.swapaxes(a, -1, -2) if op.param("transpose_in0", False) else a
    b = np.swapaxes(b, -1, -2) if op.param("transpose_in1", False) else b
    return np.matmul(a, b)


def softmax(op, x):
    axis = int(op.param("axis", x.ndim - 1))
    z = float(op.param("beta", 1.0)) * (x - x.max(axis=axis, keepdims=True))
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


def neuron(op, x):
    if op.param("operation") != spec.NEURON_HARD_SIGMOID:
        raise NotImplementedError(f"ElementWiseNeuron operation {op.param('operation')}")
    return np.clip(op.param("alpha") * x + op.param("beta"), 0, 1)


def reduce(fn):
    return lambda op, x: fn(x, axis=tuple(int(a) for a in op.param("axes")),
                            keepdims=bool(op.param("keep_dims", False)))


def pad(op, x):
    widths = [tuple(int(v) for v in row) for row in op.param("pad_amount")]
    scheme = op.param("scheme", spec.PAD_SCHEME_CONSTANT)
    if scheme == spec.PAD_SCHEME_CONSTANT:
        return np.pad(x, widths, constant_values=op.param("pad_constant_value", 0.0))
    return np.pad(x, widths, mode={spec.PAD_SCHEME_MIRROR_REFLECT: "reflect",
                                   spec.PAD_SCHEME_EDGE: "edge"}[scheme])


def strided_slice(op, x):
    return x[tuple(slice(int(b), int(e), int(s)) for b, e, s in op.param("ranges"))]


def _binary(fn):
    return lambda op, a, b: fn(a, b)


def _unary(fn):
    return lambda op, x: fn(x)


OPS = {
    "Conv2d": conv2d, "DepthWiseConv2d": depthwise_conv2d, "PoolMax2d": pool("max"),
    "PoolAvg2d": pool("avg"), "Lrn": lrn, "Batchnorm": batchnorm,
    "FullyConnected": fully_connected, "MatMul": matmul, "Softmax": softmax,
    "ElementWiseAdd": _binary(np.add), "ElementWiseSubtract": _binary(np.subtract),
    "ElementWiseMultiply": _binary(np.multiply), "ElementWiseDivide": _binary(np.divide),
    "ElementWiseMaximum": _binary(np.maximum), "ElementWiseMinimum": _binary(np.minimum),
    "ElementWisePower": _binary(np.power),
    "ElementWiseExp": _unary(np.exp), "ElementWiseLog": _unary(np.log),
    "ElementWiseSquareRoot": _unary(np.sqrt), "ElementWiseAbs": _unary(np.abs),
    "ElementWiseNeg": _unary(np.negative), "ElementWiseFloor": _unary(np.floor),
    "Relu": _unary(lambda x: np.maximum(x, 0)),
    "ReluMinMax": lambda op, x: np.clip(x, op.param("min_value"), op.param("max_value")),
    "Sigmoid": _unary(lambda x: 0.5 * (1 + np.tanh(0.5 * x))), "Tanh": _unary(np.tanh),
    "ElementWiseNeuron": neuron,
    "HardSwish": _unary(lambda x: x * np.clip(x * x.dtype.type(1 / 6) + x.dtype.type(0.5),
                                              0, 1)),
    "ReduceMean": reduce(np.mean), "ReduceSum": reduce(np.sum), "ReduceMax": reduce(np.max),
    "ReduceMin": reduce(np.min), "Pad": pad, "StridedSlice": strided_slice,
    "Transpose": lambda op, x: np.ascontiguousarray(np.transpose(x, [int(p) for p in
                                                                      op.param("perm")])),
    "Concat": lambda op, *xs: np.concatenate(xs, axis=int(op.param("axis"))),
}


def run(graph, inputs: list, fp16: bool = False) -> list:
    """Execute `graph` (a QnnGraph) on host arrays given in graph-input order."""
    values = {n: t.data for n, t in graph.tensors.items() if t.type == "STATIC"}
    bind_inputs(values, graph.inputs, inputs, lambda name: graph.tensors[name].dims,
                lambda name: f"QNN input tensor '{name}'")
    for op in graph.ops:
        impl = OPS.get(op.type)
        if op.type == "Reshape":
            impl = lambda _op, x, _dims=graph.tensors[op.outputs[0]].dims: x.reshape(_dims)  # noqa: E731
        if impl is None:
            raise NotImplementedError(f"the reference interpreter has no QNN op {op.type}")
        x = impl(op, *[values[i] for i in op.inputs])
        out = graph.tensors[op.outputs[0]]
        dtype = {"QNN_DATATYPE_FLOAT_32": np.float32, "QNN_DATATYPE_FLOAT_16": np.float16,
                 "QNN_DATATYPE_INT_32": np.int32, "QNN_DATATYPE_BOOL_8": np.bool_}[out.data_type]
        if tuple(np.shape(x)) != out.dims:
            raise ValueError(f"{op.type} '{op.name}' produced {list(np.shape(x))}; the graph "
                             f"declares '{out.name}' as {list(out.dims)}")
        if fp16 and dtype == np.float32:
            x = np.asarray(x).astype(np.float16)
        values[out.name] = np.asarray(x).astype(dtype, copy=False)
    return [values[name] for name in graph.outputs]
