"""MatMul(A, B) followed by Add(C) becomes Gemm(A, B, C) where Gemm allows it: A and B known
to be 2-D, and C a constant that broadcasts to the [M, N] result without growing it
(1-D of size N or 1, or 2-D [1|M, N|1])."""
from __future__ import annotations

from .. import ir
from .graph_edit import FLOAT_TYPES, GraphView, PassContext, attr_int, element_type, is_onnx
from .patterns import fed_by
from .ranks import known_rank


def fuse_matmul_add(view: GraphView, ctx: PassContext) -> int:
    count = 0
    for add in view.live_nodes():
        if view.is_dead(add) or not is_onnx(add, "Add"):
            continue
        for mm, bias in fed_by(view, add, "MatMul"):
            if not _gemm_compatible(view, mm, bias):
                continue
            gemm = ir.Node(op_type="Gemm", inputs=[mm.inputs[0], mm.inputs[1], bias],
                           outputs=[add.outputs[0]], name=mm.name)
            if ctx.opset() < 7:     # before opset 7 Gemm broadcasts C only when told to
                gemm.attributes["broadcast"] = attr_int("broadcast", 1)
            view.replace([mm, add], gemm)
            count += 1
            break
    return count


def _gemm_compatible(view: GraphView, mm, bias_name: str) -> bool:
    if known_rank(view, mm.inputs[0]) != 2 or known_rank(view, mm.inputs[1]) != 2:
        return False
    bias = view.constant(bias_name)
    if bias is None or bias.ndim > 2 or element_type(bias) not in FLOAT_TYPES:
        return False
    b = view.constant(mm.inputs[1])
    n = b.shape[1] if b is not None else None
    last = bias.shape[-1] if bias.ndim else 1
    if n is None:
        return bias.size == 1
    if last not in (1, n):
        return False
    # a 2-D bias [M, N] is fine too, but M is unknown here: accept only a leading 1
    return bias.ndim < 2 or bias.shape[0] == 1
