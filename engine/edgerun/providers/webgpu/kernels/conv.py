"""Conv (1-D and 2-D, grouped, depthwise, dilated, auto_pad), FusedConv, ConvTranspose,
Col2Im and CausalConvWithState on conv.wgsl."""
from __future__ import annotations

from .activation import check_fused, epilogue
from ....ir import dtypes
from ....ir.conv_rules import transpose_output_geometry
from .. import host_values
from .common import as_gpu, count, host_ints, strided_copy
from .matmul import k_lanes, matmul_core
from .registry import Unsupported, gpu_op


def _auto_pad(node, opset) -> str:
    pad = node.attr("auto_pad", b"NOTSET")
    pad = pad.decode() if isinstance(pad, bytes) else pad
    return "" if pad in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER") else f"auto_pad={pad}"


def check_conv(node, opset) -> str:
    return _auto_pad(node, opset)


def check_fused_conv(node, opset) -> str:
    return _auto_pad(node, opset) or check_fused(node, opset)


def window_pads(in_sizes, kernel, strides, dilations, pads, auto_pad) -> tuple:
    """(begin pads, end pads, output sizes) for a sliding window, ONNX's rules."""
    n = len(in_sizes)
    begin, end, out = [], [], []
    for i in range(n):
        span = (kernel[i] - 1) * dilations[i] + 1
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-in_sizes[i] // strides[i])
            total = max((o - 1) * strides[i] + span - in_sizes[i], 0)
            b = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
            begin.append(b)
            end.append(total - b)
        elif auto_pad == "VALID":
            begin.append(0)
            end.append(0)
        else:
            begin.append(pads[i])
            end.append(pads[i + n])
        out.append((in_sizes[i] + begin[i] + end[i] - span) // strides[i] + 1)
    return begin, end, out


def conv(gpu, x, w, b=None, auto_pad="NOTSET", dilations=None, group=1, kernel_shape=None,
         pads=None, strides=None, activation="", act_params=(), integer=False):
    """Conv of float32 x and w, or with `integer` of int32 x and w (ConvInteger's operands
    after their zero points: int32 sums, no bias, no activation)."""
    if not integer:
        x, w = as_gpu(gpu, x), as_gpu(gpu, w)
    spatial = x.ndim - 2
    if spatial not in (1, 2) or w.ndim != x.ndim:
        raise Unsupported(f"{spatial}-D convolution (the kernel does 1-D and 2-D)")
    n, c = x.shape[:2]
    m, cg = w.shape[:2]
    if cg * group != c or m % group:
        raise ValueError(f"Conv: input has {c} channels, weight {w.shape} with group={group}")
    kernel = list(w.shape[2:])
    if not integer and _is_pointwise(kernel, strides, pads, dilations, group, auto_pad):
        return _pointwise(gpu, x, w, b, activation, act_params)
    dilations = list(dilations or [1] * spatial)
    strides = list(strides or [1] * spatial)
    pads = list(pads or [0] * 2 * spatial)
    begin, _, out_sizes = window_pads(list(x.shape[2:]), kernel, strides, dilations, pads,
                                      auto_pad)
    out = gpu.empty((n, m) + tuple(out_sizes), "int32" if integer else "float32")
    if spatial == 2 and x.shape[3] == 1 and kernel[1] == 1 and out_sizes[1] == 1:
        # a column ([H, 1] with a [KH, 1] kernel) has a row's memory layout: run it as
        # [1, H], where the kernel's 4 outputs per item lie along the long axis
        spatial, kernel, strides, dilations = 1, kernel[:1], strides[:1], dilations[:1]
        begin, out_sizes = begin[:1], out_sizes[:1]
    if spatial == 1:           # 1-D runs as 2-D with H = 1
        kernel, strides, dilations = [1] + kernel, [1] + strides, [1] + dilations
        begin, out_sizes, in_hw = [0] + begin, [1] + out_sizes, (1, x.shape[2])
    else:
        in_hw = x.shape[2:]
    mg = m // group
    ocb = 4 if mg % 4 == 0 else 1
    ow_tiles = -(-out_sizes[1] // 4)
    oc_tiles = m // ocb
    threads = n * oc_tiles * out_sizes[0] * ow_tiles
    if b is None:
        bias, bias_stride = gpu.zeros(1), 0
    else:
        bias, bias_stride = as_gpu(gpu, b), 1
    expr, act_alpha, act_beta = epilogue(activation, act_params)
    params = [n, c, in_hw[0], in_hw[1], m, out_sizes[0], out_sizes[1], kernel[0], kernel[1],
              strides[0], strides[1], begin[0], begin[1], dilations[0], dilations[1], cg, mg,
              ow_tiles, oc_tiles, act_alpha, act_beta, bias_stride]
    if ocb == 4 and not integer:
        # lanes split the input channels: each takes whole ones (a step is one tap)
        lanes = min(k_lanes(gpu, threads, cg * kernel[0] * kernel[1]),
                    1 << (cg.bit_length() - 1))
        return gpu.dispatch("conv", "conv2d_oc4", out, [x, w, bias], params, threads * lanes,
                            {"ACT": expr, "LANES": lanes})
    return gpu.dispatch("conv", "conv2d", out, [x, w, bias], params, threads,
                        {"OCB": ocb, "ACT": expr, "T": "i32" if integer else "f32"})


@gpu_op("Conv", check=check_conv)
def run_conv(gpu, ctx, x, w, b=None, **attrs):
    return conv(gpu, x, w, b, **attrs)


@gpu_op("FusedConv", domain="com.edgerun", check=check_fused_conv)
def run_fused_conv(gpu, ctx, x, w, b=None, activation="Relu", activation_params=None, **attrs):
    return conv(gpu, x, w, b, activation=activation, act_params=activation_params, **attrs)


def _is_pointwise(kernel, strides, pads, dilations, group, auto_pad) -> bool:
    ones = [1] * len(kernel)
    return (kernel == ones and list(strides or ones) == ones and not any(pads or [])
            and list(dilations or ones) == ones and group == 1)


def _pointwise(gpu, x, w, b, activation, act_params):
    """A 1x1 convolution is a batched matrix product: out[n] = W[M, C] @ X[n][C, HW]."""
    n, c = x.shape[:2]
    m = w.shape[0]
    hw = x.size // (n * c) if n * c else 0
    bias, strides = (None, (0, 0)) if b is None else (as_gpu(gpu, b), (1, 0))
    out = matmul_core(gpu, w, x, m, hw, c, (c, 1), (hw, 1), (n,), [0], [c * hw],
                      bias=bias, bias_strides=strides, beta=1.0, activation=activation,
                      act_params=act_params)
    return out.view((n, m) + x.shape[2:])


def _text(value, default: str) -> str:
    value = default if value is None else value
    return value.decode() if isinstance(value, bytes) else value


@gpu_op("ConvTranspose", check=check_conv)
def conv_transpose(gpu, ctx, x, w, b=None, auto_pad="NOTSET", dilations=None, group=1,
                   kernel_shape=None, output_padding=None, output_shape=None, pads=None,
                   strides=None):
    x, w = as_gpu(gpu, x), as_gpu(gpu, w)
    rank = x.ndim - 2
    if rank not in (1, 2, 3) or w.ndim != x.ndim or x.shape[1] != w.shape[0] or \
            x.shape[1] % group:
        raise Unsupported(f"ConvTranspose of a {x.shape} input with {w.shape} weights")
    out_sizes, begin, strides, dilations = transpose_output_geometry(
        list(x.shape[2:]), list(kernel_shape or w.shape[2:]), strides, dilations, pads,
        auto_pad, output_padding, output_shape)
    return transposed_conv(gpu, x, w, b, out_sizes, begin, strides, dilations, group)


def transposed_conv(gpu, x, w, b, out_sizes, begin, strides, dilations, group):
    """conv.wgsl's conv_transpose: y (N, Mg * group, *out_sizes) gathered from x."""
    rank = x.ndim - 2
    out_per_group = w.shape[1]
    m = out_per_group * group
    out = gpu.empty((x.shape[0], m) + tuple(out_sizes))
    if out.size == 0:
        return out
    bias, bias_stride = (gpu.zeros(1), 0) if b is None else (as_gpu(gpu, b), 1)

    def pad3(values, fill):              # 1-D and 2-D run as 3-D
        return [fill] * (3 - rank) + list(values)

    params = ([x.shape[1]] + pad3(x.shape[2:], 1) + [m] + pad3(out_sizes, 1)
              + pad3(w.shape[2:], 1) + pad3(strides, 1) + pad3(begin, 0) + pad3(dilations, 1)
              + [x.shape[1] // group, out_per_group, bias_stride])
    return gpu.dispatch("conv", "conv_transpose", out, [x, w, bias], params, out.size)


def _fold_weights(channels: int, block: list):
    """The (C * K, 1, *block) weights that make conv_transpose a Col2Im fold: input channel
    c * K + k feeds output channel c through kernel tap k only."""
    k = count(block)
    values = [1.0 if j == i % k else 0.0 for i in range(channels * k) for j in range(k)]
    return host_values.make(dtypes.FLOAT, (channels * k, 1) + tuple(block), values)


@gpu_op("Col2Im")
def col2im(gpu, ctx, x, image_shape, block_shape, dilations=None, pads=None, strides=None):
    """Col2Im is a grouped transposed convolution of the columns, seen as (N, C * K, *blocks),
    with one-hot weights (each column row lands on its own kernel tap)."""
    x = as_gpu(gpu, x)
    image, block = host_ints(gpu, image_shape), host_ints(gpu, block_shape)
    rank = len(image)
    k = count(block)
    if x.ndim != 3 or x.shape[1] % k or len(block) != rank or rank > 3:
        raise Unsupported(f"Col2Im of a {x.shape} input into {image} by {block}")
    strides = list(strides or [1] * rank)
    dilations = list(dilations or [1] * rank)
    pads = list(pads or [0] * 2 * rank)
    grid = [(i + pads[d] + pads[d + rank] - (b - 1) * dilations[d] - 1) // strides[d] + 1
            for d, (i, b) in enumerate(zip(image, block))]
    if count(grid) != x.shape[2]:
        raise ValueError(f"Col2Im: {x.shape[2]} blocks, the geometry gives {grid}")
    channels = x.shape[1] // k
    w = gpu.constant(("col2im", channels, tuple(block)), lambda: _fold_weights(channels, block))
    return transposed_conv(gpu, x.view((x.shape[0], x.shape[1]) + tuple(grid)), w, None,
                           image, pads[:rank], strides, dilations, channels)


def check_causal_conv(node, opset) -> str:
    activation = _text(node.attr("activation"), "none")
    return "" if activation in ("none", "silu", "swish") else f"activation={activation!r}"


@gpu_op("CausalConvWithState", check=check_causal_conv)
def causal_conv_with_state(gpu, ctx, x, w, bias=None, past_state=None, activation="none"):
    x, w = as_gpu(gpu, x), as_gpu(gpu, w)
    if x.ndim != 3 or w.ndim != 3 or w.shape[1] != 1 or w.shape[0] != x.shape[1]:
        raise ValueError(f"CausalConvWithState: input (B, C, L) and weight (C, 1, k) "
                         f"expected, got {x.shape} and {w.shape}")
    batch, channels, length = x.shape
    k = w.shape[2]
    state_shape = (batch, channels, k - 1)
    past = None if past_state is None else as_gpu(gpu, past_state)
    if past is not None and past.shape != state_shape:
        raise ValueError(f"CausalConvWithState: past_state {past.shape}, expected {state_shape}")
    y = gpu.empty(x.shape)
    b, bias_stride = (gpu.zeros(1), 0) if bias is None else (as_gpu(gpu, bias), 1)
    if y.size:
        history = gpu.zeros(1) if past is None else past
        gpu.dispatch("conv", "causal_conv", y, [x, w, b, history],
                     [channels, length, k, int(past is not None), bias_stride], y.size,
                     {"SILU": int(_text(activation, "none") != "none")})
    # the last k - 1 steps of the history: past_state's tail, then x's
    present = gpu.empty(state_shape)
    kept = max(k - 1 - length, 0)          # steps still from past_state
    rows = batch * channels
    dst = [k - 1, 1]
    if kept:
        source = past if past is not None else gpu.zeros(rows * (k - 1))
        strided_copy(gpu, present, source, [rows, kept], [k - 1, 1], dst, length, 0)
    if k - 1 - kept:
        strided_copy(gpu, present, x, [rows, k - 1 - kept], [length, 1], dst,
                     length - (k - 1 - kept), kept)
    return y, present
