"""Unary elementwise operators, one row each: the activations and the float math functions.

A row is the operator's whole definition for every provider:
- `params`: its float attributes in order, with their defaults; a kernel sees them as its two
  parameters (alpha, beta in WGSL, p0, p1 in C), so at most two.
- `numpy`: the formula over `x` (a float ndarray) and the attribute names, with `np`,
  `sigmoid`, `softplus` and `erf` in scope. The CPU provider compiles it
  (providers/cpu/ops/unary.py); float16/bfloat16 inputs compute in float32.
- `c`: the same in C over `double x` and the attribute names, with dmath.h's `d_*` functions
  and map.c's `d_sigmoid`, `d_softplus`. wasm_kernels/build.py writes the switch of every row
  into unary_ops.h, which map.c includes.
- `wgsl`: the same in WGSL over `f32 x` and the attribute names, with snippets.wgsl's
  `erf_approx` (the WebGPU provider's elementwise kernels and fused epilogues).
- `integers`: the formula also holds on integer tensors in their own type (Abs, Neg, ...).

Shape inference gives every row its input's shape and type. Adding an operator here, then
running `python wasm_kernels/build.py`, gives it to the CPU, wasm and WebGPU providers; the
conformance and differential tests cover it. Gelu is a row for its exact form; each provider
binds its `approximate="tanh"` form itself. Operators that are more than a formula of one
float are not rows and stay hand-written per provider: Clip (its bounds are inputs), IsInf and
IsNaN (bool outputs), Not and BitwiseNot.
"""
from __future__ import annotations

from typing import NamedTuple


class UnaryOp(NamedTuple):
    name: str
    numpy: str
    c: str
    wgsl: str
    params: tuple = ()          # ((attribute, default), ...), at most two
    integers: bool = False


SELU_ALPHA = 1.67326319217681884765625
SELU_GAMMA = 1.05070102214813232421875

_ROWS = (
    # math
    UnaryOp("Abs", "np.abs(x)", "__builtin_fabs(x)", "abs(x)", integers=True),
    UnaryOp("Neg", "np.negative(x)", "-x", "-x", integers=True),
    UnaryOp("Sign", "np.sign(x)", "x > 0 ? 1 : x < 0 ? -1 : x", "sign(x)", integers=True),
    UnaryOp("Round", "np.round(x)", "__builtin_nearbyint(x)", "round(x)", integers=True),
    UnaryOp("Floor", "np.floor(x)", "__builtin_floor(x)", "floor(x)", integers=True),
    UnaryOp("Ceil", "np.ceil(x)", "__builtin_ceil(x)", "ceil(x)", integers=True),
    UnaryOp("Sqrt", "np.sqrt(x)", "__builtin_sqrt(x)", "sqrt(x)"),
    UnaryOp("Exp", "np.exp(x)", "d_exp(x)", "exp(x)"),
    UnaryOp("Log", "np.log(x)", "d_log(x)", "log(x)"),
    UnaryOp("Reciprocal", "np.reciprocal(x)", "1 / x", "1.0 / x"),
    UnaryOp("Sin", "np.sin(x)", "d_sin(x)", "sin(x)"),
    UnaryOp("Cos", "np.cos(x)", "d_cos(x)", "cos(x)"),
    UnaryOp("Tan", "np.tan(x)", "d_tan(x)", "tan(x)"),
    UnaryOp("Asin", "np.arcsin(x)", "d_asin(x)", "asin(x)"),
    UnaryOp("Acos", "np.arccos(x)", "d_acos(x)", "acos(x)"),
    UnaryOp("Atan", "np.arctan(x)", "d_atan(x)", "atan(x)"),
    UnaryOp("Sinh", "np.sinh(x)", "d_sinh(x)", "sinh(x)"),
    UnaryOp("Cosh", "np.cosh(x)", "d_cosh(x)", "cosh(x)"),
    UnaryOp("Tanh", "np.tanh(x)", "d_tanh(x)", "tanh(clamp(x, -20.0, 20.0))"),
    UnaryOp("Asinh", "np.arcsinh(x)", "d_asinh(x)", "asinh(x)"),
    UnaryOp("Acosh", "np.arccosh(x)", "d_acosh(x)", "acosh(x)"),
    UnaryOp("Atanh", "np.arctanh(x)", "d_atanh(x)", "atanh(x)"),
    UnaryOp("Erf", "erf(x)", "d_erf(x)", "erf_approx(x)"),
    # activations
    UnaryOp("Relu", "np.maximum(x, 0)", "x > 0 ? x : (x == x ? 0 : x)", "max(x, 0.0)",
            integers=True),
    UnaryOp("Sigmoid", "sigmoid(x)", "d_sigmoid(x)", "1.0 / (1.0 + exp(-x))"),
    UnaryOp("LeakyRelu", "np.where(x >= 0, x, x * alpha)", "x >= 0 ? x : alpha * x",
            "select(x * alpha, x, x >= 0.0)", params=(("alpha", 0.01),)),
    UnaryOp("ThresholdedRelu", "np.where(x > alpha, x, 0)", "x > alpha ? x : 0",
            "select(0.0, x, x > alpha)", params=(("alpha", 1.0),)),
    UnaryOp("Elu", "np.where(x > 0, x, alpha * np.expm1(x))", "x >= 0 ? x : alpha * d_expm1(x)",
            "select(alpha * (exp(x) - 1.0), x, x >= 0.0)", params=(("alpha", 1.0),)),
    UnaryOp("Selu", "gamma * np.where(x > 0, x, alpha * np.expm1(x))",
            "x > 0 ? gamma * x : gamma * alpha * d_expm1(x)",
            "gamma * select(alpha * (exp(x) - 1.0), x, x > 0.0)",
            params=(("alpha", SELU_ALPHA), ("gamma", SELU_GAMMA))),
    UnaryOp("Celu", "np.maximum(x, 0) + np.minimum(0, alpha * np.expm1(x / alpha))",
            "(x > 0 ? x : 0) + (x < 0 ? alpha * d_expm1(x / alpha) : 0)",
            "max(x, 0.0) + min(0.0, alpha * (exp(x / alpha) - 1.0))", params=(("alpha", 1.0),)),
    UnaryOp("HardSigmoid", "np.clip(alpha * x + beta, 0, 1)",
            "alpha * x + beta < 0 ? 0 : alpha * x + beta > 1 ? 1 : alpha * x + beta",
            "clamp(alpha * x + beta, 0.0, 1.0)", params=(("alpha", 0.2), ("beta", 0.5))),
    UnaryOp("HardSwish", "x * np.clip(x / 6 + 0.5, 0, 1)",
            "x * (x / 6 + 0.5 < 0 ? 0 : x / 6 + 0.5 > 1 ? 1 : x / 6 + 0.5)",
            "x * clamp(x / 6.0 + 0.5, 0.0, 1.0)"),
    UnaryOp("Softplus", "softplus(x)", "d_softplus(x)", "select(log(1.0 + exp(x)), x, x > 20.0)"),
    UnaryOp("Softsign", "x / (1 + np.abs(x))", "x / (1 + __builtin_fabs(x))", "x / (1.0 + abs(x))"),
    UnaryOp("Mish", "x * np.tanh(softplus(x))", "x * d_tanh(d_softplus(x))",
            "x * tanh(clamp(select(log(1.0 + exp(x)), x, x > 20.0), -20.0, 20.0))"),
    UnaryOp("Swish", "x * sigmoid(alpha * x)", "x * d_sigmoid(alpha * x)",
            "x / (1.0 + exp(-alpha * x))", params=(("alpha", 1.0),)),
    UnaryOp("Shrink", "np.where(x < -lambd, x + bias, np.where(x > lambd, x - bias, 0))",
            "x < -lambd ? x + bias : x > lambd ? x - bias : 0",
            "select(select(0.0, x - bias, x > lambd), x + bias, x < -lambd)",
            params=(("bias", 0.0), ("lambd", 0.5))),
    UnaryOp("Gelu", "0.5 * x * (1 + erf(x * 0.7071067811865476))",
            "0.5 * x * (1 + d_erf(x * 0.7071067811865476))",
            "0.5 * x * (1.0 + erf_approx(x * 0.7071067811865476))"),
    # ONNX's experimental operators (opset 1-9), still in onnxruntime and in old converters'
    # models, and the RNN activations of the same names
    UnaryOp("Affine", "alpha * x + beta", "alpha * x + beta", "alpha * x + beta",
            params=(("alpha", 1.0), ("beta", 0.0))),
    UnaryOp("ScaledTanh", "alpha * np.tanh(beta * x)", "alpha * d_tanh(beta * x)",
            "alpha * tanh(clamp(beta * x, -20.0, 20.0))", params=(("alpha", 1.0), ("beta", 1.0))),
    UnaryOp("ParametricSoftplus", "alpha * softplus(beta * x)", "alpha * d_softplus(beta * x)",
            "alpha * select(log(1.0 + exp(beta * x)), beta * x, beta * x > 20.0)",
            params=(("alpha", 1.0), ("beta", 1.0))),
)

UNARY_OPS = {row.name: row for row in _ROWS}

FLOAT32_MAX = 3.4028234663852886e38


def params_of(row: UnaryOp, attr) -> tuple:
    """(p0, p1): the row's attributes read with `attr(name, default)`, zeros after them."""
    values = [float(attr(name, default)) for name, default in row.params]
    return tuple(values + [0.0] * (2 - len(values)))


def params_from_list(row: UnaryOp, given) -> tuple:
    """(p0, p1) from a list of values in the row's order (a fused node's activation_params),
    the defaults after the ones given."""
    given = list(given or [])
    values = [float(given[i]) if i < len(given) else float(default)
              for i, (_, default) in enumerate(row.params)]
    return tuple(values + [0.0] * (2 - len(values)))


def fused_clip_bounds(given) -> tuple:
    """(low, high) of a fused Clip activation from its activation_params: Clip is no row (its
    bounds are inputs), and a bound not given is the float32 extreme."""
    given = [float(v) for v in given or []]
    return tuple(given[:2] + [-FLOAT32_MAX, FLOAT32_MAX][len(given):])


# The activations ONNX's RNN, GRU and LSTM accept (by name, any case): each takes its first
# attribute from the node's activation_alpha list and its second from activation_beta, in order
RNN_ACTIVATIONS = {name.lower(): name for name in (
    "Relu", "Tanh", "Sigmoid", "Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh",
    "HardSigmoid", "Elu", "Softsign", "Softplus")}


def rnn_activation(name: str, alphas, betas) -> tuple:
    """(row name, p0, p1) of a recurrent node's activation, taking its parameters from the
    `alphas` and `betas` iterators (the defaults once they run out)."""
    if name.lower() not in RNN_ACTIVATIONS:
        raise ValueError(f"unsupported activation {name!r}; expected one of "
                         f"{sorted(RNN_ACTIVATIONS.values())}")
    row = UNARY_OPS[RNN_ACTIVATIONS[name.lower()]]
    given = [next(source, default) for source, (_, default) in zip((alphas, betas), row.params)]
    return (row.name, *params_from_list(row, given))
