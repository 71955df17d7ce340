"""Neural-network operators -> MIL conv, linear, matmul, normalizations, pooling, softmax.

ONNX pads list every begin then every end ([h0, w0, h1, w1]); MIL pads pair them per
dimension ([h0, h1, w0, w1]). SAME auto-padding is resolved to explicit pads here from the
static shapes, since MIL's "same" depends only on the kernel, not on the stride.
"""
from __future__ import annotations

import math

import numpy as np

from ....ir import EDGERUN_DOMAIN as EDGERUN
from ..lowering import attr, lowers
from .elementwise import activate, check_fused_activation



# ---- geometry ---------------------------------------------------------------------------

def _explicit_pads(node, spatial: tuple, kernel: list, strides: list, dilations: list) -> list:
    """ONNX pads [begins..., ends...] for `node`, auto_pad resolved."""
    n = len(spatial)
    auto_pad = attr(node, "auto_pad", "NOTSET")
    if auto_pad == "VALID":
        return [0] * (2 * n)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begins, ends = [], []
        for size, k, s, d in zip(spatial, kernel, strides, dilations):
            total = max((math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size, 0)
            small, big = total // 2, total - total // 2
            begins.append(small if auto_pad == "SAME_UPPER" else big)
            ends.append(big if auto_pad == "SAME_UPPER" else small)
        return begins + ends
    pads = attr(node, "pads", None)
    return [int(p) for p in pads] if pads else [0] * (2 * n)


def mil_pads(onnx_pads: list) -> list:
    n = len(onnx_pads) // 2
    return [p for i in range(n) for p in (onnx_pads[i], onnx_pads[n + i])]


def _window(node, ctx, x: str, kernel: list):
    spatial = ctx.shape(x)[2:]
    n = len(spatial)
    strides = [int(s) for s in attr(node, "strides", None) or [1] * n]
    dilations = [int(d) for d in attr(node, "dilations", None) or [1] * n]
    pads = _explicit_pads(node, spatial, kernel, strides, dilations)
    return strides, dilations, pads


# ---- convolution ------------------------------------------------------------------------

def _conv(ctx, node, name):
    mb = ctx.mb
    x, w = node.inputs[0], node.inputs[1]
    b = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] else ""
    rank = ctx.rank(x)
    if rank not in (3, 4, 5):
        raise ctx.error(f"input '{x}' has rank {rank}; MIL conv takes 1-D to 3-D convolutions "
                        f"(rank 3 to 5)")
    kernel = list(ctx.shape(w)[2:])
    strides, dilations, pads = _window(node, ctx, x, kernel)
    weight = ctx.const(w)
    if weight is None and any(d != 1 for d in dilations):
        raise ctx.error(f"weight '{w}' is computed at run time; MIL conv needs a constant "
                        f"weight when dilations are {dilations}")
    args = dict(x=ctx.var(x), weight=ctx.var(w), strides=strides, pad_type="custom",
                pad=mil_pads(pads), dilations=dilations, groups=int(attr(node, "group", 1)))
    bias = ctx.const(b) if b else None
    if b and bias is not None:
        return mb.conv(**args, bias=bias.astype(ctx.numpy_dtype(x)), name=name)
    y = mb.conv(**args, name=None if b else name)
    if b:        # a run-time bias: MIL conv's bias must be constant
        channels = mb.reshape(x=ctx.var(b), shape=[-1] + [1] * (rank - 2))
        y = mb.add(x=y, y=channels, name=name)
    return y


@lowers("Conv", mil=("conv", "add"))
def conv(ctx, node):
    return [_conv(ctx, node, ctx.out_name())]


@lowers("FusedConv", mil=("conv", "activation"), domain=EDGERUN, check=check_fused_activation)
def fused_conv(ctx, node):
    return [activate(ctx, node, _conv(ctx, node, None), ctx.out_name())]


# ---- matrix products --------------------------------------------------------------------

def _gemm(ctx, node, name):
    mb = ctx.mb
    a, b = node.inputs[0], node.inputs[1]
    c = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] else ""
    alpha, beta = float(attr(node, "alpha", 1.0)), float(attr(node, "beta", 1.0))
    trans_a, trans_b = int(attr(node, "transA", 0)), int(attr(node, "transB", 0))
    dtype = ctx.numpy_dtype(a)
    weight, bias = ctx.const(b), ctx.const(c) if c else None
    n_out = ctx.shape(b)[0 if trans_b else 1]
    bias_fits = not c or bias is not None and bias.size in (1, n_out)
    if weight is not None and not trans_a and bias_fits:
        # linear: y = x . W^T + bias, W laid out [out, in] (ONNX transB=1 layout)
        w = (weight if trans_b else weight.T) * alpha
        args = dict(x=ctx.var(a), weight=np.ascontiguousarray(w.astype(dtype)))
        if c:
            args["bias"] = np.broadcast_to(bias.reshape(-1) * beta, (n_out,)).astype(dtype)
        return mb.linear(**args, name=name)
    y = mb.matmul(x=ctx.var(a), y=ctx.var(b), transpose_x=bool(trans_a),
                  transpose_y=bool(trans_b), name=None if (c or alpha != 1.0) else name)
    if alpha != 1.0:
        y = mb.mul(x=y, y=np.asarray(alpha, dtype), name=None if c else name)
    if c:
        cv = ctx.var(c) if beta == 1.0 else mb.mul(x=ctx.var(c), y=np.asarray(beta, dtype))
        y = mb.add(x=y, y=cv, name=name)
    return y


@lowers("Gemm", mil=("linear", "matmul", "add", "mul"))
def gemm(ctx, node):
    return [_gemm(ctx, node, ctx.out_name())]


@lowers("FusedGemm", mil=("linear", "matmul", "add", "activation"), domain=EDGERUN,
        check=check_fused_activation)
def fused_gemm(ctx, node):
    return [activate(ctx, node, _gemm(ctx, node, None), ctx.out_name())]


def _matmul(ctx, node, name):
    return ctx.mb.matmul(x=ctx.var(node.inputs[0]), y=ctx.var(node.inputs[1]), name=name)


@lowers("MatMul", mil=("matmul",))
def matmul(ctx, node):
    return [_matmul(ctx, node, ctx.out_name())]


@lowers("FusedMatMul", mil=("matmul", "activation"), domain=EDGERUN,
        check=check_fused_activation)
def fused_matmul(ctx, node):
    return [activate(ctx, node, _matmul(ctx, node, None), ctx.out_name())]


# ---- normalization ----------------------------------------------------------------------

def _batch_norm_check(node, opset):
    if attr(node, "training_mode", 0):
        return "training_mode=1 (batch statistics); only inference BatchNormalization lowers"
    if len([o for o in node.outputs if o]) > 1:
        return "running mean/var outputs are requested; only the normalized output lowers"
    return ""


@lowers("BatchNormalization", mil=("batch_norm", "sub", "mul", "add"), check=_batch_norm_check)
def batch_norm(ctx, node):
    mb = ctx.mb
    x, scale, bias, mean, var = node.inputs[:5]
    eps = float(attr(node, "epsilon", 1e-5))
    rank = ctx.rank(x)
    dtype = ctx.numpy_dtype(x)
    consts = [ctx.const(n) for n in (mean, var, scale, bias)]
    if 3 <= rank <= 5 and all(c is not None for c in consts):
        m, v, g, b = (c.astype(dtype) for c in consts)
        return [mb.batch_norm(x=ctx.var(x), mean=m, variance=v, gamma=g, beta=b,
                              epsilon=np.asarray(eps, dtype), name=ctx.out_name())]
    # run-time statistics (or rank 2): (x - mean) * scale / sqrt(var + eps) + bias
    per_channel = [-1] + [1] * (rank - 2)

    def channel(name):
        return mb.reshape(x=ctx.var(name), shape=per_channel)
    inv = mb.rsqrt(x=mb.add(x=channel(var), y=np.asarray(eps, dtype)), epsilon=0.0)
    y = mb.mul(x=mb.sub(x=ctx.var(x), y=channel(mean)), y=mb.mul(x=inv, y=channel(scale)))
    return [mb.add(x=y, y=channel(bias), name=ctx.out_name())]


def _layer_norm_check(node, opset):
    if len([o for o in node.outputs if o]) > 1:
        return "Mean/InvStdDev outputs are requested; only the normalized output lowers"
    return ""


@lowers("LayerNormalization", mil=("layer_norm", "mul", "add"), check=_layer_norm_check,
        since=17)
@lowers("LayerNormalization", mil=("layer_norm", "mul", "add"), domain=EDGERUN,
        check=_layer_norm_check)
def layer_norm(ctx, node):
    mb = ctx.mb
    x, scale = node.inputs[0], node.inputs[1]
    bias = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] else ""
    shape = ctx.shape(x)
    axis = int(attr(node, "axis", -1)) % len(shape)
    axes = list(range(axis, len(shape)))
    dtype = ctx.numpy_dtype(x)
    eps = np.asarray(float(attr(node, "epsilon", 1e-5)), dtype)
    g, b = ctx.const(scale), ctx.const(bias) if bias else None
    normalized = tuple(shape[axis:])
    if g is not None and g.shape == normalized and (not bias or b is not None and
                                                    b.shape == normalized):
        args = dict(gamma=g.astype(dtype))
        if bias:
            args["beta"] = b.astype(dtype)
        return [mb.layer_norm(x=ctx.var(x), axes=axes, epsilon=eps, **args, name=ctx.out_name())]
    y = mb.layer_norm(x=ctx.var(x), axes=axes, epsilon=eps)
    y = mb.mul(x=y, y=ctx.var(scale), name=None if bias else ctx.out_name())
    if bias:
        y = mb.add(x=y, y=ctx.var(bias), name=ctx.out_name())
    return [y]


@lowers("LRN", mil=("local_response_norm",))
def lrn(ctx, node):
    x = node.inputs[0]
    dtype = ctx.numpy_dtype(x)
    if ctx.rank(x) not in (3, 4):
        raise ctx.error(f"input '{x}' has rank {ctx.rank(x)}; MIL local_response_norm takes "
                        f"rank 3 or 4")
    return [ctx.mb.local_response_norm(
        x=ctx.var(x), size=int(attr(node, "size")),
        alpha=np.asarray(float(attr(node, "alpha", 1e-4)), dtype),
        beta=np.asarray(float(attr(node, "beta", 0.75)), dtype),
        k=np.asarray(float(attr(node, "bias", 1.0)), dtype), name=ctx.out_name())]


@lowers("Scaler", mil=("sub", "mul"), domain="ai.onnx.ml")
def scaler(ctx, node):
    """ai.onnx.ml Scaler: (x - offset) * scale, computed in float32 as the spec says."""
    mb = ctx.mb
    x = ctx.var(node.inputs[0])
    if ctx.mil_dtype(node.inputs[0]) != "fp32":
        x = mb.cast(x=x, dtype="fp32")
    offset = np.asarray(attr(node, "offset", [0.0]), np.float32)
    scale = np.asarray(attr(node, "scale", [1.0]), np.float32)
    ctx.onnx_dtypes[node.outputs[0]] = np.dtype(np.float32)
    return [mb.mul(x=mb.sub(x=x, y=offset), y=scale, name=ctx.out_name())]


# ---- pooling ----------------------------------------------------------------------------

def _pool_check(node, opset):
    if node.op_type == "MaxPool" and len([o for o in node.outputs if o]) > 1:
        return "the Indices output is requested; MIL max_pool has none"
    if attr(node, "storage_order", 0):
        return "storage_order=1"
    if any(int(d) != 1 for d in attr(node, "dilations", None) or []):
        return f"dilations {attr(node, 'dilations')}; MIL pooling has none"
    return ""


def _pool(ctx, node, mil_op: str):
    x = node.inputs[0]
    rank = ctx.rank(x)
    if rank not in (3, 4, 5):
        raise ctx.error(f"input '{x}' has rank {rank}; MIL pooling takes rank 3 to 5")
    kernel = [int(k) for k in attr(node, "kernel_shape")]
    strides, _, pads = _window(node, ctx, x, kernel)
    ceil_mode = bool(attr(node, "ceil_mode", 0))
    n = len(kernel)
    if ceil_mode and pads[:n] != pads[n:]:
        if mil_op == "avg_pool":
            raise ctx.error(f"ceil_mode with asymmetric pads {pads}; MIL pooling needs "
                            f"symmetric pads in ceil mode")
        pads, ceil_mode = _ceil_as_end_padding(ctx.shape(x)[2:], kernel, strides, pads), False
    args = dict(x=ctx.var(x), kernel_sizes=kernel, strides=strides, pad_type="custom",
                pad=mil_pads(pads), ceil_mode=ceil_mode, name=ctx.out_name())
    if mil_op == "avg_pool":
        args["exclude_padding_from_average"] = not attr(node, "count_include_pad", 0)
    return getattr(ctx.mb, mil_op)(**args)


def _ceil_as_end_padding(spatial, kernel, strides, pads) -> list:
    """Max pooling in ceil mode as floor mode over extra end padding (-inf never wins)."""
    n = len(spatial)
    ends = list(pads[n:])
    for i, (size, k, s) in enumerate(zip(spatial, kernel, strides)):
        padded = size + pads[i] + pads[n + i]
        out = math.ceil((padded - k) / s) + 1
        if (out - 1) * s >= size + pads[i]:       # the last window starts in the end padding
            out -= 1
        ends[i] += max((out - 1) * s + k - padded, 0)
    return list(pads[:n]) + ends


@lowers("MaxPool", mil=("max_pool",), check=_pool_check)
def max_pool(ctx, node):
    return [_pool(ctx, node, "max_pool")]


@lowers("AveragePool", mil=("avg_pool",), check=_pool_check)
def average_pool(ctx, node):
    return [_pool(ctx, node, "avg_pool")]


def _global(reduce_op: str):
    def lower(ctx, node):
        x = node.inputs[0]
        axes = list(range(2, ctx.rank(x)))
        return [getattr(ctx.mb, reduce_op)(x=ctx.var(x), axes=axes, keep_dims=True,
                                           name=ctx.out_name())]
    return lower


lowers("GlobalAveragePool", mil=("reduce_mean",))(_global("reduce_mean"))
lowers("GlobalMaxPool", mil=("reduce_max",))(_global("reduce_max"))


# ---- softmax ----------------------------------------------------------------------------

def _softmax(log: bool):
    def lower(ctx, node):
        mb = ctx.mb
        x = node.inputs[0]
        shape = ctx.shape(x)
        default = -1 if ctx.opset >= 13 else 1
        axis = int(attr(node, "axis", default)) % max(len(shape), 1)
        var, back = ctx.var(x), None
        if ctx.opset < 13 and axis != len(shape) - 1:
            # before opset 13 the input is seen as 2-D: [prod(:axis), prod(axis:)]
            rows = int(np.prod(shape[:axis], dtype=np.int64))
            var, back, axis = mb.reshape(x=var, shape=[rows, -1]), list(shape), 1
        name = None if back else ctx.out_name()
        if log:
            y = mb.sub(x=var, y=mb.reduce_log_sum_exp(x=var, axes=[axis], keep_dims=True),
                       name=name)
        else:
            y = mb.softmax(x=var, axis=axis, name=name)
        if back:
            y = mb.reshape(x=y, shape=back, name=ctx.out_name())
        return [y]
    return lower


lowers("Softmax", mil=("softmax",))(_softmax(False))
lowers("LogSoftmax", mil=("reduce_log_sum_exp", "sub"))(_softmax(True))
