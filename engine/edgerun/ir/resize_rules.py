"""Resize's geometry in pure Python (no numpy: the wasm provider computes it in a page):
output sizes, the source coordinate of each output position along one axis, and the taps
(input indices and weights) that resample it. Providers apply the taps axis by axis.

Every step follows the CPU kernel's float64 arithmetic (providers/cpu/ops/resize.py), order
of operations included, so nearest indices and weights come out the same; float32 roi values
are combined in float32 where numpy does.
"""
from __future__ import annotations

import math

from .dtypes import as_float32

TRANSFORMS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
              "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "legacy")
POLICIES = ("stretch", "not_larger", "not_smaller")


def normalize_axes(axes, rank: int) -> list:
    if axes is None:
        return list(range(rank))
    result = []
    for a in axes:
        if not -rank <= a < rank:
            raise ValueError(f"Resize: axis {a} is out of range for rank {rank}")
        result.append(a + rank if a < 0 else a)
    return result


def output_geometry(in_shape, axes, scales, sizes, policy: str) -> list:
    """Per resized axis: (output size, scale factor, fractional output length)."""
    in_sizes = [in_shape[a] for a in axes]
    if sizes is not None:
        if len(sizes) != len(axes):
            raise ValueError(f"Resize: sizes has {len(sizes)} entries, expected {len(axes)}")
        ratios = [s / n if n else 1.0 for s, n in zip(sizes, in_sizes)]
        if policy == "stretch":
            return [(int(s), r, float(s)) for s, r in zip(sizes, ratios)]
        if policy not in POLICIES:
            raise ValueError(f"Resize: unknown keep_aspect_ratio_policy {policy!r}")
        scale = min(ratios) if policy == "not_larger" else max(ratios)
        return [(int(math.floor(scale * n + 0.5)), scale, scale * n) for n in in_sizes]
    if scales is None:
        raise ValueError("Resize: one of scales and sizes must be given")
    if len(scales) != len(axes):
        raise ValueError(f"Resize: scales has {len(scales)} entries, expected {len(axes)}")
    if any(s <= 0 for s in scales):
        raise ValueError(f"Resize: scales must be positive, got {list(scales)}")
    return [(int(math.floor(n * s)), s, n * s) for n, s in zip(in_sizes, scales)]


def source_coordinates(transform: str, out_size: int, in_size: int, scale: float,
                       out_length: float, roi_start: float, roi_end: float,
                       roi_float32: bool = False) -> list:
    """The input coordinate each output position along one axis maps to."""
    ys = range(out_size)
    if transform == "half_pixel":
        return [(y + 0.5) / scale - 0.5 for y in ys]
    if transform == "half_pixel_symmetric":
        offset = in_size / 2 * (1 - out_size / out_length)
        return [offset + (y + 0.5) / scale - 0.5 for y in ys]
    if transform == "pytorch_half_pixel":
        return [(y + 0.5) / scale - 0.5 if out_size > 1 else 0.0 for y in ys]
    if transform == "align_corners":
        return [y * (in_size - 1) / (out_length - 1) if out_size > 1 else 0.0 for y in ys]
    if transform == "asymmetric":
        return [y / scale for y in ys]
    if transform == "tf_half_pixel_for_nn":
        return [(y + 0.5) / scale for y in ys]
    if transform == "tf_crop_and_resize":
        f32 = as_float32 if roi_float32 else float
        span = f32(roi_end - roi_start)
        start = f32(roi_start * (in_size - 1))
        if out_size > 1:
            return [y * span * (in_size - 1) / (out_size - 1) + start for y in ys]
        middle = f32(f32(span * (in_size - 1)) / 2)
        return [middle + start for _ in ys]
    raise ValueError(f"Resize: unknown coordinate_transformation_mode {transform!r}")


def nearest_indices(coords, in_size: int, mode: str, downsampling: bool) -> list:
    pick = {"round_prefer_floor": lambda c: math.ceil(c - 0.5),
            "round_prefer_ceil": lambda c: math.floor(c + 0.5),
            "floor": math.floor, "ceil": math.ceil,
            # Upsample and Resize-10: truncate, or round up when shrinking
            "legacy": math.ceil if downsampling else math.trunc}.get(mode)
    if pick is None:
        raise ValueError(f"Resize: unknown nearest_mode {mode!r}")
    return [min(max(pick(c), 0), in_size - 1) for c in coords]


def _linear(distance: float, a: float) -> float:
    return max(0.0, 1.0 - abs(distance))


def _cubic(distance: float, a: float) -> float:
    """Keys' cubic convolution kernel with coefficient `a`, support (-2, 2)."""
    s = abs(distance)
    s2 = s * s
    s3 = s2 * s
    if s <= 1:
        return (a + 2) * s3 - (a + 3) * s2 + 1
    if s < 2:
        return a * s3 - 5 * a * s2 + 8 * a * s - 4 * a
    return 0.0


def filter_taps(coords, in_size: int, mode: str, cubic_a: float, scale: float,
                antialias: bool, exclude_outside: bool) -> tuple:
    """(indices, weights): per output position the input indices (clamped to the edge) and
    float32 weights, the same number for every position; tap columns whose weight is zero
    everywhere are left out (so an inf there cannot make a NaN)."""
    weight, support = (_linear, 1) if mode == "linear" else (_cubic, 2)
    stretch = min(scale, 1.0) if antialias else 1.0
    half = math.ceil(support / stretch)
    offsets = range(1 - half, half + 1)
    rows_index, rows_weight = [], []
    for c in coords:
        base = math.floor(c)
        index = [base + k for k in offsets]
        w = [weight((i - c) * stretch, cubic_a) for i in index]
        if antialias:
            total = sum(w)
            w = [v / total for v in w]
        if exclude_outside:
            w = [0.0 if i < 0 or i >= in_size else v for i, v in zip(index, w)]
            total = sum(w)
            w = [v / (total if total != 0 else 1.0) for v in w]
        rows_index.append([min(max(i, 0), in_size - 1) for i in index])
        rows_weight.append([as_float32(v) for v in w])
    used = [k for k in range(len(offsets)) if any(row[k] != 0 for row in rows_weight)]
    return ([[row[k] for k in used] for row in rows_index],
            [[row[k] for k in used] for row in rows_weight])
