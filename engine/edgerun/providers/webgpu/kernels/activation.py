"""Activations fused into MatMul/Gemm/Conv epilogues (com.edgerun Fused* operators)."""
from __future__ import annotations

from .registry import Unsupported

FLOAT_MAX = 3.4028234663852886e38

# activation -> (WGSL expression over x, act_alpha, act_beta; default params)
FUSED = {
    "": ("x", ()),
    "Relu": ("max(x, 0.0)", ()),
    "LeakyRelu": ("select(x * act_alpha, x, x >= 0.0)", (0.01,)),
    "Sigmoid": ("1.0 / (1.0 + exp(-x))", ()),
    "Tanh": ("tanh(clamp(x, -20.0, 20.0))", ()),
    "HardSigmoid": ("clamp(act_alpha * x + act_beta, 0.0, 1.0)", (0.2, 0.5)),
    "HardSwish": ("x * clamp(x / 6.0 + 0.5, 0.0, 1.0)", ()),
    "Clip": ("min(max(x, act_alpha), act_beta)", (-FLOAT_MAX, FLOAT_MAX)),
}


def check_fused(node, opset) -> str:
    act = node.attr("activation", b"Relu")
    act = act.decode() if isinstance(act, bytes) else act
    return "" if act in FUSED else f"fused activation {act!r} (supported: {sorted(FUSED)[1:]})"


def epilogue(activation: str, params) -> tuple:
    """(WGSL expression, act_alpha, act_beta) for a fused activation."""
    if activation not in FUSED:
        raise Unsupported(f"fused activation {activation!r}")
    expr, defaults = FUSED[activation]
    values = list(params or []) + list(defaults[len(params or []):])
    values += [0.0] * (2 - len(values))
    return expr, float(values[0]), float(values[1])
