"""Small constant tensors as flat Python lists: decoding initializers and computing on them.

A tracked value is a flat list in row-major order; its shape is the value's inferred shape.
Elements are ints (integer and bool types), floats, or, for integer tensors that hold
dimensions (Shape outputs and what is computed from them), symbolic names or None.
"""
from __future__ import annotations

import struct

from ..ir import dtypes
from ..ir.broadcast import broadcast_map, strides  # noqa: F401 - shape rules use V.*
from . import symbolic

MAX_ELEMENTS = 1024   # larger constants are not tracked

_FORMATS = {dtypes.FLOAT: "f", dtypes.UINT8: "B", dtypes.INT8: "b", dtypes.UINT16: "H",
            dtypes.INT16: "h", dtypes.INT32: "i", dtypes.INT64: "q", dtypes.BOOL: "?",
            dtypes.FLOAT16: "e", dtypes.DOUBLE: "d", dtypes.UINT32: "I", dtypes.UINT64: "Q"}

INTEGER_TYPES = {dtypes.UINT8, dtypes.INT8, dtypes.UINT16, dtypes.INT16, dtypes.INT32,
                 dtypes.INT64, dtypes.UINT32, dtypes.UINT64}
FLOAT_TYPES = {dtypes.FLOAT, dtypes.FLOAT16, dtypes.DOUBLE, dtypes.BFLOAT16}


def decode(tensor):
    """The elements of an ir.Tensor as a flat list, or None when too large or not numeric."""
    n = tensor.size
    fmt = _FORMATS.get(tensor.elem_type)
    if fmt is None or n > MAX_ELEMENTS:
        return None
    raw = tensor.raw
    if len(raw) != n * struct.calcsize(fmt):
        return None          # external data not loaded, or malformed
    items = list(struct.unpack(f"<{n}{fmt}", raw))
    if tensor.elem_type == dtypes.BOOL:
        items = [int(v) for v in items]
    return items


def cast(items, elem_type: int):
    """Elements converted as Cast would; None where that is not exact in Python."""
    out: list = []
    for v in items:
        if v is None or isinstance(v, str):
            out.append(v if elem_type in INTEGER_TYPES else None)
        elif elem_type == dtypes.BOOL:
            out.append(int(bool(v)))
        elif elem_type in INTEGER_TYPES:
            if v != v or v in (float("inf"), float("-inf")):
                return None
            out.append(int(v))
        elif elem_type in FLOAT_TYPES:
            out.append(float(v))
        else:
            return None
    return out




def _int_div(a, b):
    if b == 0:
        return None
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _numeric(op):
    def apply(a, b):
        if a is None or b is None:
            return None
        return op(a, b)
    return apply


def _compare(op):
    def apply(a, b):
        if a is None or b is None:
            return None
        if isinstance(a, str) or isinstance(b, str):
            if op(0, 0) and a == b:          # Equal / <= / >= of the same symbol
                return 1
            return None
        return int(op(a, b))
    return apply


def _div(a, b):
    if a is None or b is None:
        return None
    if isinstance(a, float) or isinstance(b, float):
        return a / b if b else None
    if isinstance(a, str) or isinstance(b, str):
        return symbolic.floordiv(a, b)
    return _int_div(a, b)


def _minmax(pick):
    def apply(a, b):
        if a is None or b is None or isinstance(a, str) or isinstance(b, str):
            return a if a == b else None
        return pick(a, b)
    return apply


def _mod(a, b):
    if a is None or b is None or isinstance(a, str) or isinstance(b, str) or b == 0:
        return None
    return a % b


def _symbolic_or(numeric, symbolic_fn):
    """Dimension arithmetic when an operand is a symbol, plain arithmetic otherwise."""
    def apply(a, b):
        if _any_str(a, b):
            return symbolic_fn(a, b)
        return _numeric(numeric)(a, b)
    return apply


# op_type -> elementwise function on two elements
BINARY = {
    "Add": _symbolic_or(lambda x, y: x + y, symbolic.add),
    "Sub": _symbolic_or(lambda x, y: x - y, symbolic.sub),
    "Mul": _symbolic_or(lambda x, y: x * y, symbolic.mul),
    "Div": _div,
    "Mod": _mod,
    "Max": _minmax(max),
    "Min": _minmax(min),
    "Equal": _compare(lambda x, y: x == y),
    "Less": _compare(lambda x, y: x < y),
    "Greater": _compare(lambda x, y: x > y),
    "LessOrEqual": _compare(lambda x, y: x <= y),
    "GreaterOrEqual": _compare(lambda x, y: x >= y),
    "And": _numeric(lambda x, y: int(bool(x) and bool(y))),
    "Or": _numeric(lambda x, y: int(bool(x) or bool(y))),
}


def _any_str(a, b) -> bool:
    return isinstance(a, str) or isinstance(b, str)


def _neg(a):
    if a is None:
        return None
    return symbolic.sub(0, a) if isinstance(a, str) else -a


UNARY = {
    "Neg": _neg,
    "Abs": lambda a: a if isinstance(a, str) else (None if a is None else abs(a)),
    "Not": lambda a: None if a is None or isinstance(a, str) else int(not a),
    "Identity": lambda a: a,
}


def index_of(flat: int, shape) -> list:
    idx = []
    for d in reversed(shape):
        idx.append(flat % d)
        flat //= d
    return idx[::-1]


def transpose(items, shape, perm) -> list:
    out_shape = [shape[p] for p in perm]
    st = strides(shape)
    out = []
    for flat in range(len(items)):
        idx = index_of(flat, out_shape)
        out.append(items[sum(idx[k] * st[p] for k, p in enumerate(perm))])
    return out


def take(items, shape, ranges) -> list:
    """Elements of a row-major tensor at the cartesian product of per-axis index lists."""
    st = strides(shape)
    offsets = [0]
    for axis_indices, s in zip(ranges, st):
        offsets = [o + i * s for o in offsets for i in axis_indices]
    return [items[o] for o in offsets]
