"""Tensor construction and layout kernels: constants, shapes, reshaping, joining and
splitting, transposition, broadcasting, padding, ranges and block rearrangements.

Shape-like outputs are int64. Kernels that only reinterpret layout (Reshape, Squeeze,
Transpose, ...) may return views of their input: inputs are never written to, and
neither are outputs, so sharing memory is safe and saves a copy.
"""
import math

import numpy as np

from ....ir.dtypes import numpy_dtype
from ....ir.shape_rules import split_lengths
from ....runtime.limits import check_allocation
from ..registry import kernel


# ---------------------------------------------------------------- shared helpers


def _ints(values) -> list:
    """A 1-D integer tensor (or list, or scalar) as a list of Python ints."""
    if type(values) is np.ndarray and values.ndim == 1 and values.dtype.kind in "iu":
        return values.tolist()
    return [int(v) for v in np.asarray(values).reshape(-1).tolist()]


def _scalar_int(value) -> int:
    """A 0-d or one-element tensor (or Python number) as a Python int."""
    return int(np.asarray(value).reshape(-1)[0])


def _normalize_axis(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def _normalize_axes(axes, rank: int) -> list:
    return [_normalize_axis(int(a), rank) for a in axes]


def _as_str(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _zero_of(dtype):
    """The default fill value of a dtype: 0, False or the empty string."""
    if np.dtype(dtype).kind == "O":
        return ""
    return np.zeros((), dtype=dtype)[()]


# ---------------------------------------------------------------- constants


@kernel("Constant")
def constant(ctx, value=None, sparse_value=None, value_float=None, value_floats=None,
             value_int=None, value_ints=None, value_string=None, value_strings=None):
    if value is not None:
        return value
    if sparse_value is not None:
        return sparse_value
    if value_float is not None:
        return np.array(value_float, dtype=np.float32)
    if value_floats is not None:
        return np.array(value_floats, dtype=np.float32).reshape(-1)
    if value_int is not None:
        return np.array(value_int, dtype=np.int64)
    if value_ints is not None:
        return np.array(value_ints, dtype=np.int64).reshape(-1)
    if value_string is not None:
        out = np.empty((), dtype=object)
        out[()] = _as_str(value_string)
        return out
    if value_strings is not None:
        out = np.empty(len(value_strings), dtype=object)
        out[:] = [_as_str(s) for s in value_strings]
        return out
    raise ValueError("Constant needs one of the value attributes, got none")


@kernel("ConstantOfShape", since=9)
def constant_of_shape(ctx, shape, value=None):
    if value is None:
        value = np.zeros(1, dtype=np.float32)
    if value.size != 1:
        raise ValueError(f"ConstantOfShape value must have one element, got {value.size}")
    dims = tuple(_ints(shape))
    check_allocation(dims, value.dtype.itemsize)
    return np.full(dims, value.reshape(-1)[0], dtype=value.dtype)


@kernel("EyeLike", since=9)
def eye_like(ctx, x, dtype=None, k=0):
    if x.ndim != 2:
        raise ValueError(f"EyeLike expects a 2-D input, got rank {x.ndim}")
    out_dtype = x.dtype if dtype is None else numpy_dtype(dtype)
    return np.eye(x.shape[0], x.shape[1], k=k, dtype=bool).astype(out_dtype)


@kernel("Range", since=11)
def range_op(ctx, start, limit, delta, stash_type=1):
    dtype = start.dtype
    if dtype.kind in "iu":
        first, stop, step = (_scalar_int(v) for v in (start, limit, delta))
        if step == 0:
            raise ValueError("Range delta must not be zero")
        count = max(-((first - stop) // step), 0)      # ceil((stop - first) / step)
        check_allocation((count,), 8)
        return (first + np.arange(count, dtype=np.int64) * step).astype(dtype)
    # float16/bfloat16 compute in the stash type (float by default); wider floats in double.
    low_precision = dtype.itemsize <= 2
    compute = np.float32 if low_precision and stash_type == 1 else np.float64
    first, stop, step = (np.asarray(v).astype(compute).item() for v in (start, limit, delta))
    if step == 0:
        raise ValueError("Range delta must not be zero")
    if not math.isfinite((stop - first) / step):
        raise ValueError(f"Range from {first} to {stop} by {step} has no finite length")
    count = max(math.ceil((stop - first) / step), 0)
    check_allocation((count,), np.dtype(compute).itemsize)
    values = np.asarray(first, compute) + np.arange(count, dtype=compute) * np.asarray(step, compute)
    return values.astype(dtype)


# ---------------------------------------------------------------- shape queries


@kernel("Shape")
def shape(ctx, data, start=0, end=None):
    return np.array(data.shape[start:end], dtype=np.int64)


@kernel("Size")
def size(ctx, data):
    return np.array(data.size, dtype=np.int64)


# ---------------------------------------------------------------- reshaping


def _target_shape(input_shape: tuple, requested: list, allowzero: int) -> tuple:
    """Resolve Reshape's 0 (copy the input dim) and -1 (infer) entries."""
    dims = list(requested)
    if dims.count(-1) > 1:
        raise ValueError(f"Reshape shape {requested} has more than one -1")
    if not allowzero:
        for i, d in enumerate(dims):
            if d == 0:
                if i >= len(input_shape):
                    raise ValueError(f"Reshape shape {requested}: 0 at {i} has no input dim to copy")
                dims[i] = input_shape[i]
    if -1 in dims:
        known = math.prod(d for d in dims if d != -1)
        total = math.prod(input_shape)
        if known == 0 or total % known:
            raise ValueError(f"cannot reshape {tuple(input_shape)} to {requested}")
        dims[dims.index(-1)] = total // known
    return tuple(dims)


@kernel("Reshape")
def reshape(ctx, data, shape=None, allowzero=0, **_):
    # `shape` is an attribute before opset 5 (beside the ignorable `consumed_inputs`) and
    # an input from 5; `allowzero` arrives in opset 14.
    return data.reshape(_target_shape(data.shape, _ints(shape), allowzero))


@kernel("Flatten")
def flatten(ctx, x, axis=1):
    if axis < 0:
        axis += x.ndim
    if not 0 <= axis <= x.ndim:
        raise ValueError(f"Flatten axis {axis} is out of range for rank {x.ndim}")
    return x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))


# Squeeze and Unsqueeze take `axes` as an attribute before opset 13 and as an input from
# 13; either way it arrives as the same parameter.


def _one_axis(axes):
    """The axis of a one-entry integer tensor, else None."""
    if type(axes) is np.ndarray and axes.size == 1 and axes.dtype.kind in "iu":
        return axes.item()             # a Python int
    return None


@kernel("Squeeze")
def squeeze(ctx, data, axes=None):
    axis = _one_axis(axes)
    shape = data.shape
    if axis is not None and -len(shape) <= axis < len(shape) and shape[axis] == 1:
        if axis < 0:
            axis += len(shape)
        return data.reshape(shape[:axis] + shape[axis + 1:])
    if axes is None or np.asarray(axes).size == 0:
        return data.reshape(tuple(d for d in data.shape if d != 1))
    axes = _normalize_axes(_ints(axes), data.ndim)
    for a in axes:
        if data.shape[a] != 1:
            raise ValueError(f"Squeeze axis {a} has size {data.shape[a]}, expected 1")
    return data.reshape(tuple(d for i, d in enumerate(data.shape) if i not in axes))


@kernel("Unsqueeze")
def unsqueeze(ctx, data, axes):
    axis = _one_axis(axes)
    shape = data.shape
    if axis is not None and -len(shape) - 1 <= axis <= len(shape):
        if axis < 0:
            axis += len(shape) + 1
        return data.reshape(shape[:axis] + (1,) + shape[axis:])
    axes = _ints(axes)
    out_rank = data.ndim + len(axes)
    axes = _normalize_axes(axes, out_rank)
    if len(set(axes)) != len(axes):
        raise ValueError(f"Unsqueeze axes {axes} contain duplicates")
    dims = iter(data.shape)
    return data.reshape(tuple(1 if i in axes else next(dims) for i in range(out_rank)))


# ---------------------------------------------------------------- joining and splitting


@kernel("Concat")
def concat(ctx, *inputs, axis=1):
    # axis defaults to 1 only in opset 1; later versions require it.
    if not inputs:
        raise ValueError("Concat needs at least one input")
    return np.concatenate(inputs, axis=_normalize_axis(axis, inputs[0].ndim))


@kernel("Split")
def split(ctx, x, split_input=None, axis=0, split=None, num_outputs=None):
    # `split` is an attribute before opset 13 (opset 1 also takes it as an input) and an
    # input from 13; `num_outputs` (opset 18) asks for near-equal chunks.
    axis = _normalize_axis(axis, x.ndim)
    lengths = split_input if split_input is not None else split
    if lengths is not None and np.asarray(lengths).size > 0:
        lengths = _ints(lengths)
        if sum(lengths) != x.shape[axis]:
            raise ValueError(f"Split lengths {lengths} do not add up to dim {x.shape[axis]}")
    else:
        lengths = split_lengths(x.shape[axis], num_outputs or ctx.num_outputs)
    lead = (slice(None),) * axis
    parts, start = [], 0
    for length in lengths:                 # views, as np.split gives (it is much slower)
        parts.append(x[lead + (slice(start, start + length),)])
        start += length
    return tuple(parts)


# ---------------------------------------------------------------- layout


@kernel("Transpose")
def transpose(ctx, data, perm=None):
    return np.transpose(data, perm)


@kernel("Expand", since=8)
def expand(ctx, x, shape):
    out_shape = np.broadcast_shapes(x.shape, tuple(_ints(shape)))
    check_allocation(out_shape, x.dtype.itemsize)
    return np.array(np.broadcast_to(x, out_shape))


@kernel("Tile")
def tile_1(ctx, x, tiles, axis):
    repeats = [1] * x.ndim
    repeats[_normalize_axis(_scalar_int(axis), x.ndim)] = _scalar_int(tiles)
    check_allocation([d * r for d, r in zip(x.shape, repeats)], x.dtype.itemsize)
    return np.tile(x, repeats)


@kernel("Tile", since=6)
def tile(ctx, x, repeats):
    repeats = _ints(repeats)
    if len(repeats) != x.ndim:
        raise ValueError(f"Tile repeats {repeats} must have one entry per dim of rank {x.ndim}")
    check_allocation([d * r for d, r in zip(x.shape, repeats)], x.dtype.itemsize)
    return np.tile(x, repeats)


@kernel("Trilu", since=14)
def trilu(ctx, x, k=None, upper=1):
    offset = 0 if k is None else _scalar_int(k)
    rows, cols = x.shape[-2:]
    diagonal = np.arange(cols)[None, :] - np.arange(rows)[:, None]
    keep = diagonal >= offset if upper else diagonal <= offset
    return np.where(keep, x, _zero_of(x.dtype)).astype(x.dtype, copy=False)


# ---------------------------------------------------------------- padding


def _pad(data, begins: list, ends: list, mode: str, value):
    """Pad (or crop, where negative) each axis by begins[i] / ends[i]."""
    mode = _as_str(mode)
    crop = tuple(slice(max(-b, 0), data.shape[i] - max(-e, 0))
                 for i, (b, e) in enumerate(zip(begins, ends)))
    data = data[crop]
    widths = [(max(b, 0), max(e, 0)) for b, e in zip(begins, ends)]
    if mode == "constant":
        out_shape = tuple(d + b + e for d, (b, e) in zip(data.shape, widths))
        fill = _zero_of(data.dtype) if value is None else value
        out = np.full(out_shape, fill, dtype=data.dtype)
        out[tuple(slice(b, b + d) for d, (b, _) in zip(data.shape, widths))] = data
        return out
    if mode not in ("reflect", "edge", "wrap"):
        raise ValueError(f"Pad mode must be constant, reflect, edge or wrap, got {mode!r}")
    if not any(b or e for b, e in widths):
        return data
    for axis, (before, after) in enumerate(widths):
        if before or after:
            padded = _pad_axis_by_slices(data, axis, before, after, mode)
            if padded is None:                  # repeated reflection or wrap: np.pad's job
                pad_widths = [(0, 0)] * axis + widths[axis:]
                return np.pad(data, pad_widths, mode=mode)  # type: ignore[call-overload]
            data = padded
    return data


def _pad_axis_by_slices(data, axis: int, before: int, after: int, mode: str):
    """One axis padded in `mode` by joining slices of it, or None where the padding is
    wider than the axis allows (np.pad handles those; it is much slower on small tensors)."""
    size = data.shape[axis]
    lead = (slice(None),) * axis

    def part(start, stop, step=1):
        return data[lead + (slice(start, stop, step),)]

    if mode == "reflect":
        if before >= size or after >= size:
            return None
        head = part(before, 0, -1)                          # elements before .. 1
        tail = part(size - 2, size - 2 - after, -1) if size - 2 - after >= 0 else \
            part(size - 2, None, -1)                        # elements size-2 .. size-1-after
    elif mode == "edge":
        if size == 0:
            return None
        head = np.repeat(part(0, 1), before, axis=axis)
        tail = np.repeat(part(size - 1, size), after, axis=axis)
    else:   # wrap
        if before > size or after > size:
            return None
        head = part(size - before, size)
        tail = part(0, after)
    return np.concatenate([head, data, tail], axis=axis)


def _split_pads(pads: list, rank: int, axes=None):
    """ONNX pads [b0, b1, ..., e0, e1, ...] (for `axes`) as per-dim begin and end lists."""
    axes = list(range(rank)) if axes is None else _normalize_axes(_ints(axes), rank)
    if len(pads) != 2 * len(axes):
        raise ValueError(f"Pad expects {2 * len(axes)} pads for axes {axes}, got {len(pads)}")
    begins, ends = [0] * rank, [0] * rank
    for i, a in enumerate(axes):
        begins[a], ends[a] = pads[i], pads[len(axes) + i]
    return begins, ends


@kernel("Pad")
def pad_1(ctx, data, pads=None, paddings=None, mode="constant", value=0.0):
    # opset 1 names the attribute `paddings`, opset 2 `pads`; both use the same layout.
    pads = pads if pads is not None else paddings
    begins, ends = _split_pads(list(pads), data.ndim)
    return _pad(data, begins, ends, mode, np.asarray(value).astype(data.dtype)[()])


# reflect/edge/wrap Pad of tensors up to this size gathers through one prepared index
_GATHERED_PAD_MAX = 1 << 16


def _pad_gather_index(shape: tuple, pads, axes, mode: str) -> np.ndarray:
    """For each output element of Pad in `mode`, the flat position of `shape` it copies:
    the padding applied to an array of positions."""
    begins, ends = _split_pads(_ints(pads), len(shape), axes)
    positions = np.arange(math.prod(shape)).reshape(shape)
    index = _pad(positions, begins, ends, mode, None)
    index.flags.writeable = False
    return index


@kernel("Pad", since=11)
def pad(ctx, data, pads, constant_value=None, axes=None, mode="constant"):
    mode = _as_str(mode)
    if mode != "constant" and ctx is not None and data.size <= _GATHERED_PAD_MAX:
        # streaming models pad the same small window on every call: one take
        index = ctx.prepared(("pad", data.shape, mode), (pads, axes),
                             lambda: _pad_gather_index(data.shape, pads, axes, mode))
        return data.reshape(-1).take(index)
    begins, ends = _split_pads(_ints(pads), data.ndim, axes)
    check_allocation([d + b + e for d, b, e in zip(data.shape, begins, ends)], data.itemsize)
    fill = None
    if constant_value is not None and np.asarray(constant_value).size:
        fill = np.asarray(constant_value).reshape(-1)[0]
    return _pad(data, begins, ends, mode, fill)


@kernel("CenterCropPad", since=18)
def center_crop_pad(ctx, input_data, shape, axes=None):
    rank = input_data.ndim
    axes = list(range(rank)) if axes is None else _normalize_axes(axes, rank)
    targets = _ints(shape)
    if len(targets) != len(axes):
        raise ValueError(f"CenterCropPad shape {targets} must match axes {axes}")
    out_shape = list(input_data.shape)
    src = [slice(None)] * rank
    dst = [slice(None)] * rank
    for axis, target in zip(axes, targets):
        dim = input_data.shape[axis]
        out_shape[axis] = target
        if target < dim:        # crop: window start rounded down
            start = (dim - target) // 2
            src[axis] = slice(start, start + target)
        elif target > dim:      # pad: the odd extra element goes to the end
            start = (target - dim) // 2
            dst[axis] = slice(start, start + dim)
    check_allocation(out_shape, input_data.itemsize)
    out = np.full(tuple(out_shape), _zero_of(input_data.dtype), dtype=input_data.dtype)
    out[tuple(dst)] = input_data[tuple(src)]
    return out


# ---------------------------------------------------------------- one-hot


@kernel("OneHot", since=9)
def one_hot(ctx, indices, depth, values, axis=-1):
    depth = int(np.asarray(depth).reshape(-1)[0])
    values = np.asarray(values).reshape(-1)
    if values.size != 2:
        raise ValueError(f"OneHot values must be [off_value, on_value], got {values.size} elements")
    rank = indices.ndim + 1
    axis = _normalize_axis(axis, rank)
    check_allocation(indices.shape + (depth,), max(values.dtype.itemsize, 1))
    idx = indices.astype(np.int64)
    idx = np.where(idx < 0, idx + depth, idx)
    hot = idx[..., None] == np.arange(depth, dtype=np.int64)   # out-of-range rows stay False
    hot = np.moveaxis(hot, -1, axis)
    return np.where(hot, values[1], values[0]).astype(values.dtype, copy=False)


# ---------------------------------------------------------------- block rearrangements


def _check_nchw(x, op: str):
    if x.ndim != 4:
        raise ValueError(f"{op} expects a 4-D NCHW input, got rank {x.ndim}")


@kernel("DepthToSpace")
def depth_to_space(ctx, x, blocksize, mode="DCR"):
    _check_nchw(x, "DepthToSpace")
    b, c, h, w = x.shape
    bs = blocksize
    if c % (bs * bs):
        raise ValueError(f"DepthToSpace channels {c} not divisible by blocksize^2 {bs * bs}")
    mode = _as_str(mode)
    if mode == "DCR":
        tmp = x.reshape(b, bs, bs, c // (bs * bs), h, w).transpose(0, 3, 4, 1, 5, 2)
    elif mode == "CRD":
        tmp = x.reshape(b, c // (bs * bs), bs, bs, h, w).transpose(0, 1, 4, 2, 5, 3)
    else:
        raise ValueError(f"DepthToSpace mode must be DCR or CRD, got {mode!r}")
    return tmp.reshape(b, c // (bs * bs), h * bs, w * bs)


@kernel("SpaceToDepth")
def space_to_depth(ctx, x, blocksize, mode="DCR"):
    # `mode` arrives in opset 28; earlier versions behave as DCR.
    _check_nchw(x, "SpaceToDepth")
    b, c, h, w = x.shape
    bs = blocksize
    if h % bs or w % bs:
        raise ValueError(f"SpaceToDepth spatial dims {(h, w)} not divisible by blocksize {bs}")
    tmp = x.reshape(b, c, h // bs, bs, w // bs, bs)
    mode = _as_str(mode)
    if mode == "DCR":
        tmp = tmp.transpose(0, 3, 5, 1, 2, 4)
    elif mode == "CRD":
        tmp = tmp.transpose(0, 1, 3, 5, 2, 4)
    else:
        raise ValueError(f"SpaceToDepth mode must be DCR or CRD, got {mode!r}")
    return tmp.reshape(b, c * bs * bs, h // bs, w // bs)
