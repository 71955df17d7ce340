"""Convolutions: output spatial sizes from kernel, strides, pads, dilations and auto_pad,
symbolic sizes included ((H + pads - k) // s + 1 spelled as an expression)."""
from __future__ import annotations

from ...ir import dtypes
from .. import symbolic
from ..context import tensor
from ..registry import infer
from ._common import unknown_dims


def sliding_sizes(ctx, spatial, kernel, ceil_mode: bool = False):
    """Output sizes of a sliding window over `spatial` (Conv, pools)."""
    n = len(spatial)
    strides = ctx.attr("strides") or [1] * n
    dilations = ctx.attr("dilations") or [1] * n
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    pads = ctx.attr("pads") or [0] * (2 * n)
    out: list = []
    for i, d in enumerate(spatial):
        k = kernel[i]
        if k is None or not symbolic.is_int(k):
            out.append(None)
            continue
        span = dilations[i] * (k - 1) + 1
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            out.append(symbolic.ceildiv(d, strides[i]))
        elif auto_pad == "VALID":
            out.append(symbolic.add(symbolic.floordiv(symbolic.sub(d, span), strides[i]), 1))
        else:
            padded = symbolic.add(d, pads[i] + pads[i + n])
            reach = symbolic.sub(padded, span)
            if ceil_mode and symbolic.is_int(reach):
                size = -(-reach // strides[i]) + 1
                # the last window must start inside the input or the left padding
                if (size - 1) * strides[i] >= d + pads[i] if symbolic.is_int(d) else False:
                    size -= 1
                out.append(size)
            elif ceil_mode:
                out.append(symbolic.add(symbolic.ceildiv(reach, strides[i]), 1))
            else:
                out.append(symbolic.add(symbolic.floordiv(reach, strides[i]), 1))
    return out


def conv_shape(ctx, x_index: int = 0, w_index: int = 1):
    x, w = ctx.shape(x_index), ctx.shape(w_index)
    if x is None:
        return None if w is None else unknown_dims(len(w))
    kernel = ctx.attr("kernel_shape") or (list(w[2:]) if w is not None
                                          else [None] * (len(x) - 2))
    channels = w[0] if w is not None else None
    return (x[0], channels) + tuple(sliding_sizes(ctx, x[2:], kernel))


@infer("Conv", "DeformConv")
def conv(ctx):
    return [tensor(ctx.elem(0), conv_shape(ctx))]


@infer("ConvInteger")
def conv_integer(ctx):
    return [tensor(dtypes.INT32, conv_shape(ctx, 0, 1))]


@infer("QLinearConv")
def qlinear_conv(ctx):
    return [tensor(ctx.elem(7) or ctx.elem(0), conv_shape(ctx, 0, 3))]


@infer("ConvTranspose")
def conv_transpose(ctx):
    x, w = ctx.shape(0), ctx.shape(1)
    if x is None:
        return [tensor(ctx.elem(0), None)]
    n = len(x) - 2
    group = ctx.attr("group", 1)
    channels = symbolic.mul(w[1], group) if w is not None else None
    output_shape = ctx.attr("output_shape")
    if output_shape:
        return [tensor(ctx.elem(0), (x[0], channels) + tuple(output_shape[-n:]))]
    kernel = ctx.attr("kernel_shape") or (list(w[2:]) if w is not None else [None] * n)
    strides = ctx.attr("strides") or [1] * n
    dilations = ctx.attr("dilations") or [1] * n
    pads = ctx.attr("pads") or [0] * (2 * n)
    out_pad = ctx.attr("output_padding") or [0] * n
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    sizes = []
    for i, d in enumerate(x[2:]):
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            sizes.append(symbolic.mul(d, strides[i]))
            continue
        if kernel[i] is None:
            sizes.append(None)
            continue
        total = (out_pad[i] + (kernel[i] - 1) * dilations[i] + 1
                 - (0 if auto_pad == "VALID" else pads[i] + pads[i + n]))
        sizes.append(symbolic.add(symbolic.mul(strides[i], symbolic.sub(d, 1)), total))
    return [tensor(ctx.elem(0), (x[0], channels) + tuple(sizes))]


@infer("CausalConvWithState")
def causal_conv_with_state(ctx):
    x, w = ctx.shape(0), ctx.shape(1)
    state = None
    if x is not None:
        k = w[2] if w is not None else None
        state = (x[0], x[1], k - 1 if symbolic.is_int(k) else None)
    return [tensor(ctx.elem(0), x), tensor(ctx.elem(0), state)]
