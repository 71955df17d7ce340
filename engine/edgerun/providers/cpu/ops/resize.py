"""Resampling: Resize, Upsample, GridSample, AffineGrid, RoiAlign.

Resize is separable: each resized axis is handled in turn by a 1-D resampler that maps every
output position to a source coordinate, turns that coordinate into a fixed number of taps
(input indices and weights), and sums the gathered slices. GridSample gathers from flattened
spatial dimensions, one gather per combination of per-dimension taps. RoiAlign's average mode
is two small interpolation matrices per region (rows, then columns).

Arithmetic runs in float32 (float64 for float64 inputs); results are cast back to the input's
dtype, integers rounded and saturated.
"""
import itertools
import math

import numpy as np

from ....ir import resize_rules as rules
from ....runtime.limits import check_allocation
from ..registry import kernel


# --- shared helpers ---------------------------------------------------------------------

def _work_dtype(dtype) -> np.dtype:
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def _cast_back(values: np.ndarray, dtype) -> np.ndarray:
    """`values` in `dtype`; integer results are rounded and clipped to the type's range."""
    dtype = np.dtype(dtype)
    if values.dtype == dtype:
        return values
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.clip(np.rint(values), info.min, info.max).astype(dtype)
    if dtype.kind == "b":
        return values != 0
    return values.astype(dtype)


def _optional_tensor(value):
    """None for an omitted or empty optional input, else the array."""
    if value is None or np.size(value) == 0:
        return None
    return np.asarray(value)


def _linear_weight(distance: np.ndarray) -> np.ndarray:
    return np.maximum(0.0, 1.0 - np.abs(distance))


def _cubic_weight(distance: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution kernel with coefficient `a`, support (-2, 2)."""
    s = np.abs(distance)
    s2 = s * s
    s3 = s2 * s
    near = (a + 2) * s3 - (a + 3) * s2 + 1
    far = a * s3 - 5 * a * s2 + 8 * a * s - 4 * a
    return np.where(s <= 1, near, np.where(s < 2, far, 0.0))


def _along(vector: np.ndarray, axis: int, rank: int) -> np.ndarray:
    """A 1-D array shaped to broadcast along `axis` of a rank-`rank` tensor."""
    shape = [1] * rank
    shape[axis] = vector.shape[0]
    return vector.reshape(shape)


# --- Resize: geometry -------------------------------------------------------------------

def _normalize_axes(axes, rank: int) -> list:
    return rules.normalize_axes(axes, rank)


def _output_geometry(in_shape, axes, scales, sizes, keep_aspect_ratio_policy):
    """Per resized axis: (output size, scale factor, fractional output length)
    (ir/resize_rules.py, shared with the wasm and WebGPU providers)."""
    if sizes is not None:
        sizes = [int(s) for s in np.asarray(sizes).reshape(-1)]
    if scales is not None:
        scales = [float(s) for s in np.asarray(scales, dtype=np.float64).reshape(-1)]
    return rules.output_geometry(in_shape, axes, scales, sizes, keep_aspect_ratio_policy)


def _source_coordinates(transform, out_size, in_size, scale, out_length, roi_start, roi_end):
    """The input coordinate each output position along one axis maps to (float64)."""
    y = np.arange(out_size, dtype=np.float64)
    if transform == "half_pixel":
        return (y + 0.5) / scale - 0.5
    if transform == "half_pixel_symmetric":
        adjustment = out_size / out_length
        offset = in_size / 2 * (1 - adjustment)
        return offset + (y + 0.5) / scale - 0.5
    if transform == "pytorch_half_pixel":
        return (y + 0.5) / scale - 0.5 if out_size > 1 else np.zeros(out_size)
    if transform == "align_corners":
        return y * (in_size - 1) / (out_length - 1) if out_size > 1 else np.zeros(out_size)
    if transform == "asymmetric":
        return y / scale
    if transform == "tf_half_pixel_for_nn":   # opset 11 only
        return (y + 0.5) / scale
    if transform == "tf_crop_and_resize":
        # roi stays in its own (usually float32) type and the terms keep this order, so
        # coordinates that should be whole numbers stay whole for the floor/ceil modes.
        # (the whole output size, not the fractional one align_corners divides by: what
        # onnxruntime computes, checked by hand in the difftest)
        if out_size > 1:
            coords = y * (roi_end - roi_start) * (in_size - 1) / (out_size - 1)
        else:
            coords = np.full(out_size, (roi_end - roi_start) * (in_size - 1) / 2, np.float64)
        return coords + roi_start * (in_size - 1)
    raise ValueError(f"Resize: unknown coordinate_transformation_mode {transform!r}")


# --- Resize: 1-D resampling -------------------------------------------------------------

def _nearest_indices(coords, in_size, nearest_mode, downsampling):
    if nearest_mode == "round_prefer_floor":
        index = np.ceil(coords - 0.5)
    elif nearest_mode == "round_prefer_ceil":
        index = np.floor(coords + 0.5)
    elif nearest_mode == "floor":
        index = np.floor(coords)
    elif nearest_mode == "ceil":
        index = np.ceil(coords)
    elif nearest_mode == "legacy":
        # Upsample and Resize-10 had no nearest_mode: truncate, or round up when shrinking.
        index = np.ceil(coords) if downsampling else np.trunc(coords)
    else:
        raise ValueError(f"Resize: unknown nearest_mode {nearest_mode!r}")
    return np.clip(index, 0, in_size - 1).astype(np.intp)


def _filter_taps(coords, in_size, weight_fn, support, scale, antialias, exclude_outside):
    """Input indices (clamped to the edge) and weights, shape [out, taps], for a filter.

    With antialias the filter is stretched by 1/scale when shrinking, so more inputs feed
    each output, and the weights are normalized to sum to one.
    """
    stretch = min(scale, 1.0) if antialias else 1.0
    half_width = math.ceil(support / stretch)
    base = np.floor(coords).astype(np.int64)
    offsets = np.arange(1 - half_width, half_width + 1)
    index = base[:, None] + offsets[None, :]
    weights = weight_fn((index - coords[:, None]) * stretch)
    if antialias:
        weights = weights / weights.sum(axis=1, keepdims=True)
    if exclude_outside:
        weights = np.where((index < 0) | (index >= in_size), 0.0, weights)
        total = weights.sum(axis=1, keepdims=True)
        weights = weights / np.where(total == 0, 1.0, total)
    return np.clip(index, 0, in_size - 1).astype(np.intp), weights


def _weighted_gather(data, axis, index, weights):
    """sum_k take(data, index[:, k], axis) * weights[:, k], weights broadcast along `axis`."""
    weights = weights.astype(data.dtype)
    result = None
    for k in range(index.shape[1]):
        column = weights[:, k]
        if not column.any():
            continue
        term = np.take(data, index[:, k], axis=axis) * _along(column, axis, data.ndim)
        result = term if result is None else result + term
    if result is None:
        shape = list(data.shape)
        shape[axis] = index.shape[0]
        result = np.zeros(shape, data.dtype)
    return result


def _resize(x, mode, scales=None, sizes=None, roi=None, axes=None,
            coordinate_transformation_mode="half_pixel", cubic_coeff_a=-0.75,
            exclude_outside=0, extrapolation_value=0.0, nearest_mode="round_prefer_floor",
            antialias=0, keep_aspect_ratio_policy="stretch"):
    mode = "linear" if mode == "bilinear" else mode   # Upsample-1 spelling
    if mode not in ("nearest", "linear", "cubic"):
        raise ValueError(f"Resize: unknown mode {mode!r}")
    axes = _normalize_axes(axes, x.ndim)
    geometry = _output_geometry(x.shape, axes, scales, sizes, keep_aspect_ratio_policy)
    out_shape = list(x.shape)
    for axis, (size, _, _) in zip(axes, geometry):
        out_shape[axis] = size
    check_allocation(out_shape, max(x.dtype.itemsize, 4))
    crop = coordinate_transformation_mode == "tf_crop_and_resize"
    if roi is not None:
        roi = np.asarray(roi).reshape(-1)
        if roi.dtype.kind != "f":
            roi = roi.astype(np.float64)
        if roi.shape[0] != 2 * len(axes):
            raise ValueError(f"Resize: roi has {roi.shape[0]} entries, expected {2 * len(axes)}")

    result = x
    work = _work_dtype(x.dtype)
    for i, axis in enumerate(axes):
        out_size, scale, out_length = geometry[i]
        in_size = result.shape[axis]
        roi_start, roi_end = ((roi[i], roi[len(axes) + i]) if roi is not None
                              else (np.float64(0.0), np.float64(1.0)))
        if out_size == in_size and scale == 1.0 and (not crop or (roi_start, roi_end) == (0, 1)):
            continue
        if out_size == 0 or in_size == 0:
            shape = list(result.shape)
            shape[axis] = out_size
            result = np.zeros(shape, result.dtype)
            continue
        coords = _source_coordinates(coordinate_transformation_mode, out_size, in_size, scale,
                                     out_length, roi_start, roi_end)
        if mode == "nearest":
            index = _nearest_indices(coords, in_size, nearest_mode, downsampling=scale < 1)
            result = np.take(result, index, axis=axis)
        else:
            if mode == "linear":
                weight_fn, support = _linear_weight, 1
            else:
                weight_fn, support = (lambda d: _cubic_weight(d, cubic_coeff_a)), 2
            index, weights = _filter_taps(coords, in_size, weight_fn, support, scale,
                                          antialias, exclude_outside)
            source = result if result.dtype == work else result.astype(work)
            result = _weighted_gather(source, axis, index, weights)
        if crop:
            outside = (coords < 0) | (coords > in_size - 1)
            if outside.any():
                fill = np.asarray(extrapolation_value, dtype=work)
                result = np.where(_along(outside, axis, result.ndim), fill, result)
    return _cast_back(result, x.dtype)


@kernel("Resize", since=10)
def resize_10(ctx, x, scales, mode="nearest"):
    return _resize(x, mode, scales=scales, coordinate_transformation_mode="asymmetric",
                   nearest_mode="legacy")


@kernel("Resize", since=11)
def resize_11(ctx, x, roi=None, scales=None, sizes=None, antialias=0, axes=None,
              coordinate_transformation_mode="half_pixel", cubic_coeff_a=-0.75,
              exclude_outside=0, extrapolation_value=0.0,
              keep_aspect_ratio_policy="stretch", mode="nearest",
              nearest_mode="round_prefer_floor"):
    scales, sizes = _optional_tensor(scales), _optional_tensor(sizes)
    if scales is not None and sizes is not None:
        raise ValueError("Resize: only one of scales and sizes may be given")
    return _resize(x, mode, scales=scales, sizes=sizes, roi=_optional_tensor(roi), axes=axes,
                   coordinate_transformation_mode=coordinate_transformation_mode,
                   cubic_coeff_a=cubic_coeff_a, exclude_outside=exclude_outside,
                   extrapolation_value=extrapolation_value, nearest_mode=nearest_mode,
                   antialias=antialias, keep_aspect_ratio_policy=keep_aspect_ratio_policy)


def _upsample(x, scales, mode):
    scales = np.asarray(scales, dtype=np.float64).reshape(-1)
    if scales.shape[0] != x.ndim:
        raise ValueError(f"Upsample: {scales.shape[0]} scales for a rank-{x.ndim} input")
    return _resize(x, mode, scales=scales, coordinate_transformation_mode="asymmetric",
                   nearest_mode="legacy")


@kernel("Upsample")
def upsample_1(ctx, x, height_scale, width_scale, mode="nearest"):
    if x.ndim != 4:
        raise ValueError(f"Upsample-1 expects a 4-D input, got rank {x.ndim}")
    return _upsample(x, [1.0, 1.0, height_scale, width_scale], mode)


@kernel("Upsample", since=7)
def upsample_7(ctx, x, scales, mode="nearest"):
    return _upsample(x, scales, mode)


@kernel("Upsample", since=9)
def upsample_9(ctx, x, scales, mode="nearest"):
    return _upsample(x, scales, mode)


# --- GridSample -------------------------------------------------------------------------

def _reflect(coords, low, high):
    """Fold coordinates outside [low, high] back in, mirroring at each border."""
    span = high - low
    if span <= 0:
        return np.full_like(coords, low)
    below, above = coords < low, coords > high
    distance = np.where(below, low - coords, np.where(above, coords - high, 0.0))
    folds = np.floor(distance / span)
    rest = distance - folds * span
    even = folds % 2 == 0
    from_below = np.where(even, low + rest, high - rest)
    from_above = np.where(even, high - rest, low + rest)
    return np.where(below, from_below, np.where(above, from_above, coords))


def _grid_dimension_taps(coords, size, mode, padding_mode, align_corners):
    """[(index, weight or None)] for one spatial dimension; weight is None for nearest.

    Indices are always in range; taps that fall outside under zeros padding get weight 0.
    """
    if align_corners:
        coords = (coords + 1) / 2 * (size - 1)
        low, high = 0.0, size - 1.0
    else:
        coords = ((coords + 1) * size - 1) / 2
        low, high = -0.5, size - 0.5
    if mode == "nearest":
        coords = np.rint(coords)   # halfway cases to even, as PyTorch
    if padding_mode == "border":
        # Only points beyond the sampling border move; cubic taps near the edge are clamped
        # individually below, which differs from clamping the point itself.
        outside = (coords < low) | (coords > high)
        coords = np.where(outside, np.clip(coords, 0, size - 1), coords)
    elif padding_mode == "reflection":
        coords = _reflect(coords, low, high)

    if mode == "nearest":
        taps = [(np.trunc(coords), None)]
    else:
        base = np.floor(coords)
        t = coords - base
        if mode == "linear":
            taps = [(base, 1 - t), (base + 1, t)]
        else:
            taps = [(base + k, _cubic_weight(t - k, -0.75)) for k in (-1, 0, 1, 2)]

    result = []
    for index, weight in taps:
        if padding_mode == "zeros":
            inside = (index >= 0) & (index <= size - 1)
            if weight is None:
                weight = inside.astype(coords.dtype)
            else:
                weight = np.where(inside, weight, 0)
        elif padding_mode == "reflection":
            index = np.trunc(_reflect(index, low, high))
        result.append((np.clip(index, 0, size - 1).astype(np.intp), weight))
    return result


@kernel("GridSample", since=16)
def grid_sample(ctx, x, grid, mode="linear", padding_mode="zeros", align_corners=0):
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    if mode not in ("linear", "nearest", "cubic"):
        raise ValueError(f"GridSample: unknown mode {mode!r}")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"GridSample: unknown padding_mode {padding_mode!r}")
    n, channels, *spatial = x.shape
    rank = len(spatial)
    if grid.ndim != rank + 2 or grid.shape[0] != n or grid.shape[-1] != rank:
        raise ValueError(f"GridSample: grid of shape {grid.shape} does not fit input {x.shape}")
    out_spatial = grid.shape[1:-1]
    out_shape = (n, channels, *out_spatial)
    if 0 in out_shape or 0 in spatial:
        return np.zeros(out_shape, x.dtype)

    work = _work_dtype(x.dtype)
    points = grid.astype(work, copy=False).reshape(n, -1, rank)
    # The grid's last axis lists (x, y, z, ...): the innermost spatial dimension first.
    per_dim_taps = [
        _grid_dimension_taps(points[:, :, rank - 1 - d], spatial[d], mode, padding_mode,
                             align_corners)
        for d in range(rank)
    ]
    strides = [int(np.prod(spatial[d + 1:])) for d in range(rank)]
    flat = x.astype(work, copy=False).reshape(n, channels, -1)

    result = np.zeros((n, channels, points.shape[1]), work)
    for combo in itertools.product(*per_dim_taps):
        flat_index = sum(index * stride for (index, _), stride in zip(combo, strides))
        weight = None
        for _, w in combo:
            if w is not None:
                weight = w if weight is None else weight * w
        gathered = np.take_along_axis(flat, flat_index[:, None, :], axis=2)
        result += gathered if weight is None else gathered * weight[:, None, :].astype(work)
    return _cast_back(result.reshape(out_shape), x.dtype)


# --- AffineGrid -------------------------------------------------------------------------

def _normalized_positions(size: int, align_corners: int) -> np.ndarray:
    """Pixel positions along one dimension in GridSample's [-1, 1] convention."""
    if align_corners:
        return np.linspace(-1.0, 1.0, size)
    return (2 * np.arange(size) + 1) / size - 1


@kernel("AffineGrid", since=20)
def affine_grid(ctx, theta, size, align_corners=0):
    n, _, *spatial = [int(s) for s in np.asarray(size).reshape(-1)]
    rank = len(spatial)
    if theta.shape != (n, rank, rank + 1):
        raise ValueError(f"AffineGrid: theta must be ({n}, {rank}, {rank + 1}) for size "
                         f"{[n, _, *spatial]}, got {theta.shape}")
    mesh = np.meshgrid(*[_normalized_positions(s, align_corners) for s in spatial],
                       indexing="ij")
    # Homogeneous source points (x, y, [z], 1): x runs along the innermost dimension.
    columns = [m.reshape(-1) for m in reversed(mesh)]
    base = np.stack(columns + [np.ones_like(columns[0])], axis=1)
    grid = np.einsum("pk,njk->npj", base, theta.astype(np.float64))
    return grid.reshape(n, *spatial, rank).astype(theta.dtype)


# --- RoiAlign ---------------------------------------------------------------------------

def _roi_samples(start, bin_size, bins, samples_per_bin, size):
    """Bilinear taps of a region's sampling points along one axis.

    Returns (low, high, low_weight, high_weight), one entry per point, ordered bin-major.
    Points more than one pixel outside the map get zero weights.
    """
    steps = (np.arange(samples_per_bin) + 0.5) * bin_size / samples_per_bin
    coords = (start + np.arange(bins)[:, None] * bin_size + steps[None, :]).reshape(-1)
    valid = (coords >= -1.0) & (coords <= size)
    coords = np.maximum(coords, 0.0)
    low = coords.astype(np.int64)
    at_edge = low >= size - 1
    low = np.where(at_edge, size - 1, low)
    high = np.where(at_edge, size - 1, low + 1)
    frac = np.where(at_edge, 0.0, coords - low)
    return low, high, (1 - frac) * valid, frac * valid


def _interpolation_matrix(low, high, w_low, w_high, bins, samples_per_bin, size):
    """[bins, size]: each row averages the bin's sampling points (bilinear taps summed)."""
    matrix = np.zeros((bins, size))
    row = np.repeat(np.arange(bins), samples_per_bin)
    np.add.at(matrix, (row, low), w_low)
    np.add.at(matrix, (row, high), w_high)
    return matrix / samples_per_bin


def _nonzero_span(matrix):
    """[first, last + 1) of the columns of `matrix` holding any non-zero weight."""
    used = np.flatnonzero(matrix.any(axis=0))
    return (int(used[0]), int(used[-1]) + 1) if used.size else (0, 0)


def _roi_align(x, rois, batch_indices, mode, output_height, output_width, sampling_ratio,
               spatial_scale, half_pixel):
    if mode not in ("avg", "max"):
        raise ValueError(f"RoiAlign: unknown mode {mode!r}")
    _, channels, height, width = x.shape
    work = _work_dtype(x.dtype)
    offset = 0.5 if half_pixel else 0.0
    boxes = rois.astype(np.float64) * spatial_scale - offset
    out = np.zeros((rois.shape[0], channels, output_height, output_width), work)
    for r, (x1, y1, x2, y2) in enumerate(boxes):
        roi_w, roi_h = x2 - x1, y2 - y1
        if not half_pixel:   # legacy mode forces malformed regions to 1x1
            roi_w, roi_h = max(roi_w, 1.0), max(roi_h, 1.0)
        bin_h, bin_w = roi_h / output_height, roi_w / output_width
        grid_h = sampling_ratio if sampling_ratio > 0 else int(math.ceil(bin_h))
        grid_w = sampling_ratio if sampling_ratio > 0 else int(math.ceil(bin_w))
        if grid_h <= 0 or grid_w <= 0:
            continue
        feature = x[int(batch_indices[r])].astype(work, copy=False)
        ys = _roi_samples(y1, bin_h, output_height, grid_h, height)
        xs = _roi_samples(x1, bin_w, output_width, grid_w, width)
        if mode == "avg":
            rows = _interpolation_matrix(*ys, output_height, grid_h, height).astype(work)
            cols = _interpolation_matrix(*xs, output_width, grid_w, width).astype(work)
            # Only the window the region touches takes part in the two products.
            r0, r1 = _nonzero_span(rows)
            c0, c1 = _nonzero_span(cols)
            if r0 < r1 and c0 < c1:
                window = feature[:, r0:r1, c0:c1]
                out[r] = (rows[:, r0:r1] @ window) @ cols[:, c0:c1].T
        else:
            # Max of the four weighted corner values per point, then max over each bin.
            y_low, y_high, wy_low, wy_high = ys
            x_low, x_high, wx_low, wx_high = xs
            best = None
            for yi, wy in ((y_low, wy_low), (y_high, wy_high)):
                rows = feature[:, yi, :]
                for xi, wx in ((x_low, wx_low), (x_high, wx_high)):
                    value = rows[:, :, xi] * np.outer(wy, wx).astype(work)
                    best = value if best is None else np.maximum(best, value)
            best = best.reshape(channels, output_height, grid_h, output_width, grid_w)
            out[r] = best.max(axis=(2, 4))
    return _cast_back(out, x.dtype)


@kernel("RoiAlign", since=10)
def roi_align_10(ctx, x, rois, batch_indices, mode="avg", output_height=1, output_width=1,
                 sampling_ratio=0, spatial_scale=1.0):
    return _roi_align(x, rois, batch_indices, mode, output_height, output_width,
                      sampling_ratio, spatial_scale, half_pixel=False)


@kernel("RoiAlign", since=16)
def roi_align_16(ctx, x, rois, batch_indices, coordinate_transformation_mode="half_pixel",
                 mode="avg", output_height=1, output_width=1, sampling_ratio=0,
                 spatial_scale=1.0):
    if coordinate_transformation_mode not in ("half_pixel", "output_half_pixel"):
        raise ValueError(f"RoiAlign: unknown coordinate_transformation_mode "
                         f"{coordinate_transformation_mode!r}")
    return _roi_align(x, rois, batch_indices, mode, output_height, output_width,
                      sampling_ratio, spatial_scale,
                      half_pixel=coordinate_transformation_mode == "half_pixel")
