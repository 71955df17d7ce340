"""Pooling and normalisation kernels: AveragePool, MaxPool, LpPool, their Global forms,
MaxUnpool and LRN.

Windowed pools share conv.py's window geometry; box windows are separable, so they reduce
one spatial axis at a time. 2-D pools with stride 1 or no padding do it over the flattened,
padded planes (each kernel position one long shifted operation); the others take each kernel
position along an axis as one strided operation over the outputs whose window it falls in:
padding is never copied nor combined (a stride-1 last axis is padded and reduced over
flattened rows instead). A window covering the whole input is one reduction over trailing
axes; MaxPool with indices walks every kernel position.
AveragePool divides by a per-window count (cached per shape), built axis by axis.
Outputs keep the input dtype; float16 and exotic floats are computed in float32.
"""
import functools
import math

import numpy as np

from ..registry import kernel
from ....ir.conv_rules import window_geometry
from .conv import (_ints, compute_dtype, kernel_positions, pad_spatial, padded_input,
                   sliding_windows, tap_ranges)
from .reduction import trailing_sum
from .forced import ForcedChoice
from ..native import conv as native_conv


# ---------------------------------------------------------------- shared helpers


def _check_pool_input(x, kernel_shape):
    if x.ndim < 3:
        raise ValueError(f"X must be (N, C, D1, ...), got shape {x.shape}")
    if kernel_shape is None:
        raise ValueError("the kernel_shape attribute is required")
    if len(kernel_shape) != x.ndim - 2:
        raise ValueError(f"kernel_shape {list(kernel_shape)} needs one entry per spatial axis "
                         f"of X {x.shape}")


def _geometry(x, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode):
    _check_pool_input(x, kernel_shape)
    return _cached_geometry(x.shape[2:], _key(kernel_shape), _key(strides), _key(dilations),
                            _key(pads), auto_pad, ceil_mode)


def _key(values):
    return None if values is None else tuple(_ints(values))


@functools.lru_cache(maxsize=256)
def _cached_geometry(in_shape, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode):
    """window_geometry per shape and attributes, computed once (a few us per call otherwise);
    callers never modify it."""
    _check_pads(kernel_shape, pads)
    return window_geometry(in_shape, kernel_shape, strides, dilations, pads, auto_pad,
                           ceil_mode)


def _check_pads(kernel_shape, pads) -> None:
    """Explicit pads must be smaller than the kernel, as onnxruntime requires: a larger pad
    puts whole windows in the padding, with nothing to pool."""
    rank = len(kernel_shape)
    if not pads or len(pads) != 2 * rank:      # window_geometry names a wrong length
        return
    for axis, size in enumerate(kernel_shape):
        if pads[axis] >= size or pads[axis + rank] >= size:
            raise ValueError(f"pads {list(pads)} must be smaller than kernel_shape "
                             f"{list(kernel_shape)} on every axis (axis {axis}: a window "
                             f"would lie entirely in the padding)")


def _window_planes(x, geometry, fill):
    """For each kernel position, its (N, C, *out_shape) strided plane of the padded input."""
    windows = sliding_windows(padded_input(x, geometry, fill), geometry)
    everything = (slice(None), slice(None))
    return [(k, windows[everything + k]) for k in kernel_positions(geometry.kernel)]


def _separable_reduce(x, geometry, fill, combine):
    """`combine` (np.maximum, np.add) over every window, one spatial axis at a time: box
    windows are separable, so each axis costs kernel[i] operations over an array already
    reduced along the axes before it. 2-D pools with stride 1 or without padding run over
    the flattened planes (`_flat_reduce_2d`: 1.3-1.7x faster on 7x7..224x224 maps). Else
    leading axes (and a strided last axis) combine the taps that fall inside the input,
    each over the outputs it reaches, so they never copy padding (a padded copy of a large
    strided map costs more than the flat path saves); a stride-1 last axis is padded and
    reduced over the flattened rows. A fresh (N, C, *out_shape) array."""
    kernel, out_shape = geometry.kernel, geometry.out_shape
    path = _reduce_path(x, geometry, combine)
    if path == "native":
        if x.dtype != np.float32:
            return native_conv.max_pool_8bit(x, geometry)
        return native_conv.pool(x, geometry, total=combine is np.add)
    if path == "whole":
        return _whole_input_reduce(x, combine)
    if path == "tiles":
        return _tiled_reduce(x, geometry, combine)
    if path == "windows":
        # Few, large windows (global-like pools): reduce each window's view directly.
        windows = sliding_windows(padded_input(x, geometry, fill), geometry)
        return combine.reduce(windows, axis=tuple(range(2, 2 + len(kernel))))
    if path == "flat":
        return _flat_reduce_2d(x, geometry, fill, combine)
    values = x
    flat_last = geometry.strides[-1] == 1
    for axis in range(len(kernel) - (1 if flat_last else 0)):
        values = _reduce_axis(values, axis, geometry, combine, fill)
    if not flat_last:
        return values if values is not x else values.copy()
    padded = _pad_last_axis(values, geometry, fill)
    rows = _shifted_combine(padded.reshape(-1), kernel[-1], geometry.dilations[-1], fill,
                            combine).reshape(padded.shape)
    return np.array(rows[..., :out_shape[-1]])      # a copy: rows may be x itself


REDUCE_PATHS = ("native", "whole", "tiles", "windows", "flat", "axes")
# tests: within `forced_path(p)`, every pool whose shapes p handles reduces along it
FORCED_PATH = ForcedChoice("pool path", REDUCE_PATHS)
forced_path = FORCED_PATH.forced


def _reduce_path(x, geometry, combine=np.maximum) -> str:
    """How `_separable_reduce` runs: natively (conv.c's window loops, float32 1-D and 2-D
    maxima and sums, 8-bit 1-D and 2-D maxima), or one numpy reduction of a whole input, one
    per window, over flattened 2-D planes, or axis by axis (whichever is cheapest, or the
    forced one)."""
    native = x.ndim in (3, 4) and native_conv.available() and (
        (x.dtype == np.float32 and combine in (np.maximum, np.add))
        or (x.dtype in (np.uint8, np.int8) and combine is np.maximum))
    forced = FORCED_PATH.value
    if forced is not None:
        applies = {"whole": _is_whole_input(x, geometry), "flat": x.ndim == 4,
                   "tiles": _is_tiled(x, geometry), "native": native}
        if applies.get(forced, True):             # windows and axes handle every pool
            return forced
    if _is_whole_input(x, geometry):
        return "whole"
    if native:
        return "native"
    if _is_tiled(x, geometry):
        return "tiles"
    if math.prod(geometry.out_shape) < math.prod(geometry.kernel):
        return "windows"
    if x.ndim == 4 and (all(s == 1 for s in geometry.strides) or _unpadded(x, geometry)):
        return "flat"
    return "axes"


def _is_tiled(x, geometry) -> bool:
    """The windows tile the input: stride = kernel, no dilation, none past the input."""
    return (tuple(geometry.strides) == tuple(geometry.kernel)
            and all(d == 1 for d in geometry.dilations) and _unpadded(x, geometry))


def _tiled_reduce(x, geometry, combine):
    """`_separable_reduce` of windows that tile the input: along each spatial axis in turn,
    `combine` the kernel's strided slices (the k-th tap of every window) of an array already
    reduced along the axes before it. Each step shrinks the array by its kernel (2x2/2 max
    pools: 2.7x faster than the flat path on 664x160 maps). A fresh array."""
    values, fresh = x, False
    for axis, (k, size) in enumerate(zip(geometry.kernel, geometry.out_shape)):
        lead = (slice(None),) * (2 + axis)
        taps = [values[lead + (slice(j, j + (size - 1) * k + 1, k),)] for j in range(k)]
        if k == 1:
            values = taps[0]
            continue
        out = combine(taps[0], taps[1])
        for tap in taps[2:]:
            combine(out, tap, out=out)
        values, fresh = out, True
    return values if fresh else np.array(values)


def _unpadded(x, geometry) -> bool:
    """Every window lies inside the input (no padding, no ceil_mode window past its end)."""
    return not any(geometry.pads_begin) and all(
        geometry.padded_extent(axis) <= size for axis, size in enumerate(x.shape[2:]))


def _flat_reduce_2d(x, geometry, fill, combine):
    """`_separable_reduce` of an (N, C, H, W) input over its flattened planes: the input
    padded once into (N * C, Hp, Wp) planes, each kernel position along W then along H one
    shifted operation over the whole flattened buffer (a window never crosses its plane's
    edge, so what the shifts mix across rows and planes lands only where no output is
    read), strided axes subsampled between the two. Every operation is one long contiguous
    run: numpy's per-row dispatch, which bounds the axis-by-axis reduction on small maps,
    disappears."""
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (dh, dw) = geometry.kernel, geometry.strides, geometry.dilations
    oh, ow = geometry.out_shape
    top, left = geometry.pads_begin
    hp = max(top + h, geometry.padded_extent(0))
    wp = max(left + w, geometry.padded_extent(1))
    if (hp, wp) == (h, w):
        planes = np.ascontiguousarray(x).reshape(n * c, h, w)
    else:
        planes = np.full((n * c, hp, wp), fill, x.dtype)
        planes[:, top:top + h, left:left + w] = x.reshape(n * c, h, w)
    rows = _shifted_combine(planes.reshape(-1), kw, dw, fill, combine).reshape(n * c, hp, wp)
    if sw > 1:
        rows = np.ascontiguousarray(rows[:, :, :(ow - 1) * sw + 1:sw])
    width = rows.shape[2]
    grid = _shifted_combine(rows.reshape(-1), kh, dh * width, fill, combine)
    out = grid.reshape(n * c, hp, width)[:, :(oh - 1) * sh + 1:sh, :ow]
    return np.array(out).reshape(n, c, oh, ow)


def _shifted_combine(flat, kernel: int, step: int, fill, combine):
    """out[i] = combine over k < kernel of flat[i + k * step], fresh (flat itself for a
    kernel of 1); the last (kernel - 1) * step positions, where windows would run past the
    end, hold `fill`. Over flattened rows or planes, a window that reaches past its row's or
    plane's end only fills a position the caller drops."""
    if kernel == 1:
        return flat
    count = flat.size - (kernel - 1) * step
    out = np.empty_like(flat)
    out[count:] = fill
    combine(flat[:count], flat[step:step + count], out=out[:count])
    for k in range(2, kernel):
        combine(out[:count], flat[k * step:k * step + count], out=out[:count])
    return out


def _is_whole_input(x, geometry) -> bool:
    """One window per channel covering exactly the whole input (a global pool)."""
    return (all(o == 1 for o in geometry.out_shape) and not any(geometry.pads_begin)
            and not any(geometry.pads_end) and all(d == 1 for d in geometry.dilations)
            and list(geometry.kernel) == list(x.shape[2:]))


def _whole_input_reduce(x, combine):
    if combine is np.add:
        return trailing_sum(x, 2)
    rows = x.reshape(x.shape[0], x.shape[1], -1)
    return combine.reduce(rows, axis=2, keepdims=True).reshape(
        x.shape[:2] + (1,) * (x.ndim - 2))


def _pad_last_axis(values, geometry, fill):
    """values padded along its last axis only, so every window of that axis lies inside."""
    rank = values.ndim - 2
    last = rank - 1
    end = max(geometry.pads_end[last],
              geometry.padded_extent(last) - values.shape[-1] - geometry.pads_begin[last])
    return np.ascontiguousarray(pad_spatial(values, [0] * last + [geometry.pads_begin[last]],
                                            [0] * last + [end], fill))


def _reduce_axis(values, axis: int, geometry, combine, fill):
    """out[o] = combine over k of values[o * stride + k * dilation - pad_begin] along spatial
    `axis`, over the positions inside values (`fill` where a window holds none)."""
    size, length = geometry.out_shape[axis], values.shape[2 + axis]
    kernel, stride = geometry.kernel[axis], geometry.strides[axis]
    pad_begin = geometry.pads_begin[axis]
    if kernel == 1 and stride == 1 and pad_begin == 0 and length == size:
        return values
    lead = (slice(None),) * (2 + axis)
    ranges = tap_ranges(length, size, kernel, stride, geometry.dilations[axis], pad_begin)
    whole = [source for _, first, stop, source in ranges if first == 0 and stop == size]
    part = [(first, stop, source) for _, first, stop, source in ranges
            if not (first == 0 and stop == size)]
    if len(whole) >= 2:
        out = combine(values[lead + (whole[0],)], values[lead + (whole[1],)])
        whole = whole[2:]
    elif whole:
        out = values[lead + (whole.pop(),)].copy()
    else:
        shape = values.shape[:2 + axis] + (size,) + values.shape[3 + axis:]
        out = np.full(shape, fill, values.dtype)
    for source in whole:
        combine(out, values[lead + (source,)], out=out)
    for first, stop, source in part:
        target = out[lead + (slice(first, stop),)]
        combine(target, values[lead + (source,)], out=target)
    return out


def _window_sum(x, geometry):
    return _separable_reduce(x, geometry, 0, np.add)


def _window_divisor(in_shape, geometry, include_pad: bool, dtype):
    fields = (geometry.out_shape, geometry.pads_begin, geometry.pads_end, geometry.kernel,
              geometry.strides, geometry.dilations)
    return _cached_divisor(in_shape, tuple(map(tuple, fields)), include_pad, dtype)


@functools.lru_cache(maxsize=256)
def _cached_divisor(in_shape, fields: tuple, include_pad: bool, dtype):
    """(1, 1, *out_shape) read-only count of the positions each window averages over: those
    inside the input, or with `include_pad` inside the declared padding too (never the extra
    positions a ceil_mode window reaches beyond it), at least 1. Windows are boxes, so the
    count is the outer product of per-axis counts."""
    out_shape, pads_begin, pads_end, kernel, strides, dilations = fields
    counts = np.ones((), dtype=np.int64)
    for i, size in enumerate(in_shape):
        low = -pads_begin[i] if include_pad else 0
        high = size + pads_end[i] if include_pad else size
        starts = np.arange(out_shape[i])[:, None] * strides[i]
        positions = starts - pads_begin[i] + np.arange(kernel[i])[None, :] * dilations[i]
        axis_counts = ((positions >= low) & (positions < high)).sum(axis=1)
        counts = np.multiply.outer(counts, axis_counts)
    divisor = np.maximum(counts, 1).astype(dtype).reshape((1, 1) + counts.shape)
    divisor.flags.writeable = False
    return divisor


def _lowest(dtype):
    """What MaxPool's padding holds: it never beats an input value (-inf included)."""
    if dtype.kind == "f":
        return -np.inf
    if dtype.kind in "iu":
        return np.iinfo(dtype).min
    raise TypeError(f"unsupported element type {dtype}")


def _native(x):
    """x in a dtype numpy computes with natively (ml_dtypes floats become float32)."""
    if x.dtype.kind in "iub" or x.dtype in (np.float16, np.float32, np.float64):
        return x
    return x.astype(np.float32)


# ---------------------------------------------------------------- AveragePool


@kernel("AveragePool")
def average_pool(ctx, x, auto_pad="NOTSET", ceil_mode=0, count_include_pad=0, dilations=None,
                 kernel_shape=None, pads=None, strides=None):
    geometry = _geometry(x, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    acc = compute_dtype(x.dtype)
    total = _window_sum(x.astype(acc, copy=False), geometry)
    # total is fresh: divide in place
    total /= _window_divisor(x.shape[2:], geometry, bool(count_include_pad), acc)
    return total.astype(x.dtype, copy=False)


# ---------------------------------------------------------------- LpPool


def _abs_power(x, p):
    if p == 1:
        return np.abs(x)
    if p == 2:
        return x * x
    return np.abs(x) ** p


def _root(total, p):
    if p == 1:
        return total
    if p == 2:
        return np.sqrt(total)
    return total ** (1.0 / p)


@kernel("LpPool")
def lp_pool(ctx, x, auto_pad="NOTSET", ceil_mode=0, dilations=None, kernel_shape=None, p=2,
            pads=None, strides=None):
    geometry = _geometry(x, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    acc = compute_dtype(x.dtype)
    total = _window_sum(_abs_power(x.astype(acc, copy=False), p), geometry)
    return _root(total, p).astype(x.dtype, copy=False)


# ---------------------------------------------------------------- MaxPool


def _flat_indices(arg, x_shape, geometry, storage_order: int):
    """Indices into the flattened input of the maxima chosen at kernel position `arg`."""
    batch, channels = x_shape[:2]
    spatial = x_shape[2:]
    rank = len(spatial)
    offsets = np.unravel_index(arg, geometry.kernel)
    if storage_order == 0:   # row-major spatial strides
        axis_strides = [math.prod(spatial[i + 1:]) for i in range(rank)]
    else:                    # column-major: the first spatial axis varies fastest
        axis_strides = [math.prod(spatial[:i]) for i in range(rank)]
    flat = (np.arange(batch * channels, dtype=np.int64).reshape(
        (batch, channels) + (1,) * rank) * math.prod(spatial))
    for i in range(rank):
        out_index = np.arange(geometry.out_shape[i], dtype=np.int64).reshape(
            (geometry.out_shape[i],) + (1,) * (rank - 1 - i))
        coord = (out_index * geometry.strides[i] - geometry.pads_begin[i]
                 + offsets[i].astype(np.int64) * geometry.dilations[i])
        flat = flat + coord * axis_strides[i]
    return flat


@kernel("MaxPool")
def max_pool(ctx, x, auto_pad="NOTSET", ceil_mode=0, dilations=None, kernel_shape=None,
             pads=None, storage_order=0, strides=None):
    geometry = _geometry(x, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    values = _native(x)
    want_indices = ctx.num_outputs > 1
    if not want_indices:
        best = _separable_reduce(values, geometry, _lowest(values.dtype), np.maximum)
        return _floor_padding_only_windows(best, x.shape, geometry).astype(x.dtype, copy=False)
    planes = _window_planes(values, geometry, _lowest(values.dtype))
    best = planes[0][1].copy()
    arg = np.zeros(best.shape, dtype=np.int64) if want_indices else None
    for position, (_, plane) in enumerate(planes[1:], start=1):
        if want_indices:
            better = plane > best   # strict: ties keep the first position, as ORT does
            np.copyto(arg, position, where=better)
            np.copyto(best, plane, where=better)
        else:
            np.maximum(best, plane, out=best)
    y = _floor_padding_only_windows(best, x.shape, geometry).astype(x.dtype, copy=False)
    return y, _flat_indices(arg, x.shape, geometry, storage_order)


def _floor_padding_only_windows(y, x_shape, geometry):
    """y with the windows that hold only padding (dilated kernels with large pads) set to
    the lowest finite float, onnxruntime's value there (the spec leaves it open; -inf
    would read as an input value)."""
    if y.dtype.kind != "f":
        return y
    uncovered = _padding_only_outputs(tuple(x_shape[2:]), tuple(geometry.kernel),
                                      tuple(geometry.strides), tuple(geometry.dilations),
                                      tuple(geometry.pads_begin), tuple(geometry.out_shape))
    for axis, outputs in uncovered:
        y[(slice(None),) * (2 + axis) + (outputs,)] = np.finfo(y.dtype).min
    return y


@functools.lru_cache(maxsize=256)
def _padding_only_outputs(in_shape, kernel, strides, dilations, pads_begin, out_shape):
    """(axis, output positions whose every tap along it reads padding), per such axis."""
    found = []
    for axis, (length, size) in enumerate(zip(in_shape, out_shape)):
        covered = np.zeros(size, bool)
        for _, first, stop, _ in tap_ranges(length, size, kernel[axis], strides[axis],
                                            dilations[axis], pads_begin[axis]):
            covered[first:stop] = True
        if not covered.all():
            found.append((axis, np.flatnonzero(~covered)))
    return tuple(found)


# ---------------------------------------------------------------- MaxUnpool


@kernel("MaxUnpool", since=9)
def max_unpool(ctx, x, indices, output_shape=None, kernel_shape=None, pads=None,
               strides=None):
    _check_pool_input(x, kernel_shape)
    rank = x.ndim - 2
    kernel = _ints(kernel_shape)
    strides = _ints(strides) if strides else [1] * rank
    pads = _ints(pads) if pads else [0] * (2 * rank)
    inferred = list(x.shape[:2]) + [
        (x.shape[2 + i] - 1) * strides[i] - pads[i] - pads[rank + i] + kernel[i]
        for i in range(rank)]
    if indices.shape != x.shape:
        raise ValueError(f"indices shape {indices.shape} must equal X shape {x.shape}")
    flat = np.zeros(math.prod(inferred), dtype=x.dtype)
    flat[indices.reshape(-1).astype(np.int64)] = x.reshape(-1)
    y = flat.reshape(inferred)
    if output_shape is None:
        return y
    # Indices address the inferred shape (as ONNX's own cases do); the values then sit in
    # the leading corner of the requested, possibly larger, output.
    shape = _ints(output_shape)
    if len(shape) != x.ndim:
        raise ValueError(f"output_shape {shape} must have rank {x.ndim}")
    out = np.zeros(shape, dtype=x.dtype)
    corner = tuple(slice(0, min(a, b)) for a, b in zip(inferred, shape))
    out[corner] = y[corner]
    return out


# ---------------------------------------------------------------- global pools


def _spatial_axes(x):
    if x.ndim < 2:
        raise ValueError(f"X must be (N, C, D1, ...), got shape {x.shape}")
    return tuple(range(2, x.ndim))


@kernel("GlobalAveragePool")
def global_average_pool(ctx, x):
    acc = compute_dtype(x.dtype)
    _spatial_axes(x)
    rows = x.astype(acc, copy=False).reshape(x.shape[0], x.shape[1], math.prod(x.shape[2:]))
    mean = trailing_sum(rows, 2) / acc.type(rows.shape[2])
    return mean.reshape(x.shape[:2] + (1,) * (x.ndim - 2)).astype(x.dtype, copy=False)


@kernel("GlobalMaxPool")
def global_max_pool(ctx, x):
    return _native(x).max(axis=_spatial_axes(x), keepdims=True).astype(x.dtype, copy=False)


@kernel("GlobalLpPool")
def global_lp_pool(ctx, x, p=2):
    acc = compute_dtype(x.dtype)
    total = _abs_power(x.astype(acc, copy=False), p).sum(axis=_spatial_axes(x), keepdims=True)
    return _root(total, p).astype(x.dtype, copy=False)


# ---------------------------------------------------------------- LRN


@kernel("LRN")
def lrn(ctx, x, alpha=0.0001, beta=0.75, bias=1.0, size=None):
    if size is None:
        raise ValueError("the size attribute is required")
    if x.ndim < 3:
        raise ValueError(f"X must be (N, C, D1, ...), got shape {x.shape}")
    acc = compute_dtype(x.dtype)
    values = x.astype(acc, copy=False)
    squares = values * values
    before = (size - 1) // 2          # channels c - before .. c + after enter channel c's sum
    after = size - 1 - before
    widths = [(0, 0), (before, after)] + [(0, 0)] * (x.ndim - 2)
    padded = np.pad(squares, widths)
    channels = x.shape[1]
    window = padded[:, 0:channels].copy()
    for j in range(1, size):
        window += padded[:, j:j + channels]
    y = values / (bias + (alpha / size) * window) ** beta
    return y.astype(x.dtype, copy=False)
