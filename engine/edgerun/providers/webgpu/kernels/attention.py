"""Attention (opsets 23-24) on attention.wgsl: 3-D or 4-D Q/K/V, grouped-query heads, boolean
or float masks (broadcast, shorter than the keys), is_causal, sliding windows, scale, softcap,
past_key/past_value with present outputs, nonpad_kv_seqlen and the qk_matmul_output in every
mode. Computed in float32: other element types are refused. RotaryEmbedding (index.wgsl's
`rotary`) lives here too."""
from __future__ import annotations

import math

from ....ir import dtypes
from .common import as_gpu, as_gpu_any, broadcast_strides, strided_copy, strides_of
from .registry import Unsupported, gpu_op

MAX_HEAD_SIZE = 256          # attention.wgsl's per-row accumulator
MASK_KINDS = {"bool": 1, "float32": 2}


def check_attention(node, opset, types) -> str:
    wanted = {0: "Q", 1: "K", 2: "V", 4: "past_key", 5: "past_value"}
    for i, name in enumerate(node.inputs):
        if not name:
            continue
        t = types.get(name)
        code = t.elem_type if t is not None else 0
        what = dtypes.type_string(code) if code else "unknown type"
        if i in wanted and code != dtypes.FLOAT:
            return f"Attention {wanted[i]} of {what} (the kernel computes float32)"
        if i == 3 and code not in (dtypes.FLOAT, dtypes.BOOL):
            return f"an attn_mask of {what}"
    return ""


def _head_strides(t, heads: int) -> tuple:
    """(B, H, S, D) dims and (batch, head, position) strides of a 4-D tensor or of a 3-D one
    packing `heads` heads in its last dim."""
    if t.ndim == 4:
        b, h, s, d = t.shape
        return (b, h, s, d), (h * s * d, s * d, d)
    if t.ndim != 3 or not heads or t.shape[2] % heads:
        raise ValueError(f"Attention: a {t.shape} input with {heads} heads")
    b, s, hd = t.shape
    return (b, heads, s, hd // heads), (s * hd, hd // heads, hd)


def _present(gpu, past, x, dims, strides):
    """past (B, H, P, D) followed by x along the sequence, as a 4-D tensor."""
    b, h, s, d = dims
    p = past.shape[2] if past is not None else 0
    out_dims = (b, h, p + s, d)
    out = gpu.empty(out_dims)
    dst = strides_of(out_dims)
    if past is not None:
        strided_copy(gpu, out, past, past.shape, strides_of(past.shape), dst)
    strided_copy(gpu, out, x, dims, list(strides) + [1], dst, 0, p * dst[2])
    return out


@gpu_op("Attention", check=check_attention, typed=True)
def attention(gpu, ctx, q, k, v, attn_mask=None, past_key=None, past_value=None,
              nonpad_kv_seqlen=None, is_causal=0, q_num_heads=None, kv_num_heads=None,
              qk_matmul_output_mode=0, scale=None, softcap=0.0, softmax_precision=None,
              left_window_size=-1, right_window_size=-1):
    q, k, v = as_gpu(gpu, q), as_gpu(gpu, k), as_gpu(gpu, v)
    if not q.ndim == k.ndim == v.ndim:
        raise ValueError(f"Attention: Q, K, V of ranks {q.ndim}, {k.ndim}, {v.ndim}")
    qd, qs = _head_strides(q, q_num_heads)
    kd, ks = _head_strides(k, kv_num_heads)
    vd, vs = _head_strides(v, kv_num_heads)
    batch, hq, seq, dqk = qd
    hkv, dv = kd[1], vd[3]
    if hkv == 0 or hq % hkv or kd[3] != dqk or vd[1] != hkv:
        raise ValueError(f"Attention: Q {q.shape}, K {k.shape}, V {v.shape} do not match")
    if dv > MAX_HEAD_SIZE:
        raise Unsupported(f"a value head size of {dv} (the kernel holds up to {MAX_HEAD_SIZE})")
    if (past_key is None) != (past_value is None):
        raise ValueError("Attention: past_key and past_value must be given together")
    if past_key is not None and nonpad_kv_seqlen is not None:
        raise ValueError("Attention: nonpad_kv_seqlen with past_key/past_value")
    past_len = 0
    n_out = ctx.num_outputs
    if past_key is not None or n_out > 1:
        past_key = None if past_key is None else as_gpu(gpu, past_key)
        past_value = None if past_value is None else as_gpu(gpu, past_value)
        past_len = 0 if past_key is None else past_key.shape[2]
        if k.ndim == 4 and past_key is None:
            present_k, present_v = k, v
        else:
            present_k = _present(gpu, past_key, k, kd, ks)
            present_v = _present(gpu, past_value, v, vd, vs)
        k, v = present_k, present_v
        kd, ks = _head_strides(k, hkv)
        vd, vs = _head_strides(v, hkv)
    kv_len = kd[2]

    if attn_mask is None:
        mask, kind, mask_params = gpu.zeros(1), 0, [0, 0, 0, 0, 0]
    else:
        mask = as_gpu_any(gpu, attn_mask)
        kind = MASK_KINDS.get(mask.dtype)
        if kind is None or mask.ndim > 4:
            raise Unsupported(f"a {mask.dtype} attn_mask of shape {mask.shape}")
        mask_len = mask.shape[-1] if mask.ndim else 1
        full = (batch, hq, seq, mask_len)
        mask_params = broadcast_strides(mask.shape, full) + [mask_len]
    if nonpad_kv_seqlen is None:
        nonpad, has_nonpad = gpu.zeros(1), 0
    else:
        nonpad, has_nonpad = as_gpu_any(gpu, nonpad_kv_seqlen), 1
        if nonpad.dtype not in ("int32", "int64") or nonpad.size != batch:
            raise Unsupported(f"a {nonpad.dtype} nonpad_kv_seqlen of shape {nonpad.shape}")

    y_dims = (batch, hq, seq, dv) if q.ndim == 4 else (batch, seq, hq * dv)
    y = gpu.empty(y_dims)
    y_strides = _head_strides(y, hq)[1]
    scale = 1.0 / math.sqrt(dqk) if scale is None else float(scale)
    params = ([hq, seq, kv_len, dqk, dv, hq // hkv] + list(qs) + list(ks) + list(vs)
              + list(y_strides) + mask_params
              + [float(scale), float(softcap or 0.0), int(bool(is_causal)), past_len,
                 int(left_window_size), int(right_window_size), int(qk_matmul_output_mode)])
    subs = {"MASK": kind, "NONPAD": has_nonpad}
    rows = batch * hq * seq
    if rows and dv:
        gpu.dispatch("attention", "attention", y, [q, k, v, mask, nonpad], params, rows, subs)
    outputs = [y]
    if n_out > 1:
        outputs += [present_k, present_v]
    if n_out > 3:
        if qk_matmul_output_mode not in (0, 1, 2, 3):
            raise ValueError(f"qk_matmul_output_mode must be 0..3, got {qk_matmul_output_mode}")
        scores = gpu.empty((batch, hq, seq, kv_len))
        gpu.dispatch("attention", "attention_scores", scores, [q, k, mask, nonpad], params,
                     scores.size, subs)
        outputs.append(scores)
    return tuple(outputs) if n_out > 1 else y


@gpu_op("RotaryEmbedding")
def rotary_embedding(gpu, ctx, x, cos_cache, sin_cache, position_ids=None, interleaved=0,
                     num_heads=0, rotary_embedding_dim=0):
    x, cos, sin = as_gpu(gpu, x), as_gpu(gpu, cos_cache), as_gpu(gpu, sin_cache)
    half = cos.shape[-1]
    if x.ndim == 4:
        batch, heads, seq, size = x.shape
        s_div = size
    elif x.ndim == 3:
        batch, seq, hidden = x.shape
        heads = num_heads or hidden // (2 * half)
        if rotary_embedding_dim and not num_heads:
            raise ValueError("RotaryEmbedding: 3-D input with rotary_embedding_dim needs "
                             "num_heads")
        if not heads or hidden % heads:
            raise ValueError(f"RotaryEmbedding: hidden size {hidden} for {heads} heads")
        size = hidden // heads
        s_div = hidden
    else:
        raise ValueError(f"RotaryEmbedding input must be 3-D or 4-D, got shape {x.shape}")
    rot_dim = rotary_embedding_dim or size
    if rot_dim % 2 or rot_dim > size or sin.shape[-1] != half or 2 * half != rot_dim:
        raise ValueError(f"RotaryEmbedding: cos/sin caches {cos.shape} for rotary_dim "
                         f"{rot_dim} of {size}")
    if position_ids is None:
        pos, has_pos = gpu.zeros(1), 0
        if cos.size != batch * seq * half:
            raise ValueError(f"RotaryEmbedding: caches {cos.shape} without position_ids for "
                             f"batch {batch}, sequence {seq}")
    else:
        pos, has_pos = as_gpu_any(gpu, position_ids), 1
        if pos.dtype not in ("int32", "int64") or pos.size != batch * seq:
            raise Unsupported(f"{pos.dtype} position_ids of shape {pos.shape}")
    out = gpu.empty(x.shape)
    if x.size == 0:
        return out
    params = [size, seq, s_div, x.size // batch, rot_dim, int(bool(interleaved)), has_pos]
    return gpu.dispatch("index", "rotary", out, [x, cos, sin, pos], params, x.size)


LINEAR_RULES = {"linear": (False, False), "gated": (True, False), "delta": (False, True),
                "gated_delta": (True, True)}      # update_rule -> (decay, beta)


def check_linear_attention(node, opset) -> str:
    rule = node.attr("update_rule", b"gated_delta")
    rule = rule.decode() if isinstance(rule, bytes) else rule
    return "" if rule in LINEAR_RULES else f"update_rule={rule!r}"


def _per_head_mode(t, heads: int, size: int, what: str) -> int:
    """How a (B, T, last) decay/beta is read: 1 per head and element (last = heads * size,
    when size > 1), 2 per head, 3 one value per step."""
    last = t.shape[-1]
    if size > 1 and last == heads * size:
        return 1
    if last == heads:
        return 2
    if last == 1:
        return 3
    raise ValueError(f"LinearAttention: {what} last dim {last} must be {heads} or "
                     f"{heads * size}")


@gpu_op("LinearAttention", check=check_linear_attention)
def linear_attention(gpu, ctx, query, key, value, past_state=None, decay=None, beta=None,
                     q_num_heads=None, kv_num_heads=None, update_rule="gated_delta",
                     scale=0.0, chunk_size=64):
    rule = update_rule.decode() if isinstance(update_rule, bytes) else update_rule
    gated, delta = LINEAR_RULES[rule]
    if gated != (decay is not None) or delta != (beta is not None):
        raise ValueError(f"LinearAttention: update_rule {rule!r} with decay "
                         f"{'given' if decay is not None else 'absent'} and beta "
                         f"{'given' if beta is not None else 'absent'}")
    q, k, v = as_gpu(gpu, query), as_gpu(gpu, key), as_gpu(gpu, value)
    if not q_num_heads or not kv_num_heads or q_num_heads % kv_num_heads or q.ndim != 3:
        raise ValueError(f"LinearAttention: q_num_heads {q_num_heads}, kv_num_heads "
                         f"{kv_num_heads} for a {q.shape} query")
    batch, steps = q.shape[:2]
    dk, dv = q.shape[2] // q_num_heads, v.shape[2] // kv_num_heads
    if dk > MAX_HEAD_SIZE:
        raise Unsupported(f"a key head size of {dk} (the kernel holds up to {MAX_HEAD_SIZE})")
    state_shape = (batch, kv_num_heads, dk, dv)
    past = gpu.zeros(1) if past_state is None else as_gpu(gpu, past_state)
    if past_state is not None and past.shape != state_shape:
        raise ValueError(f"LinearAttention: past_state {past.shape}, expected {state_shape}")
    decay_t = gpu.zeros(1) if decay is None else as_gpu(gpu, decay)
    beta_t = gpu.zeros(1) if beta is None else as_gpu(gpu, beta)
    decay_mode = 0 if decay is None else _per_head_mode(decay_t, kv_num_heads, dk, "decay")
    beta_mode = 0 if beta is None else _per_head_mode(beta_t, kv_num_heads, 1, "beta") - 1
    out = gpu.empty((batch, steps, q_num_heads * dv))
    state = gpu.empty(state_shape)
    scale = float(scale) if scale else 1.0 / math.sqrt(dk)
    params = [steps, kv_num_heads, dk, dv, q_num_heads // kv_num_heads, decay_mode,
              beta_mode, scale, int(past_state is not None)]
    gpu.dispatch("rnn", "linear_attention", out, [q, k, v, past, decay_t, beta_t, state],
                 params, batch * kv_num_heads * dv)
    return out, state


@gpu_op("Attention", domain="com.edgerun", check=check_attention, typed=True)
def fused_attention(gpu, ctx, q, k, v, mask=None, scale=None):
    """The optimizer's com.edgerun Attention (optimizer/fuse_attention.py): standard Attention
    on 4-D Q, K, V with an additive float mask that broadcasts like numpy's Add, its key axis
    included (attention.wgsl reads a shorter mask as padding, so a mask of one key column is
    widened first)."""
    q, k, v = as_gpu(gpu, q), as_gpu(gpu, k), as_gpu(gpu, v)
    if not q.ndim == k.ndim == v.ndim == 4:
        raise ValueError(f"Attention expects 4-D Q, K, V [batch, heads, seq, head_size], got "
                         f"{list(q.shape)}, {list(k.shape)}, {list(v.shape)}")
    if mask is not None:
        mask = as_gpu_any(gpu, mask)
        keys = k.shape[2]
        if mask.ndim and mask.shape[-1] == 1 and keys != 1:
            full = tuple(mask.shape[:-1]) + (keys,)
            mask = strided_copy(gpu, gpu.empty(full, mask.dtype), mask, full,
                                broadcast_strides(mask.shape, full), strides_of(full))
    return attention(gpu, ctx, q, k, v, mask, scale=scale)
