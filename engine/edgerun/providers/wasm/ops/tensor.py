"""Data movement for any element type: Transpose, Concat, Slice, Split, Gather, Expand, Cast,
and the metadata-only Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout (inference),
Shape and Size.

Small integer results (shape arithmetic) are computed on the host from the inputs' `ints`
when those are known, and uploaded with their values attached, so a chain like
Shape -> Gather -> Unsqueeze -> Concat -> Reshape never reads linear memory (which would also
keep a run from being recorded as a program, see program.py).
"""
from __future__ import annotations

from ....ir import dtypes
from ....ir.shape_rules import split_lengths
from . import operator
from .common import (broadcast_shape, broadcast_strides, contiguous_strides, converted, refuse,
                     host_floats, host_values, merge_dims, normalize_axis, product)
from .host_math import has_values, wrap
from ..device import INT_FORMATS, SMALL_INTS, WasmTensor

# what er_cast converts between: float32/64, 8- to 64-bit integers, bool
# the numeric types the kernels convert and compute (all but complex and float6)
CAST_TYPES = frozenset(set(range(dtypes.FLOAT, dtypes.FLOAT6E2M3)) -
                       {dtypes.STRING, dtypes.COMPLEX64, dtypes.COMPLEX128})
E8M0_ROUNDING = {"up": 0, "down": 1, "nearest": 2}


def copy_strided(dev, dst_ptr: int, src_ptr: int, itemsize: int, shape, dst_strides,
                 src_strides) -> None:
    if product(shape) == 0:
        return
    dims, (ds, ss) = merge_dims(list(shape), list(dst_strides), list(src_strides))
    dev.set_args(dims + ds + ss)
    dev.call("er_copy_strided", dst_ptr, src_ptr, itemsize, len(dims))


def strided_values(values, shape, strides, offset: int = 0) -> list:
    """copy_strided on host values: the elements of flat `values` a walk over `shape` with
    `strides` (elements) from `offset` reads, in order."""
    index = [offset]
    for d, s in zip(shape, strides):
        index = [base + i * s for base in index for i in range(d)]
    return [values[i] for i in index]


def _host_result(x: WasmTensor, shape) -> bool:
    """True when `x` carries its values and a result of `shape` is small: computed on the host."""
    return x.ints is not None and product(shape) <= SMALL_INTS


def take(dev, x: WasmTensor, axis: int, picks) -> WasmTensor:
    """x's slices at the host-known indices `picks` along `axis` (any element type)."""
    shape = list(x.shape)
    shape[axis] = len(picks)
    y = dev.empty(shape, x.elem_type)
    if y.size:
        index = dev.from_ints(picks, (len(picks),), dtypes.INT64)
        dev.call("er_gather", y.ptr, x.ptr, index.ptr, 1, len(picks), product(x.shape[:axis]),
                 x.shape[axis], product(x.shape[axis + 1:]) * x.itemsize)
    return y


def transpose(dev, x: WasmTensor, perm) -> WasmTensor:
    shape = [x.shape[p] for p in perm]
    src = contiguous_strides(x.shape)
    if _host_result(x, shape):
        return dev.from_ints(strided_values(x.ints, shape, [src[p] for p in perm]), shape,
                             x.elem_type)
    y = dev.empty(shape, x.elem_type)
    copy_strided(dev, y.ptr, x.ptr, x.itemsize, shape, contiguous_strides(shape),
                 [src[p] for p in perm])
    return y


def _small(t) -> bool:
    return t.ints is not None and t.size <= SMALL_INTS


@operator("Transpose")
def bind_transpose(dev, node, opset):
    perm_attr = node.attr("perm")

    def run(ctx, x, **_):
        perm = list(perm_attr) if perm_attr else list(range(len(x.shape)))[::-1]
        if sorted(perm) != list(range(len(x.shape))):
            raise ValueError(f"perm {perm} is not a permutation of {len(x.shape)} axes")
        return transpose(dev, x, perm)
    return run


@operator("Concat")
def bind_concat(dev, node, opset):
    axis_attr = int(node.attr("axis", 0))

    def run(ctx, *xs, **_):
        xs = [x for x in xs if x is not None]
        rank = len(xs[0].shape)
        axis = normalize_axis(axis_attr, rank)
        shape = list(xs[0].shape)
        shape[axis] = sum(x.shape[axis] for x in xs)
        for x in xs:
            if len(x.shape) != rank or x.elem_type != xs[0].elem_type or any(
                    x.shape[i] != shape[i] for i in range(rank) if i != axis):
                raise ValueError(f"Concat inputs {[list(v.shape) for v in xs]} differ off axis "
                                 f"{axis} (or in element type)")
        if all(_host_result(x, shape) for x in xs):
            outer = product(shape[:axis])
            blocks = [(x.ints, product(x.shape[axis:])) for x in xs]
            return dev.from_ints([v for o in range(outer) for values, n in blocks
                                  for v in values[o * n:(o + 1) * n]], shape, xs[0].elem_type)
        y = dev.empty(shape, xs[0].elem_type)
        dst = contiguous_strides(shape)
        offset = 0
        for x in xs:
            copy_strided(dev, y.ptr + offset * dst[axis] * x.itemsize, x.ptr, x.itemsize,
                         x.shape, dst, contiguous_strides(x.shape))
            offset += x.shape[axis]
        return y
    return run


def slice_ranges(shape, starts, ends, axes, steps) -> list:
    """Per axis (start, length, step) after ONNX's clamping rules."""
    rank = len(shape)
    ranges = [(0, d, 1) for d in shape]
    axes = list(axes) if axes else list(range(len(starts)))
    steps = list(steps) if steps else [1] * len(starts)
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = normalize_axis(a, rank, "Slice axis")
        d = shape[a]
        if st == 0:
            raise ValueError("Slice step cannot be 0")
        s = s + d if s < 0 else s
        e = e + d if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), d), min(max(e, 0), d)
            n = max(0, (e - s + st - 1) // st)
        else:
            s, e = min(max(s, 0), d - 1), min(max(e, -1), d - 1)
            n = max(0, (s - e + (-st) - 1) // (-st))
        ranges[a] = (s, n, st)
    return ranges


@operator("Slice")
def bind_slice(dev, node, opset):
    attrs = (node.attr("starts"), node.attr("ends"), node.attr("axes"))

    def run(ctx, x, starts=None, ends=None, axes=None, steps=None, **_):
        if opset < 10:
            s, e, a, st = attrs[0], attrs[1], attrs[2], None
        else:
            s, e, a, st = dev.ints(starts), dev.ints(ends), dev.ints(axes), dev.ints(steps)
        ranges = slice_ranges(x.shape, s, e, a, st)
        shape = [n for _, n, _ in ranges]
        strides = contiguous_strides(x.shape)
        start = sum(r[0] * s for r, s in zip(ranges, strides))
        steps = [r[2] * s for r, s in zip(ranges, strides)]
        if _host_result(x, shape):
            return dev.from_ints(strided_values(x.ints, shape, steps, start), shape, x.elem_type)
        y = dev.empty(shape, x.elem_type)
        copy_strided(dev, y.ptr, x.ptr + start * x.itemsize, x.itemsize, shape,
                     contiguous_strides(shape), steps)
        return y
    return run


@operator("Gather")
def bind_gather(dev, node, opset):
    axis_attr = int(node.attr("axis", 0))

    def run(ctx, x, indices, **_):
        axis = normalize_axis(axis_attr, len(x.shape))
        shape = list(x.shape[:axis]) + list(indices.shape) + list(x.shape[axis + 1:])
        if indices.elem_type not in (dtypes.INT64, dtypes.INT32):
            raise TypeError(f"Gather indices must be int64 or int32, got "
                            f"{dtypes.type_string(indices.elem_type)}")
        if _host_result(x, shape) and _small(indices):
            d = x.shape[axis]
            for i in indices.ints:
                if not -d <= i < d:
                    raise IndexError(f"Gather index {i} is out of range for a dimension of {d}")
            inner = product(x.shape[axis + 1:])
            picks = [i % d for i in indices.ints]
            return dev.from_ints([x.ints[(o * d + i) * inner + k]
                                  for o in range(product(x.shape[:axis])) for i in picks
                                  for k in range(inner)], shape, x.elem_type)
        y = dev.empty(shape, x.elem_type)
        if y.size == 0:
            return y
        inner = product(x.shape[axis + 1:]) * x.itemsize
        bad = dev.call("er_gather", y.ptr, x.ptr, indices.ptr,
                       int(indices.elem_type == dtypes.INT64), indices.size,
                       product(x.shape[:axis]), x.shape[axis], inner)
        if bad:
            i = -1 - bad
            value = dev.ints(indices)[i] if indices.size <= SMALL_INTS else "?"
            raise IndexError(f"Gather index {value} (position {i}) is out of range for axis "
                             f"{axis} of size {x.shape[axis]}")
        return y
    return run


@operator("Expand")
def bind_expand(dev, node, opset):
    def run(ctx, x, shape_t, **_):
        shape = broadcast_shape(x.shape, dev.ints(shape_t))
        if _host_result(x, shape):
            return dev.from_ints(strided_values(x.ints, shape, broadcast_strides(x.shape, shape)),
                                 shape, x.elem_type)
        y = dev.empty(shape, x.elem_type)
        copy_strided(dev, y.ptr, x.ptr, x.itemsize, shape, contiguous_strides(shape),
                     broadcast_strides(x.shape, shape))
        return y
    return run


def check_cast(node, opset) -> str:
    to = node.attr("to")
    if node.op_type == "CastLike":
        pass                                 # the type comes with the second input
    elif isinstance(to, (bytes, str)):       # Cast-1 names the type
        return f"Cast to a type given by name ({to!r})"
    elif to not in CAST_TYPES:
        return (f"Cast to {dtypes.type_string(to) if to in dtypes.BY_CODE else to}: the wasm "
                f"kernel casts between the numeric types (not strings, complex or float6)")
    rounding = node.attr("round_mode", "up")
    if (rounding.decode() if isinstance(rounding, bytes) else rounding) not in E8M0_ROUNDING:
        return f"round_mode={rounding!r}"
    return ""


def cast_flags(node, opset) -> int:
    """er_cast's flags from Cast's (or CastLike's) attributes: saturate=0 (bit 0); opsets
    19-23 send +-inf to NaN in the FNUZ float8 types (bit 1); float8e8m0's round_mode."""
    rounding = node.attr("round_mode", "up")
    rounding = rounding.decode() if isinstance(rounding, bytes) else rounding
    return (int(not node.attr("saturate", 1)) | (2 if 19 <= opset < 24 else 0) |
            E8M0_ROUNDING[rounding] << 2)


def cast(dev, x: WasmTensor, to: int, flags: int = 0) -> WasmTensor:
    """`x` converted to element type `to` (both in CAST_TYPES)."""
    if x.elem_type == to:
        return x
    if to in INT_FORMATS and has_values(x):          # shape arithmetic stays on the host
        return dev.from_ints([wrap(v, to) for v in x.ints], x.shape, to)
    return converted(dev, x, to, flags)


@operator("Cast", check=check_cast)
@operator("CastLike", check=check_cast)
def bind_cast(dev, node, opset):
    """Cast, and CastLike (to the element type of its second input)."""
    flags = cast_flags(node, opset)
    to_attr = node.attr("to")

    def run(ctx, x, like=None, **attrs):
        to = like.elem_type if like is not None else int(to_attr)
        if x.elem_type not in CAST_TYPES or to not in CAST_TYPES:
            refuse(node, x, *([like] if like is not None else []))
        return cast(dev, x, to, flags)
    return run


@operator("BitCast")
def bind_bit_cast(dev, node, opset):
    """The same bits read as type `to` (same width): a view."""
    to = int(node.attr("to"))

    def run(ctx, x, **_):
        if dtypes.STRING in (x.elem_type, to):
            raise TypeError("BitCast: string tensors have no bit pattern to reinterpret")
        have, want = dtypes.elem_type(x.elem_type).bits, dtypes.elem_type(to).bits
        if have != want:
            raise ValueError(f"BitCast: {dtypes.type_string(x.elem_type)} has {have} bits but "
                             f"{dtypes.type_string(to)} has {want}; they must match")
        return WasmTensor(x.block, x.shape, to, x.offset)
    return run


@operator("Split")
def bind_split(dev, node, opset):
    axis_attr = int(node.attr("axis", 0))
    split_attr = node.attr("split")
    num_outputs = node.attr("num_outputs")
    count = len(node.outputs)

    def run(ctx, x, split_t=None, **_):
        axis = normalize_axis(axis_attr, len(x.shape))
        d = x.shape[axis]
        sizes = list(dev.ints(split_t) if opset >= 13 and split_t is not None else
                     (split_attr or []))
        if not sizes and num_outputs:                # opset 18: the last chunk may be smaller
            sizes = split_lengths(d, int(num_outputs))
        elif not sizes:
            if d % count:
                raise ValueError(f"Split of a dimension of {d} into {count} equal outputs")
            sizes = [d // count] * count
        if sum(sizes) != d or len(sizes) != count or min(sizes) < 0:
            raise ValueError(f"Split sizes {sizes} must be {count} sizes summing to {d}")
        return tuple(split_parts(dev, x, axis, sizes))
    return run


def split_parts(dev, x: WasmTensor, axis: int, sizes) -> list:
    """Pieces of `x` along `axis`: views where the pieces are contiguous, else copies."""
    strides = contiguous_strides(x.shape)
    contiguous = product(x.shape[:axis]) == 1
    parts, offset = [], 0
    for s in sizes:
        shape = list(x.shape)
        shape[axis] = s
        start = offset * strides[axis] * x.itemsize
        if _host_result(x, shape):
            parts.append(dev.from_ints(strided_values(x.ints, shape, strides,
                                                      offset * strides[axis]),
                                       shape, x.elem_type))
        elif contiguous:
            parts.append(x.part(start, shape))
        else:
            y = dev.empty(shape, x.elem_type)
            copy_strided(dev, y.ptr, x.ptr + start, x.itemsize, shape, contiguous_strides(shape),
                         strides)
            parts.append(y)
        offset += s
    return parts


# ---- metadata only ----------------------------------------------------------------------

def reshape_target(in_shape, target, allowzero: int) -> list:
    out = [in_shape[i] if (d == 0 and not allowzero) else d for i, d in enumerate(target)]
    if out.count(-1) > 1:
        raise ValueError(f"Reshape target {list(target)} has more than one -1")
    if -1 in out:
        known = product(d for d in out if d != -1)
        total = product(in_shape)
        if known == 0 or total % known:
            raise ValueError(f"cannot reshape {list(in_shape)} to {list(target)}")
        out[out.index(-1)] = total // known
    if product(out) != product(in_shape):
        raise ValueError(f"cannot reshape {list(in_shape)} ({product(in_shape)} elements) "
                         f"to {list(target)}")
    return out


@operator("Reshape")
def bind_reshape(dev, node, opset):
    allowzero = int(node.attr("allowzero", 0))
    attr_shape = node.attr("shape")

    def run(ctx, x, shape_t=None, **_):
        target = dev.ints(shape_t) if opset >= 5 else attr_shape
        return x.view(reshape_target(x.shape, target, allowzero))
    return run


@operator("Flatten")
def bind_flatten(dev, node, opset):
    axis_attr = int(node.attr("axis", 1))

    def run(ctx, x, **_):
        axis = axis_attr + len(x.shape) if axis_attr < 0 else axis_attr
        return x.view((product(x.shape[:axis]), product(x.shape[axis:])))
    return run


@operator("Squeeze")
def bind_squeeze(dev, node, opset):
    attr_axes = node.attr("axes")

    def run(ctx, x, axes_t=None, **_):
        axes = dev.ints(axes_t) if opset >= 13 else attr_axes
        rank = len(x.shape)
        if axes is None:
            return x.view([d for d in x.shape if d != 1])
        axes = {normalize_axis(int(a), rank, "Squeeze axis") for a in axes}
        for a in axes:
            if x.shape[a] != 1:
                raise ValueError(f"Squeeze axis {a} has size {x.shape[a]}, not 1")
        return x.view([d for i, d in enumerate(x.shape) if i not in axes])
    return run


@operator("Unsqueeze")
def bind_unsqueeze(dev, node, opset):
    attr_axes = node.attr("axes")

    def run(ctx, x, axes_t=None, **_):
        axes = dev.ints(axes_t) if opset >= 13 else attr_axes
        rank = len(x.shape) + len(axes)
        axes = sorted(normalize_axis(int(a), rank, "Unsqueeze axis") for a in axes)
        shape = list(x.shape)
        for a in axes:
            shape.insert(a, 1)
        return x.view(shape)
    return run


@operator("Identity")
@host_values                      # tensors, sequences and optionals alike
def bind_identity(dev, node, opset):
    return lambda ctx, x=None, **_: x


@operator("Dropout")
def bind_dropout(dev, node, opset):
    """Inference: the input unchanged, and a mask of ones when the mask output is used;
    training_mode=True drops elements at random (random.dropout_training)."""
    want_mask = len(node.outputs) > 1 and bool(node.outputs[1])

    def run(ctx, x, ratio=None, training_mode=None, **attrs):
        if training_mode is not None and any(dev.ints(training_mode)):
            from .random import dropout_training
            value = host_floats(dev, ratio)[0] if ratio is not None else 0.5
            return dropout_training(dev, node, x, value, want_mask)
        if not want_mask:
            return x
        return x, dev.fill(dev.empty(x.shape, dtypes.BOOL), b"\x01")
    return run


@operator("Size")
def bind_size(dev, node, opset):
    return lambda ctx, x, **_: dev.from_ints([x.size], ())


@operator("Shape")
def bind_shape(dev, node, opset):
    start_attr, end_attr = node.attr("start", 0), node.attr("end")

    def run(ctx, x, **_):
        dims = list(x.shape)
        start = start_attr + len(dims) if start_attr < 0 else start_attr
        end = len(dims) if end_attr is None else (end_attr + len(dims) if end_attr < 0
                                                  else end_attr)
        dims = dims[max(start, 0):max(min(end, len(dims)), 0)]
        return dev.from_ints(dims, (len(dims),))
    return run
