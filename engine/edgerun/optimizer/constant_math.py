"""Arithmetic on constant values, for the fusions that fold new weights (Conv + BatchNorm,
Conv + Mul/Add, BatchNorm + Mul/Add).

With numpy it is numpy. Without numpy (a page) constants are HostTensors: reshapes and
broadcasts of one value are done on their bytes, and arithmetic and casts run as ONNX nodes
through the evaluator optimize() was given (the wasm provider's kernels). Both compute the
same IEEE operations in the same element types, so a fused weight is the same in a page as
natively.

Small float tensors (per-channel vectors) are computed in Python without a kernel call: a
Python float is an IEEE double, and one +, -, *, / or sqrt of float32 or float16 operands done
in double and rounded once to that type is the correctly rounded result (double carries more
than twice their precision), so the values are the ones the kernels give. What Python raises
on (x / 0, sqrt of a negative, a finite value too large for the type) goes to the kernels.

A pass writes its formula once with these functions; where they cannot compute (no numpy
and no evaluator, or a kernel that refuses) they raise Unfoldable and the pass leaves the
pattern as it is.
"""
from __future__ import annotations

import itertools
import math
import operator

from .. import ir
from ..ir import dtypes
from ..ir.host_tensor import HostTensor
from .graph_edit import FLOAT_TYPES, PassContext, element_type

OPSET = 13     # of the nodes built here (their kernels, not the model's operators)
SMALL = 1024   # elements computed in Python; above that, by the kernels
_BINARY = {"Add": operator.add, "Sub": operator.sub, "Mul": operator.mul,
           "Div": operator.truediv}


class Unfoldable(Exception):
    """The constant arithmetic cannot be done here: the fusion is skipped."""


class ConstantMath:
    def __init__(self, ctx: PassContext):
        self.ctx = ctx

    def cast(self, x, elem_type: int):
        if element_type(x) == elem_type:
            return x
        if self.ctx.has_numpy:
            return x.astype(dtypes.numpy_dtype(elem_type))
        if elem_type in FLOAT_TYPES:
            done = _on_host(None, [x], elem_type)
            if done is not None:
                return done
        return self._run("Cast", [x], to=elem_type)

    def add(self, a, b):
        return self._binary("Add", a, b)

    def sub(self, a, b):
        return self._binary("Sub", a, b)

    def mul(self, a, b):
        return self._binary("Mul", a, b)

    def div(self, a, b):
        return self._binary("Div", a, b)

    def sqrt(self, x):
        if self.ctx.has_numpy:
            import numpy as np

            return np.sqrt(x)
        return _on_host(math.sqrt, [x], x.elem_type) or self._run("Sqrt", [x])

    def reshape(self, x, shape):
        """`x` with `shape` (one -1 allowed), its elements in the same order."""
        shape = list(shape)
        if -1 in shape:
            known = 1
            for d in shape:
                known *= d if d != -1 else 1
            shape[shape.index(-1)] = x.size // known if known else 0
        if self.ctx.has_numpy:
            return x.reshape(shape)
        return HostTensor(x.elem_type, shape, x.data)

    def per_channel(self, x, channels: int):
        """`x` (one value, or `channels` of them) as a (channels,) vector."""
        if not hasattr(x, "shape"):
            raise Unfoldable("a number where a per-channel constant was expected")
        if x.size not in (1, channels):
            raise Unfoldable(f"{x.size} values for {channels} channels")
        if x.size == channels:
            return self.reshape(x, [channels])
        if self.ctx.has_numpy:
            import numpy as np

            return np.broadcast_to(x.reshape(-1), (channels,))
        return HostTensor(x.elem_type, (channels,), bytes(x.data) * channels)

    def like(self, value: float, other):
        """The number `value` as a scalar constant of `other`'s element type."""
        if self.ctx.has_numpy:
            import numpy as np

            return np.asarray(value, dtype=other.dtype)
        try:
            return HostTensor.from_values(other.elem_type, (), [value])
        except TypeError as e:
            raise Unfoldable(str(e)) from None

    def _binary(self, op: str, a, b):
        if not hasattr(a, "shape"):
            a = self.like(a, b)
        if not hasattr(b, "shape"):
            b = self.like(b, a)
        if self.ctx.has_numpy:
            import numpy as np

            return {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply,
                    "Div": np.divide}[op](a, b)
        if a.elem_type == b.elem_type:
            done = _on_host(_BINARY[op], [a, b], a.elem_type)
            if done is not None:
                return done
        return self._run(op, [a, b])

    def _run(self, op: str, inputs: list, **attributes):
        if self.ctx.evaluate is None:
            raise Unfoldable("no evaluator")
        node = ir.Node(op_type=op, domain="", name=f"constant_math_{op}",
                       inputs=[f"x{i}" for i in range(len(inputs))], outputs=["y"],
                       attributes={k: ir.Attribute(name=k, type=ir.AttrType.INT, value=v)
                                   for k, v in attributes.items()})
        try:
            result = self.ctx.evaluate(node, OPSET, inputs)
        except Exception as e:   # noqa: BLE001 - a refusing kernel means: do not fold
            raise Unfoldable(f"{op}: {e}") from None
        if isinstance(result, tuple):
            result = result[0]
        if not isinstance(result, HostTensor):
            raise Unfoldable(f"{op} gave {type(result).__name__}")
        return result


def _on_host(fn, inputs: list, out_type: int):
    """fn over the elements of small float HostTensors (same shapes, or one value beside a
    tensor of at least its rank), as `out_type` (fn None: the values as they are, a cast);
    None where the kernels must compute it."""
    if any(t.size > SMALL or t.elem_type not in FLOAT_TYPES for t in inputs):
        return None
    shape = max((t.shape for t in inputs), key=len)
    if any(t.shape != shape and (t.size != 1 or len(t.shape) > len(shape)) for t in inputs):
        return None
    if any(t.size == 1 for t in inputs) and any(d == 0 for d in shape):
        return None
    columns = [t.values() for t in inputs]
    count = max(len(c) for c in columns)
    columns = [c if len(c) == count else itertools.repeat(c[0], count) for c in columns]
    try:
        values = columns[0] if fn is None else list(map(fn, *columns))
        return HostTensor.from_values(out_type, shape, values)
    except (ArithmeticError, ValueError):     # OverflowError is an ArithmeticError
        return None
