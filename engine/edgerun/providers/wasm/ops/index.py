"""Indexed data movement and scans (index.c) for any element type: GatherElements,
ScatterElements (and the old Scatter), GatherND, ScatterND, Trilu, CumSum, CumProd, OneHot,
TopK, Hardmax, TensorScatter and Unique."""
from __future__ import annotations

from ....ir import dtypes
from . import operator
from .common import (contiguous_strides, converted, float_or_refused, refuse,
                     host_floats, normalize_axis, product)
from .tensor import CAST_TYPES, copy_strided, take, transpose
from ..device import SMALL_INTS, WasmTensor

SCATTER_REDUCTIONS = {"none": 0, "add": 1, "mul": 2, "max": 3, "min": 4}
INDEX_TYPES = (dtypes.INT64, dtypes.INT32)


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _indices(dev, t: WasmTensor, op: str) -> WasmTensor:
    if t.elem_type not in INDEX_TYPES:
        raise TypeError(f"{op} indices must be int64 or int32, got "
                        f"{dtypes.type_string(t.elem_type)}")
    return t


def _out_of_range(dev, op: str, indices: WasmTensor, position: int, limit: str):
    value = dev.ints(indices)[position] if indices.size <= SMALL_INTS else "?"
    return IndexError(f"{op} index {value} (position {position}) is out of range for {limit}")


def check_scatter(node, opset) -> str:
    reduction = _text(node.attr("reduction", "none"))
    return "" if reduction in SCATTER_REDUCTIONS else f"reduction={reduction!r}"


def _typed_or_refused(dev, node, opset, run, reduce=False):
    """`run` when the data's element type is one the kernels handle (any 1-8 byte type for
    copies, the numeric types where values combine), else refused."""

    def checked(ctx, data, *rest, **attrs):
        ok = isinstance(data, WasmTensor) and (data.elem_type in CAST_TYPES if reduce else
                                               data.itemsize in (1, 2, 4, 8))
        return run(ctx, data, *rest) if ok else refuse(node, data, *rest)
    return checked


@operator("GatherElements", "ScatterElements", "Scatter", check=check_scatter)
def bind_elements(dev, node, opset):
    scatter = int(node.op_type != "GatherElements")
    axis_attr = int(node.attr("axis", 0))
    reduction = SCATTER_REDUCTIONS[_text(node.attr("reduction", "none"))]

    def run(ctx, data, indices, updates=None):
        indices = _indices(dev, indices, node.op_type)
        rank = len(data.shape)
        axis = normalize_axis(axis_attr, rank)
        if len(indices.shape) != rank or (scatter and updates.shape != indices.shape):
            raise ValueError(f"{node.op_type}: indices {list(indices.shape)}"
                             f"{f' and updates {list(updates.shape)}' if scatter else ''} must "
                             f"have the rank of data {list(data.shape)}"
                             f"{' and match' if scatter else ''}")
        if scatter:
            y = dev.empty(data.shape, data.elem_type)
            dev.call("er_memcpy", y.ptr, data.ptr, data.nbytes)
            dst, src = y, updates
        else:
            y = dev.empty(indices.shape, data.elem_type)
            dst, src = y, data
        if indices.size == 0:
            return y
        dev.set_args([rank, axis, *indices.shape, *contiguous_strides(data.shape),
                      data.shape[axis]])
        bad = dev.call("er_elements", scatter, dst.ptr, src.ptr, indices.ptr,
                       int(indices.elem_type == dtypes.INT64), data.elem_type, data.itemsize,
                       reduction)
        if bad:
            raise _out_of_range(dev, node.op_type, indices, -1 - bad,
                                f"axis {axis} of size {data.shape[axis]}")
        return y
    return _typed_or_refused(dev, node, opset, run, reduce=bool(reduction))


@operator("GatherND", "ScatterND", check=check_scatter)
def bind_nd(dev, node, opset):
    scatter = int(node.op_type == "ScatterND")
    batch_dims = int(node.attr("batch_dims", 0))
    reduction = SCATTER_REDUCTIONS[_text(node.attr("reduction", "none"))]

    def run(ctx, data, indices, updates=None):
        indices = _indices(dev, indices, node.op_type)
        k = indices.shape[-1] if indices.shape else 0
        if tuple(indices.shape[:batch_dims]) != tuple(data.shape[:batch_dims]) or \
                k > len(data.shape) - batch_dims or not indices.shape:
            raise ValueError(f"{node.op_type}: indices {list(indices.shape)} do not address "
                             f"data {list(data.shape)} (batch_dims {batch_dims})")
        batches = product(data.shape[:batch_dims])
        per_batch = product(indices.shape[batch_dims:-1])
        slice_shape = data.shape[batch_dims + k:]
        out_shape = tuple(indices.shape[:-1]) + tuple(slice_shape)
        if scatter:
            if tuple(updates.shape) != out_shape:
                raise ValueError(f"ScatterND: updates {list(updates.shape)} must have shape "
                                 f"{list(out_shape)}")
            y = dev.empty(data.shape, data.elem_type)
            dev.call("er_memcpy", y.ptr, data.ptr, data.nbytes)
            src = updates
        else:
            y = dev.empty(out_shape, data.elem_type)
            src = data
        if batches * per_batch == 0 or (not scatter and y.size == 0):
            return y
        inner = data.shape[batch_dims:]
        dev.set_args([*inner[:k], *contiguous_strides(inner)[:k]])
        bad = dev.call("er_nd", scatter, y.ptr, src.ptr, indices.ptr,
                       int(indices.elem_type == dtypes.INT64), batches, per_batch, k,
                       product(slice_shape), product(inner), data.elem_type, data.itemsize,
                       reduction)
        if bad:
            raise _out_of_range(dev, node.op_type, indices, -1 - bad,
                                f"data {list(data.shape)}")
        return y
    return _typed_or_refused(dev, node, opset, run, reduce=bool(reduction))


@operator("Trilu")
def bind_trilu(dev, node, opset):
    upper = int(node.attr("upper", 1))

    def run(ctx, x, k=None):
        if len(x.shape) < 2:
            raise ValueError(f"Trilu input must be at least 2-D, got {list(x.shape)}")
        offset = dev.ints(k)[0] if k is not None else 0
        y = dev.empty(x.shape, x.elem_type)
        if y.size:
            rows, cols = x.shape[-2:]
            dev.call("er_trilu", y.ptr, x.ptr, x.itemsize, product(x.shape[:-2]), rows, cols,
                     max(min(offset, 2 ** 31 - 1), -2 ** 31), upper)
        return y
    return _typed_or_refused(dev, node, opset, run)


@operator("CumSum", "CumProd")
def bind_cumulative(dev, node, opset):
    prod = int(node.op_type == "CumProd")
    exclusive, reverse = int(node.attr("exclusive", 0)), int(node.attr("reverse", 0))

    def run(ctx, x, axis_t):
        rank = len(x.shape)
        axis = normalize_axis(int(dev.ints(axis_t)[0]), rank)
        y = dev.empty(x.shape, x.elem_type)
        if y.size:
            dev.call("er_cumulative", prod, x.elem_type, x.ptr, y.ptr, product(x.shape[:axis]),
                     x.shape[axis], product(x.shape[axis + 1:]), exclusive, reverse)
        return y
    return _typed_or_refused(dev, node, opset, run, reduce=True)


@operator("OneHot")
def bind_one_hot(dev, node, opset):
    axis_attr = int(node.attr("axis", -1))

    def run(ctx, indices, depth, values, **_):
        if indices.elem_type not in CAST_TYPES or depth.elem_type not in CAST_TYPES:
            raise TypeError("OneHot indices and depth must be numeric")
        n = int(host_floats(dev, depth)[0])
        if n < 1:
            raise ValueError(f"OneHot depth must be positive, got {n}")
        if values.size != 2:
            raise ValueError(f"OneHot values must hold [off, on], got {values.size} values")
        rank = len(indices.shape) + 1
        axis = normalize_axis(axis_attr, rank)
        shape = list(indices.shape[:axis]) + [n] + list(indices.shape[axis:])
        y = dev.empty(shape, values.elem_type)
        if y.size:
            dev.call("er_fill", y.ptr, values.ptr, values.itemsize, y.size)
            index = converted(dev, indices, dtypes.INT64)
            dev.call("er_one_hot", y.ptr, index.ptr, values.ptr + values.itemsize,
                     values.itemsize, product(indices.shape[:axis]), n,
                     product(indices.shape[axis:]))
        return y
    return run



@operator("TopK")
def bind_top_k(dev, node, opset):
    axis_attr = int(node.attr("axis", -1))
    largest = int(node.attr("largest", 1))
    k_attr = node.attr("k")

    def run(ctx, x, k_t=None):
        count = int(dev.ints(k_t)[0]) if k_t is not None else int(k_attr)
        axis = normalize_axis(axis_attr, len(x.shape))
        n = x.shape[axis]
        if not 0 <= count <= n:
            raise ValueError(f"TopK k={count} is out of range for axis {axis} of size {n}")
        shape = list(x.shape)
        shape[axis] = count
        values, indices = dev.empty(shape, x.elem_type), dev.empty(shape, dtypes.INT64)
        if values.size:
            scratch = dev.scratch(n * 16)
            dev.call("er_top_k", x.ptr, values.ptr, indices.ptr, x.elem_type, x.itemsize,
                     product(x.shape[:axis]), n, product(x.shape[axis + 1:]), count, largest,
                     scratch.ptr)
        return values, indices
    return _typed_or_refused(dev, node, opset, run, reduce=True)


@operator("Hardmax")
def bind_hardmax(dev, node, opset):
    axis_attr = int(node.attr("axis", -1 if opset >= 13 else 1))

    def run(ctx, x):
        rank = len(x.shape)
        axis = normalize_axis(axis_attr, max(rank, 1))
        y = dev.empty(x.shape)
        if y.size:
            if opset < 13:           # the input is flattened to 2-D at axis
                outer, n, inner = product(x.shape[:axis]), product(x.shape[axis:]), 1
            else:
                outer, n, inner = (product(x.shape[:axis]), x.shape[axis],
                                   product(x.shape[axis + 1:]))
            dev.call("er_hardmax", x.ptr, y.ptr, outer, n, inner)
        return y
    return float_or_refused(dev, node, opset, run)


@operator("TensorScatter")
def bind_tensor_scatter(dev, node, opset):
    """The cache with each batch entry's update written along `axis` from its write index
    (linear: must fit; circular: wraps around); one strided copy per batch entry and step."""
    mode = _text(node.attr("mode", "linear"))
    axis_attr = int(node.attr("axis", -2))

    def run(ctx, cache, update, write_indices=None, **_):
        if mode not in ("linear", "circular"):
            raise ValueError(f"TensorScatter mode must be linear or circular, got {mode!r}")
        rank = len(cache.shape)
        axis = normalize_axis(axis_attr, rank)
        if axis == 0 or len(update.shape) != rank or any(
                (u > c) if d == axis else (u != c)
                for d, (c, u) in enumerate(zip(cache.shape, update.shape))):
            raise ValueError(f"TensorScatter update {list(update.shape)} does not fit cache "
                             f"{list(cache.shape)} along axis {axis}")
        batch, max_len, seq = cache.shape[0], cache.shape[axis], update.shape[axis]
        starts = list(dev.ints(converted(dev, write_indices, dtypes.INT64))) \
            if write_indices is not None else [0] * batch
        y = dev.empty(cache.shape, cache.elem_type)
        dev.call("er_memcpy", y.ptr, cache.ptr, cache.nbytes)
        cs, us = contiguous_strides(cache.shape), contiguous_strides(update.shape)
        step_shape = [d for i, d in enumerate(update.shape) if i not in (0, axis)]
        step_cs = [s for i, s in enumerate(cs) if i not in (0, axis)]
        step_us = [s for i, s in enumerate(us) if i not in (0, axis)]
        for b in range(batch):
            if mode == "linear" and seq and (starts[b] < 0 or starts[b] + seq > max_len):
                raise ValueError(f"TensorScatter write index {starts[b]} + {seq} exceeds "
                                 f"{max_len}")
            for t in range(seq):
                at = (starts[b] + t) % max_len if mode == "circular" else starts[b] + t
                dst = y.ptr + (b * cs[0] + at * cs[axis]) * y.itemsize
                src = update.ptr + (b * us[0] + t * us[axis]) * y.itemsize
                copy_strided(dev, dst, src, y.itemsize, step_shape or [1], step_cs or [1],
                             step_us or [1])
        return y
    return run


@operator("Unique")
def bind_unique(dev, node, opset):
    """The unique elements (or slices along `axis`), found on the host: sorted ascending (NaN
    last, all NaNs one value) or in order of first appearance; with the first index, the
    inverse indices and the counts. The values are gathered from x, keeping its bits."""
    axis_attr = node.attr("axis")
    keep_sorted = int(node.attr("sorted", 1))

    def run(ctx, x, **_):
        if x.elem_type not in CAST_TYPES:
            raise TypeError(f"Unique of {dtypes.type_string(x.elem_type)} has no wasm kernel")
        if axis_attr is None:
            source, axis = x.view((x.size,)), 0
        else:
            axis = normalize_axis(int(axis_attr), len(x.shape))
            source = x
        moved = transpose(dev, source, [axis] + [a for a in range(len(source.shape))
                                                 if a != axis]) if axis else source
        rows, width = moved.shape[0], product(moved.shape[1:])
        flat = host_floats(dev, moved)
        keys = [tuple((1, 0.0) if v != v else (0, v) for v in flat[r * width:(r + 1) * width])
                for r in range(rows)]
        first: dict = {}
        for r, k in enumerate(keys):
            first.setdefault(k, r)
        uniques = sorted(first) if keep_sorted else list(first)
        position = {k: i for i, k in enumerate(uniques)}
        counts = [0] * len(uniques)
        for k in keys:
            counts[position[k]] += 1
        picks = [first[k] for k in uniques]
        inverse = [position[k] for k in keys]
        return (take(dev, source, axis, picks),
                *(dev.from_ints(v, (len(v),), dtypes.INT64) for v in (picks, inverse, counts)))
    return run
