"""Elementwise operators: unary activations and math, broadcasting binary operators.

Each operator is a row: its WGSL expression (over `x`, `y`, `alpha`, `beta`) and how its
attributes become alpha/beta. elementwise.wgsl does the rest.
"""
from __future__ import annotations

from typing import Optional

from ....ir import dtypes, text_rules
from ....ir.unary_ops import FLOAT32_MAX, UNARY_OPS, params_of
from .. import host_values
from .common import (as_gpu, as_gpu_any, broadcast_strides, count, host_floats_or_ints,
                     merge_dims, padded)
from .activation import wgsl_of
from .registry import Unsupported, gpu_op

# op -> (WGSL expression over x, alpha, beta; fn(attributes) -> (alpha, beta)): every
# ir/unary_ops.py row (Gelu's `approximate` and Clip's bounds are bound below)
UNARY = {name: (wgsl_of(name), (lambda a, row=row: params_of(row, a.get)) if row.params else None)
         for name, row in UNARY_OPS.items() if name != "Gelu"}
GELU = {"none": wgsl_of("Gelu"),
        "tanh": "0.5 * x * (1.0 + tanh(clamp(0.7978845608028654 * (x + 0.044715 * x * x * x),"
                " -20.0, 20.0)))"}
CLIP = "min(max(x, alpha), beta)"
SCALE = "x * alpha"
FLOAT_MAX = FLOAT32_MAX

BINARY = {
    "Add": "x + y", "Sub": "x - y", "Mul": "x * y", "Div": "x / y",
    "Pow": "pow_any(x, y)", "Max": "max(x, y)", "Min": "min(x, y)",
    "PRelu": "select(x * y, x, x >= 0.0)",
}
INTEGER_OK = {"Add", "Sub", "Mul", "Div", "Max", "Min"}   # the same WGSL serves int32 words
BITWISE = {"BitwiseAnd": "x & y", "BitwiseOr": "x | y", "BitwiseXor": "x ^ y"}   # int32 only
# Mod by fmod and element type: C fmod (the dividend's sign) or Python's % (the divisor's);
# rem_i32 is the former on every backend (WGSL's % on i32 is too, but not through OpenGL)
_PY_MOD = "select({r}, {r} + y, {r} != {z} && (({r} < {z}) != (y < {z})))"
MOD = {(1, "f32"): "fmod_f32(x, y)", (1, "i32"): "rem_i32(x, y)",
       (0, "i32"): _PY_MOD.format(r="rem_i32(x, y)", z="0"),
       (0, "f32"): _PY_MOD.format(r="fmod_f32(x, y)", z="0.0")}
NUMERIC = ("float32", "int32", "int64")
COMPARE = {"Equal": "x == y", "Less": "x < y", "LessOrEqual": "x <= y", "Greater": "x > y",
           "GreaterOrEqual": "x >= y"}
LOGIC = {"And": "x & y", "Or": "x | y", "Xor": "x ^ y"}     # bool is u32 0 or 1


def unary(gpu, x, expr: str, alpha: float = 0.0, beta: float = 0.0, out_dtype: Optional[str] = None,
          dtypes_in=("float32",)):
    """out = EXPR(x). x must be one of `dtypes_in`; out has x's type unless `out_dtype`."""
    x = as_gpu(gpu, x) if dtypes_in == ("float32",) else as_gpu_any(gpu, x)
    if x.dtype not in dtypes_in:
        raise Unsupported(f"a {x.dtype} input (the kernel takes {', '.join(dtypes_in)})")
    out = gpu.empty(x.shape, out_dtype or x.dtype)
    return gpu.dispatch("elementwise", "unary", out, [x], [float(alpha), float(beta)], x.size,
                        {"EXPR": expr, "T": x.wgsl, "OT": out.wgsl})


def binary(gpu, a, b, expr: str, cast_b: bool = False, dtypes_in=("float32",),
           out_dtype: Optional[str] = None, alpha: float = 0.0, beta: float = 0.0):
    """out = EXPR(x, y) with numpy broadcasting; both inputs of one type among `dtypes_in`
    (int32 and int64 mix: both are int32 words)."""
    if dtypes_in == ("float32",):
        a, b = as_gpu(gpu, a), as_gpu(gpu, b, cast=cast_b)
    else:
        a, b = as_gpu_any(gpu, a), as_gpu_any(gpu, b)
    if a.dtype not in dtypes_in or b.dtype not in dtypes_in or a.wgsl != b.wgsl:
        raise Unsupported(f"{a.dtype} and {b.dtype} inputs (the kernel takes two of "
                          f"{', '.join(dtypes_in)})")
    shape = host_values.broadcast_shapes(a.shape, b.shape)
    out = gpu.empty(shape, out_dtype or a.dtype)
    n = count(shape)
    subs = {"EXPR": expr, "T": a.wgsl, "OT": out.wgsl}
    if a.shape == shape and b.shape == shape:
        return gpu.dispatch("elementwise", "binary_same", out, [a, b],
                            [float(alpha), float(beta)], n, subs)
    dims, (sa, sb) = merge_dims(list(shape), broadcast_strides(a.shape, shape),
                                broadcast_strides(b.shape, shape))
    params = ([len(dims)] + padded(dims, fill=1) + padded(sa) + padded(sb)
              + [float(alpha), float(beta)])
    return gpu.dispatch("elementwise", "binary", out, [a, b], params, n, subs)


INTEGER_UNARY = {"Neg", "Abs", "Sign"}          # the same WGSL serves i32 (int32, int64)


def _unary_op(op, expr, attr_fn, domain=""):
    kinds = ("float32", "int32", "int64") if op in INTEGER_UNARY else ("float32",)

    @gpu_op(op, domain=domain)
    def run(gpu, ctx, x, **attrs):
        alpha, beta = attr_fn(attrs) if attr_fn else (0.0, 0.0)
        return unary(gpu, x, expr, alpha, beta, dtypes_in=kinds)
    return run


for _op, (_expr, _attrs) in UNARY.items():
    _unary_op(_op, _expr, _attrs)
# the optimizer's HardSwish and Swish for models older than opset 14 and 24
# (optimizer/fuse_hard_swish.py, fuse_swish.py)
for _op in ("HardSwish", "Swish"):
    _unary_op(_op, *UNARY[_op], domain="com.edgerun")


def _check_gelu(node, opset):
    approx = node.attr("approximate", b"none")
    approx = approx.decode() if isinstance(approx, bytes) else approx
    return "" if approx in GELU else f"approximate={approx!r} (supported: none, tanh)"


@gpu_op("Gelu", check=_check_gelu)
@gpu_op("Gelu", domain="com.edgerun", check=_check_gelu)
def gelu(gpu, ctx, x, approximate="none"):
    return unary(gpu, x, GELU[approximate])


@gpu_op("Clip")
def clip(gpu, ctx, x, low=None, high=None, min=None, max=None):   # noqa: A002 - ONNX names
    if ctx.opset < 11:
        low, high = min, max
    lo = -FLOAT_MAX if low is None else float(host_floats_or_ints(gpu, low)[0])
    hi = FLOAT_MAX if high is None else float(host_floats_or_ints(gpu, high)[0])
    return unary(gpu, x, CLIP, lo, hi)


def _binary_op(op, expr, kinds=None):
    kinds = kinds or (NUMERIC if op in INTEGER_OK else ("float32",))

    @gpu_op(op)
    def run(gpu, ctx, a, b, **_):
        return binary(gpu, a, b, expr, cast_b=(op == "Pow"), dtypes_in=kinds)
    return run


for _op, _expr in BINARY.items():
    if _op not in ("Max", "Min"):
        _binary_op(_op, _expr)


def _compare_op(op, test):
    @gpu_op(op)
    def run(gpu, ctx, a, b):
        if op == "Equal" and _strings(a) and _strings(b):
            return _equal_strings(a, b)
        return binary(gpu, a, b, f"select(0u, 1u, {test})", dtypes_in=NUMERIC + ("bool",),
                      out_dtype="bool")
    return run


def _strings(value) -> bool:
    return host_values.is_host_tensor(value) and \
        host_values.elem_type(value) == dtypes.STRING


def _equal_strings(a, b):
    """Equal of two string tensors, on the host in Python (GPU tensors hold no strings)."""
    shape, pairs = text_rules.broadcast(
        [text_rules.as_str(v) for v in host_values.values(a)], host_values.shape(a),
        [text_rules.as_str(v) for v in host_values.values(b)], host_values.shape(b))
    return host_values.make(dtypes.BOOL, shape, [int(x == y) for x, y in pairs])


def _logic_op(op, expr):
    @gpu_op(op)
    def run(gpu, ctx, a, b):
        return binary(gpu, a, b, expr, dtypes_in=("bool",))
    return run


for _op, _test in COMPARE.items():
    _compare_op(_op, _test)
for _op, _expr in LOGIC.items():
    _logic_op(_op, _expr)


for _op, _expr in BITWISE.items():
    _binary_op(_op, _expr, ("int32",))


@gpu_op("SwiGLU")
def swiglu(gpu, ctx, a, b, alpha=1.0):
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(f"SwiGLU inputs must have the same shape, got {a.shape} and {b.shape}")
    return binary(gpu, a, b, UNARY["Swish"][0] + " * y", alpha=alpha)


@gpu_op("BitShift")
def bit_shift(gpu, ctx, a, b, direction="LEFT"):
    direction = direction.decode() if isinstance(direction, bytes) else direction
    op = {"LEFT": "<<", "RIGHT": ">>"}[direction]
    # shifts of 32 or more give 0, as numpy's; WGSL would shift by y % 32
    return binary(gpu, a, b, f"select(x {op} y, 0u, y >= 32u)", dtypes_in=("uint32",))


@gpu_op("BitwiseNot")
def bitwise_not(gpu, ctx, x):
    return unary(gpu, x, "~x", dtypes_in=("int32",))


@gpu_op("Mod")
def mod(gpu, ctx, a, b, fmod=0):
    a = as_gpu_any(gpu, a)
    expr = MOD.get((int(fmod), a.wgsl))
    if expr is None:
        raise Unsupported(f"Mod with fmod={fmod} over {a.dtype}")
    return binary(gpu, a, b, expr, dtypes_in=NUMERIC)


@gpu_op("Not")
def not_(gpu, ctx, x):
    return unary(gpu, x, "1u - x", dtypes_in=("bool",))


# NaN and infinities by their bits: WGSL lets compilers assume floats are finite
_ABS_BITS = "(bitcast<u32>(x) & 0x7fffffffu)"


@gpu_op("IsNaN")
def is_nan(gpu, ctx, x):
    return unary(gpu, x, f"select(0u, 1u, {_ABS_BITS} > 0x7f800000u)", out_dtype="bool")


@gpu_op("IsInf")
def is_inf(gpu, ctx, x, detect_negative=1, detect_positive=1):
    signs = {(1, 1): "true", (1, 0): "x < 0.0", (0, 1): "x > 0.0", (0, 0): "false"}
    test = f"{_ABS_BITS} == 0x7f800000u && ({signs[(int(detect_negative), int(detect_positive))]})"
    return unary(gpu, x, f"select(0u, 1u, {test})", out_dtype="bool")


@gpu_op("Where")
def where(gpu, ctx, cond, x, y):
    cond, x, y = as_gpu_any(gpu, cond), as_gpu_any(gpu, x), as_gpu_any(gpu, y)
    if cond.dtype != "bool" or x.wgsl != y.wgsl:
        raise Unsupported(f"Where over {cond.dtype}, {x.dtype} and {y.dtype} tensors")
    shape = host_values.broadcast_shapes(cond.shape, x.shape, y.shape)
    out = gpu.empty(shape, x.dtype)
    dims, strides = merge_dims(list(shape), *(broadcast_strides(t.shape, shape)
                                              for t in (cond, x, y)))
    params = [len(dims)] + padded(dims, fill=1) + [v for s in strides for v in padded(s)]
    return gpu.dispatch("elementwise", "where", out, [cond, x, y], params, count(shape),
                        {"T": out.wgsl})


def _variadic(gpu, inputs, expr, kinds=("float32",)):
    acc = inputs[0]
    if len(inputs) == 1:
        return unary(gpu, acc, "x", dtypes_in=kinds)
    for v in inputs[1:]:
        acc = binary(gpu, acc, v, expr, dtypes_in=kinds)
    return acc


@gpu_op("Sum")
def sum_(gpu, ctx, *inputs):
    return _variadic(gpu, inputs, BINARY["Add"])


@gpu_op("Max")
def max_(gpu, ctx, *inputs):
    return _variadic(gpu, inputs, BINARY["Max"], NUMERIC)


@gpu_op("Min")
def min_(gpu, ctx, *inputs):
    return _variadic(gpu, inputs, BINARY["Min"], NUMERIC)


@gpu_op("Mean")
def mean(gpu, ctx, *inputs):
    return unary(gpu, _variadic(gpu, inputs, BINARY["Add"]), SCALE, 1.0 / len(inputs))
