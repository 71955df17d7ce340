"""Softmax, LogSoftmax, LayerNormalization, BatchNormalization (inference), LRN."""
from __future__ import annotations

from . import EDGERUN, operator
from .common import float_or_fallback, normalize_axis, product


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
    return float_or_fallback(dev, node, opset, run)


def check_layer_norm(node, opset) -> str:
    if len([o for o in node.outputs if o]) > 1:
        return "LayerNormalization with Mean/InvStdDev outputs"
    return ""


@operator("LayerNormalization", check=check_layer_norm)
@operator("LayerNormalization", domains=EDGERUN, check=check_layer_norm)
def bind_layer_norm(dev, node, opset):
    axis_attr = int(node.attr("axis", -1))
    eps = float(node.attr("epsilon", 1e-5))

    def run(ctx, x, scale, bias=None, **_):
        axis = normalize_axis(axis_attr, len(x.shape))
        n = product(x.shape[axis:])
        if scale.size != n or (bias is not None and bias.size != n):
            raise ValueError(f"LayerNormalization: scale {list(scale.shape)} / bias "
                             f"{list(bias.shape) if bias is not None else None} must have the "
                             f"normalized shape {list(x.shape[axis:])}")
        y = dev.empty(x.shape)
        if y.size:
            dev.call("er_layer_norm", x.ptr, scale.ptr, bias.ptr if bias is not None else 0,
                     y.ptr, product(x.shape[:axis]), n, eps)
        return y
    return float_or_fallback(dev, node, opset, run)


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
    return float_or_fallback(dev, node, opset, run)


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
    return float_or_fallback(dev, node, opset, run)
