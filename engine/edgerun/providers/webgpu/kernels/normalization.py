"""BatchNormalization (inference), LayerNormalization, RMSNormalization, InstanceNormalization,
GroupNormalization, MeanVarianceNormalization, LRN."""
from __future__ import annotations

from ....ir import dtypes
from .. import host_values
from .common import as_gpu, count, normalize_axis, row_dispatch
from .elementwise import binary
from .reduce import reduce
from .registry import Unsupported, gpu_op


def check_batchnorm(node, opset) -> str:
    if opset < 14 and len([o for o in node.outputs if o]) > 1:
        return "the mean/variance outputs of opsets before 14 (training)"
    return ""


@gpu_op("BatchNormalization", check=check_batchnorm)
def batch_normalization(gpu, ctx, x, scale, bias, mean, var, epsilon=1e-5, momentum=0.9,
                        training_mode=0, **_):
    x = as_gpu(gpu, x)
    operands = [as_gpu(gpu, v) for v in (scale, bias, mean, var)]
    channels = x.shape[1] if x.ndim > 1 else 1
    if any(v.size != channels for v in operands):
        raise Unsupported("BatchNormalization parameters that are not per-channel vectors")
    running = []
    if training_mode:              # the batch's own statistics, and the running ones updated
        axes = [0] + list(range(2, x.ndim))
        batch_mean = reduce(gpu, x, "ReduceMean", axes, keepdims=False)
        kept = (1, channels) + (1,) * (x.ndim - 2)
        squares = binary(gpu, x, batch_mean.view(kept), "(x - y) * (x - y)")
        batch_var = reduce(gpu, squares, "ReduceMean", axes, keepdims=False)
        running = [binary(gpu, old, new, "x * alpha + y * (1.0 - alpha)", alpha=momentum)
                   for old, new in ((operands[2], batch_mean), (operands[3], batch_var))]
        operands[2:] = [batch_mean, batch_var]
    out = gpu.empty(x.shape)
    inner = count(x.shape[2:])
    gpu.dispatch("elementwise", "batchnorm", out, [x] + operands,
                 [channels, inner, float(epsilon)], x.size)
    if not training_mode or ctx.num_outputs <= 1:
        return out
    return (out, *running)[:ctx.num_outputs]


def _row_operand(gpu, v, cols: int, what: str) -> tuple:
    """(GPU tensor, stride) of a scale or bias read once per normalized element: a full row
    (stride 1) or a single value (stride 0)."""
    v = as_gpu(gpu, v)
    if v.size == cols:
        return v, 1
    if v.size == 1:
        return v, 0
    raise Unsupported(f"a {what} of shape {v.shape} that broadcasts over part of the "
                      f"normalized {cols} elements")


def layer_norm(gpu, x, scale, bias=None, axis=-1, epsilon=1e-5, rms=False, stats=False):
    """LayerNormalization (or RMSNormalization) over x.shape[axis:]; with `stats`, also
    the per-row Mean and InvStdDev, shaped x.shape[:axis] + [1, ...]."""
    x = as_gpu(gpu, x)
    axis = normalize_axis(axis, x.ndim)
    cols = count(x.shape[axis:])
    rows = count(x.shape[:axis])
    stat_shape = tuple(x.shape[:axis]) + (1,) * (x.ndim - axis)
    out = gpu.empty(x.shape)
    mean, inv = (gpu.empty(stat_shape), gpu.empty(stat_shape)) if stats else (
        gpu.empty((1,)), gpu.empty((1,)))
    if cols == 0:
        if stats:
            raise Unsupported("the Mean/InvStdDev of empty rows")
        return out
    scale, scale_stride = _row_operand(gpu, scale, cols, "scale")
    if bias is None:
        bias, bias_stride = gpu.zeros(1), 0
    else:
        bias, bias_stride = _row_operand(gpu, bias, cols, "bias")
    row_dispatch(gpu, "layernorm", out, [x, scale, bias, mean, inv],
                 [cols, float(epsilon), scale_stride, bias_stride, rows], rows, cols,
                 {"RMS": int(rms), "STATS": int(stats)})
    return (out, mean, inv) if stats else out


@gpu_op("LayerNormalization")
@gpu_op("LayerNormalization", domain="com.edgerun")
def run_layer_norm(gpu, ctx, x, scale, bias=None, axis=-1, epsilon=1e-5, stash_type=1):
    stats = len([o for o in ctx.node.outputs if o]) > 1
    return layer_norm(gpu, x, scale, bias, axis, epsilon, stats=stats)


@gpu_op("RMSNormalization")
def run_rms_norm(gpu, ctx, x, scale, axis=-1, epsilon=1e-5, stash_type=1):
    return layer_norm(gpu, x, scale, None, axis, epsilon, rms=True)


def _one(gpu):
    return gpu.constant(("one",), lambda: host_values.filled(dtypes.FLOAT, (1,), 1.0))


def _grouped_norm(gpu, x, groups: int, scale, bias, epsilon, per_group=False):
    """Normalize each (n, group) block of x (N, C, ...), then scale and shift per channel
    (per group with `per_group`: GroupNormalization before opset 21)."""
    x = as_gpu(gpu, x)
    n, channels = x.shape[0], x.shape[1]
    if groups <= 0 or channels % groups:
        raise ValueError(f"{channels} channels in {groups} groups")
    normed = layer_norm(gpu, x.view((n * groups, x.size // max(n * groups, 1))), _one(gpu),
                        None, -1, epsilon)
    affine = groups if per_group else channels
    shaped = normed.view((n, affine, x.size // max(n * affine, 1)))
    scale, bias = as_gpu(gpu, scale).view((affine, 1)), as_gpu(gpu, bias).view((affine, 1))
    return binary(gpu, binary(gpu, shaped, scale, "x * y"), bias, "x + y").view(x.shape)


@gpu_op("InstanceNormalization")
def instance_normalization(gpu, ctx, x, scale, bias, epsilon=1e-5):
    return _grouped_norm(gpu, x, x.shape[1], scale, bias, epsilon)


@gpu_op("GroupNormalization")
def group_normalization(gpu, ctx, x, scale, bias, num_groups, epsilon=1e-5, stash_type=1):
    return _grouped_norm(gpu, x, int(num_groups), scale, bias, epsilon,
                         per_group=ctx.opset < 21)


@gpu_op("MeanVarianceNormalization")
def mean_variance_normalization(gpu, ctx, x, axes=(0, 2, 3)):
    """(x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9) over `axes` (the spec's function)."""
    x = as_gpu(gpu, x)
    mean = reduce(gpu, x, "ReduceMean", list(axes))
    square = reduce(gpu, binary(gpu, x, x, "x * y"), "ReduceMean", list(axes))
    std = binary(gpu, square, mean, "sqrt(max(x - y * y, 0.0)) + 1e-9")
    return binary(gpu, binary(gpu, x, mean, "x - y"), std, "x / y")


@gpu_op("LRN")
def lrn(gpu, ctx, x, size, alpha=1e-4, beta=0.75, bias=1.0):
    x = as_gpu(gpu, x)
    out = gpu.empty(x.shape)
    params = [x.shape[1], count(x.shape[2:]), int(size), float(alpha), float(beta), float(bias)]
    return gpu.dispatch("reduce", "lrn", out, [x], params, x.size)
