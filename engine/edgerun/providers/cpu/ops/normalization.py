"""Normalization: BatchNormalization, InstanceNormalization, LayerNormalization,
GroupNormalization, RMSNormalization, LpNormalization, MeanVarianceNormalization.

Statistics are computed in at least float32 (float16 and bfloat16 inputs would lose too much
precision summing in their own type) and the normalized result is cast back to the input's
dtype. float32 LayerNormalization runs natively where the native kernels do
(native/elementwise.py: one pass per statistic, summed in double).
"""
import math

import numpy as np

from ....ir.dtypes import numpy_dtype
from ..native import conv as native_conv
from ..native import elementwise as native
from ..registry import kernel
from .float_errors import ignored_float_errors
from .reduction import trailing_sum


def _work_dtype(dtype, stash_type: int = 1) -> np.dtype:
    """The precision for the statistics: the stash type, or float64 for float64 inputs."""
    if np.dtype(dtype) == np.float64:
        return np.dtype(np.float64)
    stash = numpy_dtype(stash_type)
    if stash == np.float64:
        return stash
    return np.dtype(np.float32)


def _as(x: np.ndarray, dtype) -> np.ndarray:
    return x if x.dtype == dtype else x.astype(dtype)


def _normalize_axis(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def _in_place(op, y: np.ndarray, other: np.ndarray) -> np.ndarray:
    """op(y, other), written into the fresh `y` unless broadcasting makes the result larger."""
    if np.ndim(other) <= y.ndim and all(o in (1, d) for o, d in
                                        zip(np.shape(other)[::-1], y.shape[::-1])):
        return op(y, other, out=y)
    return op(y, other)


def _mean(x: np.ndarray, axes: tuple) -> np.ndarray:
    """The mean over `axes`, kept as size-1 dimensions; over trailing axes (LayerNorm) the
    sum is one BLAS product per row (numpy reduces short rows one by one)."""
    if axes and axes == tuple(range(axes[0], x.ndim)):
        return trailing_sum(x, axes[0]) / x.dtype.type(math.prod(x.shape[axes[0]:]))
    return x.mean(axis=axes, keepdims=True)


def _mean_and_variance(x: np.ndarray, axes: tuple):
    """Population mean and variance over `axes`, kept as size-1 dimensions."""
    mean = _mean(x, axes)
    centered = x - mean
    return mean, centered, _mean(centered * centered, axes)


def _channel_shape(param: np.ndarray, rank: int) -> np.ndarray:
    """A per-channel parameter of an N x C x D1 x ... tensor, shaped to broadcast against it.

    A 1-D parameter holds one value per channel; a parameter of rank > 1 (BatchNormalization's
    spatial=0) already has the shape C x D1 x ... .
    """
    if param.ndim <= 1:
        return param.reshape((1, -1) + (1,) * (rank - 2))
    return param.reshape((1,) + param.shape)


# --- BatchNormalization ---------------------------------------------------------------

def _batch_norm_inference(x, scale, bias, mean, var, epsilon, ctx=None):
    return batch_norm_activated(x, scale, bias, mean, var, epsilon, ctx)[0]


def batch_norm_activated(x, scale, bias, mean, var, epsilon, ctx=None, act=None) -> tuple:
    """(y, activated): y = x * factor + shift, two numpy passes over x or one native pass
    (float32, per-channel parameters, enough values to pay for the call, or an activation to
    apply in the same pass; the same bits), with `act` (native conv.activation_code's: a
    FusedBatchNormalization's) applied when `activated`. The per-channel factor and shift
    are onnxruntime's, step for step in the work precision: 1 / sqrt(var + eps) times scale,
    and bias - mean * factor, so that y is its values bit for bit (in a quantized graph an
    ulp off moves the next quantizer a step); once per node while the parameters are the
    same arrays (constants) when `ctx` is given."""
    work = _work_dtype(x.dtype)

    def coefficients():
        scale_w, bias_w, mean_w, var_w = (_as(np.asarray(p), work)
                                          for p in (scale, bias, mean, var))
        with ignored_float_errors():
            inverse_std = work.type(1) / np.sqrt(var_w + work.type(epsilon))
            factor = inverse_std * scale_w
            shift = bias_w - mean_w * factor
        return _channel_shape(factor, x.ndim), _channel_shape(shift, x.ndim)
    if ctx is None:
        factor, shift = coefficients()
    else:
        factor, shift = ctx.prepared(("batch_norm", x.ndim, work), (scale, bias, mean, var),
                                     coefficients)
    if work == np.float32 and x.dtype == np.float32 and factor.size == x.shape[1] and \
            (x.size >= native_conv.NATIVE_PASS_MIN_VALUES or act is not None) and \
            native_conv.available():
        return native_conv.channel_affine(x, factor, shift, act), act is not None
    y = np.multiply(_as(x, work), factor)
    y += shift
    return y.astype(x.dtype, copy=False), False


def _batch_norm_training(x, scale, bias, mean, var, epsilon, momentum):
    """Y from the batch's own statistics, plus running and batch mean and variance."""
    work = _work_dtype(x.dtype)
    xw = _as(x, work)
    axes = (0,) + tuple(range(2, x.ndim))
    batch_mean = xw.mean(axis=axes)
    batch_var = xw.var(axis=axes)
    y = _batch_norm_inference(x, scale, bias, batch_mean.astype(work), batch_var.astype(work),
                              epsilon)
    running_mean = _as(mean, work) * momentum + batch_mean * (1 - momentum)
    running_var = _as(var, work) * momentum + batch_var * (1 - momentum)
    return (y, running_mean.astype(mean.dtype), running_var.astype(var.dtype),
            batch_mean.astype(mean.dtype), batch_var.astype(var.dtype))


@kernel("BatchNormalization")
def batch_normalization_1(ctx, x, scale, bias, mean, var, epsilon=1e-5, momentum=0.9,
                          is_test=0, spatial=1, consumed_inputs=None):
    # Opsets 1 and 6: is_test selects inference; otherwise all five outputs are produced.
    if is_test or ctx.num_outputs == 1:
        return _batch_norm_inference(x, scale, bias, mean, var, epsilon, ctx)
    return _batch_norm_training(x, scale, bias, mean, var, epsilon, momentum)


@kernel("BatchNormalization", since=7)
def batch_normalization_7(ctx, x, scale, bias, mean, var, epsilon=1e-5, momentum=0.9,
                          spatial=1):
    # Opsets 7 and 9: training mode is told by the node asking for more than Y.
    if ctx.num_outputs == 1:
        return _batch_norm_inference(x, scale, bias, mean, var, epsilon, ctx)
    return _batch_norm_training(x, scale, bias, mean, var, epsilon, momentum)[:ctx.num_outputs]


@kernel("BatchNormalization", since=14)
def batch_normalization_14(ctx, x, scale, bias, input_mean, input_var, epsilon=1e-5,
                           momentum=0.9, training_mode=0):
    if not training_mode:
        return _batch_norm_inference(x, scale, bias, input_mean, input_var, epsilon, ctx)
    y, running_mean, running_var, _, _ = _batch_norm_training(
        x, scale, bias, input_mean, input_var, epsilon, momentum)
    return (y, running_mean, running_var)[:max(ctx.num_outputs, 1)]


# --- Instance, group, layer and RMS normalization ---------------------------------------

@kernel("InstanceNormalization")
def instance_normalization(ctx, x, scale, bias, epsilon=1e-5, consumed_inputs=None):
    work = _work_dtype(x.dtype)
    xw = _as(x, work)
    _, centered, variance = _mean_and_variance(xw, tuple(range(2, x.ndim)))
    normalized = centered / np.sqrt(variance + work.type(epsilon))
    y = normalized * _as(_channel_shape(scale, x.ndim), work) + _as(_channel_shape(bias, x.ndim), work)
    return y.astype(x.dtype, copy=False)


def _group_statistics_normalize(x, num_groups, epsilon, work):
    """x normalized per instance and group of channels, in `work` precision, shaped like x."""
    n, channels = x.shape[0], x.shape[1]
    if channels % num_groups:
        raise ValueError(f"GroupNormalization: {channels} channels are not divisible into "
                         f"{num_groups} groups")
    grouped = _as(x, work).reshape(n, num_groups, -1)
    _, centered, variance = _mean_and_variance(grouped, (2,))
    return (centered / np.sqrt(variance + work.type(epsilon))).reshape(x.shape)


@kernel("GroupNormalization", since=18)
def group_normalization_18(ctx, x, scale, bias, num_groups, epsilon=1e-5):
    # Opset 18: scale and bias hold one value per group.
    work = _work_dtype(x.dtype)
    normalized = _group_statistics_normalize(x, num_groups, epsilon, work)
    per_group = x.shape[1] // num_groups
    scale_c = np.repeat(_as(scale.reshape(-1), work), per_group)
    bias_c = np.repeat(_as(bias.reshape(-1), work), per_group)
    y = normalized * _channel_shape(scale_c, x.ndim) + _channel_shape(bias_c, x.ndim)
    return y.astype(x.dtype, copy=False)


@kernel("GroupNormalization", since=21)
def group_normalization_21(ctx, x, scale, bias, num_groups, epsilon=1e-5, stash_type=1):
    # Opset 21: scale and bias hold one value per channel; stash_type sets stage one's
    # precision, the affine stage runs in the input's type.
    work = _work_dtype(x.dtype, stash_type)
    normalized = _group_statistics_normalize(x, num_groups, epsilon, work).astype(x.dtype)
    y = normalized * _channel_shape(scale, x.ndim) + _channel_shape(bias, x.ndim)
    return y.astype(x.dtype, copy=False)


def _native_layer_norm(x, scale, bias, axis: int, epsilon: float):
    """float32 LayerNormalization with one output through the native kernel (statistics in
    double), or None where it does not apply: scale and bias must hold one value per
    normalized element (their shapes the trailing ones, leading 1s allowed)."""
    if x.dtype != np.float32 or not native.available():
        return None
    depth = math.prod(x.shape[axis:])
    trailing = x.shape[axis:]
    for param in (scale, bias):
        if param is not None and (param.dtype != np.float32 or param.size != depth
                                  or tuple(param.shape[-len(trailing):]) != trailing):
            return None
    return native.layer_norm(x, max(depth, 1), scale, bias, float(epsilon))


@kernel("LayerNormalization", since=17)
def layer_normalization(ctx, x, scale, bias=None, axis=-1, epsilon=1e-5, stash_type=1):
    axis = _normalize_axis(axis, x.ndim)
    if ctx.num_outputs == 1 and stash_type == 1:
        y = _native_layer_norm(x, scale, bias, axis, epsilon)
        if y is not None:
            return y
    work = _work_dtype(x.dtype, stash_type)
    xw = _as(x, work)
    mean, centered, variance = _mean_and_variance(xw, tuple(range(axis, x.ndim)))
    inv_std_dev = 1.0 / np.sqrt(variance + work.type(epsilon))
    y = centered                                     # fresh: normalise it in place
    y *= inv_std_dev
    y = _in_place(np.multiply, y, _as(scale, work))
    if bias is not None:
        y = _in_place(np.add, y, _as(bias, work))
    y = y.astype(x.dtype, copy=False)
    if ctx.num_outputs == 1:
        return y
    stats_dtype = numpy_dtype(stash_type)
    return (y, mean.astype(stats_dtype), inv_std_dev.astype(stats_dtype))[:ctx.num_outputs]


@kernel("RMSNormalization", since=23)
def rms_normalization(ctx, x, scale, axis=-1, epsilon=1e-5, stash_type=1):
    axis = _normalize_axis(axis, x.ndim)
    work = _work_dtype(x.dtype, stash_type)
    xw = _as(x, work)
    mean_square = np.mean(xw * xw, axis=tuple(range(axis, x.ndim)), keepdims=True)
    y = xw / np.sqrt(mean_square + work.type(epsilon)) * _as(scale, work)
    return y.astype(x.dtype, copy=False)


# --- Lp and mean-variance normalization ----------------------------------------------

@kernel("LpNormalization")
def lp_normalization(ctx, x, axis=-1, p=2):
    axis = _normalize_axis(axis, x.ndim)
    work = _work_dtype(x.dtype)
    xw = _as(x, work)
    if p == 1:
        norm = np.sum(np.abs(xw), axis=axis, keepdims=True)
    elif p == 2:
        norm = np.sqrt(np.sum(xw * xw, axis=axis, keepdims=True))
    else:
        raise ValueError(f"LpNormalization supports p=1 or p=2, got p={p}")
    # A zero norm (an all-zero slice) gives zeros rather than NaN, as the spec says.
    safe_norm = np.where(norm == 0, 1, norm)
    y = np.where(norm == 0, 0, xw / safe_norm)
    return y.astype(x.dtype, copy=False)


@kernel("MeanVarianceNormalization", since=9)
def mean_variance_normalization(ctx, x, axes=(0, 2, 3)):
    axes = tuple(_normalize_axis(a, x.ndim) for a in axes)
    work = _work_dtype(x.dtype)
    xw = _as(x, work)
    mean = xw.mean(axis=axes, keepdims=True)
    # The spec's function: (X - E[X]) / (sqrt(E[X^2] - E[X]^2) + 1e-9).
    variance = np.mean(xw * xw, axis=axes, keepdims=True) - mean * mean
    std = np.sqrt(np.maximum(variance, 0))
    y = (xw - mean) / (std + work.type(1e-9))
    return y.astype(x.dtype, copy=False)
