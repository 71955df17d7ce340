"""Comparisons, logical operators and Where.

Small operands with host values (shapes, If conditions) are computed in Python; others run
er_compare / er_not / er_where, which take any numeric element type and broadcast like the
arithmetic kernels.
"""
from __future__ import annotations

import operator as op

from ....ir import dtypes
from . import operator
from .common import broadcast_shape, broadcast_strides, refuse, host_values, merge_dims
from .host_math import elementwise, has_values
from .tensor import CAST_TYPES
from .text import compare_strings, is_strings
from ..device import WasmTensor

# op_type -> (er_compare code, the same on Python values)
COMPARE = {
    "Equal": (0, op.eq), "Less": (1, op.lt), "Greater": (2, op.gt),
    "LessOrEqual": (3, op.le), "GreaterOrEqual": (4, op.ge),
    "And": (5, lambda a, b: bool(a) and bool(b)), "Or": (6, lambda a, b: bool(a) or bool(b)),
    "Xor": (7, lambda a, b: bool(a) != bool(b)),
}


@operator(*COMPARE)
@host_values                            # Equal takes strings, which stay on the host
def bind_compare(dev, node, opset):
    code, fn = COMPARE[node.op_type]

    def run(ctx, a, b, **attrs):
        if type(a) is not WasmTensor or type(b) is not WasmTensor:
            if node.op_type == "Equal" and is_strings(a) and is_strings(b):
                return compare_strings(dev, fn, a, b)
            refuse(node, a, b)
        if a.elem_type != b.elem_type:
            raise TypeError(f"{node.op_type} inputs differ in type: "
                            f"{dtypes.type_string(a.elem_type)} and "
                            f"{dtypes.type_string(b.elem_type)}")
        if has_values(a, b):
            shape, values = elementwise(fn, (a, b))
            return dev.from_ints([int(v) for v in values], shape, dtypes.BOOL)
        if a.elem_type not in CAST_TYPES:
            refuse(node, a, b)
        shape = broadcast_shape(a.shape, b.shape)
        y = dev.empty(shape, dtypes.BOOL)
        if y.size:
            dims, (sa, sb) = merge_dims(shape, broadcast_strides(a.shape, shape),
                                        broadcast_strides(b.shape, shape))
            dev.set_args(dims + sa + sb)
            dev.call("er_compare", code, a.elem_type, a.ptr, b.ptr, y.ptr, len(dims))
        return y
    return run


@operator("Not")
def bind_not(dev, node, opset):
    def run(ctx, x, **_):
        if has_values(x):
            return dev.from_ints([int(not v) for v in x.ints], x.shape, dtypes.BOOL)
        y = dev.empty(x.shape, dtypes.BOOL)
        dev.call("er_not", x.ptr, y.ptr, x.size)
        return y
    return run


@operator("Where")
def bind_where(dev, node, opset):
    def run(ctx, cond, a, b, **_):
        if a.elem_type != b.elem_type:
            raise TypeError(f"Where branches differ in type: {dtypes.type_string(a.elem_type)} "
                            f"and {dtypes.type_string(b.elem_type)}")
        if has_values(cond, a, b):
            shape, values = elementwise(lambda c, x, z: x if c else z, (cond, a, b))
            return dev.from_ints(values, shape, a.elem_type)
        shape = broadcast_shape(cond.shape, a.shape, b.shape)
        y = dev.empty(shape, a.elem_type)
        if y.size:
            dims, strides = merge_dims(shape, *(broadcast_strides(t.shape, shape)
                                                for t in (cond, a, b)))
            dev.set_args(dims + strides[0] + strides[1] + strides[2])
            dev.call("er_where", cond.ptr, a.ptr, b.ptr, y.ptr, a.itemsize, len(dims))
        return y
    return run
