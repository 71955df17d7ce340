"""Elementwise operators and activations -> MIL elementwise ops (numpy broadcasting on both
sides), plus the activation step shared with the fused com.edgerun operators."""
from __future__ import annotations

import numpy as np

from ..lowering import LoweringError, attr, lowers

# ONNX binary operator -> MIL op (both broadcast like numpy)
BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Pow": "pow",
          "Equal": "equal", "Less": "less", "LessOrEqual": "less_equal",
          "Greater": "greater", "GreaterOrEqual": "greater_equal",
          "And": "logical_and", "Or": "logical_or", "Xor": "logical_xor"}
BOOL_RESULT = {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor"}

# ONNX unary operator -> MIL op taking only x
UNARY = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Exp": "exp", "Sqrt": "sqrt",
         "Abs": "abs", "Floor": "floor", "Ceil": "ceil", "Erf": "erf", "Sin": "sin",
         "Cos": "cos", "Softplus": "softplus", "Softsign": "softsign", "Not": "logical_not"}

# variadic ONNX operator -> MIL op folded over its inputs
VARIADIC = {"Sum": "add", "Max": "maximum", "Min": "minimum", "Mean": "add"}


def _binary(mil_op: str, bool_result: bool):
    def lower(ctx, node):
        a, b = ctx.var(node.inputs[0]), ctx.var(node.inputs[1])
        out = getattr(ctx.mb, mil_op)(x=a, y=b, name=ctx.out_name())
        if bool_result:
            ctx.onnx_dtypes[node.outputs[0]] = np.dtype(np.bool_)
        return [out]
    return lower


for _op, _mil in BINARY.items():
    lowers(_op, mil=(_mil,))(_binary(_mil, _op in BOOL_RESULT))


@lowers("Div", mil=("real_div",))
def div(ctx, node):
    if ctx.mil_dtype(node.inputs[0]) not in ("fp32", "fp16"):
        raise ctx.error("integer Div truncates toward zero in ONNX; MIL has only floor_div")
    return [ctx.mb.real_div(x=ctx.var(node.inputs[0]), y=ctx.var(node.inputs[1]),
                            name=ctx.out_name())]


def _unary(mil_op: str):
    def lower(ctx, node):
        return [getattr(ctx.mb, mil_op)(x=ctx.var(node.inputs[0]), name=ctx.out_name())]
    return lower


for _op, _mil in UNARY.items():
    lowers(_op, mil=(_mil,))(_unary(_mil))


def _variadic(onnx_op: str, mil_op: str):
    def lower(ctx, node):
        names = [n for n in node.inputs if n]
        acc = ctx.var(names[0])
        for i, name in enumerate(names[1:], 1):
            last = i == len(names) - 1 and onnx_op != "Mean"
            acc = getattr(ctx.mb, mil_op)(x=acc, y=ctx.var(name),
                                          name=ctx.out_name() if last else None)
        if onnx_op == "Mean":
            acc = ctx.mb.mul(x=acc, y=ctx.scalar(1.0 / len(names), names[0]),
                             name=ctx.out_name())
        elif len(names) == 1:
            acc = ctx.mb.identity(x=acc, name=ctx.out_name())
        return [acc]
    return lower


for _op, _mil in VARIADIC.items():
    lowers(_op, mil=(_mil,) if _op != "Mean" else ("add", "mul"))(_variadic(_op, _mil))


@lowers("Neg", mil=("mul",))
def neg(ctx, node):
    x = node.inputs[0]
    return [ctx.mb.mul(x=ctx.var(x), y=ctx.scalar(-1, x), name=ctx.out_name())]


@lowers("Reciprocal", mil=("real_div",))
def reciprocal(ctx, node):
    # MIL's `inverse` adds an epsilon; real_div(1, x) is exact
    x = node.inputs[0]
    return [ctx.mb.real_div(x=ctx.scalar(1, x), y=ctx.var(x), name=ctx.out_name())]


@lowers("Log", mil=("log",))
def log(ctx, node):
    # MIL computes log(x + epsilon); ONNX has no epsilon
    return [ctx.mb.log(x=ctx.var(node.inputs[0]), epsilon=0.0, name=ctx.out_name())]


@lowers("LeakyRelu", mil=("leaky_relu",))
def leaky_relu(ctx, node):
    return [ctx.mb.leaky_relu(x=ctx.var(node.inputs[0]), alpha=float(attr(node, "alpha", 0.01)),
                              name=ctx.out_name())]


@lowers("Elu", mil=("elu",))
def elu(ctx, node):
    return [ctx.mb.elu(x=ctx.var(node.inputs[0]), alpha=float(attr(node, "alpha", 1.0)),
                       name=ctx.out_name())]


@lowers("HardSigmoid", mil=("sigmoid_hard",))
def hard_sigmoid(ctx, node):
    return [ctx.mb.sigmoid_hard(x=ctx.var(node.inputs[0]), alpha=float(attr(node, "alpha", 0.2)),
                                beta=float(attr(node, "beta", 0.5)), name=ctx.out_name())]


@lowers("HardSwish", mil=("sigmoid_hard", "mul"))
def hard_swish(ctx, node):
    x = ctx.var(node.inputs[0])
    gate = ctx.mb.sigmoid_hard(x=x, alpha=1.0 / 6, beta=0.5)
    return [ctx.mb.mul(x=x, y=gate, name=ctx.out_name())]


def _gelu_check(node, opset):
    approximate = attr(node, "approximate", "none")
    return "" if approximate in ("none", "tanh") else f"approximate='{approximate}'"


@lowers("Gelu", mil=("gelu",), check=_gelu_check, since=20)
@lowers("Gelu", mil=("gelu",), domain="com.edgerun", check=_gelu_check)
def gelu(ctx, node):
    mode = "EXACT" if attr(node, "approximate", "none") == "none" else "TANH_APPROXIMATION"
    return [ctx.mb.gelu(x=ctx.var(node.inputs[0]), mode=mode, name=ctx.out_name())]


@lowers("Clip", mil=("maximum", "minimum"))
def clip(ctx, node):
    """maximum/minimum rather than MIL clip: works for ints and run-time bounds alike."""
    x = node.inputs[0]
    if ctx.opset < 11:
        low, high = attr(node, "min"), attr(node, "max")
        bounds = [None if v is None else ctx.scalar(v, x) for v in (low, high)]
    else:
        bounds = [None if len(node.inputs) <= i or not node.inputs[i] else
                  (ctx.const(node.inputs[i]) if ctx.const(node.inputs[i]) is not None
                   else ctx.var(node.inputs[i])) for i in (1, 2)]
    return [apply_bounds(ctx, ctx.var(x), bounds[0], bounds[1], ctx.out_name())]


def apply_bounds(ctx, var, low, high, name):
    if low is None and high is None:
        return ctx.mb.identity(x=var, name=name)
    if low is not None:
        var = ctx.mb.maximum(x=var, y=low, name=None if high is not None else name)
    if high is not None:
        var = ctx.mb.minimum(x=var, y=high, name=name)
    return var


# ---- the activation step of com.edgerun FusedConv / FusedGemm / FusedMatMul ---------------

FUSED_ACTIVATIONS = ("Relu", "LeakyRelu", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish",
                     "Clip")


def check_fused_activation(node, opset):
    activation = attr(node, "activation", "Relu")
    if activation not in FUSED_ACTIVATIONS:
        return f"fused activation '{activation}' has no MIL lowering"
    return ""


def activate(ctx, node, var, name):
    """Apply node's `activation` (with `activation_params`) to `var`."""
    mb = ctx.mb
    activation = attr(node, "activation", "Relu")
    params = [float(p) for p in attr(node, "activation_params", None) or []]
    if activation == "Relu":
        return mb.relu(x=var, name=name)
    if activation == "LeakyRelu":
        return mb.leaky_relu(x=var, alpha=params[0] if params else 0.01, name=name)
    if activation == "Sigmoid":
        return mb.sigmoid(x=var, name=name)
    if activation == "Tanh":
        return mb.tanh(x=var, name=name)
    if activation == "HardSigmoid":
        alpha, beta = (params + [0.2, 0.5][len(params):])[:2]
        return mb.sigmoid_hard(x=var, alpha=alpha, beta=beta, name=name)
    if activation == "HardSwish":     # x * hard_sigmoid(x), as the HardSwish op lowers
        return mb.mul(x=var, y=mb.sigmoid_hard(x=var, alpha=1.0 / 6, beta=0.5), name=name)
    if activation == "Clip":
        dtype = np.float16 if ctx.types.builtin_to_string(var.dtype) == "fp16" else np.float32
        low = np.asarray(params[0], dtype) if len(params) > 0 else None
        high = np.asarray(params[1], dtype) if len(params) > 1 else None
        return apply_bounds(ctx, var, low, high, name)
    raise LoweringError(f"{ctx.where()}: fused activation '{activation}' has no MIL lowering")
