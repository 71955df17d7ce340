"""Elementwise operators: same shape, broadcasting, comparisons to bool. Constant operands
(shape arithmetic) are computed so later Reshape/Expand/Range see exact values."""
from __future__ import annotations

from ...ir import dtypes
from ...ir.unary_ops import UNARY_OPS
from .. import symbolic, values as V
from ..context import tensor
from ..registry import infer
from ._common import same_as_input

# ir/unary_ops.py's rows (math and activations) and the other one-input operators whose
# output is their input's shape and type
SAME_AS_INPUT = (*UNARY_OPS, "BitwiseNot", "Clip", "Identity")


@infer(*SAME_AS_INPUT)
def unary(ctx):
    fn = V.UNARY.get(ctx.node.op_type)
    if fn is not None and ctx.value(0) is not None:
        ctx.set_value(0, [fn(v) for v in ctx.value(0)])
    return [same_as_input(ctx)]


@infer("Not")
def logical_not(ctx):
    if ctx.value(0) is not None:
        ctx.set_value(0, [V.UNARY["Not"](v) for v in ctx.value(0)])
    return [same_as_input(ctx, elem_type=dtypes.BOOL)]


@infer("IsNaN", "IsInf")
def float_test(ctx):
    return [same_as_input(ctx, elem_type=dtypes.BOOL)]


def _computed(ctx, shape, indices):
    """Elementwise values of the inputs at `indices` when all are known and small."""
    fn = V.BINARY.get(ctx.node.op_type)
    if fn is None or not symbolic.is_known(shape):
        return None
    operands = [(ctx.value(i), ctx.shape(i)) for i in indices]
    if any(v is None or not symbolic.is_known(s) for v, s in operands):
        return None
    if symbolic.product(shape) > V.MAX_ELEMENTS:
        return None
    if len(operands) == 1:
        return list(operands[0][0])
    out = V.broadcast_map(fn, operands[:2], shape)
    for items, s in operands[2:]:
        out = V.broadcast_map(fn, [(out, shape), (items, s)], shape)
    return out


@infer("Add", "Sub", "Mul", "Div", "Mod", "Pow", "BitShift", "BitwiseAnd", "BitwiseOr",
       "BitwiseXor")
def arithmetic(ctx):
    shape = ctx.broadcast(0, 1)
    ctx.set_value(0, _computed(ctx, shape, [0, 1]))
    return [tensor(ctx.elem(0), shape)]


@infer("Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "And", "Or", "Xor")
def comparison(ctx):
    shape = ctx.broadcast(0, 1)
    ctx.set_value(0, _computed(ctx, shape, [0, 1]))
    return [tensor(dtypes.BOOL, shape)]


@infer("Max", "Min", "Sum", "Mean")
def variadic(ctx):
    indices = [i for i in range(ctx.num_inputs) if ctx.has(i)]
    shape = ctx.broadcast(*indices)
    if ctx.node.op_type in ("Max", "Min"):
        ctx.set_value(0, _computed(ctx, shape, indices))
    elem = next((ctx.elem(i) for i in indices if ctx.elem(i)), 0)
    return [tensor(elem, shape)]


@infer("Where")
def where(ctx):
    shape = ctx.broadcast(0, 1, 2)
    if symbolic.is_known(shape) and all(ctx.value(i) is not None and
                                        symbolic.is_known(ctx.shape(i)) for i in range(3)):
        pick = lambda c, a, b: None if c is None else (a if c else b)   # noqa: E731
        ctx.set_value(0, V.broadcast_map(pick, [(ctx.value(i), ctx.shape(i)) for i in range(3)],
                                         shape))
    return [tensor(ctx.elem(1) or ctx.elem(2), shape)]
