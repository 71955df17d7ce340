"""Conv (2-D, and 1-D as H = 1): im2col + SGEMM, pointwise as plain GEMM, depthwise direct."""
from __future__ import annotations

from . import EDGERUN, operator
from .common import float_or_fallback
from .elementwise import activation_of, apply_activation, check_activation
from .matmul import broadcast_into


def _text(v):
    return v.decode() if isinstance(v, bytes) else v


def check_conv(node, opset) -> str:
    if node.op_type == "FusedConv":
        why = check_activation(node)
        if why:
            return why
    kernel = node.attr("kernel_shape")
    if kernel is not None and len(kernel) not in (1, 2):
        return f"Conv over {len(kernel)} spatial dimensions (the wasm kernel does 1-D and 2-D)"
    pad = _text(node.attr("auto_pad", b"NOTSET"))
    if pad not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
        return f"Conv auto_pad={pad!r}"
    return ""


def conv_geometry(x_shape, w_shape, node) -> dict:
    """Output size and start pads for a 1-D or 2-D convolution or pooling window."""
    spatial = len(x_shape) - 2
    if spatial not in (1, 2):
        raise ValueError(f"input of rank {len(x_shape)}: the wasm kernel does 1-D and 2-D")
    kernel = list(node.attr("kernel_shape") or w_shape[2:])
    strides = list(node.attr("strides") or [1] * spatial)
    dil = list(node.attr("dilations") or [1] * spatial)
    pads = list(node.attr("pads") or [0] * (2 * spatial))
    auto = _text(node.attr("auto_pad", b"NOTSET"))
    ceil_mode = int(node.attr("ceil_mode", 0))
    size = list(x_shape[2:])
    out, begin, end = [], [], []
    for i in range(spatial):
        span = (kernel[i] - 1) * dil[i] + 1
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-size[i] // strides[i])
            total = max(0, (o - 1) * strides[i] + span - size[i])
            lo = total // 2 if auto == "SAME_UPPER" else total - total // 2
            begin.append(lo)
            end.append(total - lo)
        elif auto == "VALID":
            begin.append(0)
            end.append(0)
        else:
            begin.append(pads[i])
            end.append(pads[i + spatial])
        extent = size[i] + begin[i] + end[i] - span
        if ceil_mode:
            o = -(-extent // strides[i]) + 1
            if (o - 1) * strides[i] >= size[i] + begin[i]:
                o -= 1
        else:
            o = extent // strides[i] + 1
        out.append(max(o, 0))
    if spatial == 1:                         # 1-D as a 2-D problem with H = 1
        kernel, strides, dil = [1] + kernel, [1] + strides, [1] + dil
        begin, end, out, size = [0] + begin, [0] + end, [1] + out, [1] + size
    return {"kernel": kernel, "strides": strides, "dilations": dil, "begin": begin,
            "end": end, "out": out, "size": size}


@operator("Conv", check=check_conv)
@operator("FusedConv", domains=EDGERUN, check=check_conv)
def bind_conv(dev, node, opset):
    group = int(node.attr("group", 1))
    act = activation_of(node) if node.op_type == "FusedConv" else (0, 0.0, 0.0)

    def run(ctx, x, w, b=None, **_):
        n, c = x.shape[:2]
        m = w.shape[0]
        if c % group or m % group or w.shape[1] * group != c:
            raise ValueError(f"Conv group={group}: input has {c} channels, weight "
                             f"{list(w.shape)}")
        g = conv_geometry(x.shape, w.shape, node)
        (kh, kw), (sh, sw), (dh, dw) = g["kernel"], g["strides"], g["dilations"]
        (oh, ow), (h, wd) = g["out"], g["size"]
        y = dev.empty([n, m] + g["out"][-(len(x.shape) - 2):])
        if y.size == 0:
            return y
        accumulate = 0
        if b is not None:
            broadcast_into(dev, b.view((m, 1)), y.view((n, m, oh * ow)))
            accumulate = 1
        dev.set_args([n, c, h, wd, m, group, kh, kw, sh, sw, g["begin"][0], g["begin"][1],
                      dh, dw, oh, ow])
        if group == c == m and group > 1:
            dev.call("er_depthwise2d", x.ptr, w.ptr, y.ptr, accumulate)
        else:
            pointwise = (kh == kw == sh == sw == 1 and g["begin"] == [0, 0] and
                         (oh, ow) == (h, wd))
            col = None if pointwise else dev.scratch((c // group) * kh * kw * oh * ow * 4)
            dev.call("er_conv2d", x.ptr, w.ptr, y.ptr, col.ptr if col else 0, accumulate)
        apply_activation(dev, y, *act)
        return y
    return float_or_fallback(dev, node, opset, run)
