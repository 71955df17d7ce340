"""Pooling: MaxPool (with Indices), AveragePool and LpPool over 1 to 3 spatial axes,
GlobalAveragePool, GlobalMaxPool, GlobalLpPool. 1-D and 2-D max and average pools take the
2-D kernels; the rest er_pool_nd."""
from __future__ import annotations

from ....ir import dtypes
from . import operator
from .common import float_or_refused, product
from .conv import conv_geometry, _text

R_MEAN, R_MAX = 1, 2


P_MAX, P_AVG, P_LP = 0, 1, 2


def check_pool(node, opset) -> str:
    kernel = node.attr("kernel_shape") or []
    if len(kernel) not in (1, 2, 3):
        return f"{node.op_type} over {len(kernel)} spatial dimensions (the kernels do 1 to 3)"
    pad = _text(node.attr("auto_pad", b"NOTSET"))
    if pad not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
        return f"{node.op_type} auto_pad={pad!r}"
    return ""


@operator("MaxPool", "AveragePool", "LpPool", check=check_pool)
def bind_pool(dev, node, opset):
    export = "er_maxpool2d" if node.op_type == "MaxPool" else "er_avgpool2d"
    include_pad = int(node.attr("count_include_pad", 0))
    with_indices = len(node.outputs) > 1 and bool(node.outputs[1])
    general = node.op_type == "LpPool" or with_indices or \
        len(node.attr("kernel_shape") or []) == 3

    def run(ctx, x, **_):
        if general:
            return pool_nd(dev, node, x, include_pad, with_indices)
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
    return float_or_refused(dev, node, opset, run, selects_values=node.op_type == "MaxPool")


def pool_nd(dev, node, x, include_pad: int, with_indices: bool):
    """er_pool_nd: any pool over 1 to 3 spatial axes, MaxPool's indices included."""
    spatial = len(x.shape) - 2
    if not 1 <= spatial <= 3 or len(node.attr("kernel_shape")) != spatial:
        raise ValueError(f"{node.op_type}: kernel_shape {node.attr('kernel_shape')} for an input "
                         f"of shape {list(x.shape)}")
    g = conv_geometry(x.shape, None, node, max_spatial=3)
    keys = ("size", "kernel", "strides", "begin", "end", "dilations", "out")
    axes = [[g[key][-spatial:][a] for key in keys] for a in range(spatial)]
    axes = [[1, 1, 1, 0, 0, 1, 1]] * (3 - spatial) + axes
    mode = {"MaxPool": P_MAX, "AveragePool": P_AVG, "LpPool": P_LP}[node.op_type]
    out_shape = list(x.shape[:2]) + g["out"][-spatial:]
    y = dev.empty(out_shape)
    indices = dev.empty(out_shape, dtypes.INT64) if with_indices else None
    if y.size:
        dev.set_args([x.shape[0] * x.shape[1], include_pad, int(node.attr("storage_order", 0))]
                     + [v for axis in axes for v in axis])
        dev.call("er_pool_nd", mode, x.ptr, y.ptr, indices.ptr if indices is not None else 0,
                 float(node.attr("p", 2)))
    return (y, indices) if with_indices else y


@operator("GlobalLpPool")
def bind_global_lp_pool(dev, node, opset):
    p = float(node.attr("p", 2))

    def run(ctx, x, **_):
        if len(x.shape) < 3:
            raise ValueError(f"GlobalLpPool needs rank >= 3, got {list(x.shape)}")
        y = dev.empty(list(x.shape[:2]) + [1] * (len(x.shape) - 2))
        spatial = product(x.shape[2:])
        dev.set_args([x.shape[0] * x.shape[1], 0, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 0, 0, 1, 1,
                      spatial, spatial, 1, 0, 0, 1, 1])
        dev.call("er_pool_nd", P_LP, x.ptr, y.ptr, 0, p)
        return y
    return float_or_refused(dev, node, opset, run)


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
    return float_or_refused(dev, node, opset, run)
