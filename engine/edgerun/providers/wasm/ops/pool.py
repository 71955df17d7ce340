"""Pooling: MaxPool and AveragePool (1-D and 2-D windows), GlobalAveragePool, GlobalMaxPool."""
from __future__ import annotations

from . import operator
from .common import float_or_fallback, product
from .conv import conv_geometry, _text

R_MEAN, R_MAX = 1, 2


def check_pool(node, opset) -> str:
    if node.op_type == "MaxPool" and len([o for o in node.outputs if o]) > 1:
        return "MaxPool with an Indices output"
    if node.op_type == "MaxPool" and node.attr("storage_order", 0):
        return "MaxPool storage_order=1"
    kernel = node.attr("kernel_shape") or []
    if len(kernel) not in (1, 2):
        return f"{node.op_type} over {len(kernel)} spatial dimensions (the kernel does 1-D, 2-D)"
    pad = _text(node.attr("auto_pad", b"NOTSET"))
    if pad not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
        return f"{node.op_type} auto_pad={pad!r}"
    return ""


@operator("MaxPool", "AveragePool", check=check_pool)
def bind_pool(dev, node, opset):
    export = "er_maxpool2d" if node.op_type == "MaxPool" else "er_avgpool2d"
    include_pad = int(node.attr("count_include_pad", 0))

    def run(ctx, x, **_):
        g = conv_geometry(x.shape, None, node)
        spatial = len(x.shape) - 2
        if len(g["kernel"]) - (1 if spatial == 1 else 0) != spatial:
            raise ValueError(f"kernel_shape has {len(node.attr('kernel_shape'))} dims for a "
                             f"{spatial}-D input")
        y = dev.empty(list(x.shape[:2]) + g["out"][-spatial:])
        if y.size == 0:
            return y
        (kh, kw), (sh, sw), (dh, dw) = g["kernel"], g["strides"], g["dilations"]
        dev.set_args([x.shape[0] * x.shape[1], g["size"][0], g["size"][1], kh, kw, sh, sw,
                      g["begin"][0], g["begin"][1], g["end"][0], g["end"][1], dh, dw,
                      g["out"][0], g["out"][1], include_pad])
        dev.call(export, x.ptr, y.ptr)
        return y
    return float_or_fallback(dev, node, opset, run)


@operator("GlobalAveragePool", "GlobalMaxPool")
def bind_global_pool(dev, node, opset):
    op = R_MEAN if node.op_type == "GlobalAveragePool" else R_MAX

    def run(ctx, x, **_):
        if len(x.shape) < 3:
            raise ValueError(f"{node.op_type} needs rank >= 3, got {list(x.shape)}")
        outer, r = x.shape[0] * x.shape[1], product(x.shape[2:])
        y = dev.empty(list(x.shape[:2]) + [1] * (len(x.shape) - 2))
        dev.call("er_reduce", op, x.ptr, y.ptr, outer, r, 1)
        return y
    return float_or_fallback(dev, node, opset, run)
