"""Values made from attributes and shapes: Constant, ConstantOfShape and Range.

String constants stay host values (linear memory holds no strings; see text.py).

Without numpy the optimizer does not fold these away, so they run every call: Constant
uploads its value once, when the node is bound; ConstantOfShape keeps its last result for
the same shape (the light model zoo builds every weight with it), since values are never
written in place (while a program is recorded it fills a block of its own, so the program
never refers to a block this cache may drop).
"""
from __future__ import annotations

import math
from array import array

from ....ir import Tensor, dtypes
from ....ir.dtypes import as_float32
from ....ir.host_tensor import HostTensor
from . import operator
from .common import floats_as, host_floats, product
from .text import string_tensor
from ..device import INT_FORMATS, SMALL_INTS, UNHELD_TYPES

_VALUE_ATTRS = ("value", "value_float", "value_floats", "value_int", "value_ints",
                "value_string", "value_strings")


def check_constant(node, opset) -> str:
    names = set(node.attributes)
    if not names & set(_VALUE_ATTRS):
        return f"Constant with {sorted(names)} (sparse values need numpy)"
    value = node.attr("value")
    if value is not None and value.elem_type in UNHELD_TYPES - {dtypes.STRING}:
        return f"Constant of {dtypes.type_string(value.elem_type)}"
    return ""


def constant_value(node) -> HostTensor:
    a = node.attr
    if a("value") is not None:
        return HostTensor.from_ir(a("value"))
    if a("value_string") is not None:
        return HostTensor(dtypes.STRING, (), [a("value_string")])
    if a("value_strings") is not None:
        return HostTensor(dtypes.STRING, (len(a("value_strings")),), a("value_strings"))
    if a("value_float") is not None:
        return HostTensor(dtypes.FLOAT, (), array("f", [a("value_float")]).tobytes())
    if a("value_floats") is not None:
        v = list(a("value_floats"))
        return HostTensor(dtypes.FLOAT, (len(v),), array("f", v).tobytes())
    if a("value_int") is not None:
        return HostTensor(dtypes.INT64, (), array("q", [a("value_int")]).tobytes())
    v = list(a("value_ints"))
    return HostTensor(dtypes.INT64, (len(v),), array("q", v).tobytes())


@operator("Constant", check=check_constant)
def bind_constant(dev, node, opset):
    value = constant_value(node)
    if value.elem_type == dtypes.STRING:
        value = string_tensor(dev, value.shape, value.data)
    else:
        value = dev.upload(value)
    return lambda ctx, **_: value


@operator("ConstantOfShape")
def bind_constant_of_shape(dev, node, opset):
    value: Tensor = node.attr("value")
    elem_type = value.elem_type if value is not None else dtypes.FLOAT
    itemsize = dtypes.elem_type(elem_type).bits // 8
    element = bytes(value.raw[:itemsize]) if value is not None else bytes(4)
    last = {}

    def run(ctx, shape_t, **_):
        shape = tuple(dev.ints(shape_t))
        t = last.get(shape) if dev.recorder is None else None   # a program fills its own
        if t is None:
            if min(shape, default=0) < 0:
                raise ValueError(f"ConstantOfShape: negative dimension in {list(shape)}")
            if elem_type in INT_FORMATS and product(shape) <= SMALL_INTS:
                v = array(INT_FORMATS[elem_type], element)[0]
                t = dev.from_ints([v] * product(shape), shape, elem_type)
            else:
                t = dev.fill(dev.empty(shape, elem_type), element)
            if dev.recorder is None:
                last.clear()
                last[shape] = t
        return t
    return run


@operator("Range")
def bind_range(dev, node, opset):
    """Computed on the host, as the CPU kernel does: integers exactly, float16 and bfloat16
    in float32 (the stash type) or float64, wider floats in float64."""
    def run(ctx, start, limit, delta, stash_type=1, **_):
        kind = start.elem_type
        if kind in INT_FORMATS:
            s, l, d = dev.ints(start)[0], dev.ints(limit)[0], dev.ints(delta)[0]
            if d == 0:
                raise ValueError("Range delta must not be zero")
            n = max(-((s - l) // d), 0)
            return dev.from_ints([s + i * d for i in range(n)], (n,), kind)
        s, l, d = (host_floats(dev, t)[0] for t in (start, limit, delta))
        if d == 0:
            raise ValueError("Range delta must not be zero")
        if not math.isfinite((l - s) / d):
            raise ValueError(f"Range from {s} to {l} by {d} has no finite length")
        n = max(math.ceil((l - s) / d), 0)
        if dtypes.elem_type(kind).bits <= 16 and stash_type == 1:
            s, d = as_float32(s), as_float32(d)
            values = [as_float32(s + as_float32(i * d)) for i in range(n)]
        else:
            values = [s + i * d for i in range(n)]
        return floats_as(dev, values, (n,), kind)
    return run
