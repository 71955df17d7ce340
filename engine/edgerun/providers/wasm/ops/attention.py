"""Attention (opset 23+, and the optimizer's com.edgerun form): er_attention over 4-D strided
views of Q, K, V and the mask.

3-D inputs pack the heads into the last axis, (batch, sequence, heads * head_size); they are
read in place as (batch, heads, sequence, head_size) through strides. With past_key and
past_value, the present key/value (past then new along the sequence) are built first and
attention reads them. float16, bfloat16 and float64 compute in float32 (float_or_refused).
"""
from __future__ import annotations

import math

from ....ir import dtypes
from . import EDGERUN, operator
from .common import contiguous_strides, converted, float_or_refused
from .matmul import broadcast_into
from .tensor import copy_strided
from ..device import WasmTensor

MASK_KINDS = {None: 0, dtypes.BOOL: 1, dtypes.FLOAT: 2}


def check_attention(node, opset) -> str:
    mode = node.attr("qk_matmul_output_mode", 0)
    if mode not in (0, 1, 2, 3):
        return f"qk_matmul_output_mode={mode} (0..3 exist)"
    return ""


def heads_view(x: WasmTensor, heads, what: str) -> tuple:
    """(shape, strides) of x as (batch, heads, sequence, head_size)."""
    if len(x.shape) == 4:
        return x.shape, contiguous_strides(x.shape)
    if len(x.shape) != 3:
        raise ValueError(f"Attention {what} must be 3-D or 4-D, got shape {list(x.shape)}")
    batch, seq, hidden = x.shape
    if not heads:
        raise ValueError(f"Attention {what} is 3-D: the number of heads attribute is required")
    if hidden % heads:
        raise ValueError(f"Attention {what} hidden size {hidden} is not a multiple of "
                         f"{heads} heads")
    size = hidden // heads
    return (batch, heads, seq, size), [seq * hidden, size, hidden, 1]


def present(dev, past, new: WasmTensor, new_view) -> WasmTensor:
    """past (B, H, P, D) then new along the sequence, as one contiguous (B, H, P + S, D)."""
    shape, strides = new_view
    p = past.shape[2] if past is not None else 0
    out_shape = (shape[0], shape[1], p + shape[2], shape[3])
    y = dev.empty(out_shape)
    out_strides = contiguous_strides(out_shape)
    if p:
        copy_strided(dev, y.ptr, past.ptr, 4, past.shape, out_strides,
                     contiguous_strides(past.shape))
    if y.size:
        copy_strided(dev, y.ptr + p * out_strides[2] * 4, new.ptr, 4, shape, out_strides, strides)
    return y


def mask_strides(mask: WasmTensor, target) -> list:
    """Strides reading `mask` broadcast to the 4-D (batch, heads, q, k) grid (its last axis
    as it is: a shorter mask pads with 'not attended')."""
    shape = (1,) * (4 - len(mask.shape)) + tuple(mask.shape)
    strides = contiguous_strides(shape)
    return [0 if shape[i] == 1 and target[i] != 1 else strides[i] for i in range(3)] + \
        [strides[3]]


@operator("Attention", check=check_attention)
def bind_attention(dev, node, opset):
    is_causal = int(node.attr("is_causal", 0))
    q_heads, kv_heads = node.attr("q_num_heads"), node.attr("kv_num_heads")
    scale_attr, softcap = node.attr("scale"), float(node.attr("softcap", 0.0) or 0.0)
    qk_mode = int(node.attr("qk_matmul_output_mode", 0))
    left, right = int(node.attr("left_window_size", -1)), int(node.attr("right_window_size", -1))
    outputs = [bool(o) for o in node.outputs]

    def run(ctx, q, k, v, attn_mask=None, past_key=None, past_value=None,
            nonpad_kv_seqlen=None):
        if (past_key is None) != (past_value is None):
            raise ValueError("Attention: past_key and past_value must be given together")
        if past_key is not None and nonpad_kv_seqlen is not None:
            raise ValueError("Attention: nonpad_kv_seqlen cannot be combined with past_key")
        if not len(q.shape) == len(k.shape) == len(v.shape):
            raise ValueError(f"Attention: Q, K, V must all be 3-D or 4-D, got {list(q.shape)}, "
                             f"{list(k.shape)}, {list(v.shape)}")
        qv, kv, vv = (heads_view(q, q_heads, "Q"), heads_view(k, kv_heads, "K"),
                      heads_view(v, kv_heads, "V"))
        (batch, hq, sq, d), (_, hkv, _, _), (_, _, _, dv) = qv[0], kv[0], vv[0]
        if hkv == 0 or hq % hkv:
            raise ValueError(f"Attention: query heads ({hq}) must be a multiple of key/value "
                             f"heads ({hkv})")
        past_len = past_key.shape[2] if past_key is not None else 0
        pk = present(dev, past_key, k, kv) if past_key is not None or outputs[1:2] == [True] \
            else None
        pv = present(dev, past_value, v, vv) if past_value is not None or \
            outputs[2:3] == [True] else None
        keys = (pk.shape, contiguous_strides(pk.shape), pk) if pk is not None else (*kv, k)
        values = (pv.shape, contiguous_strides(pv.shape), pv) if pv is not None else (*vv, v)
        skv = keys[0][2]
        if nonpad_kv_seqlen is not None:
            nonpad_kv_seqlen = converted(dev, nonpad_kv_seqlen, dtypes.INT64)
        if attn_mask is not None and attn_mask.elem_type != dtypes.BOOL:
            attn_mask = converted(dev, attn_mask, dtypes.FLOAT)
        kind = MASK_KINDS[attn_mask.elem_type if attn_mask is not None else None]
        grid = (batch, hq, sq, skv)
        m_strides = mask_strides(attn_mask, grid) if attn_mask is not None else [0] * 4
        y_shape = (batch, hq, sq, dv) if len(q.shape) == 4 else (batch, sq, hq * dv)
        y = dev.empty(y_shape)
        y_strides = contiguous_strides(y_shape) if len(q.shape) == 4 else \
            [sq * hq * dv, dv, hq * dv, 1]
        qk = dev.empty(grid) if len(outputs) > 3 and outputs[3] else None
        scale = float(scale_attr) if scale_attr is not None else 1.0 / math.sqrt(d)
        if y.size or qk is not None:
            row = dev.scratch(max(skv, 1) * 4)
            dev.set_args([batch, hq, hkv, sq, skv, d, dv, *qv[1], *keys[1], *values[1],
                          *y_strides, *m_strides, kind,
                          attn_mask.shape[-1] if attn_mask is not None else 0,
                          is_causal, past_len, left, right, qk_mode if qk is not None else -1])
            dev.call("er_attention", q.ptr, keys[2].ptr, values[2].ptr,
                     attn_mask.ptr if attn_mask is not None else 0,
                     nonpad_kv_seqlen.ptr if nonpad_kv_seqlen is not None else 0,
                     y.ptr, qk.ptr if qk is not None else 0, row.ptr, scale, softcap)
        results = (y, pk, pv, qk)[:max(len(outputs), 1)]
        return results if len(outputs) > 1 else y
    return float_or_refused(dev, node, opset, run, float_inputs=[0, 1, 2, 4, 5])


@operator("RotaryEmbedding")
def bind_rotary(dev, node, opset):
    """er_rotary over (batch, head, seq, feature) strides: 4-D (B, H, S, D) as it is, 3-D
    (B, S, H * D) with its heads unpacked in place."""
    interleaved = int(node.attr("interleaved", 0))
    heads_attr = int(node.attr("num_heads", 0))
    rot_attr = int(node.attr("rotary_embedding_dim", 0))

    def run(ctx, x, cos_cache, sin_cache, position_ids=None):
        if len(x.shape) == 4:
            b, h, s, d = x.shape
            strides = contiguous_strides(x.shape)
        elif len(x.shape) == 3:
            b, s, hidden = x.shape
            half_cache = cos_cache.shape[-1]
            if not heads_attr and rot_attr:
                raise ValueError("RotaryEmbedding: a 3-D input with rotary_embedding_dim "
                                 "needs num_heads")
            h = heads_attr or hidden // (2 * half_cache)
            if not h or hidden % h:
                raise ValueError(f"RotaryEmbedding: hidden size {hidden} is not a multiple of "
                                 f"num_heads {h}")
            d = hidden // h
            strides = [s * hidden, d, hidden, 1]
        else:
            raise ValueError(f"RotaryEmbedding input must be 3-D or 4-D, got {list(x.shape)}")
        rot = rot_attr or d
        if cos_cache.shape[-1] != rot // 2 or sin_cache.shape[-1] != rot // 2:
            raise ValueError(f"RotaryEmbedding: cos/sin cache last dim must be "
                             f"rotary_embedding_dim/2 = {rot // 2}, got {cos_cache.shape[-1]} "
                             f"and {sin_cache.shape[-1]}")
        if position_ids is not None:
            position_ids = converted(dev, position_ids, dtypes.INT64)
            rows = cos_cache.shape[0]
        else:
            rows = b * s
            if cos_cache.size != rows * (rot // 2):
                raise ValueError(f"RotaryEmbedding: without position_ids the caches must be "
                                 f"(batch, seq, {rot // 2}), got {list(cos_cache.shape)}")
        y = dev.empty(x.shape)
        if y.size:
            dev.set_args([b, h, s, d, rot, interleaved, *strides, *strides, rows])
            bad = dev.call("er_rotary", x.ptr, cos_cache.ptr, sin_cache.ptr,
                           position_ids.ptr if position_ids is not None else 0, y.ptr)
            if bad:
                raise IndexError(f"RotaryEmbedding: position id at {-1 - bad} is outside the "
                                 f"cache's {rows} rows")
        return y
    return float_or_refused(dev, node, opset, run, float_inputs=[0, 1, 2])


@operator("SwiGLU")
def bind_swiglu(dev, node, opset):
    """a * sigmoid(alpha a) * b through the typed kernels (Swish, then Mul)."""
    from .elementwise import MAP_BINARY, MAP_UNARY, map_binary, map_unary

    alpha = float(node.attr("alpha", 1.0))

    def run(ctx, a, b, **_):
        if tuple(a.shape) != tuple(b.shape):
            raise ValueError(f"SwiGLU inputs must have the same shape, got {list(a.shape)} and "
                             f"{list(b.shape)}")
        gated = map_unary(dev, MAP_UNARY.index("Swish"), a, a.elem_type, alpha)
        return map_binary(dev, MAP_BINARY.index("Mul"), gated, b, a.elem_type)
    return run


@operator("Attention", domains=EDGERUN)
def bind_fused_attention(dev, node, opset):
    """The optimizer's com.edgerun Attention (optimizer/fuse_attention.py): standard
    Attention on 4-D Q, K, V with an additive float mask that broadcasts like numpy's Add,
    its key axis included (er_attention reads a shorter mask as padding, so a mask of one
    key column is widened first)."""
    standard = bind_attention(dev, node, opset)

    def run(ctx, q, k, v, mask=None, **_):
        if not len(q.shape) == len(k.shape) == len(v.shape) == 4:
            raise ValueError(f"Attention expects 4-D Q, K, V [batch, heads, seq, head_size], "
                             f"got {list(q.shape)}, {list(k.shape)}, {list(v.shape)}")
        keys = k.shape[2]
        if mask is not None and mask.shape and mask.shape[-1] == 1 and keys != 1:
            widened = dev.empty(tuple(mask.shape[:-1]) + (keys,), mask.elem_type)
            broadcast_into(dev, mask, widened)
            mask = widened
        return standard(ctx, q, k, v, mask)
    return run
