"""RoiAlign (er_roi_align, wasm_kernels/roi_align.c): regions pooled to fixed-size bins of
bilinear samples. The regions are data (a detector's proposals), so their geometry - and the
sampling grid, which follows the region's size when sampling_ratio is 0 - is computed in the
kernel, not on the host: a graph with RoiAlign records and replays as a program."""
from __future__ import annotations

from ....ir import dtypes
from . import operator
from .common import converted
from .typed_floats import typed_or_refused

MODES = {"avg": 0, "max": 2}
TRANSFORMS = {"half_pixel": 1, "output_half_pixel": 0}


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _transform(node, opset) -> str:
    """opset 10 has no attribute and the legacy (output_half_pixel) coordinates."""
    if opset < 16:
        return "output_half_pixel"
    return _text(node.attr("coordinate_transformation_mode", "half_pixel"))


def check_roi_align(node, opset) -> str:
    mode = _text(node.attr("mode", "avg"))
    transform = _transform(node, opset)
    if mode not in MODES or transform not in TRANSFORMS:
        return f"RoiAlign mode={mode!r} coordinate_transformation_mode={transform!r}"
    return ""


@operator("RoiAlign", check=check_roi_align)
def bind_roi_align(dev, node, opset):
    flags = MODES[_text(node.attr("mode", "avg"))] | TRANSFORMS[_transform(node, opset)]
    out_h = int(node.attr("output_height", 1))
    out_w = int(node.attr("output_width", 1))
    sampling_ratio = int(node.attr("sampling_ratio", 0))
    spatial_scale = float(node.attr("spatial_scale", 1.0))

    def run(ctx, x, rois, batch_indices):
        if len(x.shape) != 4:
            raise ValueError(f"RoiAlign: X must be [N, C, H, W], got shape {list(x.shape)}")
        n, c, h, w = x.shape
        if len(rois.shape) != 2 or rois.shape[1] != 4:
            raise ValueError(f"RoiAlign: rois must be [num_rois, 4], got shape "
                             f"{list(rois.shape)}")
        count = rois.shape[0]
        if tuple(batch_indices.shape) != (count,):
            raise ValueError(f"RoiAlign: batch_indices must be [{count}] for rois "
                             f"{list(rois.shape)}, got shape {list(batch_indices.shape)}")
        if batch_indices.elem_type not in (dtypes.INT64, dtypes.INT32):
            raise TypeError(f"RoiAlign: batch_indices must be int64, got "
                            f"{dtypes.type_string(batch_indices.elem_type)}")
        if out_h < 1 or out_w < 1:
            raise ValueError(f"RoiAlign: output_height and output_width must be positive, got "
                             f"{out_h} and {out_w}")
        y = dev.empty((count, c, out_h, out_w), x.elem_type)
        if y.size == 0:
            return y
        if h == 0 or w == 0:
            raise ValueError(f"RoiAlign: X has an empty spatial axis, shape {list(x.shape)}")
        index = converted(dev, batch_indices, dtypes.INT64)
        acc = dev.scratch(8 * c)
        dev.set_args([n, c, h, w, count, out_h, out_w])
        bad = dev.call("er_roi_align", x.ptr, rois.ptr, index.ptr, y.ptr, acc.ptr, x.elem_type,
                       rois.elem_type, sampling_ratio, spatial_scale, flags)
        if bad:
            raise IndexError(f"RoiAlign: batch_indices[{bad - 1}] is outside [0, {n}), the "
                             f"batch of X {list(x.shape)}")
        return y
    return typed_or_refused(dev, node, opset, run, float_inputs=(0, 1))
