"""A small numpy interpreter of the MIL ops the lowering emits, following the MIL op
documentation (coremltools.converters.mil.mil.ops.defs), not ONNX's: running a lowered
program here and comparing with the CPU provider proves the lowering (pad layouts, weight
layouts, axes) where Core ML itself cannot run (off Apple).

`run_program(program, feeds)` walks the main function's operations in order; variables the
MIL builder already computed (constants, folded shape arithmetic) are taken as they are.
Each result is checked against the shape MIL inferred for it. One rule per MIL op in RULES.
"""
from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

NUMPY_OF_MIL = {"fp32": np.float32, "fp16": np.float16, "int32": np.int32, "bool": np.bool_}


class ReferenceError(Exception):
    """The interpreter met an op it has no rule for, or a result MIL did not expect."""


def run_program(program, feeds: dict) -> dict:
    """Run `program`'s main function on `feeds` (MIL input name -> array): name -> array."""
    from coremltools.converters.mil.mil import types

    func = program.functions["main"]
    env = {name: np.asarray(feeds[name]) for name in func.inputs}
    for op in func.operations:
        if all(v.val is not None for v in op.outputs):
            for v in op.outputs:
                env[v.name] = np.asarray(v.val)
            continue
        rule = RULES.get(op.op_type)
        if rule is None:
            raise ReferenceError(f"no reference rule for MIL op '{op.op_type}' ({op.name})")
        args = {k: _value(env, v) for k, v in op.inputs.items()}
        result = rule(**args)
        results = result if isinstance(result, tuple) else (result,)
        for var, value in zip(op.outputs, results):
            dtype = NUMPY_OF_MIL[types.builtin_to_string(var.dtype)]
            value = np.asarray(value).astype(dtype, copy=False)
            expected = tuple(int(d) for d in var.shape)
            if value.shape != expected:
                raise ReferenceError(f"MIL op '{op.op_type}' ({op.name}): reference result has "
                                     f"shape {value.shape}, MIL inferred {expected}")
            env[var.name] = value
    return {v.name: env[v.name] for v in func.outputs}


def _value(env: dict, var):
    if isinstance(var, (list, tuple)):
        return [_value(env, v) for v in var]
    if var.name in env:
        return env[var.name]
    val = var.val
    return val if isinstance(val, str) else np.asarray(val)


def _scalar(v):
    return v.item() if isinstance(v, np.ndarray) else v


# ---- elementwise ------------------------------------------------------------------------

def _erf(x):
    v = np.vectorize(math.erf, otypes=[np.float64])
    return v(x.astype(np.float64)).astype(x.dtype)


def _gelu(x, mode="EXACT"):
    x64 = x.astype(np.float64)
    if _scalar(mode) == "TANH_APPROXIMATION":
        y = 0.5 * x64 * (1 + np.tanh(math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64 ** 3)))
    else:
        y = 0.5 * x64 * (1 + _erf(x64 / math.sqrt(2)))
    return y.astype(x.dtype)


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=int(axis), keepdims=True))
    return e / e.sum(axis=int(axis), keepdims=True)


# ---- windows (conv, pooling) ------------------------------------------------------------

def _pairs(pad, n):
    pad = [0] * (2 * n) if pad is None else [int(p) for p in np.asarray(pad).reshape(-1)]
    return [(pad[2 * i], pad[2 * i + 1]) for i in range(n)]


def _windows(x, kernel, strides, dilations, pads, fill):
    """[N, C, *out, *kernel] views of x padded with `fill` (pads: (begin, end) per dim)."""
    n = len(kernel)
    xp = np.pad(x, [(0, 0), (0, 0)] + list(pads), constant_values=fill)
    extent = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    w = sliding_window_view(xp, extent, axis=tuple(range(2, 2 + n)))
    index = (slice(None), slice(None)) + tuple(slice(None, None, s) for s in strides) + \
        tuple(slice(None, None, d) for d in dilations)
    return w[index]


def _conv(x, weight, strides=None, pad_type="valid", pad=None, dilations=None, groups=1,
          bias=None):
    n = x.ndim - 2
    kernel = list(weight.shape[2:])
    strides = [1] * n if strides is None else [int(s) for s in strides]
    dilations = [1] * n if dilations is None else [int(d) for d in dilations]
    if _scalar(pad_type) != "custom":
        raise ReferenceError(f"reference conv handles pad_type='custom' only, got {pad_type}")
    groups = int(groups)
    win = _windows(x, kernel, strides, dilations, _pairs(pad, n), 0)
    c_in, c_out = weight.shape[1], weight.shape[0]
    axes_win = [1] + list(range(2 + n, 2 + 2 * n))
    axes_w = list(range(1, 2 + n))
    parts = []
    for g in range(groups):
        wg = weight[g * (c_out // groups):(g + 1) * (c_out // groups)]
        xg = win[:, g * c_in:(g + 1) * c_in]
        parts.append(np.tensordot(xg, wg, axes=(axes_win, axes_w)))   # [N, *out, Cout/g]
    y = np.moveaxis(np.concatenate(parts, axis=-1), -1, 1)
    if bias is not None:
        y = y + bias.reshape([-1] + [1] * n)
    return y


def _pool_geometry(x, kernel_sizes, strides, pad, ceil_mode):
    n = x.ndim - 2
    kernel = [int(k) for k in kernel_sizes]
    strides = [1] * n if strides is None else [int(s) for s in strides]
    pads = _pairs(pad, n)
    extra = [0] * n
    if _scalar(ceil_mode):       # PyTorch's ceil mode: windows may overhang the end
        for i, (size, k, s, (b, e)) in enumerate(zip(x.shape[2:], kernel, strides, pads)):
            out = math.ceil((size + b + e - k) / s) + 1
            if (out - 1) * s >= size + b:
                out -= 1
            extra[i] = max((out - 1) * s + k - (size + b + e), 0)
    return kernel, strides, pads, extra


def _max_pool(x, kernel_sizes, strides=None, pad_type="valid", pad=None, ceil_mode=False):
    kernel, strides, pads, extra = _pool_geometry(x, kernel_sizes, strides, pad, ceil_mode)
    padded = [(b, e + x_) for (b, e), x_ in zip(pads, extra)]
    win = _windows(x, kernel, strides, [1] * len(kernel), padded, -np.inf)
    return win.max(axis=tuple(range(-len(kernel), 0)))


def _avg_pool(x, kernel_sizes, strides=None, pad_type="valid", pad=None,
              exclude_padding_from_average=False, ceil_mode=False):
    kernel, strides, pads, extra = _pool_geometry(x, kernel_sizes, strides, pad, ceil_mode)
    n = len(kernel)
    padded = [(b, e + x_) for (b, e), x_ in zip(pads, extra)]
    axes = tuple(range(-n, 0))
    total = _windows(x, kernel, strides, [1] * n, padded, 0).sum(axis=axes)
    ones = np.ones((1, 1) + x.shape[2:], x.dtype)
    if not _scalar(exclude_padding_from_average):
        ones = np.pad(ones, [(0, 0), (0, 0)] + list(pads), constant_values=1)
        padded = [(0, x_) for x_ in extra]     # padding counts; the ceil overhang does not
    count = _windows(ones, kernel, strides, [1] * n, padded, 0).sum(axis=axes)
    return total / count


# ---- normalization ----------------------------------------------------------------------

def _batch_norm(x, mean, variance, gamma=None, beta=None, epsilon=1e-5):
    shape = [-1] + [1] * (x.ndim - 2)
    y = (x - mean.reshape(shape)) / np.sqrt(variance.reshape(shape) + epsilon)
    if gamma is not None:
        y = y * gamma.reshape(shape)
    if beta is not None:
        y = y + beta.reshape(shape)
    return y


def _layer_norm(x, axes, gamma=None, beta=None, epsilon=1e-5):
    axes = tuple(int(a) for a in axes)
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x64 - mean) / np.sqrt(var + float(epsilon))
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y


def _local_response_norm(x, size, alpha=1e-4, beta=0.75, k=1.0):
    size = int(size)
    sq = np.square(x.astype(np.float64))
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    padded = np.pad(sq, [(0, 0), (before, after)] + [(0, 0)] * (x.ndim - 2))
    window = sliding_window_view(padded, size, axis=1).sum(axis=-1)
    return x / (float(k) + float(alpha) / size * window) ** float(beta)


# ---- tensors ----------------------------------------------------------------------------

def _reduce(fn):
    def rule(x, axes=None, keep_dims=False):
        axes = tuple(range(x.ndim)) if axes is None else tuple(int(a) for a in axes)
        return fn(x, axes, bool(keep_dims))
    return rule


def _log_sum_exp(x, axes, keep):
    m = x.max(axis=axes, keepdims=True)
    y = np.log(np.exp(x - m).sum(axis=axes, keepdims=True)) + m
    return y if keep else y.squeeze(axis=axes)


def _slice_by_index(x, begin, end, stride=None, begin_mask=None, end_mask=None,
                    squeeze_mask=None):
    index = []
    for i in range(x.ndim):
        b = None if begin_mask is not None and begin_mask[i] else int(begin[i])
        e = None if end_mask is not None and end_mask[i] else int(end[i])
        s = 1 if stride is None else int(stride[i])
        index.append(slice(b, e, s))
    y = x[tuple(index)]
    if squeeze_mask is not None and np.any(squeeze_mask):
        y = y.squeeze(axis=tuple(i for i, m in enumerate(squeeze_mask) if m))
    return y


def _matmul(x, y, transpose_x=False, transpose_y=False):
    if transpose_x:
        x = np.swapaxes(x, -1, -2)
    if transpose_y:
        y = np.swapaxes(y, -1, -2)
    return np.matmul(x, y)


def _cast(x, dtype):
    return x.astype(NUMPY_OF_MIL[_scalar(dtype)])


RULES = {
    # elementwise binary (numpy broadcasting)
    "add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
    "real_div": lambda x, y: x / y, "pow": lambda x, y: np.power(x, y),
    "maximum": lambda x, y: np.maximum(x, y), "minimum": lambda x, y: np.minimum(x, y),
    "equal": lambda x, y: x == y, "not_equal": lambda x, y: x != y,
    "less": lambda x, y: x < y, "less_equal": lambda x, y: x <= y,
    "greater": lambda x, y: x > y, "greater_equal": lambda x, y: x >= y,
    "logical_and": lambda x, y: np.logical_and(x, y),
    "logical_or": lambda x, y: np.logical_or(x, y),
    "logical_xor": lambda x, y: np.logical_xor(x, y), "logical_not": lambda x: np.logical_not(x),
    # elementwise unary and activations
    "relu": lambda x: np.maximum(x, 0), "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    **{op: (lambda fn: lambda x: fn(x))(getattr(np, op))
       for op in ("tanh", "exp", "sqrt", "abs", "floor", "ceil", "sin", "cos")},
    "erf": _erf,
    "log": lambda x, epsilon=1e-45: np.log(x + epsilon),
    "rsqrt": lambda x, epsilon=1e-12: 1 / np.sqrt(x + epsilon),
    "softplus": lambda x: np.logaddexp(0, x), "softsign": lambda x: x / (1 + np.abs(x)),
    "elu": lambda x, alpha=1.0: np.where(x > 0, x, alpha * (np.exp(x) - 1)),
    "leaky_relu": lambda x, alpha=0.01: np.where(x >= 0, x, alpha * x),
    "sigmoid_hard": lambda x, alpha=0.2, beta=0.5: np.clip(alpha * x + beta, 0, 1),
    "gelu": _gelu, "softmax": _softmax,
    # linear algebra, convolution, pooling, normalization
    "conv": _conv, "matmul": _matmul,
    "linear": lambda x, weight, bias=None: x @ weight.T + (0 if bias is None else bias),
    "max_pool": _max_pool, "avg_pool": _avg_pool,
    "batch_norm": _batch_norm, "layer_norm": _layer_norm,
    "local_response_norm": _local_response_norm,
    # reductions
    "reduce_mean": _reduce(lambda x, a, k: x.mean(axis=a, keepdims=k)),
    "reduce_sum": _reduce(lambda x, a, k: x.sum(axis=a, keepdims=k)),
    "reduce_max": _reduce(lambda x, a, k: x.max(axis=a, keepdims=k)),
    "reduce_min": _reduce(lambda x, a, k: x.min(axis=a, keepdims=k)),
    "reduce_prod": _reduce(lambda x, a, k: x.prod(axis=a, keepdims=k)),
    "reduce_l2_norm": _reduce(lambda x, a, k: np.sqrt((x * x).sum(axis=a, keepdims=k))),
    "reduce_sum_square": _reduce(lambda x, a, k: (x * x).sum(axis=a, keepdims=k)),
    "reduce_log_sum_exp": _reduce(_log_sum_exp),
    "reduce_argmax": lambda x, axis=-1, keep_dims=False: np.argmax(
        x, axis=int(axis), keepdims=bool(keep_dims)),
    "reduce_argmin": lambda x, axis=-1, keep_dims=False: np.argmin(
        x, axis=int(axis), keepdims=bool(keep_dims)),
    # data movement
    "identity": lambda x: x, "cast": _cast,
    "reshape": lambda x, shape: x.reshape([int(d) for d in shape]),
    "transpose": lambda x, perm: np.transpose(x, [int(p) for p in perm]),
    "concat": lambda values, axis, interleave=False: np.concatenate(values, axis=int(axis)),
    "squeeze": lambda x, axes=None: np.squeeze(
        x, axis=None if axes is None else tuple(int(a) for a in axes)),
    "expand_dims": lambda x, axes: np.expand_dims(x, tuple(int(a) for a in axes)),
    "gather": lambda x, indices, axis=0, batch_dims=0, validate_indices=False: np.take(
        x, indices.astype(np.int64), axis=int(axis)),
    "slice_by_index": _slice_by_index,
}
