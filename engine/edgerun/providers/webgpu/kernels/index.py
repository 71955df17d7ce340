"""Index operators on index.wgsl: GatherElements, ScatterElements (and Scatter),
ScatterND, Trilu, OneHot, CumSum, TopK, and the losses that gather by label
(NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss)."""
from __future__ import annotations

from ....ir import dtypes
from .. import host_values
from ..gpu import CODES, GPU_TYPES
from ..memory import GpuTensor
from .common import (as_gpu, as_gpu_any, cast_to, count, gpu_indices, host_floats_or_ints,
                     host_ints, normalize_axis, padded, strides_of)
from .elementwise import binary
from .reduce import reduce, softmax
from .registry import Unsupported, gpu_op

# ScatterElements / ScatterND reduction -> how update `u` folds into `acc`
REDUCE = {"none": "u", "add": "acc + u", "mul": "acc * u", "max": "max(acc, u)",
          "min": "min(acc, u)"}
NUMERIC = ("float32", "int32", "int64")


def _text(value, default: str) -> str:
    value = default if value is None else value
    return value.decode() if isinstance(value, bytes) else value


def check_reduction(node, opset) -> str:
    reduction = _text(node.attr("reduction"), "none")
    return "" if reduction in REDUCE else f"reduction={reduction!r}"


@gpu_op("GatherElements", narrow=True)
def gather_elements(gpu, ctx, data, indices, axis=0):
    data = as_gpu_any(gpu, data)
    axis = normalize_axis(axis, data.ndim)
    idx, shape = gpu_indices(gpu, indices, [data.shape[axis]], "GatherElements")
    out = gpu.empty(shape, data.dtype)
    if count(shape) == 0:
        return out
    n_axis = data.shape[axis]
    dims, strides, axis = _merge_beside_axis(list(shape), strides_of(data.shape), data.shape,
                                             axis)
    params = [len(dims), axis, n_axis] + padded(dims, fill=1) + padded(strides)
    return gpu.dispatch("index", "gather_elements", out, [data, idx], params, count(shape),
                        {"T": data.wgsl})


def _merge_beside_axis(dims: list, strides: list, full: tuple, axis: int) -> tuple:
    """Merge neighbouring dims on one side of `axis` where the inner one is whole (so both
    the index walk and `strides` stay contiguous): ranks above 6 fit the kernels."""
    i = len(dims) - 2
    while i >= 0:
        if axis not in (i, i + 1) and dims[i + 1] == full[i + 1]:
            dims[i] *= dims[i + 1]
            strides[i] = strides[i + 1]
            del dims[i + 1], strides[i + 1]
            full = full[:i] + (full[i] * full[i + 1],) + full[i + 2:]
            axis -= axis > i
        i -= 1
    return dims, strides, axis


@gpu_op("ScatterElements", check=check_reduction)
@gpu_op("Scatter")
def scatter_elements(gpu, ctx, data, indices, updates, axis=0, reduction="none"):
    data, updates = as_gpu_any(gpu, data), as_gpu_any(gpu, updates)
    reduction = _text(reduction, "none")
    if data.dtype != updates.dtype or (data.dtype == "bool" and reduction != "none"):
        raise Unsupported(f"ScatterElements of {updates.dtype} updates into {data.dtype} "
                          f"data (reduction {reduction})")
    axis = normalize_axis(axis, data.ndim)
    idx, shape = gpu_indices(gpu, indices, [data.shape[axis]], "ScatterElements")
    if tuple(shape) != updates.shape:
        raise ValueError(f"ScatterElements: indices {tuple(shape)} and updates "
                         f"{updates.shape} differ in shape")
    out = gpu.empty(data.shape, data.dtype)
    params = ([data.ndim, axis, data.shape[axis]] + padded(list(data.shape), fill=1)
              + padded(list(updates.shape), fill=1) + padded(strides_of(updates.shape)))
    return gpu.dispatch("index", "scatter_elements", out, [data, idx, updates], params,
                        data.size, {"T": data.wgsl, "REDUCE": REDUCE[reduction]})


@gpu_op("ScatterND", check=check_reduction)
def scatter_nd(gpu, ctx, data, indices, updates, reduction="none"):
    data, updates = as_gpu_any(gpu, data), as_gpu_any(gpu, updates)
    reduction = _text(reduction, "none")
    if data.dtype != updates.dtype or (data.dtype == "bool" and reduction != "none"):
        raise Unsupported(f"ScatterND of {updates.dtype} updates into {data.dtype} data "
                          f"(reduction {reduction})")
    k = (indices.shape if isinstance(indices, GpuTensor) else host_values.shape(indices))[-1]
    if k > data.ndim:
        raise ValueError(f"ScatterND: index tuples of {k} into a rank-{data.ndim} tensor")
    idx, shape = gpu_indices(gpu, indices, list(data.shape[:k]), "ScatterND")
    out = gpu.empty(data.shape, data.dtype)
    inner = count(data.shape[k:])
    rows = count(shape[:-1])
    params = [k, inner, rows] + padded(list(data.shape[:k]), fill=1)
    return gpu.dispatch("index", "scatter_nd", out, [data, idx, updates], params, data.size,
                        {"T": data.wgsl, "REDUCE": REDUCE[reduction]})


@gpu_op("Trilu")
def trilu(gpu, ctx, x, k=None, upper=1):
    x = as_gpu_any(gpu, x)
    offset = 0 if k is None else int(host_floats_or_ints(gpu, k)[0])
    out = gpu.empty(x.shape, x.dtype)
    if x.size == 0:
        return out
    offset = max(min(offset, 2**31 - 1), -2**31 + 1)
    return gpu.dispatch("index", "trilu", out, [x], [x.shape[-2], x.shape[-1], offset],
                        x.size, {"T": x.wgsl, "UPPER": int(bool(upper))})


def _lines(shape, axis):
    """(L, inner, number of lines) of the lines along `axis`."""
    length, inner = shape[axis], count(shape[axis + 1:])
    return length, inner, count(shape[:axis]) * inner


CUMULATIVE = {"CumSum": ("+", 0), "CumProd": ("*", 1)}     # op -> (WGSL operator, start)


def _cumulative_op(op):
    @gpu_op(op)
    def run(gpu, ctx, x, axis, exclusive=0, reverse=0):
        x = as_gpu_any(gpu, x)
        if x.dtype not in NUMERIC:
            raise Unsupported(f"{op} over {x.dtype}")
        axis = normalize_axis(host_ints(gpu, axis)[0], x.ndim)
        out = gpu.empty(x.shape, x.dtype)
        length, inner, lines = _lines(x.shape, axis)
        if x.size == 0:
            return out
        sign, first = CUMULATIVE[op]
        return gpu.dispatch("index", "cumulative", out, [x],
                            [length, inner, int(bool(exclusive)), int(bool(reverse))], lines,
                            {"T": x.wgsl, "OP": sign, "FIRST": first})
    return run


for _op in CUMULATIVE:
    _cumulative_op(_op)


# (largest, WGSL type) -> does (a, ia) come before (b, ib): ties keep the lower index
TOPK_ORDER = {True: "a > b || (a == b && ia < ib)", False: "a < b || (a == b && ia < ib)"}


@gpu_op("TopK")
def topk(gpu, ctx, x, k_input=None, axis=-1, largest=1, sorted=1, k=None):  # noqa: A002
    x = as_gpu_any(gpu, x)
    if x.dtype not in NUMERIC:
        raise Unsupported(f"TopK over {x.dtype}")
    kk = int(k) if ctx.opset < 10 else host_ints(gpu, k_input)[0]
    axis = normalize_axis(axis, x.ndim)
    length, inner, lines = _lines(x.shape, axis)
    if not 0 <= kk <= length:
        raise ValueError(f"TopK: k={kk} for an axis of {length} elements")
    shape = list(x.shape)
    shape[axis] = kk
    values, indices = gpu.empty(shape, x.dtype), gpu.empty(shape, "int64")
    if count(shape) == 0:
        return values, indices
    gpu.dispatch("index", "topk", values, [x, indices], [length, inner, kk], lines,
                 {"T": x.wgsl, "BEFORE": TOPK_ORDER[bool(largest)]})
    return values, indices


def check_one_hot(node, opset, types) -> str:
    t = types.get(node.inputs[2])
    if t is None or t.elem_type not in GPU_TYPES or t.elem_type == dtypes.UINT32:
        return (f"OneHot values of type {t.type_string() if t else 'unknown'} (GPU tensors "
                f"are float32, int32, int64 or bool)")
    return ""


@gpu_op("OneHot", check=check_one_hot, typed=True)
def one_hot(gpu, ctx, indices, depth, values, axis=-1):
    depth_n = int(host_floats_or_ints(gpu, depth)[0])
    values = as_gpu_any(gpu, values)
    if depth_n < 1 or values.size != 2:
        raise ValueError(f"OneHot: depth {depth_n} and {values.size} values (2 expected)")
    idx = as_gpu_any(gpu, indices, cast_host=True)
    if idx.dtype == "float32":           # float indices: truncated, as the CPU kernel does
        idx = cast_to(gpu, idx, "int32")
    elif idx.dtype not in ("int32", "int64"):
        raise Unsupported(f"{idx.dtype} OneHot indices")
    rank = idx.ndim + 1
    axis = normalize_axis(axis, rank)
    shape = idx.shape[:axis] + (depth_n,) + idx.shape[axis:]
    out = gpu.empty(shape, values.dtype)
    if count(shape) == 0:
        return out
    return gpu.dispatch("index", "onehot", out, [idx, values], [depth_n, count(idx.shape[axis:])],
                        count(shape), {"T": values.wgsl})


LOSS_REDUCTIONS = ("none", "sum", "mean")


def check_loss(node, opset) -> str:
    reduction = _text(node.attr("reduction"), "mean")
    return "" if reduction in LOSS_REDUCTIONS else f"reduction={reduction!r}"


def nll_loss(gpu, log_prob, target, weight, ignore_index, reduction):
    """NegativeLogLikelihoodLoss of float32 `log_prob` (N, C, ...) on the GPU."""
    labels = as_gpu_any(gpu, target)
    if labels.dtype not in ("int32", "int64"):
        raise Unsupported(f"{labels.dtype} targets")
    n, classes = log_prob.shape[0], log_prob.shape[1]
    if labels.shape != (n,) + log_prob.shape[2:]:
        raise ValueError(f"NegativeLogLikelihoodLoss: target {labels.shape} for input "
                         f"{log_prob.shape}")
    weight = gpu.zeros(1) if weight is None else as_gpu(gpu, weight)
    loss, weights = gpu.empty(labels.shape), gpu.empty(labels.shape)
    params = [classes, count(log_prob.shape[2:]), int(weight.size == classes),
              int(ignore_index is not None), int(ignore_index or 0)]
    gpu.dispatch("index", "nll", loss, [log_prob, labels, weight, weights], params,
                 labels.size)
    reduction = _text(reduction, "mean")
    if reduction == "none":
        return loss
    axes = list(range(loss.ndim))
    total = reduce(gpu, loss, "ReduceSum", axes, keepdims=False)
    if reduction == "sum":
        return total
    return binary(gpu, total, reduce(gpu, weights, "ReduceSum", axes, keepdims=False), "x / y")


@gpu_op("NegativeLogLikelihoodLoss", check=check_loss)
def negative_log_likelihood_loss(gpu, ctx, x, target, weight=None, ignore_index=None,
                                 reduction="mean"):
    return nll_loss(gpu, as_gpu(gpu, x), target, weight, ignore_index, reduction)


@gpu_op("SoftmaxCrossEntropyLoss", check=check_loss)
def softmax_cross_entropy_loss(gpu, ctx, scores, labels, weights=None, ignore_index=None,
                               reduction="mean"):
    log_prob = softmax(gpu, scores, 1, 13, True)
    loss = nll_loss(gpu, log_prob, labels, weights, ignore_index, reduction)
    return (loss, log_prob) if ctx.num_outputs > 1 else loss


@gpu_op("GatherND", narrow=True)
def gather_nd(gpu, ctx, data, indices, batch_dims=0):
    data = as_gpu_any(gpu, data)
    idx_shape = indices.shape if isinstance(indices, GpuTensor) else host_values.shape(indices)
    k, b = idx_shape[-1], int(batch_dims)
    if b + k > data.ndim or tuple(idx_shape[:b]) != tuple(data.shape[:b]):
        raise ValueError(f"GatherND: indices {tuple(idx_shape)} into data {data.shape} with "
                         f"batch_dims {b}")
    idx, _ = gpu_indices(gpu, indices, list(data.shape[b:b + k]), "GatherND")
    shape = tuple(idx_shape[:-1]) + tuple(data.shape[b + k:])
    out = gpu.empty(shape, data.dtype)
    if count(shape) == 0:
        return out
    inner = count(data.shape[b + k:])
    params = [k, inner, count(idx_shape[b:-1]), count(data.shape[b:])] + padded(
        list(data.shape[b:b + k]), fill=1)
    return gpu.dispatch("index", "gather_nd", out, [data, idx], params, count(shape),
                        {"T": data.wgsl})


def check_eye_like(node, opset, types) -> str:
    code = node.attr("dtype")
    if code is None:
        t = types.get(node.inputs[0])
        code = t.elem_type if t is not None else 0
    if code not in GPU_TYPES or code == dtypes.UINT32:
        return f"EyeLike of {dtypes.type_string(code) if code else 'an unknown type'}"
    return ""


@gpu_op("EyeLike", check=check_eye_like, typed=True)
def eye_like(gpu, ctx, x, dtype=None, k=0):
    shape = x.shape if isinstance(x, GpuTensor) else host_values.shape(x)
    code = dtype if dtype is not None else (
        CODES[x.dtype] if isinstance(x, GpuTensor) else host_values.elem_type(x))
    if len(shape) != 2:
        raise ValueError(f"EyeLike of a rank-{len(shape)} tensor (2 expected)")
    out = gpu.empty(shape, GPU_TYPES[code])
    return gpu.dispatch("index", "eye", out, [], [shape[1], int(k)], count(shape),
                        {"T": out.wgsl})


@gpu_op("ReverseSequence")
def reverse_sequence(gpu, ctx, x, sequence_lens, batch_axis=1, time_axis=0):
    x = as_gpu_any(gpu, x)
    lens = as_gpu_any(gpu, sequence_lens)
    if lens.dtype not in ("int32", "int64"):
        raise Unsupported(f"{lens.dtype} sequence_lens")
    strides = strides_of(x.shape)
    out = gpu.empty(x.shape, x.dtype)
    if x.size == 0:
        return out
    params = [x.shape[time_axis], strides[time_axis], x.shape[batch_axis], strides[batch_axis]]
    return gpu.dispatch("index", "reverse_sequence", out, [x, lens], params, x.size,
                        {"T": x.wgsl})


@gpu_op("TensorScatter")
def tensor_scatter(gpu, ctx, past_cache, update, write_indices=None, mode="linear", axis=-2):
    cache, upd = as_gpu_any(gpu, past_cache), as_gpu_any(gpu, update)
    mode = _text(mode, "linear")
    axis = normalize_axis(axis, cache.ndim)
    if mode not in ("linear", "circular") or axis == 0 or cache.dtype != upd.dtype:
        raise Unsupported(f"TensorScatter (mode {mode}, axis {axis}) of {upd.dtype} into "
                          f"{cache.dtype}")
    starts = (gpu.zeros(cache.shape[0]) if write_indices is None
              else as_gpu_any(gpu, write_indices))
    if write_indices is not None and starts.dtype not in ("int32", "int64"):
        raise Unsupported(f"{starts.dtype} write_indices")
    out = gpu.empty(cache.shape, cache.dtype)
    if cache.size == 0:
        return out
    params = [cache.shape[axis], count(cache.shape[axis + 1:]), upd.shape[axis],
              count(cache.shape[1:]), int(mode == "circular")]
    return gpu.dispatch("index", "tensor_scatter", out, [cache, upd, starts], params,
                        cache.size, {"T": cache.wgsl})
