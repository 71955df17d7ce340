"""Softmax, LogSoftmax, LayerNormalization, RMSNormalization, BatchNormalization
(inference), LRN, InstanceNormalization, GroupNormalization, LpNormalization and
MeanVarianceNormalization."""
from __future__ import annotations

from ....ir import dtypes
from . import EDGERUN, operator
from .common import (broadcast_shape, broadcast_strides, contiguous_strides, converted,
                     float_or_refused, normalize_axis, product)
from .elementwise import AFFINE, BINARY, UNARY, binary
from .reduce import REDUCE, reduce_axes
from .tensor import CAST_TYPES, copy_strided, take
from ..device import WasmTensor


@operator("Softmax", "LogSoftmax")
def bind_softmax(dev, node, opset):
    log_out = int(node.op_type == "LogSoftmax")
    axis_attr = node.attr("axis", -1 if opset >= 13 else 1)

    def run(ctx, x, **_):
        rank = len(x.shape)
        y = dev.empty(x.shape)
        if y.size == 0:
            return y
        axis = normalize_axis(int(axis_attr), max(rank, 1))
        if opset < 13:        # the input is flattened to 2-D at axis
            outer, n, inner = product(x.shape[:axis]), product(x.shape[axis:]), 1
        else:
            outer, n, inner = (product(x.shape[:axis]), x.shape[axis],
                               product(x.shape[axis + 1:]))
        dev.call("er_softmax", x.ptr, y.ptr, outer, n, inner, log_out)
        return y
    return float_or_refused(dev, node, opset, run)


def normalized_param(dev, t, shape, what: str, op: str):
    """A scale or bias as float32 of the normalized shape: broadcast when it is smaller."""
    if t is None or tuple(t.shape) == tuple(shape):
        return t
    try:
        target = broadcast_shape(t.shape, shape)
    except ValueError:
        target = None
    if target != tuple(shape):
        raise ValueError(f"{op}: {what} shape {list(t.shape)} does not broadcast to the "
                         f"normalized shape {list(shape)}")
    y = dev.empty(shape, t.elem_type)
    copy_strided(dev, y.ptr, t.ptr, t.itemsize, shape, contiguous_strides(shape),
                 broadcast_strides(t.shape, shape))
    return y


@operator("LayerNormalization", "RMSNormalization")
@operator("LayerNormalization", domains=EDGERUN)
def bind_layer_norm(dev, node, opset):
    """LayerNormalization (with its Mean and InvStdDev outputs) and RMSNormalization: the
    statistics are float32 (stash_type), whatever the input's type."""
    axis_attr = int(node.attr("axis", -1))
    eps = float(node.attr("epsilon", 1e-5))
    rms = int(node.op_type == "RMSNormalization")
    stash = int(node.attr("stash_type", dtypes.FLOAT))
    wanted = [bool(o) for o in node.outputs]

    def run(ctx, x, scale, bias=None, **_):
        axis = normalize_axis(axis_attr, len(x.shape))
        normalized = x.shape[axis:]
        scale = normalized_param(dev, scale, normalized, "scale", node.op_type)
        bias = normalized_param(dev, bias, normalized, "bias", node.op_type)
        rows, n = product(x.shape[:axis]), product(normalized)
        stats_shape = list(x.shape[:axis]) + [1] * len(normalized)
        y = dev.empty(x.shape)
        mean = dev.empty(stats_shape) if wanted[1:2] == [True] else None
        inv = dev.empty(stats_shape) if wanted[2:3] == [True] else None
        if y.size:
            dev.call("er_layer_norm", x.ptr, scale.ptr, bias.ptr if bias is not None else 0,
                     y.ptr, mean.ptr if mean is not None else 0,
                     inv.ptr if inv is not None else 0, rows, n, eps, rms)
        if len(wanted) == 1:
            return y
        stats = [converted(dev, t, stash) if t is not None and stash in CAST_TYPES else t
                 for t in (mean, inv)]
        return (y, *stats)[:len(wanted)]
    return float_or_refused(dev, node, opset, run, keep_outputs=(1, 2))


def check_batch_norm(node, opset) -> str:
    if int(node.attr("training_mode", 0)) or len([o for o in node.outputs if o]) > 1:
        return "BatchNormalization in training mode (running statistics outputs)"
    if opset < 9 and int(node.attr("spatial", 1)) == 0:
        return "BatchNormalization spatial=0"
    return ""


@operator("BatchNormalization", check=check_batch_norm)
def bind_batch_norm(dev, node, opset):
    eps = float(node.attr("epsilon", 1e-5))

    def run(ctx, x, scale, bias, mean, var, **_):
        if len(x.shape) < 2:
            raise ValueError(f"BatchNormalization input must have rank >= 2, got {x.shape}")
        c = x.shape[1]
        if any(t.size != c for t in (scale, bias, mean, var)):
            raise ValueError(f"BatchNormalization parameters must have {c} values")
        y = dev.empty(x.shape)
        if y.size:
            dev.call("er_batch_norm", x.ptr, scale.ptr, bias.ptr, mean.ptr, var.ptr, y.ptr,
                     x.shape[0], c, product(x.shape[2:]), eps)
        return y
    return float_or_refused(dev, node, opset, run)


@operator("LRN")
def bind_lrn(dev, node, opset):
    size = int(node.attr("size"))
    alpha, beta = float(node.attr("alpha", 1e-4)), float(node.attr("beta", 0.75))
    bias = float(node.attr("bias", 1.0))

    def run(ctx, x, **_):
        if len(x.shape) < 3:
            raise ValueError(f"LRN input must have rank >= 3 (N, C, ...), got {list(x.shape)}")
        y = dev.empty(x.shape)
        if y.size:
            dev.call("er_lrn", x.ptr, y.ptr, x.shape[0], x.shape[1], product(x.shape[2:]), size,
                     alpha, beta, bias)
        return y
    return float_or_refused(dev, node, opset, run)


def _affine_per_channel(dev, y: WasmTensor, scale, bias) -> WasmTensor:
    """y * scale[c] + bias[c] over (N, C, ...)."""
    shape = y.shape
    flat = y.view((shape[0], shape[1], product(shape[2:])))
    for t, code in ((scale, BINARY["Mul"]), (bias, BINARY["Add"])):
        if t is not None:
            if t.size != shape[1]:
                raise ValueError(f"expected {shape[1]} per-channel values, got {t.size}")
            flat = binary(dev, "er_binary", code, flat, t.view((shape[1], 1)), dtypes.FLOAT)
    return flat.view(shape)


def _normalize_rows(dev, x: WasmTensor, rows: int, eps: float) -> WasmTensor:
    y = dev.empty(x.shape)
    if y.size:
        dev.call("er_layer_norm", x.ptr, 0, 0, y.ptr, 0, 0, rows, y.size // rows, eps, 0)
    return y


@operator("InstanceNormalization")
def bind_instance_norm(dev, node, opset):
    eps = float(node.attr("epsilon", 1e-5))

    def run(ctx, x, scale, bias, **_):
        if len(x.shape) < 3:
            raise ValueError(f"InstanceNormalization input must be (N, C, ...), got "
                             f"{list(x.shape)}")
        y = _normalize_rows(dev, x, x.shape[0] * x.shape[1], eps)
        return _affine_per_channel(dev, y, scale, bias)
    return float_or_refused(dev, node, opset, run)


@operator("GroupNormalization")
def bind_group_norm(dev, node, opset):
    """Opset 18 scales per group (repeated to the channels), opset 21 per channel."""
    eps = float(node.attr("epsilon", 1e-5))
    groups = int(node.attr("num_groups"))

    def run(ctx, x, scale, bias, **_):
        n, c = x.shape[:2]
        if groups < 1 or c % groups:
            raise ValueError(f"GroupNormalization: {c} channels are not divisible into "
                             f"{groups} groups")
        y = _normalize_rows(dev, x, n * groups, eps)
        if opset < 21:
            scale, bias = (_per_group(dev, t, c, groups) for t in (scale, bias))
        return _affine_per_channel(dev, y, scale, bias)
    return float_or_refused(dev, node, opset, run)


def _per_group(dev, t: WasmTensor, channels: int, groups: int):
    """Opset 18's one value per group, repeated for each channel of the group."""
    if t.size != groups:
        raise ValueError(f"GroupNormalization-18 takes one scale/bias per group ({groups}), "
                         f"got {t.size}")
    return take(dev, t.view((groups,)), 0, [i // (channels // groups) for i in range(channels)])


@operator("LpNormalization")
def bind_lp_norm(dev, node, opset):
    """x / ||x||_p along axis (p 1 or 2); an all-zero slice stays zeros."""
    axis_attr, p = int(node.attr("axis", -1)), int(node.attr("p", 2))

    def run(ctx, x, **_):
        if p not in (1, 2):
            raise ValueError(f"LpNormalization supports p=1 or p=2, got p={p}")
        axis = normalize_axis(axis_attr, len(x.shape))
        norm = reduce_axes(dev, x, REDUCE["ReduceL1" if p == 1 else "ReduceL2"], [axis], True)
        zero = binary(dev, "er_binary", BINARY["Mul"], norm, dev.from_floats([0.0], ()),
                      dtypes.FLOAT)
        dev.set_args([norm.size, 1, 1])
        is_zero = dev.empty(norm.shape, dtypes.BOOL)
        dev.call("er_compare", 0, dtypes.FLOAT, norm.ptr, zero.ptr, is_zero.ptr, 1)
        safe = binary(dev, "er_binary", BINARY["Add"], norm,
                      converted(dev, is_zero, dtypes.FLOAT), dtypes.FLOAT)
        return binary(dev, "er_binary", BINARY["Div"], x, safe, dtypes.FLOAT)
    return float_or_refused(dev, node, opset, run)


@operator("MeanVarianceNormalization")
def bind_mean_variance_norm(dev, node, opset):
    """(x - E[x]) / (sqrt(max(E[x^2] - E[x]^2, 0)) + 1e-9), the spec's function."""
    axes = list(node.attr("axes", [0, 2, 3]))

    def run(ctx, x, **_):
        mean = reduce_axes(dev, x, REDUCE["ReduceMean"], axes, True)
        square = binary(dev, "er_binary", BINARY["Mul"], x, x, dtypes.FLOAT)
        mean_square = reduce_axes(dev, square, REDUCE["ReduceMean"], axes, True)
        variance = binary(dev, "er_binary", BINARY["Sub"], mean_square,
                          binary(dev, "er_binary", BINARY["Mul"], mean, mean, dtypes.FLOAT),
                          dtypes.FLOAT)
        dev.call("er_unary", UNARY["Relu"][0], variance.ptr, variance.ptr, variance.size,
                 0.0, 0.0)
        dev.call("er_unary", UNARY["Sqrt"][0], variance.ptr, variance.ptr, variance.size,
                 0.0, 0.0)
        dev.call("er_unary", AFFINE, variance.ptr, variance.ptr, variance.size, 1.0, 1e-9)
        centered = binary(dev, "er_binary", BINARY["Sub"], x, mean, dtypes.FLOAT)
        return binary(dev, "er_binary", BINARY["Div"], centered, variance, dtypes.FLOAT)
    return float_or_refused(dev, node, opset, run)
