"""Resize (opsets 10-19) and Upsample: separable, one pass per resized axis; GridSample
(er_grid_sample) and AffineGrid.

The geometry (output sizes, source coordinates, taps) is ir/resize_rules.py's, computed on
the host once per input shape and sizes/scales/roi values. Nearest passes gather slices
(er_gather, any element type); linear and cubic passes (er_resample) run in float32, as the
CPU kernel does, and integer results are rounded and saturated back to their type.
"""
from __future__ import annotations

from typing import Optional

from array import array

from ....ir import dtypes, resize_rules as rules
from ....ir.host_tensor import HostTensor
from . import operator
from .common import converted, float_or_refused, host_floats, product
from .elementwise import MAP_UNARY, map_unary
from .tensor import CAST_TYPES, take
from ..device import WasmTensor

INT_RANGES = {dtypes.INT8: (-128, 127), dtypes.UINT8: (0, 255), dtypes.INT16: (-32768, 32767),
              dtypes.UINT16: (0, 65535), dtypes.INT32: (-2 ** 31, 2 ** 31 - 1),
              dtypes.UINT32: (0, 2 ** 32 - 1), dtypes.INT64: (-2 ** 63, 2 ** 63 - 1),
              dtypes.UINT64: (0, 2 ** 64 - 1)}


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else value


def check_resize(node, opset) -> str:
    mode = _text(node.attr("mode", "nearest"))
    if mode not in ("nearest", "linear", "cubic", "bilinear"):
        return f"mode={mode!r}"
    transform = _text(node.attr("coordinate_transformation_mode", "half_pixel"))
    if transform not in rules.TRANSFORMS:
        return f"coordinate_transformation_mode={transform!r}"
    if _text(node.attr("nearest_mode", "round_prefer_floor")) not in rules.NEAREST_MODES:
        return f"nearest_mode={node.attr('nearest_mode')!r}"
    if node.op_type == "Upsample" and opset < 7:
        return "Upsample-1 (height_scale/width_scale attributes)"
    return ""


def _floats(dev, t) -> Optional[list]:
    """A small float tensor's values (scales, roi); None when absent or empty."""
    return host_floats(dev, t) if t is not None and t.size else None


@operator("Resize", "Upsample", check=check_resize)
def bind_resize(dev, node, opset):
    legacy = node.op_type == "Upsample" or opset < 11       # asymmetric, legacy nearest
    mode = _text(node.attr("mode", "nearest"))
    mode = "linear" if mode == "bilinear" else mode
    transform = "asymmetric" if legacy else \
        _text(node.attr("coordinate_transformation_mode", "half_pixel"))
    nearest = "legacy" if legacy else _text(node.attr("nearest_mode", "round_prefer_floor"))
    cubic_a = float(node.attr("cubic_coeff_a", -0.75))
    exclude_outside = bool(node.attr("exclude_outside", 0))
    fill = float(node.attr("extrapolation_value", 0.0))
    antialias = bool(node.attr("antialias", 0))
    policy = _text(node.attr("keep_aspect_ratio_policy", "stretch"))
    axes_attr = node.attr("axes")
    scales_attr = node.attr("scales")                # Upsample-7
    plans: dict = {}

    def plan(shape, scales, sizes, roi, roi32):
        """Per resized axis: (axis, out size, nearest indices or (indices, weights), outside
        flags or None)."""
        key = (tuple(shape), tuple(scales or ()), tuple(sizes or ()), tuple(roi or ()))
        if key in plans:
            return plans[key]
        axes = rules.normalize_axes(axes_attr, len(shape))
        geometry = rules.output_geometry(shape, axes, scales, sizes, policy)
        crop = transform == "tf_crop_and_resize"
        if roi is not None and len(roi) != 2 * len(axes):
            raise ValueError(f"Resize: roi has {len(roi)} entries, expected {2 * len(axes)}")
        passes = []
        for i, axis in enumerate(axes):
            out_size, scale, length = geometry[i]
            in_size = shape[axis]
            start, end = (roi[i], roi[len(axes) + i]) if roi is not None else (0.0, 1.0)
            if out_size == in_size and scale == 1.0 and (not crop or (start, end) == (0, 1)):
                continue
            if out_size == 0 or in_size == 0:
                passes.append((axis, out_size, None, None))
                continue
            coords = rules.source_coordinates(transform, out_size, in_size, scale, length,
                                              start, end, roi32)
            taps = rules.nearest_indices(coords, in_size, nearest, scale < 1) \
                if mode == "nearest" else \
                rules.filter_taps(coords, in_size, mode, cubic_a, scale, antialias,
                                  exclude_outside)
            outside = [int(c < 0 or c > in_size - 1) for c in coords] if crop else None
            passes.append((axis, out_size, taps, outside if outside and any(outside) else None))
        plans[key] = passes
        return passes

    def run(ctx, x, *rest, **_):
        if x.elem_type not in CAST_TYPES:
            raise TypeError(f"Resize of {dtypes.type_string(x.elem_type)} has no wasm kernel")
        roi_t = None
        if node.op_type == "Upsample":
            scales, sizes, roi = (list(scales_attr) if scales_attr is not None
                                  else _floats(dev, rest[0])), None, None
        elif opset < 11:
            scales, sizes, roi = _floats(dev, rest[0]), None, None
        else:
            roi_t = rest[0] if len(rest) > 0 else None
            roi = _floats(dev, roi_t)
            scales = _floats(dev, rest[1]) if len(rest) > 1 else None
            sizes = list(dev.ints(rest[2])) if len(rest) > 2 and rest[2] is not None and \
                rest[2].size else None
            if scales is not None and sizes is not None:
                raise ValueError("Resize: only one of scales and sizes may be given")
        roi32 = roi is not None and roi_t.elem_type == dtypes.FLOAT
        passes = plan(x.shape, scales, sizes, roi, roi32)
        float_path = mode != "nearest" or any(p[3] is not None for p in passes)
        y = converted(dev, x, dtypes.FLOAT) if float_path else x
        for axis, out_size, taps, outside in passes:
            y = _resample(dev, y, axis, out_size, taps, outside, fill, mode == "nearest")
        if not float_path or x.elem_type == dtypes.FLOAT:
            return y
        return _float_back(dev, y, x.elem_type)
    return run


def _upload(dev, elem_type: int, fmt: str, values, shape) -> WasmTensor:
    return dev.upload(HostTensor(elem_type, shape, array(fmt, values).tobytes()))


def _resample(dev, x: WasmTensor, axis: int, out_size: int, taps, outside, fill: float,
              nearest: bool) -> WasmTensor:
    shape = list(x.shape)
    outer, in_n, inner = product(shape[:axis]), shape[axis], product(shape[axis + 1:])
    shape[axis] = out_size
    y = dev.empty(shape, x.elem_type)
    if y.size == 0 or taps is None:
        return dev.zeros(shape, x.elem_type)
    if nearest and outside is None:
        return take(dev, x, axis, taps)
    index, weight = ([[i] for i in taps], [[1.0]] * out_size) if nearest else taps
    count = len(index[0])
    index_t = _upload(dev, dtypes.INT32, "i", [i for row in index for i in row],
                      (out_size, count))
    weight_t = _upload(dev, dtypes.FLOAT, "f", [w for row in weight for w in row],
                       (out_size, count))
    flags = _upload(dev, dtypes.UINT8, "B", outside, (out_size,)) if outside else None
    dev.call("er_resample", x.ptr, y.ptr, outer, in_n, inner, out_size, index_t.ptr,
             weight_t.ptr, count, flags.ptr if flags is not None else 0, fill)
    return y


def _float_back(dev, y: WasmTensor, elem_type: int) -> WasmTensor:
    """float32 results in the input's type: integers rounded (ties to even) and saturated,
    bool nonzero."""
    if elem_type in INT_RANGES:
        lo, hi = INT_RANGES[elem_type]
        y = map_unary(dev, MAP_UNARY.index("Round"), y, dtypes.FLOAT)
        y = map_unary(dev, MAP_UNARY.index("Clip"), y, dtypes.FLOAT, float(lo), float(hi))
    return converted(dev, y, elem_type)


GRID_MODES = {"linear": 0, "bilinear": 0, "nearest": 1, "cubic": 2, "bicubic": 2}
GRID_PADDING = {"zeros": 0, "border": 1, "reflection": 2}


def check_grid_sample(node, opset) -> str:
    mode = _text(node.attr("mode", "linear" if opset >= 20 else "bilinear"))
    padding = _text(node.attr("padding_mode", "zeros"))
    if mode not in GRID_MODES or padding not in GRID_PADDING:
        return f"GridSample mode={mode!r} padding_mode={padding!r}"
    return ""


@operator("GridSample", check=check_grid_sample)
def bind_grid_sample(dev, node, opset):
    mode = GRID_MODES[_text(node.attr("mode", "linear" if opset >= 20 else "bilinear"))]
    padding = GRID_PADDING[_text(node.attr("padding_mode", "zeros"))]
    align = int(node.attr("align_corners", 0))

    def run(ctx, x, grid, **_):
        n, c, *spatial = x.shape
        rank = len(spatial)
        if not 1 <= rank <= 3 or len(grid.shape) != rank + 2 or grid.shape[0] != n or \
                grid.shape[-1] != rank:
            raise ValueError(f"GridSample: grid of shape {list(grid.shape)} does not fit input "
                             f"{list(x.shape)}")
        out_spatial = list(grid.shape[1:-1])
        y = dev.empty([n, c] + out_spatial)
        if y.size == 0:
            return y
        if 0 in spatial:
            return dev.zeros(y.shape)
        dev.set_args([n, c, rank] + spatial + [product(out_spatial)])
        dev.call("er_grid_sample", x.ptr, grid.ptr, y.ptr, mode, padding, align)
        return y
    return float_or_refused(dev, node, opset, run)


@operator("AffineGrid")
def bind_affine_grid(dev, node, opset):
    """grid[n, p] = theta[n] (x_p, y_p, [z_p,] 1): the base points in GridSample's [-1, 1]
    convention (x along the innermost axis), one er_sgemm per batch entry."""
    align = int(node.attr("align_corners", 0))

    def run(ctx, theta, size_t, **_):
        n, _, *spatial = dev.ints(size_t)
        rank = len(spatial)
        if tuple(theta.shape) != (n, rank, rank + 1):
            raise ValueError(f"AffineGrid: theta must be ({n}, {rank}, {rank + 1}) for size "
                             f"{list(dev.ints(size_t))}, got {list(theta.shape)}")
        axes = [_positions(s, align) for s in spatial]
        points = product(spatial)
        base = []
        for p in range(points):
            index, rest = [], p
            for s in reversed(spatial):
                index.append(rest % s)
                rest //= s
            base.extend([axes[rank - 1 - d][i] for d, i in enumerate(index)] + [1.0])
        base_t = dev.from_floats(base, (points, rank + 1))
        y = dev.empty([n] + spatial + [rank])
        for i in range(n):     # (points, rank + 1) x theta[i]^T
            dev.call("er_sgemm", points, rank, rank + 1, base_t.ptr, rank + 1, 1,
                     theta.ptr + i * rank * (rank + 1) * 4, 1, rank + 1,
                     y.ptr + i * points * rank * 4, rank, 0)
        return y
    return float_or_refused(dev, node, opset, run, float_inputs=[0])


def _positions(size: int, align: int) -> list:
    """Pixel positions along one axis in GridSample's [-1, 1] convention."""
    if align:
        return [-1.0 + 2.0 * i / (size - 1) if size > 1 else -1.0 for i in range(size)]
    return [(2 * i + 1) / size - 1 for i in range(size)]
