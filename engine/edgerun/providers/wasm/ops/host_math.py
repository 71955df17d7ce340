"""Elementwise arithmetic on the host copies of small integer and bool tensors (pure Python).

Shape arithmetic (Shape -> Gather -> Mul -> Concat -> Reshape), If conditions (Equal, Not,
Cast to bool) and the like work on a handful of values, where a kernel call and its copies
would cost more than the work. Results are uploaded with their values attached, so a whole
chain of such nodes never reads linear memory. Integer results wrap to the element type's
width, as the kernels (and numpy) do.
"""
from __future__ import annotations

import itertools

from ....ir import dtypes
from ..device import SMALL_INTS, WasmTensor
from .common import broadcast_shape, broadcast_strides

_BITS = {dtypes.INT8: (8, True), dtypes.UINT8: (8, False), dtypes.INT16: (16, True),
         dtypes.UINT16: (16, False), dtypes.INT32: (32, True), dtypes.UINT32: (32, False),
         dtypes.INT64: (64, True), dtypes.UINT64: (64, False)}


INTEGER_TYPES = frozenset(_BITS)


def has_values(*tensors) -> bool:
    """True when every given tensor (None skipped) is small and carries its host values."""
    return all(t is None or (isinstance(t, WasmTensor) and t.ints is not None
                             and t.size <= SMALL_INTS) for t in tensors)


def wrap(value: int, elem_type: int) -> int:
    """`value` as the element type stores it (two's complement wrap; bool is 0 or 1)."""
    if elem_type == dtypes.BOOL:
        return int(bool(value))
    bits, signed = _BITS[elem_type]
    value &= (1 << bits) - 1
    if signed and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def elementwise(fn, tensors) -> tuple:
    """(broadcast shape, values) of fn applied across the tensors' host values."""
    shape = broadcast_shape(*(t.shape for t in tensors))
    strides = [broadcast_strides(t.shape, shape) for t in tensors]
    out = []
    for index in itertools.product(*(range(d) for d in shape)):
        args = [t.ints[sum(i * s for i, s in zip(index, st))] for t, st in zip(tensors, strides)]
        out.append(fn(*args))
    return shape, out


def truncating_div(a: int, b: int) -> int:
    """Integer division rounding toward zero (C, onnxruntime)."""
    if b == 0:
        raise ZeroDivisionError("integer division by zero")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


# op_type -> Python function on two ints (the integer semantics of ONNX's binary operators)
INT_BINARY = {
    "Add": lambda a, b: a + b,
    "Sub": lambda a, b: a - b,
    "Mul": lambda a, b: a * b,
    "Div": truncating_div,
    "Max": max,
    "Min": min,
    "Pow": lambda a, b: a ** b if b >= 0 else 0,
}
