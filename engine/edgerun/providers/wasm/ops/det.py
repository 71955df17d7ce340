"""Det (er_det, wasm_kernels/det.c): LU with partial pivoting per matrix, in double."""
from __future__ import annotations

from . import operator
from .common import product
from .typed_floats import typed_or_refused


@operator("Det")
def bind_det(dev, node, opset):
    def run(ctx, x):
        if len(x.shape) < 2 or x.shape[-1] != x.shape[-2]:
            raise ValueError(f"Det: input must be [*, M, M], got shape {list(x.shape)}")
        n = x.shape[-1]
        y = dev.empty(x.shape[:-2], x.elem_type)
        if y.size == 0:
            return y
        scratch = dev.scratch(8 * max(n * n, 1))
        dev.call("er_det", x.ptr, y.ptr, scratch.ptr, x.elem_type, product(x.shape[:-2]), n)
        return y
    return typed_or_refused(dev, node, opset, run)
