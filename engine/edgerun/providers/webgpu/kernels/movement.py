"""Layout operators: Transpose, Slice, Split, Concat, Expand, Tile, DepthToSpace, SpaceToDepth
as strided copies; Gather, Pad (and CenterCropPad), Resize, GridSample and AffineGrid with
their own index rules (movement.wgsl)."""
from __future__ import annotations

import weakref
from array import array
from collections import OrderedDict

from ....ir import dtypes, resize_rules
from .. import host_values
from ..memory import GpuTensor
from ....ir.shape_rules import split_lengths
from .common import (as_gpu, as_gpu_any, broadcast_strides, count, gpu_indices,
                     host_floats_or_ints, host_ints, normalize_axis, padded, strided_copy,
                     strides_of)
from .registry import Unsupported, gpu_op


def transpose(gpu, x, perm):
    strides = strides_of(x.shape)
    dims = [x.shape[p] for p in perm]
    out = gpu.empty(dims, x.dtype)
    return strided_copy(gpu, out, x, dims, [strides[p] for p in perm], strides_of(dims))


@gpu_op("Transpose", narrow=True)
def run_transpose(gpu, ctx, x, perm=None):
    x = as_gpu_any(gpu, x)
    return transpose(gpu, x, list(perm) if perm is not None else list(range(x.ndim))[::-1])


def _space_depth(gpu, x, shape6, perm, out_shape):
    """DepthToSpace/SpaceToDepth: a reshape to 6-D, a transpose, a reshape back."""
    return transpose(gpu, x.view(shape6), perm).view(out_shape)


@gpu_op("DepthToSpace")
def depth_to_space(gpu, ctx, x, blocksize, mode="DCR"):
    x = as_gpu(gpu, x)
    n, c, h, w = x.shape
    b = blocksize
    out_shape = (n, c // (b * b), h * b, w * b)
    if mode == "DCR":
        return _space_depth(gpu, x, (n, b, b, c // (b * b), h, w), [0, 3, 4, 1, 5, 2], out_shape)
    return _space_depth(gpu, x, (n, c // (b * b), b, b, h, w), [0, 1, 4, 2, 5, 3], out_shape)


@gpu_op("SpaceToDepth")
def space_to_depth(gpu, ctx, x, blocksize, mode="DCR"):
    x = as_gpu(gpu, x)
    n, c, h, w = x.shape
    b = blocksize
    perm = [0, 3, 5, 1, 2, 4] if mode == "DCR" else [0, 1, 3, 5, 2, 4]
    return _space_depth(gpu, x, (n, c, h // b, b, w // b, b), perm,
                        (n, c * b * b, h // b, w // b))


def slice_view(gpu, x, starts, ends, axes, steps):
    """Copy of x[starts:ends:steps] along `axes` (ONNX clamping = Python slice clamping)."""
    rank = x.ndim
    axes = list(range(len(starts))) if axes is None else [normalize_axis(a, rank) for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    strides = strides_of(x.shape)
    dims, src, base = list(x.shape), list(strides), 0
    for a, s, e, st in zip(axes, starts, ends, steps):
        if st == 0:
            raise ValueError("Slice: a step of 0")
        s = max(min(s, 2**62), -2**62)
        e = max(min(e, 2**62), -2**62)
        start, _, step = slice(s, e, st).indices(x.shape[a])
        dims[a] = len(range(*slice(s, e, st).indices(x.shape[a])))
        base += start * strides[a]
        src[a] = step * strides[a]
    out = gpu.empty(dims, x.dtype)
    return strided_copy(gpu, out, x, dims, src, strides_of(dims), base, 0)


@gpu_op("Slice", narrow=True)
def run_slice(gpu, ctx, x, starts=None, ends=None, axes=None, steps=None, **attrs):
    x = as_gpu_any(gpu, x)
    if ctx.opset < 10:
        return slice_view(gpu, x, attrs["starts"], attrs["ends"], attrs.get("axes"), None)
    return slice_view(gpu, x, host_ints(gpu, starts), host_ints(gpu, ends),
                      host_ints(gpu, axes), host_ints(gpu, steps))


@gpu_op("Split", narrow=True)
def run_split(gpu, ctx, x, split_input=None, axis=0, split=None, num_outputs=None):
    x = as_gpu_any(gpu, x)
    axis = normalize_axis(axis, x.ndim)
    if ctx.opset >= 13:
        split = host_ints(gpu, split_input)
    outputs = ctx.num_outputs
    length = x.shape[axis]
    if not split:
        split = split_lengths(length, num_outputs or outputs)
    results, start = [], 0
    for size in split:
        results.append(slice_view(gpu, x, [start], [start + size], [axis], [1]))
        start += size
    return tuple(results)


@gpu_op("Concat", narrow=True)
def run_concat(gpu, ctx, *inputs, axis=0):
    tensors = [as_gpu_any(gpu, v) for v in inputs]
    if len({t.dtype for t in tensors}) > 1:
        raise Unsupported(f"Concat of {sorted({t.dtype for t in tensors})} tensors")
    first = tensors[0].shape
    axis = normalize_axis(axis, len(first))
    shape = list(first)
    shape[axis] = sum(t.shape[axis] for t in tensors)
    out = gpu.empty(shape, tensors[0].dtype)
    out_strides = strides_of(shape)
    offset = 0
    for t in tensors:
        strided_copy(gpu, out, t, t.shape, strides_of(t.shape), out_strides, 0,
                     offset * out_strides[axis])
        offset += t.shape[axis]
    return out


@gpu_op("Expand", narrow=True)
def run_expand(gpu, ctx, x, shape):
    x = as_gpu_any(gpu, x)
    target = host_values.broadcast_shapes(x.shape, tuple(host_ints(gpu, shape)))
    out = gpu.empty(target, x.dtype)
    return strided_copy(gpu, out, x, target, broadcast_strides(x.shape, target),
                        strides_of(target))


@gpu_op("Tile", narrow=True)
def tile(gpu, ctx, x, repeats):
    """x repeated along each dim: broadcast copies of x as (r0, d0, r1, d1, ...), three
    repeated dims at a time (the copy kernel's rank limit is 6)."""
    x = as_gpu_any(gpu, x)
    reps = host_ints(gpu, repeats)
    if len(reps) != x.ndim or any(r < 0 for r in reps):
        raise ValueError(f"Tile: repeats {reps} for a rank-{x.ndim} input")
    repeated = [a for a, r in enumerate(reps) if r != 1]
    for first in range(0, max(len(repeated), 1), 3):
        now = [reps[a] if a in repeated[first:first + 3] else 1 for a in range(x.ndim)]
        out = gpu.empty([d * r for d, r in zip(x.shape, now)], x.dtype)
        dims = [v for d, r in zip(x.shape, now) for v in (r, d)]
        src = [v for s in strides_of(x.shape) for v in (0, s)]
        x = strided_copy(gpu, out, x, dims, src, strides_of(dims))
    return x


@gpu_op("CenterCropPad")
def center_crop_pad(gpu, ctx, x, shape, axes=None):
    x = as_gpu_any(gpu, x)
    target = host_ints(gpu, shape)
    axes = list(range(x.ndim)) if axes is None else [normalize_axis(a, x.ndim) for a in axes]
    begin, end = [0] * x.ndim, [0] * x.ndim
    for a, t in zip(axes, target):
        diff = t - x.shape[a]          # > 0: pad (the extra one at the end); < 0: crop
        begin[a] = diff // 2 if diff > 0 else -((-diff) // 2)
        end[a] = diff - begin[a]
    return pad(gpu, x, begin, end)


@gpu_op("Compress", narrow=True)
def compress(gpu, ctx, x, condition, axis=None):
    """The slices of x where `condition` (read on the host) is true, by a Gather."""
    x = as_gpu_any(gpu, x)
    keep = [i for i, c in enumerate(host_values.values(gpu.host_values(condition))) if c]
    if axis is None:
        x, axis = x.view((x.size,)), 0
    axis = normalize_axis(axis, x.ndim)
    keep = [i for i in keep if i < x.shape[axis]]
    return gather(gpu, x, host_values.make(dtypes.INT64, (len(keep),), keep), axis)


@gpu_op("Gather", narrow=True)
def run_gather(gpu, ctx, data, indices, axis=0):
    data = as_gpu_any(gpu, data)
    axis = normalize_axis(axis, data.ndim)
    return gather(gpu, data, indices, axis)


def gather(gpu, data, indices, axis):
    """data's entries at `indices` along `axis`: host indices are checked and uploaded, GPU
    ones (int32/int64) are read where they are."""
    n_axis = data.shape[axis]
    idx_gpu, idx_shape = gpu_indices(gpu, indices, [n_axis], "Gather")
    shape = data.shape[:axis] + tuple(idx_shape) + data.shape[axis + 1:]
    out = gpu.empty(shape, data.dtype)
    if count(shape) == 0:
        return out
    inner = count(data.shape[axis + 1:])
    return gpu.dispatch("movement", "gather", out, [data, idx_gpu],
                        [inner, max(count(idx_shape), 1), n_axis], count(shape),
                        {"T": data.wgsl})


PAD_MODES = {"constant": 0, "reflect": 1, "edge": 2, "wrap": 3}


def check_pad(node, opset) -> str:
    mode = node.attr("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    return "" if mode in PAD_MODES else f"mode={mode}"


@gpu_op("Pad", check=check_pad)
def run_pad(gpu, ctx, x, pads_input=None, value_input=None, axes_input=None, mode="constant",
            pads=None, value=0.0):
    x = as_gpu_any(gpu, x)
    rank = x.ndim
    if ctx.opset >= 11:
        pads = host_ints(gpu, pads_input)
        value = 0.0 if value_input is None else float(host_floats_or_ints(gpu, value_input)[0])
        axes = host_ints(gpu, axes_input)
        if axes is not None:
            full = [0] * (2 * rank)
            for i, a in enumerate(axes):
                a = normalize_axis(a, rank)
                full[a], full[a + rank] = pads[i], pads[i + len(axes)]
            pads = full
    return pad(gpu, x, pads[:rank], pads[rank:], value, mode)


def pad(gpu, x, begin, end, value=0.0, mode="constant"):
    """x padded by `begin`/`end` per dim (negative: cropped) in one of PAD_MODES."""
    rank = x.ndim
    out_shape = [d + b + e for d, b, e in zip(x.shape, begin, end)]
    out = gpu.empty(out_shape, x.dtype)
    if count(out_shape) == 0:
        return out
    if x.size == 0 and mode != "constant":
        raise Unsupported(f"{mode} padding of an empty tensor")
    params = ([rank] + padded(out_shape, fill=1) + padded(list(x.shape), fill=1)
              + padded(strides_of(x.shape)) + padded(begin)
              + [float(value) if x.dtype == "float32" else int(value), PAD_MODES[mode]])
    return gpu.dispatch("movement", "pad", out, [x], params, count(out_shape), {"T": x.wgsl})


RESIZE_MODES = ("nearest", "linear", "bilinear", "cubic")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
ASPECT_POLICIES = ("stretch", "not_larger", "not_smaller")
STATIC_TAPS = 4        # tap counts up to this compile into the kernel (antialias: params)
TAPS_CACHE = 64        # per GPU context: Resize geometries whose taps stay uploaded
# GpuContext -> OrderedDict (LRU)
_taps_caches: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _text(node, name, default):
    value = node.attr(name, default)
    return value.decode() if isinstance(value, bytes) else value


def check_resize(node, opset) -> str:
    mode = _text(node, "mode", "nearest")
    if mode not in RESIZE_MODES:
        return f"mode={mode} (supported: nearest, linear, cubic)"
    coord = _text(node, "coordinate_transformation_mode", "half_pixel")
    if coord not in resize_rules.TRANSFORMS:
        return f"coordinate_transformation_mode={coord}"
    if _text(node, "nearest_mode", "round_prefer_floor") not in NEAREST_MODES:
        return f"nearest_mode={_text(node, 'nearest_mode', '')}"
    if _text(node, "keep_aspect_ratio_policy", "stretch") not in ASPECT_POLICIES:
        return f"keep_aspect_ratio_policy={_text(node, 'keep_aspect_ratio_policy', '')}"
    if node.op_type == "Upsample" and opset < 7:
        return "Upsample-1 (height_scale/width_scale attributes)"
    return ""


def _axis_taps(rule, in_size, out_size, scale, length, roi_start, roi_end):
    """(indices [out_size][K], weights [out_size][K], outside flags or None) along one axis,
    by ir/resize_rules.py (the CPU kernel's float64 geometry). An axis the CPU kernel leaves
    alone (same size, scale 1, no crop) gets one tap of weight 1 per position."""
    mode, coord, nearest_mode, cubic_a, exclude_outside, antialias, roi32 = rule
    crop = coord == "tf_crop_and_resize"
    if out_size == in_size and scale == 1.0 and (not crop or (roi_start, roi_end) == (0, 1)):
        return [[i] for i in range(in_size)], [[1.0]] * in_size, None
    coords = resize_rules.source_coordinates(coord, out_size, in_size, scale, length,
                                             roi_start, roi_end, roi32)
    if mode == "nearest":
        picked = resize_rules.nearest_indices(coords, in_size, nearest_mode, scale < 1)
        index, weight = [[i] for i in picked], [[1.0]] * out_size
    else:
        index, weight = resize_rules.filter_taps(coords, in_size, mode, cubic_a, scale,
                                                 antialias, exclude_outside)
    outside = [int(c < 0 or c > in_size - 1) for c in coords] if crop else None
    return index, weight, outside if outside and any(outside) else None


def _resize_taps(gpu, rule, axes_geometry):
    """(taps tensor, KH, KW, crop) for the last two axes, uploaded once per geometry (an LRU
    per GPU context): int32 (index, weight's float32 bits) pairs, the H taps (OH x KH), the
    W taps (OW x KW), then, with crop, the outside flags (OH, then OW; paired with 0)."""
    key = (rule, axes_geometry)
    with gpu.lock:
        cache = _taps_caches.setdefault(gpu, OrderedDict())
        found = cache.get(key)
        if found is not None:
            cache.move_to_end(key)
            return found
    (ih, wh, fh), (iw, ww, fw) = [_axis_taps(rule, *g) for g in axes_geometry]
    crop = fh is not None or fw is not None
    index = [i for row in ih + iw for i in row]
    bits = array("i", array("f", [w for row in wh + ww for w in row]).tobytes())
    pairs = [v for pair in zip(index, bits) for v in pair]
    if crop:
        pairs += [v for flag in (fh or [0] * len(ih)) + (fw or [0] * len(iw))
                  for v in (flag, 0)]
    kh, kw = len(ih[0]), len(iw[0])
    found = (gpu.upload(host_values.make(dtypes.INT32, (max(len(pairs), 2),), pairs or [0, 0])),
             kh, kw, crop)
    with gpu.lock:
        cache[key] = found
        cache.move_to_end(key)
        if len(cache) > TAPS_CACHE:
            cache.popitem(last=False)
    return found


def resize(gpu, x, scales, sizes, mode, coord, nearest_mode, axes=None, roi=None,
           policy="stretch", cubic_a=-0.75, exclude_outside=0, extrapolation=0.0,
           antialias=0, roi32=True):
    """Resize of the last two dims (others must keep their size): every output position
    along each axis reads taps (input indices, weights) computed on the host by
    ir/resize_rules.py, so source coordinates and nearest picks are the CPU kernel's float64
    ones, never recomputed in f32 (movement.wgsl)."""
    x = as_gpu(gpu, x)
    if x.ndim < 2:
        raise Unsupported(f"resizing a {x.ndim}-D tensor")
    mode = "linear" if mode == "bilinear" else mode
    axes = resize_rules.normalize_axes(axes, x.ndim)
    geometry = resize_rules.output_geometry(x.shape, axes, scales or None, sizes or None,
                                            policy)
    if roi is not None and len(roi) == 0:
        roi = None
    if roi is not None and len(roi) != 2 * len(axes):
        raise ValueError(f"Resize: roi has {len(roi)} entries, expected {2 * len(axes)}")
    crop = coord == "tf_crop_and_resize"
    per_axis = {}          # dim -> (out size, scale, fractional length, roi start, roi end)
    for i, a in enumerate(axes):
        size, factor, length = geometry[i]
        start, end = (roi[i], roi[len(axes) + i]) if roi is not None else (0.0, 1.0)
        per_axis[a] = (size, float(factor), float(length), float(start), float(end))
    for a, (size, factor, _, start, end) in per_axis.items():
        if a < x.ndim - 2 and (size != x.shape[a] or factor != 1.0 or
                               (crop and (start, end) != (0, 1))):
            # (a scale of 4/3 on 2 keeps the size yet moves the samples)
            raise Unsupported("resizing dims other than the last two")
    out_shape = list(x.shape)
    for a, (size, *_) in per_axis.items():
        out_shape[a] = size
    out = gpu.empty(out_shape)
    if count(out_shape) == 0:
        return out
    h, w = x.shape[-2:]
    oh, ow = out_shape[-2:]
    if h == 0 or w == 0:
        raise Unsupported("resizing an empty input to a non-empty output")
    rule = (mode, coord, nearest_mode, float(cubic_a), bool(exclude_outside), bool(antialias),
            bool(roi32))
    axes_geometry = tuple((n, o) + per_axis.get(a, (o, 1.0, float(o), 0.0, 1.0))[1:]
                          for a, n, o in ((x.ndim - 2, h, oh), (x.ndim - 1, w, ow)))
    taps, kh, kw, with_flags = _resize_taps(gpu, rule, axes_geometry)
    # the CPU kernel resizes axis by axis in `axes` order: sum along the first one inside
    w_first = x.ndim - 1 in per_axis and x.ndim - 2 in per_axis and \
        axes.index(x.ndim - 1) < axes.index(x.ndim - 2)
    ka, kb = (kw, kh) if w_first else (kh, kw)
    params = [h, w, oh, ow, kh, kw, int(w_first), int(with_flags), float(extrapolation),
              ka, kb]
    subs = {"NEAREST": "true" if mode == "nearest" else "false",
            "KA": f"{ka}u" if ka <= STATIC_TAPS else "pu(10u)",
            "KB": f"{kb}u" if kb <= STATIC_TAPS else "pu(11u)"}
    if mode == "nearest":
        subs["KA"] = subs["KB"] = "1u"
    return gpu.dispatch("movement", "resize", out, [x, taps], params, count(out_shape), subs)


def _roi_is_float32(roi) -> bool:
    """tf_crop_and_resize combines a float32 roi in float32 (as the CPU kernel's numpy)."""
    if isinstance(roi, GpuTensor):
        return roi.dtype == "float32"
    return host_values.elem_type(roi) == dtypes.FLOAT


@gpu_op("Resize", check=check_resize)
def run_resize(gpu, ctx, x, roi=None, scales=None, sizes=None, mode="nearest",
               coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_floor",
               cubic_coeff_a=-0.75, extrapolation_value=0.0, axes=None, exclude_outside=0,
               keep_aspect_ratio_policy="stretch", antialias=0, **_):
    roi32 = True
    if ctx.opset < 11:          # Resize-10: (X, scales), asymmetric, legacy nearest picks
        scales, roi = roi, None
        coordinate_transformation_mode, nearest_mode = "asymmetric", "legacy"
    scale_values = None if scales is None else host_floats_or_ints(gpu, scales)
    size_values = host_ints(gpu, sizes)
    roi_values = None if roi is None else host_floats_or_ints(gpu, roi)
    if roi_values:
        roi32 = _roi_is_float32(roi)
    if scale_values and size_values:
        raise ValueError("Resize: only one of scales and sizes may be given")
    return resize(gpu, x, scale_values, size_values, mode, coordinate_transformation_mode,
                  nearest_mode, axes, roi_values, keep_aspect_ratio_policy, cubic_coeff_a,
                  exclude_outside, extrapolation_value, antialias, roi32)


@gpu_op("Upsample", check=check_resize)
def run_upsample(gpu, ctx, x, scales_input=None, mode="nearest", scales=None):
    if scales_input is not None:
        scales = host_floats_or_ints(gpu, scales_input)
    return resize(gpu, x, scales, None, mode, "asymmetric", "legacy")


GRID_MODES = {"nearest": 0, "linear": 1, "bilinear": 1, "cubic": 2, "bicubic": 2}
GRID_PADDING = {"zeros": 0, "border": 1, "reflection": 2}


def check_grid_sample(node, opset) -> str:
    mode = _text(node, "mode", "linear" if opset >= 20 else "bilinear")
    padding = _text(node, "padding_mode", "zeros")
    if mode not in GRID_MODES or padding not in GRID_PADDING:
        return f"mode={mode}, padding_mode={padding}"
    return ""


@gpu_op("GridSample", check=check_grid_sample)
def grid_sample(gpu, ctx, x, grid, mode="linear", padding_mode="zeros", align_corners=0):
    x, grid = as_gpu(gpu, x), as_gpu(gpu, grid)
    n, channels, *spatial = x.shape
    rank = len(spatial)
    if rank not in (2, 3) or grid.ndim != rank + 2 or grid.shape[0] != n or \
            grid.shape[-1] != rank:
        raise Unsupported(f"GridSample of a {x.shape} input at a {grid.shape} grid")
    points = count(grid.shape[1:-1])
    out = gpu.empty((n, channels) + tuple(grid.shape[1:-1]))
    if out.size == 0:
        return out
    if 0 in spatial:
        raise Unsupported("sampling an empty input")
    d, h, w = ([1] + spatial)[-3:]
    params = [channels, points, rank, d, h, w, GRID_PADDING[_text_value(padding_mode)],
              int(bool(align_corners))]
    return gpu.dispatch("movement", "grid_sample", out, [x, grid], params, out.size,
                        {"MODE": GRID_MODES[_text_value(mode)]})


def _text_value(value) -> str:
    return value.decode() if isinstance(value, bytes) else value


@gpu_op("AffineGrid")
def affine_grid(gpu, ctx, theta, size, align_corners=0):
    theta = as_gpu(gpu, theta)
    n, _, *spatial = host_ints(gpu, size)
    rank = len(spatial)
    if rank not in (2, 3) or theta.shape != (n, rank, rank + 1):
        raise ValueError(f"AffineGrid: theta {theta.shape} for size {[n, _, *spatial]}")
    out = gpu.empty([n] + spatial + [rank])
    if out.size == 0:
        return out
    d, h, w = ([1] + spatial)[-3:]
    return gpu.dispatch("movement", "affine_grid", out, [theta],
                        [rank, d, h, w, int(bool(align_corners))], out.size)
