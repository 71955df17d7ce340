"""BatchNormalization (inference), LayerNormalization, LRN."""
from __future__ import annotations

from .common import as_gpu, count, normalize_axis
from .registry import Unsupported, gpu_op


def check_batchnorm(node, opset) -> str:
    if node.attr("training_mode", 0):
        return "training_mode=1 (batch statistics)"
    if len([o for o in node.outputs if o]) > 1:
        return "the running mean/variance outputs (training)"
    return ""


@gpu_op("BatchNormalization", check=check_batchnorm)
def batch_normalization(gpu, ctx, x, scale, bias, mean, var, epsilon=1e-5, **_):
    x = as_gpu(gpu, x)
    operands = [as_gpu(gpu, v) for v in (scale, bias, mean, var)]
    channels = x.shape[1] if x.ndim > 1 else 1
    if any(v.size != channels for v in operands):
        raise Unsupported("BatchNormalization parameters that are not per-channel vectors")
    out = gpu.empty(x.shape)
    inner = count(x.shape[2:])
    return gpu.dispatch("elementwise", "batchnorm", out, [x] + operands,
                        [channels, inner, float(epsilon)], x.size)


def check_layernorm(node, opset) -> str:
    if len([o for o in node.outputs if o]) > 1:
        return "the Mean/InvStdDev outputs"
    return ""


def layer_norm(gpu, x, scale, bias=None, axis=-1, epsilon=1e-5, **_):
    x = as_gpu(gpu, x)
    axis = normalize_axis(axis, x.ndim)
    cols = count(x.shape[axis:])
    scale = as_gpu(gpu, scale)
    if scale.size != cols or (bias is not None and count(bias.shape) != cols):
        raise Unsupported("LayerNormalization scale/bias that broadcast (not full rows)")
    if bias is None:
        bias, stride = gpu.zeros(1), 0
    else:
        bias, stride = as_gpu(gpu, bias), 1
    out = gpu.empty(x.shape)
    if cols == 0:
        return out
    return gpu.dispatch("reduce", "layernorm", out, [x, scale, bias],
                        [cols, float(epsilon), stride], x.size // cols)


@gpu_op("LayerNormalization", check=check_layernorm)
@gpu_op("LayerNormalization", domain="com.edgerun", check=check_layernorm)
def run_layer_norm(gpu, ctx, x, scale, bias=None, axis=-1, epsilon=1e-5, stash_type=1):
    return layer_norm(gpu, x, scale, bias, axis, epsilon)


@gpu_op("LRN")
def lrn(gpu, ctx, x, size, alpha=1e-4, beta=0.75, bias=1.0):
    x = as_gpu(gpu, x)
    out = gpu.empty(x.shape)
    params = [x.shape[1], count(x.shape[2:]), int(size), float(alpha), float(beta), float(bias)]
    return gpu.dispatch("reduce", "lrn", out, [x], params, x.size)
