"""Attention family. 4-D tensors are [batch, heads, seq, head_size]; 3-D ones pack the heads
into the last axis, [batch, seq, heads * head_size]."""
from __future__ import annotations

from .. import symbolic
from ..context import tensor
from ..registry import infer
from ._common import same_as_input


def _heads(shape, num_heads):
    """(batch, heads, seq, head_size) of a 3-D or 4-D tensor."""
    if shape is None:
        return (None,) * 4
    if len(shape) == 4:
        return tuple(shape)
    batch, seq, hidden = shape
    size = symbolic.floordiv(hidden, num_heads) if num_heads else None
    return batch, num_heads, seq, size


@infer("Attention")
def attention(ctx):
    q_heads, kv_heads = ctx.attr("q_num_heads"), ctx.attr("kv_num_heads")
    b, hq, sq, _ = _heads(ctx.shape(0), q_heads)
    _, hkv, skv, dk = _heads(ctx.shape(1), kv_heads)
    _, _, _, dv = _heads(ctx.shape(2), kv_heads)
    past = ctx.shape(4)[2] if ctx.has(4) and ctx.shape(4) is not None else (0 if not ctx.has(4)
                                                                             else None)
    total = symbolic.add(past, skv)
    q = ctx.shape(0)
    if q is not None and len(q) == 3:
        y = (b, sq, symbolic.mul(hq, dv) if hq else None)
    else:
        y = (b, hq, sq, dv) if q is not None else None
    elem = ctx.elem(0)
    return [tensor(elem, y), tensor(elem, (b, hkv, total, dk)),
            tensor(elem, (b, hkv, total, dv)), tensor(elem, (b, hq, sq, total))]


@infer("RotaryEmbedding")
def rotary_embedding(ctx):
    return [same_as_input(ctx)]


@infer("SwiGLU")
def swiglu(ctx):
    return [same_as_input(ctx)]


@infer("LinearAttention")
def linear_attention(ctx):
    q_heads, kv_heads = ctx.attr("q_num_heads"), ctx.attr("kv_num_heads")
    b, _, steps, dk = _heads(ctx.shape(0), q_heads)
    _, _, _, dv = _heads(ctx.shape(2), kv_heads)
    state_elem = ctx.elem(3) if ctx.has(3) else ctx.elem(0)
    return [tensor(ctx.elem(0), (b, steps, symbolic.mul(q_heads, dv))),
            tensor(state_elem, (b, kv_heads, dk, dv))]


@infer("FlexAttention", domain="ai.onnx.preview")
def flex_attention(ctx):
    q, v = ctx.shape(0), ctx.shape(2)
    if q is None:
        return [tensor(ctx.elem(2), None)]
    return [tensor(ctx.elem(2), (q[0], q[1], q[2], v[3] if v is not None else None))]
