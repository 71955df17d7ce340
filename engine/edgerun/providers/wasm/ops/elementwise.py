"""Elementwise operators: activations (er_unary) and broadcasting arithmetic (er_binary)."""
from __future__ import annotations

from ....ir import dtypes
from . import EDGERUN, operator
from .common import (all_float, broadcast_shape, broadcast_strides, float_or_fallback,
                     host_fallback, merge_dims)
from .host_math import INT_BINARY, INTEGER_TYPES, elementwise, has_values, wrap
from ..device import WasmTensor

# op_type -> (er_unary code, params from the node's attributes); codes match common.h
FLT_MAX = 3.4028234663852886e38
UNARY = {
    "Relu": (1, lambda n: (0.0, 0.0)),
    "Sigmoid": (2, lambda n: (0.0, 0.0)),
    "Tanh": (3, lambda n: (0.0, 0.0)),
    "Clip": (4, lambda n: (n.attr("min", -FLT_MAX), n.attr("max", FLT_MAX))),
    "LeakyRelu": (5, lambda n: (n.attr("alpha", 0.01), 0.0)),
    "HardSigmoid": (6, lambda n: (n.attr("alpha", 0.2), n.attr("beta", 0.5))),
    "HardSwish": (7, lambda n: (0.0, 0.0)),
    "Erf": (8, lambda n: (0.0, 0.0)),
    "Gelu": (9, lambda n: (0.0, 0.0)),
    "Softplus": (11, lambda n: (0.0, 0.0)),
    "Exp": (12, lambda n: (0.0, 0.0)),
    "Neg": (13, lambda n: (0.0, 0.0)),
    "Abs": (14, lambda n: (0.0, 0.0)),
    "Sqrt": (15, lambda n: (0.0, 0.0)),
    "Reciprocal": (16, lambda n: (0.0, 0.0)),
    "Log": (17, lambda n: (0.0, 0.0)),
    "Elu": (18, lambda n: (n.attr("alpha", 1.0), 0.0)),
    "Softsign": (19, lambda n: (0.0, 0.0)),
    "Floor": (20, lambda n: (0.0, 0.0)),
    "Ceil": (21, lambda n: (0.0, 0.0)),
}
GELU_TANH = 10
AFFINE = 23        # p0 * x + p1

# fused activations (com.edgerun Fused*): name -> (code, params from activation_params)
ACTIVATIONS = {
    "Relu": (1, lambda p: (0.0, 0.0)),
    "Sigmoid": (2, lambda p: (0.0, 0.0)),
    "Tanh": (3, lambda p: (0.0, 0.0)),
    "Clip": (4, lambda p: (p[0] if p else -FLT_MAX, p[1] if len(p) > 1 else FLT_MAX)),
    "LeakyRelu": (5, lambda p: (p[0] if p else 0.01, 0.0)),
    "HardSigmoid": (6, lambda p: (p[0] if p else 0.2, p[1] if len(p) > 1 else 0.5)),
}


def check_unary(node, opset) -> str:
    if node.op_type == "Gelu" and node.attr("approximate", b"none") not in (b"none", b"tanh",
                                                                            "none", "tanh"):
        return f"Gelu approximate={node.attr('approximate')!r} is not 'none' or 'tanh'"
    return ""


def activation_of(node) -> tuple:
    """(code, p0, p1) of a fused node's activation attribute."""
    name = node.attr("activation", b"Relu")
    name = name.decode() if isinstance(name, bytes) else name
    code, params = ACTIVATIONS[name]
    p0, p1 = params(list(node.attr("activation_params", []) or []))
    return code, float(p0), float(p1)


def check_activation(node) -> str:
    name = node.attr("activation", b"Relu")
    name = name.decode() if isinstance(name, bytes) else name
    return "" if name in ACTIVATIONS else f"fused activation {name} has no wasm kernel"


def apply_activation(dev, y: WasmTensor, code: int, p0: float, p1: float) -> None:
    if code:
        dev.call("er_unary", code, y.ptr, y.ptr, y.size, p0, p1)


@operator(*UNARY, check=check_unary)
@operator("Gelu", "HardSwish", domains=EDGERUN, check=check_unary)   # optimizer-fused forms
def bind_unary(dev, node, opset):
    code, params = UNARY[node.op_type]
    p0, p1 = params(node)
    if node.op_type == "Gelu" and node.attr("approximate", b"none") in (b"tanh", "tanh"):
        code = GELU_TANH
    clip_inputs = node.op_type == "Clip" and opset >= 11

    def run(ctx, x, *bounds, **_):
        lo, hi = p0, p1
        if clip_inputs:
            lo = _scalar(dev, bounds[0], -FLT_MAX) if len(bounds) > 0 else -FLT_MAX
            hi = _scalar(dev, bounds[1], FLT_MAX) if len(bounds) > 1 else FLT_MAX
        y = dev.empty(x.shape)
        dev.call("er_unary", code, x.ptr, y.ptr, x.size, float(lo), float(hi))
        return y
    return float_or_fallback(dev, node, opset, run)


def _scalar(dev, t, default: float) -> float:
    if t is None:
        return default
    data = dev.read(t.ptr, 4)
    from array import array
    return float(array("f", bytes(data))[0])


BINARY = {"Add": 0, "Sub": 1, "Mul": 2, "Div": 3, "Max": 4, "Min": 5, "Pow": 6}
INT64_BINARY = {"Add", "Sub", "Mul"}


def check_binary(node, opset) -> str:
    if node.op_type in ("Max", "Min") and len(node.inputs) != 2:
        return f"{node.op_type} with {len(node.inputs)} inputs (the kernel takes 2)"
    if node.op_type in ("Add", "Sub", "Mul", "Div") and opset < 7 and node.attr("broadcast"):
        return "legacy broadcast attribute (opset < 7)"
    return ""


@operator(*BINARY, check=check_binary)
def bind_binary(dev, node, opset):
    code = BINARY[node.op_type]
    fallback = host_fallback(dev, node, opset)
    int64_ok = node.op_type in INT64_BINARY

    int_fn = INT_BINARY[node.op_type]

    def run(ctx, a, b, **attrs):
        if all_float((a, b)):
            return binary(dev, "er_binary", code, a, b, dtypes.FLOAT)
        if a.elem_type == b.elem_type in INTEGER_TYPES and has_values(a, b):   # shape math
            shape, values = elementwise(int_fn, (a, b))
            return dev.from_ints([wrap(v, a.elem_type) for v in values], shape, a.elem_type)
        if int64_ok and a.elem_type == b.elem_type == dtypes.INT64:
            return binary(dev, "er_binary_i64", code, a, b, dtypes.INT64)
        return fallback(ctx, a, b, **attrs)
    return run


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


@operator("Sum")
def bind_sum(dev, node, opset):
    """Sum of any number of inputs (broadcast): a chain of binary adds."""
    fallback = host_fallback(dev, node, opset)

    def run(ctx, *xs, **attrs):
        if not all_float(xs):
            return fallback(ctx, *xs, **attrs)
        if len(xs) == 1:
            return xs[0]
        y = binary(dev, "er_binary", BINARY["Add"], xs[0], xs[1], dtypes.FLOAT)
        for x in xs[2:]:
            y = binary(dev, "er_binary", BINARY["Add"], y, x, dtypes.FLOAT)
        return y
    return run
