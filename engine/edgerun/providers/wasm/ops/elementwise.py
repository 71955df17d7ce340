"""Elementwise operators: activations and math (er_unary), broadcasting arithmetic (er_binary)
and the operators of many inputs (Sum, Max, Min, Mean).

float32 takes the SIMD kernels where an operator has one; every other numeric type, and the
operators without a SIMD loop, take the typed kernels (er_map_unary, er_map_binary in map.c).
"""
from __future__ import annotations

from ....ir import dtypes
from ....ir.unary_ops import (FLOAT32_MAX, UNARY_OPS, fused_clip_bounds, params_from_list,
                              params_of)
from . import EDGERUN, operator
from .common import (HALF_FLOATS, all_float, broadcast_shape, broadcast_strides, converted,
                     floats_as, refuse, host_floats, merge_dims)
from .host_math import INT_BINARY, INTEGER_TYPES, elementwise, has_values, wrap
from .tensor import CAST_TYPES
from ..device import WasmTensor

# Typed kernels' operation codes: map.c's own, then one per unary_ops row (the enum
# wasm_kernels/build.py writes into unary_ops.h, in this order)
# (Saturate: Clip to [p0, p1] with NaN to p0, quantization's rounding into an integer range)
MAP_SPECIAL = ("Identity", "IsInf", "IsNaN", "Not", "BitwiseNot", "Clip", "GeluTanh",
               "Saturate")
MAP_UNARY = MAP_SPECIAL + tuple(UNARY_OPS)
MAP_BINARY = ("Add Sub Mul Div Max Min Pow Mod FMod ShiftLeft ShiftRight BitwiseAnd BitwiseOr "
              "BitwiseXor PRelu").split()

FLT_MAX = FLOAT32_MAX
# float32 SIMD loops (elementwise.c's er_unary codes); every operator also runs er_map_unary
# (any numeric type) with the same parameters
SIMD = {"Relu": 1, "Sigmoid": 2, "Tanh": 3, "Clip": 4, "LeakyRelu": 5, "HardSigmoid": 6,
        "HardSwish": 7, "Erf": 8, "Gelu": 9, "Softplus": 11, "Exp": 12, "Neg": 13, "Abs": 14,
        "Sqrt": 15, "Reciprocal": 16, "Log": 17, "Elu": 18, "Softsign": 19, "Floor": 20,
        "Ceil": 21, "Affine": 23}
GELU_TANH = 10
AFFINE = SIMD["Affine"]        # p0 * x + p1


def _row_params(row):
    return lambda n: params_of(row, n.attr)


# op_type -> (er_unary code for float32 SIMD or None, params from the node's attributes)
UNARY = {
    **{name: (SIMD.get(name), _row_params(row)) for name, row in UNARY_OPS.items()},
    "Clip": (SIMD["Clip"], lambda n: (n.attr("min", -FLT_MAX), n.attr("max", FLT_MAX))),
    "BitwiseNot": (None, lambda n: (0.0, 0.0)),
    "IsNaN": (None, lambda n: (0.0, 0.0)),
    "IsInf": (None, lambda n: (float(n.attr("detect_positive", 1)),
                               float(n.attr("detect_negative", 1)))),
}
BOOL_RESULT = {"IsInf", "IsNaN"}


def _activation_name(node) -> str:
    name = node.attr("activation", b"Relu")
    return name.decode() if isinstance(name, bytes) else name


def activation_of(node) -> tuple:
    """(er_unary code or None, MAP_UNARY code, p0, p1) of a fused node's activation."""
    name = _activation_name(node)
    given = list(node.attr("activation_params", []) or [])
    if name == "Clip":
        p0, p1 = fused_clip_bounds(given)
    else:
        p0, p1 = params_from_list(UNARY_OPS[name], given)
    return SIMD.get(name), MAP_UNARY.index(name), float(p0), float(p1)


NO_ACTIVATION = (None, 0, 0.0, 0.0)      # MAP_UNARY 0: Identity


def check_activation(node) -> str:
    name = _activation_name(node)
    return "" if name in UNARY_OPS or name == "Clip" else f"fused activation {name} has no wasm kernel"


def apply_activation(dev, y: WasmTensor, simd, code: int, p0: float, p1: float) -> None:
    """A fused activation on float32 `y`, in place."""
    if simd is not None:
        dev.call("er_unary", simd, y.ptr, y.ptr, y.size, p0, p1)
    elif code:
        dev.call("er_map_unary", code, y.elem_type, y.ptr, y.elem_type, y.ptr, y.size, p0, p1)


def check_unary(node, opset) -> str:
    if node.op_type == "Gelu" and node.attr("approximate", b"none") not in (b"none", b"tanh",
                                                                            "none", "tanh"):
        return f"Gelu approximate={node.attr('approximate')!r} is not 'none' or 'tanh'"
    return ""


@operator(*UNARY, check=check_unary)
@operator("Gelu", "HardSwish", "Swish", domains=EDGERUN, check=check_unary)   # optimizer-fused forms
def bind_unary(dev, node, opset):
    code, params = UNARY[node.op_type]
    p0, p1 = params(node)
    map_name = node.op_type
    if node.op_type == "Gelu" and node.attr("approximate", b"none") in (b"tanh", "tanh"):
        code, map_name = GELU_TANH, "GeluTanh"
    map_code = MAP_UNARY.index(map_name)
    out_type = dtypes.BOOL if node.op_type in BOOL_RESULT else None
    clip_inputs = node.op_type == "Clip" and opset >= 11

    def run(ctx, x, *bounds, **attrs):
        if x.elem_type not in CAST_TYPES:
            refuse(node, x, *bounds)
        if clip_inputs and x.elem_type != dtypes.FLOAT:
            return clip_between(dev, x, *bounds)
        lo, hi = p0, p1
        if clip_inputs:
            lo = _scalar(dev, bounds[0], -FLT_MAX) if len(bounds) > 0 else -FLT_MAX
            hi = _scalar(dev, bounds[1], FLT_MAX) if len(bounds) > 1 else FLT_MAX
        if code is not None and x.elem_type in HALF_FLOATS:
            y = simd_unary(dev, code, converted(dev, x, dtypes.FLOAT), lo, hi)
            return converted(dev, y, x.elem_type)
        if code is not None and x.elem_type == dtypes.FLOAT:
            return simd_unary(dev, code, x, lo, hi)
        return map_unary(dev, map_code, x, out_type or x.elem_type, lo, hi)
    return run


def simd_unary(dev, code: int, x: WasmTensor, p0: float, p1: float) -> WasmTensor:
    """er_unary: the float32 SIMD loop `code` (SIMD) over float32 `x`."""
    y = dev.empty(x.shape)
    dev.call("er_unary", code, x.ptr, y.ptr, x.size, float(p0), float(p1))
    return y


def map_unary(dev, code: int, x: WasmTensor, out_type: int, p0=0.0, p1=0.0) -> WasmTensor:
    """er_map_unary: operation `code` (MAP_UNARY) on any numeric type."""
    y = dev.empty(x.shape, out_type)
    if y.size:
        dev.call("er_map_unary", code, x.elem_type, x.ptr, out_type, y.ptr, x.size,
                 float(p0), float(p1))
    return y


def clip_between(dev, x: WasmTensor, lo=None, hi=None) -> WasmTensor:
    """Clip with bound tensors of x's own type: Max, then Min (exact for every type)."""
    for bound, name in ((lo, "Max"), (hi, "Min")):
        if bound is not None:
            x = map_binary(dev, MAP_BINARY.index(name), x, bound, x.elem_type)
    return x


def _scalar(dev, t, default: float) -> float:
    return default if t is None else host_floats(dev, t)[0]


BINARY = {"Add": 0, "Sub": 1, "Mul": 2, "Div": 3, "Max": 4, "Min": 5, "Pow": 6}   # er_binary
INT64_BINARY = {"Add", "Sub", "Mul"}
TYPED_BINARY = ("Mod", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "PRelu")


def check_binary(node, opset) -> str:
    if node.op_type in ("Add", "Sub", "Mul", "Div") and opset < 7 and node.attr("broadcast"):
        return "legacy broadcast attribute (opset < 7)"
    return ""


def map_binary_name(node) -> str:
    """The MAP_BINARY operation a binary node computes."""
    if node.op_type == "Mod":
        return "FMod" if node.attr("fmod", 0) else "Mod"
    if node.op_type == "BitShift":
        direction = node.attr("direction", b"LEFT")
        return "ShiftRight" if direction in (b"RIGHT", "RIGHT") else "ShiftLeft"
    return node.op_type


@operator(*BINARY, *TYPED_BINARY, check=check_binary)
def bind_binary(dev, node, opset):
    code = BINARY.get(node.op_type)
    map_code = MAP_BINARY.index(map_binary_name(node))
    int64_ok = node.op_type in INT64_BINARY
    int_fn = INT_BINARY.get(node.op_type)

    def run(ctx, a, b, **attrs):
        if code is not None and all_float((a, b)):
            return binary(dev, "er_binary", code, a, b, dtypes.FLOAT)
        if code is not None and a.elem_type == b.elem_type and a.elem_type in HALF_FLOATS:
            y = binary(dev, "er_binary", code, converted(dev, a, dtypes.FLOAT),
                       converted(dev, b, dtypes.FLOAT), dtypes.FLOAT)
            return converted(dev, y, a.elem_type)
        if int_fn and a.elem_type == b.elem_type in INTEGER_TYPES and has_values(a, b):
            shape, values = elementwise(int_fn, (a, b))                 # shape math
            return dev.from_ints([wrap(v, a.elem_type) for v in values], shape, a.elem_type)
        if int64_ok and a.elem_type == b.elem_type == dtypes.INT64:
            return binary(dev, "er_binary_i64", code, a, b, dtypes.INT64)
        if a.elem_type in CAST_TYPES and b.elem_type in CAST_TYPES:
            return map_binary(dev, map_code, a, b, a.elem_type)
        refuse(node, a, b)
    return run


def map_binary(dev, code: int, a: WasmTensor, b: WasmTensor, out_type: int) -> WasmTensor:
    """er_map_binary: operation `code` (MAP_BINARY) with broadcasting, on any numeric types."""
    shape = broadcast_shape(a.shape, b.shape)
    y = dev.empty(shape, out_type)
    if y.size:
        dims, (sa, sb) = merge_dims(shape, broadcast_strides(a.shape, shape),
                                    broadcast_strides(b.shape, shape))
        dev.set_args(dims + sa + sb)
        dev.call("er_map_binary", code, a.elem_type, a.ptr, b.elem_type, b.ptr, out_type, y.ptr,
                 len(dims))
    return y


def binary(dev, export: str, code: int, a: WasmTensor, b: WasmTensor, elem_type: int):
    shape = broadcast_shape(a.shape, b.shape)
    y = dev.empty(shape, elem_type)
    if y.size == 0:
        return y
    dims, (sa, sb) = merge_dims(shape, broadcast_strides(a.shape, shape),
                                broadcast_strides(b.shape, shape))
    dev.set_args(dims + sa + sb)
    dev.call(export, code, a.ptr, b.ptr, y.ptr, len(dims))
    return y


@operator("Sum", "Max", "Min", "Mean")
def bind_variadic(dev, node, opset):
    """Sum, Max, Min and Mean of any number of inputs (broadcast): a chain of binary ops
    (Mean: a Sum, divided by the count)."""
    name = "Add" if node.op_type in ("Sum", "Mean") else node.op_type

    def step(a, b):
        if all_float((a, b)):
            return binary(dev, "er_binary", BINARY[name], a, b, dtypes.FLOAT)
        return map_binary(dev, MAP_BINARY.index(name), a, b, a.elem_type)

    def run(ctx, *xs, **attrs):
        if any(x.elem_type not in CAST_TYPES for x in xs):
            refuse(node, *xs)
        y = xs[0]
        for x in xs[1:]:
            y = step(y, x)
        if node.op_type == "Mean" and len(xs) > 1:
            count = floats_as(dev, [len(xs)], (), dtypes.DOUBLE)
            y = map_binary(dev, MAP_BINARY.index("Div"), y, count, y.elem_type)
        return y
    return run
