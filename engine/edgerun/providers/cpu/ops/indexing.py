"""Indexing kernels: gathers, scatters, slicing, selection (Compress, NonZero, TopK, Unique)
and ReverseSequence.

Indices may be negative (counted from the end of their axis) wherever the spec allows it;
index outputs are int64. Scatters copy `data` first: inputs are never written to.
"""
import math

import numpy as np

from ..registry import kernel


# ---------------------------------------------------------------- shared helpers


def _ints(values) -> list:
    """A 1-D integer tensor (or list, or scalar) as a list of Python ints."""
    if type(values) is np.ndarray and values.ndim == 1 and values.dtype.kind in "iu":
        return values.tolist()
    return [int(v) for v in np.asarray(values).reshape(-1).tolist()]


def _normalize_axis(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def _as_str(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _wrap_negative(indices, dims):
    """Indices with `dims` added where negative; `dims` broadcasts against `indices`."""
    indices = np.asarray(indices).astype(np.int64, copy=False)
    return np.where(indices < 0, indices + dims, indices)


def _check_bounds(indices, dims, op: str):
    if indices.size and (np.any(indices < 0) or np.any(indices >= dims)):
        raise ValueError(f"{op}: index out of bounds for dims {dims}")


def _element_index(indices, axis: int, dim: int) -> tuple:
    """Advanced index picking, for every position of `indices`, the element whose
    coordinate along `axis` is the index and whose other coordinates are the position's."""
    idx = _wrap_negative(indices, dim)
    rank = idx.ndim
    index = [np.arange(n).reshape([n if d == i else 1 for d in range(rank)])
             for i, n in enumerate(idx.shape)]
    index[axis] = idx
    return tuple(index)


_REDUCTIONS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _scatter_into(out, index, updates, reduction: str):
    """out[index] = updates, or combined with the current values by `reduction`."""
    reduction = _as_str(reduction)
    if reduction == "none":
        out[index] = updates
    elif reduction in _REDUCTIONS:
        _REDUCTIONS[reduction].at(out, index, updates)
    else:
        raise ValueError(f"scatter reduction must be none, add, mul, max or min, got {reduction!r}")


# ---------------------------------------------------------------- gathers


@kernel("Gather")
def gather(ctx, data, indices, axis=0):
    # np.take already counts negative indices from the end and rejects out-of-range ones.
    axis = _normalize_axis(axis, data.ndim)
    if indices.dtype.kind not in "iu":
        raise TypeError(f"Gather indices must be integers, got {indices.dtype}")
    try:
        result = np.take(data, indices, axis=axis)
    except IndexError as e:
        raise ValueError(f"Gather: {e}") from None
    return result if type(result) is np.ndarray else np.asarray(result)


@kernel("GatherElements", since=11)
def gather_elements(ctx, data, indices, axis=0):
    axis = _normalize_axis(axis, data.ndim)
    if indices.ndim != data.ndim:
        raise ValueError(f"GatherElements indices rank {indices.ndim} != data rank {data.ndim}")
    index = _element_index(indices, axis, data.shape[axis])
    _check_bounds(index[axis], data.shape[axis], "GatherElements")
    return data[index]


def _nd_index(data_shape, indices, batch_dims: int):
    """GatherND/ScatterND addressing: indices (B..., M..., k) as an advanced index into
    data reshaped to (prod(B), *data.shape[batch_dims:]), with shape (prod(B), prod(M))."""
    k = indices.shape[-1]
    if tuple(indices.shape[:batch_dims]) != tuple(data_shape[:batch_dims]):
        raise ValueError(f"indices batch dims {indices.shape[:batch_dims]} != data batch dims "
                         f"{data_shape[:batch_dims]}")
    if k > len(data_shape) - batch_dims:
        raise ValueError(f"indices last dim {k} exceeds data rank {len(data_shape)} - batch_dims")
    batch = math.prod(data_shape[:batch_dims])
    per_batch = math.prod(indices.shape[batch_dims:-1])
    dims = np.array(data_shape[batch_dims:batch_dims + k], dtype=np.int64)
    idx = _wrap_negative(indices, dims).reshape(batch, per_batch, k)
    _check_bounds(idx, dims, "GatherND/ScatterND")
    batch_index = np.arange(batch).reshape(batch, 1)
    return (batch_index,) + tuple(idx[..., j] for j in range(k))


@kernel("GatherND", since=11)
def gather_nd(ctx, data, indices, batch_dims=0):
    flat = data.reshape((math.prod(data.shape[:batch_dims]),) + data.shape[batch_dims:])
    picked = flat[_nd_index(data.shape, indices, batch_dims)]
    k = indices.shape[-1]
    return picked.reshape(indices.shape[:-1] + data.shape[batch_dims + k:])


# ---------------------------------------------------------------- scatters


@kernel("Scatter", since=9)
@kernel("ScatterElements", since=11)
def scatter_elements(ctx, data, indices, updates, axis=0, reduction="none"):
    axis = _normalize_axis(axis, data.ndim)
    if indices.shape != updates.shape or indices.ndim != data.ndim:
        raise ValueError(f"ScatterElements: indices {indices.shape} and updates {updates.shape} "
                         f"must match, with the rank of data {data.shape}")
    index = _element_index(indices, axis, data.shape[axis])
    _check_bounds(index[axis], data.shape[axis], "ScatterElements")
    out = data.copy()
    _scatter_into(out, index, updates, reduction)
    return out


@kernel("ScatterND", since=11)
def scatter_nd(ctx, data, indices, updates, reduction="none"):
    k = indices.shape[-1]
    index = _nd_index(data.shape, indices, 0)[1:]       # no batch dims: drop the batch index
    index = tuple(i.reshape(-1) for i in index)
    out = data.copy()
    _scatter_into(out, index, updates.reshape((-1,) + data.shape[k:]), reduction)
    return out


@kernel("TensorScatter", since=24)
def tensor_scatter(ctx, past_cache, update, write_indices=None, mode="linear", axis=-2):
    mode = _as_str(mode)
    if mode not in ("linear", "circular"):
        raise ValueError(f"TensorScatter mode must be linear or circular, got {mode!r}")
    axis = _normalize_axis(axis, past_cache.ndim)
    if axis == 0:
        raise ValueError("TensorScatter axis must not be the batch axis 0")
    for d, (cache_dim, update_dim) in enumerate(zip(past_cache.shape, update.shape)):
        if (update_dim > cache_dim) if d == axis else (update_dim != cache_dim):
            raise ValueError(f"TensorScatter update {update.shape} does not fit cache "
                             f"{past_cache.shape} along axis {axis}")
    max_len, seq_len = past_cache.shape[axis], update.shape[axis]
    starts = np.zeros(past_cache.shape[0], np.int64) if write_indices is None else \
        np.asarray(write_indices).astype(np.int64).reshape(-1)
    present = past_cache.copy()
    lead = (slice(None),) * (axis - 1)
    for b in range(past_cache.shape[0]):
        positions = starts[b] + np.arange(seq_len)
        if mode == "circular":
            positions %= max_len
        elif seq_len and (starts[b] < 0 or positions[-1] >= max_len):
            raise ValueError(f"TensorScatter write index {starts[b]} + {seq_len} exceeds {max_len}")
        present[b][lead + (positions,)] = update[b]
    return present


# ---------------------------------------------------------------- slicing


def _axis_slice(start: int, end: int, step: int, dim: int) -> slice:
    """ONNX Slice's clamping for one axis, as a Python slice."""
    if step == 0:
        raise ValueError("Slice step must not be zero")
    if start < 0:
        start += dim
    if end < 0:
        end += dim
    if step > 0:
        start = min(max(start, 0), dim)
        end = min(max(end, 0), dim)
        return slice(start, end, step)
    start = min(max(start, 0), dim - 1)
    end = min(max(end, -1), dim - 1)
    return slice(start, None if end < 0 else end, step)   # -1 means "past the front"


@kernel("Slice")
def slice_op(ctx, data, starts=None, ends=None, axes=None, steps=None):
    # Opset 1 passes starts/ends/axes as attributes, opset 10+ as inputs: same names.
    # The index depends on the data's shape and the (usually constant) slice inputs only.
    index = ctx.prepared(("slice", data.shape), (starts, ends, axes, steps),
                         lambda: _slice_index(data.shape, starts, ends, axes, steps))
    return data[index]


def _slice_index(shape: tuple, starts, ends, axes, steps) -> tuple:
    starts, ends = _ints(starts), _ints(ends)
    if len(starts) != len(ends):
        raise ValueError(f"Slice starts {starts} and ends {ends} differ in length")
    axes = list(range(len(starts))) if axes is None else _ints(axes)
    steps = [1] * len(starts) if steps is None else _ints(steps)
    index = [slice(None)] * len(shape)
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis = _normalize_axis(axis, len(shape))
        index[axis] = _axis_slice(start, end, step, shape[axis])
    return tuple(index)


# ---------------------------------------------------------------- selection


@kernel("Compress", since=9)
def compress(ctx, x, condition, axis=None):
    condition = np.asarray(condition).astype(bool).reshape(-1)
    if axis is None:
        flat = x.reshape(-1)
        return flat[:condition.size][condition[:flat.size]]
    axis = _normalize_axis(axis, x.ndim)
    dim = x.shape[axis]
    keep = np.nonzero(condition[:dim])[0]
    return np.take(x, keep, axis=axis)


@kernel("NonZero", since=9)
def non_zero(ctx, x):
    x = x.reshape(1) if x.ndim == 0 else x    # a scalar answers like a one-element vector
    return np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)


def _sorted_order(x, largest: int):
    """Positions along the last axis in TopK order, ties by lower index first."""
    if not largest:
        return np.argsort(x, axis=-1, kind="stable")
    # Descending with ties in index order: stable-sort the reversed axis ascending, read
    # the result backwards and map positions in the reversed axis back to originals.
    order = np.argsort(np.flip(x, -1), axis=-1, kind="stable")
    return x.shape[-1] - 1 - np.flip(order, -1)


def _top_k_by_partition(x, count: int, largest: int):
    """TopK of a 2-D array along its last axis without sorting whole rows: keep every
    element strictly better than the k-th value plus the lowest-index ties with it, then
    sort just those `count` candidates."""
    rows, n = x.shape
    kth = np.partition(x, n - count if largest else count - 1, axis=-1)
    kth = kth[:, n - count if largest else count - 1][:, None]
    better = x > kth if largest else x < kth
    ties = x == kth
    ties_needed = count - better.sum(axis=-1, keepdims=True)
    chosen = better | (ties & (np.cumsum(ties, axis=-1) <= ties_needed))
    candidates = np.nonzero(chosen)[1].reshape(rows, count)     # in index order per row
    order = _sorted_order(np.take_along_axis(x, candidates, axis=-1), largest)
    return np.take_along_axis(candidates, order, axis=-1)


@kernel("TopK")
def top_k(ctx, x, k=None, axis=-1, largest=1, sorted=1):
    # k is an attribute before opset 10 and a one-element input after; `sorted=0` leaves
    # the order unspecified, so the sorted order is returned in every case.
    count = int(np.asarray(k).reshape(-1)[0])
    axis = _normalize_axis(axis, x.ndim)
    dim = x.shape[axis]
    if not 0 <= count <= dim:
        raise ValueError(f"TopK k={count} is out of range for axis of size {dim}")
    rows = np.moveaxis(x, axis, -1)
    flat = rows.reshape(-1, dim)
    partition_pays = 0 < count * 8 < dim and dim >= 256 and x.dtype.kind in "iuf"
    if partition_pays and not (x.dtype.kind == "f" and np.isnan(flat).any()):
        indices = _top_k_by_partition(flat, count, largest)
    else:
        indices = _sorted_order(flat, largest)[:, :count]
    indices = np.moveaxis(indices.reshape(rows.shape[:-1] + (count,)), -1, axis)
    indices = indices.astype(np.int64, copy=False)
    return np.take_along_axis(x, indices, axis=axis), indices


@kernel("Unique", since=11)
def unique(ctx, x, axis=None, sorted=1):
    if axis is None:
        values, first, inverse, counts = np.unique(
            x.reshape(-1), return_index=True, return_inverse=True, return_counts=True)
    else:
        axis = _normalize_axis(axis, x.ndim)
        values, first, inverse, counts = np.unique(
            x, axis=axis, return_index=True, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    if not sorted:
        # Reorder by first occurrence; `rank` maps a sorted position to its new position.
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        values = np.take(values, order, axis=0 if axis is None else axis)
        first, counts, inverse = first[order], counts[order], rank[inverse]
    as_int64 = [a.astype(np.int64, copy=False) for a in (first, inverse, counts)]
    return (values, *as_int64)


@kernel("ReverseSequence", since=10)
def reverse_sequence(ctx, x, sequence_lens, batch_axis=1, time_axis=0):
    batch_axis = _normalize_axis(batch_axis, x.ndim)
    time_axis = _normalize_axis(time_axis, x.ndim)
    if batch_axis == time_axis:
        raise ValueError("ReverseSequence batch_axis and time_axis must differ")
    moved = np.moveaxis(x, (batch_axis, time_axis), (0, 1))        # (batch, time, ...)
    lengths = np.asarray(sequence_lens).astype(np.int64).reshape(-1, 1)
    time = np.arange(moved.shape[1]).reshape(1, -1)
    source = np.where(time < lengths, lengths - 1 - time, time)     # (batch, time)
    source = source.reshape(source.shape + (1,) * (moved.ndim - 2))
    picked = np.take_along_axis(moved, source, axis=1)
    return np.moveaxis(picked, (0, 1), (batch_axis, time_axis))
