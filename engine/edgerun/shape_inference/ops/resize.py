"""Resize/Upsample (sizes, or floor(input * scale)), GridSample, AffineGrid, RoiAlign."""
from __future__ import annotations

import math

from .. import symbolic
from ..context import tensor
from ..registry import infer
from ._common import unknown_dims


def _scaled(s, axes, scales, sizes, policy: str):
    out = list(s)
    if sizes is not None:
        if policy != "stretch":
            if not all(symbolic.is_int(s[a]) for a in axes):
                return [None if i in axes else d for i, d in enumerate(s)]
            ratios = [n / s[a] if s[a] else 1.0 for a, n in zip(axes, sizes)]
            scale = min(ratios) if policy == "not_larger" else max(ratios)
            for a in axes:
                out[a] = int(math.floor(scale * s[a] + 0.5))
            return out
        for a, n in zip(axes, sizes):
            out[a] = n
        return out
    for a, f in zip(axes, scales):
        d = s[a]
        if symbolic.is_int(d):
            out[a] = int(math.floor(d * f))
        elif float(f).is_integer():
            out[a] = symbolic.mul(d, int(f))
        else:
            out[a] = None
    return out


@infer("Resize")
def resize(ctx):
    s = ctx.shape(0)
    if s is None:
        return [tensor(ctx.elem(0), None)]
    rank = len(s)
    axes = [ctx.axis(a, rank) for a in (ctx.attr("axes") or range(rank))]
    policy = ctx.attr("keep_aspect_ratio_policy", "stretch")
    if ctx.opset < 11:
        sizes, scales = None, ctx.value(1)
    else:
        sizes = ctx.dims(3) if ctx.has(3) else None
        scales = ctx.value(2) if ctx.has(2) else None
        if ctx.has(3) and sizes is None:
            return [tensor(ctx.elem(0), unknown_dims(rank))]
    if sizes is None and (scales is None or None in scales or len(scales) != len(axes)):
        return [tensor(ctx.elem(0), unknown_dims(rank))]
    if sizes is not None and policy != "stretch" and not all(symbolic.is_int(n) for n in sizes):
        return [tensor(ctx.elem(0), unknown_dims(rank))]
    return [tensor(ctx.elem(0), tuple(_scaled(s, axes, scales, sizes, policy)))]


@infer("Upsample")
def upsample(ctx):
    s = ctx.shape(0)
    if s is None:
        return [tensor(ctx.elem(0), None)]
    if ctx.has_attr("scales"):
        scales = ctx.attr("scales")
    elif ctx.has_attr("height_scale"):
        scales = [1.0, 1.0, ctx.attr("height_scale"), ctx.attr("width_scale")]
    else:
        scales = ctx.value(1)
    if scales is None or len(scales) != len(s):
        return [tensor(ctx.elem(0), unknown_dims(len(s)))]
    return [tensor(ctx.elem(0), tuple(_scaled(s, range(len(s)), scales, None, "stretch")))]


@infer("GridSample")
def grid_sample(ctx):
    x, grid = ctx.shape(0), ctx.shape(1)
    if x is None or grid is None:
        return [tensor(ctx.elem(0), None)]
    return [tensor(ctx.elem(0), tuple(x[:2]) + tuple(grid[1:-1]))]


@infer("AffineGrid")
def affine_grid(ctx):
    size = ctx.dims(1)
    if size is None:
        s1 = ctx.shape(1)
        n = s1[0] if s1 is not None and symbolic.is_int(s1[0]) else None
        return [tensor(ctx.elem(0), None if n is None else (None,) * (n - 1) + (n - 2,))]
    n, spatial = size[0], size[2:]
    return [tensor(ctx.elem(0), (n,) + tuple(spatial) + (len(spatial),))]


@infer("RoiAlign")
def roi_align(ctx):
    x, rois = ctx.shape(0), ctx.shape(1)
    num = rois[0] if rois is not None else None
    channels = x[1] if x is not None else None
    return [tensor(ctx.elem(0), (num, channels, ctx.attr("output_height", 1),
                                 ctx.attr("output_width", 1)))]
