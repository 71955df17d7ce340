"""Attention (opset 23+): er_attention over 4-D strided views of Q, K, V and the mask.

3-D inputs pack the heads into the last axis, (batch, sequence, heads * head_size); they are
read in place as (batch, heads, sequence, head_size) through strides. With past_key and
past_value, the present key/value (past then new along the sequence) are built first and
attention reads them. float16, bfloat16 and float64 compute in float32 (float_or_fallback).
"""
from __future__ import annotations

import math

from ....ir import dtypes
from . import operator
from .common import contiguous_strides, converted, float_or_fallback
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
    return float_or_fallback(dev, node, opset, run, float_inputs=[0, 1, 2, 4, 5])
