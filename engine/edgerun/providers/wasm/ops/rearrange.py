"""Rearranging operators for any element type, as strided copies and gathers:
SpaceToDepth, DepthToSpace, Tile, Compress, ReverseSequence, EyeLike, CenterCropPad and
NonZero (whose output size depends on the data: its indices are found on the host)."""
from __future__ import annotations

from array import array

from ....ir import dtypes
from . import operator
from .common import contiguous_strides, converted, normalize_axis
from .tensor import CAST_TYPES, copy_strided, take, transpose
from ..device import WasmTensor


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _blocks(x: WasmTensor, b: int, op: str) -> tuple:
    if len(x.shape) != 4 or b < 1:
        raise ValueError(f"{op} takes a 4-D input and a positive blocksize, got "
                         f"{list(x.shape)} and {b}")
    return x.shape


def check_mode(node, opset) -> str:
    mode = _text(node.attr("mode", "DCR"))
    return "" if mode in ("DCR", "CRD") else f"mode={mode!r}"


@operator("SpaceToDepth", check=check_mode)
def bind_space_to_depth(dev, node, opset):
    b = int(node.attr("blocksize"))
    perm = [0, 1, 3, 5, 2, 4] if _text(node.attr("mode", "DCR")) == "CRD" else [0, 3, 5, 1, 2, 4]

    def run(ctx, x, **_):
        n, c, h, w = _blocks(x, b, "SpaceToDepth")
        if h % b or w % b:
            raise ValueError(f"SpaceToDepth: height {h} and width {w} must be multiples of {b}")
        y = transpose(dev, x.view((n, c, h // b, b, w // b, b)), perm)
        return y.view((n, c * b * b, h // b, w // b))
    return run


@operator("DepthToSpace", check=check_mode)
def bind_depth_to_space(dev, node, opset):
    b = int(node.attr("blocksize"))
    crd = _text(node.attr("mode", "DCR")) == "CRD"

    def run(ctx, x, **_):
        n, c, h, w = _blocks(x, b, "DepthToSpace")
        if c % (b * b):
            raise ValueError(f"DepthToSpace: {c} channels are not a multiple of {b * b}")
        if crd:
            y = transpose(dev, x.view((n, c // (b * b), b, b, h, w)), [0, 1, 4, 2, 5, 3])
        else:
            y = transpose(dev, x.view((n, b, b, c // (b * b), h, w)), [0, 3, 4, 1, 5, 2])
        return y.view((n, c // (b * b), h * b, w * b))
    return run


@operator("Tile")
def bind_tile(dev, node, opset):
    def run(ctx, x, repeats_t, **_):
        repeats = list(dev.ints(repeats_t))
        if len(repeats) != len(x.shape) or any(r < 0 for r in repeats):
            raise ValueError(f"Tile: repeats {repeats} must be {len(x.shape)} non-negative "
                             f"counts, one per axis of {list(x.shape)}")
        # (r0, d0, r1, d1, ...) read from x with stride 0 along the repeat axes
        wide = [v for r, d in zip(repeats, x.shape) for v in (r, d)]
        strides = [v for s in contiguous_strides(x.shape) for v in (0, s)]
        y = dev.empty([r * d for r, d in zip(repeats, x.shape)], x.elem_type)
        copy_strided(dev, y.ptr, x.ptr, x.itemsize, wide, contiguous_strides(wide), strides)
        return y
    return run


def _truths(dev, t: WasmTensor) -> list:
    """The elements of a numeric tensor as booleans, read to the host."""
    flags = converted(dev, t, dtypes.BOOL)
    return list(bytes(dev.read(flags.ptr, flags.size))) if flags.size else []


@operator("Compress")
def bind_compress(dev, node, opset):
    axis_attr = node.attr("axis")

    def run(ctx, x, condition, **_):
        keep = _truths(dev, condition)
        if axis_attr is None:
            x, axis = x.view((x.size,)), 0
        else:
            axis = normalize_axis(int(axis_attr), len(x.shape))
        if len(keep) > x.shape[axis]:
            raise ValueError(f"Compress: condition has {len(keep)} entries, more than axis "
                             f"{axis} of {list(x.shape)} holds")
        return take(dev, x, axis, [i for i, k in enumerate(keep) if k])
    return run


@operator("ReverseSequence")
def bind_reverse_sequence(dev, node, opset):
    batch_axis, time_axis = int(node.attr("batch_axis", 1)), int(node.attr("time_axis", 0))

    def run(ctx, x, lengths_t, **_):
        lengths = dev.ints(converted(dev, lengths_t, dtypes.INT64))
        if len(x.shape) < 2 or {batch_axis, time_axis} != {0, 1} or \
                len(lengths) != x.shape[batch_axis]:
            raise ValueError(f"ReverseSequence: input {list(x.shape)} with batch_axis "
                             f"{batch_axis}, time_axis {time_axis} and {len(lengths)} lengths")
        y = dev.empty(x.shape, x.elem_type)
        copy_strided(dev, y.ptr, x.ptr, x.itemsize, x.shape, contiguous_strides(x.shape),
                     contiguous_strides(x.shape))
        strides = contiguous_strides(x.shape)
        bs, ts = strides[batch_axis], strides[time_axis]
        for b, length in enumerate(lengths):
            if not 0 <= length <= x.shape[time_axis]:
                raise ValueError(f"ReverseSequence: length {length} of batch {b} is outside "
                                 f"[0, {x.shape[time_axis]}]")
            if length > 1:      # the first `length` steps of batch b, read backwards
                shape = [length] + list(x.shape[2:])
                inner = strides[2:]
                dst = y.ptr + b * bs * x.itemsize
                src = x.ptr + (b * bs + (length - 1) * ts) * x.itemsize
                copy_strided(dev, dst, src, x.itemsize, shape, [ts] + inner, [-ts] + inner)
        return y
    return run


@operator("EyeLike")
def bind_eye_like(dev, node, opset):
    k = int(node.attr("k", 0))
    dtype = node.attr("dtype")

    def run(ctx, x, **_):
        if len(x.shape) != 2:
            raise ValueError(f"EyeLike takes a 2-D input, got {list(x.shape)}")
        elem_type = int(dtype) if dtype is not None else x.elem_type
        if elem_type not in CAST_TYPES:
            raise TypeError(f"EyeLike to {dtypes.type_string(elem_type)} has no wasm kernel")
        rows, cols = x.shape
        y = dev.zeros((rows, cols), elem_type)
        if y.size:
            one = converted(dev, dev.from_floats([1.0], ()), elem_type)
            index = dev.from_ints([r + k for r in range(rows)], (rows,), dtypes.INT64)
            dev.call("er_one_hot", y.ptr, index.ptr, one.ptr, y.itemsize, rows, cols, 1)
        return y
    return run


@operator("CenterCropPad")
def bind_center_crop_pad(dev, node, opset):
    axes_attr = node.attr("axes")

    def run(ctx, x, shape_t, **_):
        rank = len(x.shape)
        axes = [normalize_axis(int(a), rank) for a in axes_attr] if axes_attr \
            else list(range(rank))
        target = list(dev.ints(shape_t))
        if len(target) != len(axes):
            raise ValueError(f"CenterCropPad: shape has {len(target)} entries for "
                             f"{len(axes)} axes")
        out = list(x.shape)
        src_start, dst_start, span = [0] * rank, [0] * rank, list(x.shape)
        for axis, size in zip(axes, target):
            out[axis] = size
            have = x.shape[axis]
            if size < have:                 # crop: the centered window (extra at the end)
                src_start[axis], span[axis] = (have - size) // 2, size
            else:                           # pad: centered (extra padding at the end)
                dst_start[axis] = (size - have) // 2
        y = dev.zeros(out, x.elem_type)
        xs, ys = contiguous_strides(x.shape), contiguous_strides(out)
        src = x.ptr + sum(s * t for s, t in zip(src_start, xs)) * x.itemsize
        dst = y.ptr + sum(s * t for s, t in zip(dst_start, ys)) * x.itemsize
        copy_strided(dev, dst, src, x.itemsize, span, ys, xs)
        return y
    return run


@operator("NonZero")
def bind_non_zero(dev, node, opset):
    def run(ctx, x, **_):
        shape = list(x.shape) or [1]
        strides = contiguous_strides(shape)
        hits = [i for i, v in enumerate(_truths(dev, x)) if v]
        rows = [[(i // s) % d for i in hits] for d, s in zip(shape, strides)]
        y = dev.empty((len(shape), len(hits)), dtypes.INT64)
        if y.size:
            dev.write(y.ptr, array("q", [v for row in rows for v in row]))
        return y
    return run
