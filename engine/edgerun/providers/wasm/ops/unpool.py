"""MaxUnpool: MaxPool's values put back at their (flat) indices in a zero tensor, with the
existing kernels (er_fill, er_elements' scatter, er_copy_strided), for any element type.

As in the CPU provider (and ONNX's own cases), the indices address the shape inferred from
the pooling attributes; a given output_shape then holds those values in its leading corner.
"""
from __future__ import annotations

from ....ir import dtypes
from . import operator
from .common import contiguous_strides, product
from .tensor import copy_strided

INDEX_TYPES = (dtypes.INT64, dtypes.INT32)


def check_max_unpool(node, opset) -> str:
    return "" if node.attr("kernel_shape") is not None else "MaxUnpool without kernel_shape"


@operator("MaxUnpool", check=check_max_unpool)
def bind_max_unpool(dev, node, opset):
    kernel = [int(k) for k in node.attr("kernel_shape")]
    rank = len(kernel)
    strides = [int(s) for s in node.attr("strides", None) or [1] * rank]
    pads = [int(p) for p in node.attr("pads", None) or [0] * (2 * rank)]

    def run(ctx, x, indices, output_shape_t=None, **_):
        if len(x.shape) != rank + 2:
            raise ValueError(f"MaxUnpool: X must be (N, C, D1, ...) with one spatial axis per "
                             f"kernel_shape entry {kernel}, got shape {list(x.shape)}")
        if tuple(indices.shape) != tuple(x.shape):
            raise ValueError(f"MaxUnpool: indices shape {list(indices.shape)} must equal X "
                             f"shape {list(x.shape)}")
        if indices.elem_type not in INDEX_TYPES:
            raise TypeError(f"MaxUnpool: indices must be int64, got "
                            f"{dtypes.type_string(indices.elem_type)}")
        inferred = list(x.shape[:2]) + [
            (x.shape[2 + i] - 1) * strides[i] - pads[i] - pads[rank + i] + kernel[i]
            for i in range(rank)]
        if min(inferred) < 0:
            raise ValueError(f"MaxUnpool: the attributes give a negative output shape "
                             f"{inferred} for X {list(x.shape)}")
        y = dev.zeros(inferred, x.elem_type)
        if x.size:
            dev.set_args([1, 0, x.size, 1, y.size])
            bad = dev.call("er_elements", 1, y.ptr, x.ptr, indices.ptr,
                           int(indices.elem_type == dtypes.INT64), x.elem_type, x.itemsize, 0)
            if bad:
                raise IndexError(f"MaxUnpool: index {-1 - bad} of indices is outside "
                                 f"[{-y.size}, {y.size}), the output's {inferred} elements")
        if output_shape_t is None:
            return y
        shape = [int(d) for d in dev.ints(output_shape_t)]
        if len(shape) != len(inferred) or min(shape) < 0:
            raise ValueError(f"MaxUnpool: output_shape {shape} must have rank {len(inferred)} "
                             f"and no negative size")
        if shape == inferred:
            return y
        out = dev.zeros(shape, x.elem_type)
        corner = [min(a, b) for a, b in zip(inferred, shape)]
        if product(corner):
            copy_strided(dev, out.ptr, y.ptr, x.itemsize, corner, contiguous_strides(shape),
                         contiguous_strides(inferred))
        return out
    return run
