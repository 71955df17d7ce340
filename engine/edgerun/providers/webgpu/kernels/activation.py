"""ir/unary_ops.py's rows in WGSL: the elementwise kernels' expressions and the activations
fused into MatMul/Gemm/Conv epilogues (com.edgerun Fused* operators)."""
from __future__ import annotations

import re

from ....ir.unary_ops import UNARY_OPS, fused_clip_bounds, params_from_list
from .registry import Unsupported


def wgsl_of(name: str, slots=("alpha", "beta")) -> str:
    """The row's WGSL expression over `x`, its attributes renamed to the kernel's two
    parameter slots."""
    row = UNARY_OPS[name]
    renamed = {attribute: slot for (attribute, _), slot in zip(row.params, slots)}
    if not renamed:
        return row.wgsl
    pattern = r"\b(" + "|".join(map(re.escape, renamed)) + r")\b"
    return re.sub(pattern, lambda m: renamed[m.group(1)], row.wgsl)


def check_fused(node, opset) -> str:
    act = node.attr("activation", b"Relu")
    act = act.decode() if isinstance(act, bytes) else act
    known = act in UNARY_OPS or act in ("", "Clip")
    return "" if known else f"fused activation {act!r} (supported: Clip and {sorted(UNARY_OPS)})"


def epilogue(activation: str, params) -> tuple:
    """(WGSL expression, act_alpha, act_beta) for a fused activation."""
    if activation == "":
        return "x", 0.0, 0.0
    if activation == "Clip":
        return ("min(max(x, act_alpha), act_beta)", *fused_clip_bounds(params))
    if activation not in UNARY_OPS:
        raise Unsupported(f"fused activation {activation!r}")
    p0, p1 = params_from_list(UNARY_OPS[activation], params)
    return wgsl_of(activation, ("act_alpha", "act_beta")), p0, p1
