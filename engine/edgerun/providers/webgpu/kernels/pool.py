"""MaxPool, AveragePool, LpPool (1-D and 2-D) on pool.wgsl; global pools are reductions
(GlobalLpPool: one window over the whole plane)."""
from __future__ import annotations

from .common import as_gpu
from .conv import window_pads
from .reduce import reduce
from .registry import Unsupported, gpu_op


def check_pool(node, opset) -> str:
    pad = node.attr("auto_pad", b"NOTSET")
    pad = pad.decode() if isinstance(pad, bytes) else pad
    if pad not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        return f"auto_pad={pad}"
    return ""


def pool(gpu, x, kind, kernel_shape, auto_pad="NOTSET", ceil_mode=0, count_include_pad=0,
         dilations=None, pads=None, strides=None, p=2, storage_order=0, indices=False):
    x = as_gpu(gpu, x)
    spatial = x.ndim - 2
    if spatial not in (1, 2) or len(kernel_shape) != spatial:
        raise Unsupported(f"{spatial}-D pooling (the kernel does 1-D and 2-D)")
    kernel = list(kernel_shape)
    dilations = list(dilations or [1] * spatial)
    strides = list(strides or [1] * spatial)
    pads = list(pads or [0] * 2 * spatial)
    if kind == "avg" and any(d != 1 for d in dilations):
        raise Unsupported("dilated AveragePool")
    in_sizes = list(x.shape[2:])
    begin, end, out_sizes = window_pads(in_sizes, kernel, strides, dilations, pads, auto_pad)
    if ceil_mode:
        for i in range(spatial):
            span = (kernel[i] - 1) * dilations[i] + 1
            o = -(-(in_sizes[i] + begin[i] + end[i] - span) // strides[i]) + 1
            if (o - 1) * strides[i] >= in_sizes[i] + begin[i]:   # window starting in padding
                o -= 1
            out_sizes[i] = o
    if spatial == 1:
        kernel, strides, dilations = [1] + kernel, [1] + strides, [1] + dilations
        begin, end, out_sizes, in_sizes = [0] + begin, [0] + end, [1] + out_sizes, [1] + in_sizes
    out = gpu.empty(x.shape[:2] + tuple(out_sizes[-spatial:]))
    planes = x.shape[0] * x.shape[1]
    threads = planes * out_sizes[0] * out_sizes[1]
    common = [in_sizes[0], in_sizes[1], out_sizes[0], out_sizes[1], kernel[0], kernel[1],
              strides[0], strides[1], begin[0], begin[1]]
    if kind in ("max", "lp"):
        where = gpu.empty(out.shape, "int64") if indices else gpu.empty((1,), "int32")
        gpu.dispatch("pool", "maxpool", out, [x, where],
                     common + dilations + [float(p), int(storage_order)], threads,
                     {"LP": int(kind == "lp"), "IDX": int(indices)})
        return (out, where) if indices else out
    params = common + [end[0], end[1], int(count_include_pad)]   # windows clip at the pads' end
    return gpu.dispatch("pool", "avgpool", out, [x], params, threads)


@gpu_op("MaxPool", check=check_pool)
def run_maxpool(gpu, ctx, x, kernel_shape=None, storage_order=0, **attrs):
    indices = len(ctx.node.outputs) > 1 and bool(ctx.node.outputs[1])
    return pool(gpu, x, "max", kernel_shape, storage_order=storage_order, indices=indices,
                **attrs)


@gpu_op("AveragePool", check=check_pool)
def run_avgpool(gpu, ctx, x, kernel_shape=None, **attrs):
    return pool(gpu, x, "avg", kernel_shape, **attrs)


@gpu_op("LpPool", check=check_pool)
def run_lppool(gpu, ctx, x, kernel_shape=None, **attrs):
    return pool(gpu, x, "lp", kernel_shape, **attrs)


@gpu_op("GlobalLpPool")
def run_global_lp(gpu, ctx, x, p=2):
    x = as_gpu(gpu, x)
    return pool(gpu, x, "lp", list(x.shape[2:]), p=p)


@gpu_op("GlobalAveragePool")
def run_global_avg(gpu, ctx, x):
    x = as_gpu(gpu, x)
    return reduce(gpu, x, "ReduceMean", list(range(2, x.ndim)), keepdims=True)


@gpu_op("GlobalMaxPool")
def run_global_max(gpu, ctx, x):
    x = as_gpu(gpu, x)
    return reduce(gpu, x, "ReduceMax", list(range(2, x.ndim)), keepdims=True)
