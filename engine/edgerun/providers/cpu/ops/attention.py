"""Attention-family kernels: Attention, RotaryEmbedding, LinearAttention, SwiGLU and the preview
FlexAttention.

Scores, softmax and recurrent states are computed in float32 (float64 for double inputs) whatever
the input precision; results are cast back to the types the spec requires.

Head layout: 4-D tensors are (batch, heads, sequence, head_size); 3-D tensors pack the heads into
the last axis, (batch, sequence, heads * head_size).
"""
from __future__ import annotations

import numpy as np

from ....ir.dtypes import numpy_dtype
from ..native import products
from ..registry import kernel


def _compute_dtype(x: np.ndarray):
    return np.dtype(np.float64) if x.dtype == np.float64 else np.dtype(np.float32)


def _split_heads(x: np.ndarray, num_heads, what: str) -> np.ndarray:
    """(B, S, H*D) -> (B, H, S, D)."""
    if not num_heads:
        raise ValueError(f"{what} is 3-D: the number of heads attribute is required")
    batch, seq, hidden = x.shape
    if hidden % num_heads:
        raise ValueError(f"{what} hidden size {hidden} is not a multiple of {num_heads} heads")
    return x.reshape(batch, seq, num_heads, hidden // num_heads).transpose(0, 2, 1, 3)


def _merge_heads(x: np.ndarray) -> np.ndarray:
    """(B, H, S, D) -> (B, S, H*D)."""
    batch, heads, seq, size = x.shape
    return x.transpose(0, 2, 1, 3).reshape(batch, seq, heads * size)


def _grouped_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a (B, Hq, M, K) @ b (B, Hkv, K, N) where query head h uses kv head h // (Hq // Hkv).

    Grouped-query attention without materialising repeated K/V heads.
    """
    hq, hkv = a.shape[1], b.shape[1]
    if hkv == 0 or hq % hkv:
        raise ValueError(f"query heads ({hq}) must be a multiple of key/value heads ({hkv})")
    dtype = a.dtype
    if dtype.itemsize < 4:
        # float32 products with float32 accumulation (BLAS), rounded once at the end
        a, b = a.astype(np.float32), b.astype(np.float32)
    if hq == hkv:
        out = products.matmul(a, b)
    else:
        batch, _, m, k = a.shape
        out = products.matmul(a.reshape(batch, hkv, hq // hkv, m, k), b[:, :, None])
        out = out.reshape(batch, hq, m, out.shape[-1])
    return out.astype(dtype, copy=False)


def _softmax_last_axis(scores: np.ndarray) -> np.ndarray:
    """Softmax over the last axis; a row with no finite score gives zeros instead of NaN."""
    row_max = scores.max(axis=-1, keepdims=True)
    row_max = np.where(np.isneginf(row_max), 0, row_max)
    e = np.exp(scores - row_max)
    total = e.sum(axis=-1, keepdims=True)
    e /= np.where(total == 0, 1, total)
    return e


# ---------------------------------------------------------------------------------------------
# Attention (opset 23; 24 adds nonpad_kv_seqlen; 25 adds the sliding window)


def _pad_mask_keys(mask: np.ndarray, kv_len: int) -> np.ndarray:
    """A mask shorter than the key sequence is padded with 'not attended'."""
    missing = kv_len - mask.shape[-1]
    if missing <= 0:
        return mask
    fill = False if mask.dtype == np.bool_ else -np.inf
    pad = [(0, 0)] * (mask.ndim - 1) + [(0, missing)]
    return np.pad(mask, pad, constant_values=fill)


def _attention_bias(attn_mask, nonpad_kv_seqlen, is_causal, left_window, right_window,
                    past_len: int, q_len: int, kv_len: int, dtype):
    """The additive score bias (0 or -inf per position, plus any float mask), broadcastable
    to (batch, heads, q_len, kv_len); None when nothing masks."""
    allowed = None
    additive = None
    if attn_mask is not None:
        mask = _pad_mask_keys(attn_mask, kv_len)
        if mask.dtype == np.bool_:
            allowed = mask
        else:
            additive = mask.astype(dtype)

    def restrict(condition):
        nonlocal allowed
        allowed = condition if allowed is None else allowed & condition

    # Positions are bottom-right aligned: the query block starts after `offset` valid keys.
    if nonpad_kv_seqlen is not None:
        valid = nonpad_kv_seqlen.astype(np.int64).reshape(-1, 1, 1, 1)
        offset = valid - q_len
    else:
        offset = past_len
    query_pos = np.arange(q_len).reshape(q_len, 1) + offset
    key_pos = np.arange(kv_len)
    if is_causal:
        restrict(key_pos <= query_pos)
    if left_window >= 0:
        restrict(key_pos >= query_pos - left_window)
    if right_window >= 0:
        restrict(key_pos <= query_pos + right_window)
    if nonpad_kv_seqlen is not None:
        restrict(key_pos < valid)

    if allowed is None:
        return additive
    bias = np.where(allowed, dtype.type(0), dtype.type(-np.inf))
    return bias if additive is None else bias + additive


@kernel("Attention", since=23)
def attention(ctx, q, k, v, attn_mask=None, past_key=None, past_value=None,
              nonpad_kv_seqlen=None, is_causal=0, q_num_heads=None, kv_num_heads=None,
              qk_matmul_output_mode=0, scale=None, softcap=0.0, softmax_precision=None,
              left_window_size=-1, right_window_size=-1):
    if not q.ndim == k.ndim == v.ndim or q.ndim not in (3, 4):
        raise ValueError(f"Q, K, V must all be 3-D or 4-D, got {q.shape}, {k.shape}, {v.shape}")
    packed = q.ndim == 3
    if packed:
        q4 = _split_heads(q, q_num_heads, "Q")
        k4 = _split_heads(k, kv_num_heads, "K")
        v4 = _split_heads(v, kv_num_heads, "V")
    else:
        q4, k4, v4 = q, k, v
    if (past_key is None) != (past_value is None):
        raise ValueError("past_key and past_value must be given together")
    past_len = 0
    if past_key is not None:
        if nonpad_kv_seqlen is not None:
            raise ValueError("nonpad_kv_seqlen cannot be combined with past_key/past_value")
        past_len = past_key.shape[2]
        k4 = np.concatenate([past_key, k4], axis=2)
        v4 = np.concatenate([past_value, v4], axis=2)
    present_key, present_value = k4, v4
    q_len, kv_len = q4.shape[2], k4.shape[2]

    # bfloat16 is computed step by step in bfloat16, the precision the spec's pattern implies:
    # with an 8-bit mantissa, a float32 computation rounds differently by about one ulp.
    cdtype = q.dtype if q.dtype.name == "bfloat16" else _compute_dtype(q)
    if softmax_precision == 11:     # DOUBLE asked for explicitly; narrower ones gain nothing
        cdtype = np.dtype(np.float64)
    if scale is None:
        scale = 1.0 / np.sqrt(q4.shape[-1])
    # Scale Q and K by sqrt(scale) each, as the spec says, to keep Q.K^T from overflowing.
    root = cdtype.type(np.sqrt(scale))
    raw_scores = _grouped_matmul(q4.astype(cdtype) * root,
                                 (k4.astype(cdtype) * root).swapaxes(-1, -2))
    scores = raw_scores
    if softcap and softcap > 0:
        scores = cdtype.type(softcap) * np.tanh(raw_scores / cdtype.type(softcap))

    bias = _attention_bias(attn_mask, nonpad_kv_seqlen, is_causal, left_window_size,
                           right_window_size, past_len, q_len, kv_len, cdtype)
    logits = scores if bias is None else scores + bias
    probs = _softmax_last_axis(logits)
    if bias is not None:
        # A query row whose bias disallows every key outputs zeros, decided on the bias so a
        # NaN score (inf - inf) in such a row cannot leak through.
        fully_masked = np.isneginf(bias.max(axis=-1, keepdims=True))
        if fully_masked.any():
            probs = np.where(fully_masked, cdtype.type(0), probs)

    y = _grouped_matmul(probs, v4.astype(cdtype)).astype(q.dtype)
    if packed:
        y = _merge_heads(y)
    outputs = [y, present_key, present_value]
    if ctx.num_outputs > 3:
        chosen = {0: raw_scores, 1: scores, 2: logits, 3: probs}.get(qk_matmul_output_mode)
        if chosen is None:
            raise ValueError(f"qk_matmul_output_mode must be 0..3, got {qk_matmul_output_mode}")
        shape = (y.shape[0], q4.shape[1], q_len, kv_len)
        outputs.append(np.broadcast_to(chosen, shape).astype(q.dtype))
    return tuple(outputs[:max(ctx.num_outputs, 1)])


# ---------------------------------------------------------------------------------------------
# RotaryEmbedding (opset 23)


@kernel("RotaryEmbedding", since=23)
def rotary_embedding(ctx, x, cos_cache, sin_cache, position_ids=None, interleaved=0,
                     num_heads=0, rotary_embedding_dim=0):
    if position_ids is not None:
        cos, sin = cos_cache[position_ids], sin_cache[position_ids]   # (B, S, rd/2)
    else:
        cos, sin = cos_cache, sin_cache
    if x.ndim == 4:                                 # (B, H, S, D): angles per (B, S)
        heads = x
        cos, sin = cos[..., None, :, :], sin[..., None, :, :]
    elif x.ndim == 3:                               # (B, S, H*D) -> (B, S, H, D)
        batch, seq, hidden = x.shape
        if not num_heads:
            if rotary_embedding_dim:
                raise ValueError("3-D input with rotary_embedding_dim needs num_heads")
            num_heads = hidden // (2 * cos.shape[-1])      # full rotation: head_size = 2 * half
        if hidden % num_heads:
            raise ValueError(f"hidden size {hidden} is not a multiple of num_heads {num_heads}")
        heads = x.reshape(batch, seq, num_heads, hidden // num_heads)
        cos, sin = cos[..., None, :], sin[..., None, :]
    else:
        raise ValueError(f"RotaryEmbedding input must be 3-D or 4-D, got shape {x.shape}")

    rot_dim = rotary_embedding_dim or heads.shape[-1]
    half = rot_dim // 2
    if cos.shape[-1] != half or sin.shape[-1] != half:
        raise ValueError(f"cos/sin cache last dim must be rotary_embedding_dim/2 = {half}, "
                         f"got {cos.shape[-1]} and {sin.shape[-1]}")
    cdtype = _compute_dtype(x)
    cos, sin = cos.astype(cdtype), sin.astype(cdtype)
    rotated = heads[..., :rot_dim].astype(cdtype)
    if interleaved:
        first, second = rotated[..., 0::2], rotated[..., 1::2]
    else:
        first, second = rotated[..., :half], rotated[..., half:]
    real = cos * first - sin * second
    imag = sin * first + cos * second

    out = np.empty(heads.shape, dtype=x.dtype)
    if interleaved:
        out[..., 0:rot_dim:2] = real
        out[..., 1:rot_dim:2] = imag
    else:
        out[..., :half] = real
        out[..., half:rot_dim] = imag
    out[..., rot_dim:] = heads[..., rot_dim:]
    return out.reshape(x.shape)


# ---------------------------------------------------------------------------------------------
# LinearAttention (opset 27)

_LINEAR_RULES = {  # update_rule -> (uses decay, uses beta)
    "linear": (False, False),
    "gated": (True, False),
    "delta": (False, True),
    "gated_delta": (True, True),
}


def _per_head_sequence(x: np.ndarray, heads: int, size: int, what: str) -> np.ndarray:
    """(B, T, heads*size) or (B, T, heads) [one value per head] -> (B, heads, T, size or 1)."""
    if x.ndim != 3:
        raise ValueError(f"{what} must be rank 3, got shape {x.shape}")
    batch, steps, last = x.shape
    if last == heads * size:
        return x.reshape(batch, steps, heads, size).transpose(0, 2, 1, 3)
    if last in (heads, 1):
        return x.reshape(batch, steps, last, 1).transpose(0, 2, 1, 3)
    raise ValueError(f"{what} last dim {last} must be {heads} or {heads * size}")


@kernel("LinearAttention", since=27)
def linear_attention(ctx, query, key, value, past_state=None, decay=None, beta=None,
                     q_num_heads=None, kv_num_heads=None, update_rule="gated_delta",
                     scale=0.0, chunk_size=64):
    if update_rule not in _LINEAR_RULES:
        raise ValueError(f"update_rule must be one of {sorted(_LINEAR_RULES)}, got {update_rule!r}")
    gated, delta = _LINEAR_RULES[update_rule]
    if gated != (decay is not None):
        raise ValueError(f"update_rule {update_rule!r} {'needs' if gated else 'forbids'} decay")
    if delta != (beta is not None):
        raise ValueError(f"update_rule {update_rule!r} {'needs' if delta else 'forbids'} beta")
    if not q_num_heads or not kv_num_heads or q_num_heads % kv_num_heads:
        raise ValueError(f"q_num_heads ({q_num_heads}) must be a positive multiple of "
                         f"kv_num_heads ({kv_num_heads})")

    cdtype = _compute_dtype(query)
    q4 = _split_heads(query, q_num_heads, "query").astype(cdtype)
    k4 = _split_heads(key, kv_num_heads, "key").astype(cdtype)
    v4 = _split_heads(value, kv_num_heads, "value").astype(cdtype)
    batch, _, steps, d_k = q4.shape
    d_v = v4.shape[-1]
    group = q_num_heads // kv_num_heads
    # Query heads are read against their kv head's state: (B, Hkv, group, T, d_k).
    q5 = q4.reshape(batch, kv_num_heads, group, steps, d_k)
    gate = rate = None
    if gated:     # exp(decay), per head or per key dim
        gate = np.exp(_per_head_sequence(decay, kv_num_heads, d_k, "decay").astype(cdtype))
    if delta:     # beta, per head or shared
        rate = _per_head_sequence(beta, kv_num_heads, 1, "beta").astype(cdtype)

    if past_state is not None:
        if past_state.shape != (batch, kv_num_heads, d_k, d_v):
            raise ValueError(f"past_state shape {past_state.shape} must be "
                             f"{(batch, kv_num_heads, d_k, d_v)}")
        state = past_state.astype(cdtype)           # astype copies: the input stays untouched
        state_dtype = past_state.dtype
    else:
        state = np.zeros((batch, kv_num_heads, d_k, d_v), dtype=cdtype)
        state_dtype = query.dtype
    scale_value = scale if scale else 1.0 / np.sqrt(d_k)

    outputs = np.empty((batch, kv_num_heads, group, steps, d_v), dtype=cdtype)
    for t in range(steps):           # the recurrence is sequential in time
        k_t, v_t = k4[:, :, t], v4[:, :, t]                       # (B, Hkv, d)
        if gated:
            state = state * gate[:, :, t][..., None]              # decay per key dim or head
        if delta:
            retrieved = np.einsum("bhdm,bhd->bhm", state, k_t)
            v_t = rate[:, :, t] * (v_t - retrieved)
        state = state + k_t[..., :, None] * v_t[..., None, :]
        outputs[:, :, :, t] = np.matmul(q5[:, :, :, t], state)   # (B, Hkv, group, d_v)
    outputs *= cdtype.type(scale_value)

    output = outputs.reshape(batch, q_num_heads, steps, d_v)
    return _merge_heads(output).astype(query.dtype), state.astype(state_dtype)


# ---------------------------------------------------------------------------------------------
# SwiGLU (opset 28)


@kernel("SwiGLU", since=28)
def swiglu(ctx, a, b, alpha=1.0):
    if a.shape != b.shape:
        raise ValueError(f"SwiGLU inputs must have the same shape, got {a.shape} and {b.shape}")
    cdtype = _compute_dtype(a)
    gate = a.astype(cdtype)
    z = cdtype.type(alpha) * gate
    # sigmoid(z) = 1 / (1 + exp(-z)), written so exp never overflows
    e = np.exp(-np.abs(z))
    sigmoid = np.where(z >= 0, 1 / (1 + e), e / (1 + e))
    return (gate * sigmoid * b.astype(cdtype)).astype(a.dtype)


# ---------------------------------------------------------------------------------------------
# FlexAttention (ai.onnx.preview, version 1)


@kernel("FlexAttention", domain="ai.onnx.preview")
def flex_attention(ctx, q, k, v, scale=None, score_mod=None, prob_mod=None,
                   softmax_precision=None):
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ValueError(f"FlexAttention needs rank-4 Q, K, V, got {q.shape}, {k.shape}, {v.shape}")
    if k.shape[1] != v.shape[1] or k.shape[2] != v.shape[2]:
        raise ValueError(f"K {k.shape} and V {v.shape} must share heads and sequence length")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"Q head size {q.shape[-1]} differs from K head size {k.shape[-1]}")
    if softmax_precision is not None:
        cdtype = numpy_dtype(softmax_precision)
    else:
        cdtype = _compute_dtype(q)
    if scale is None:
        scale = 1.0 / np.sqrt(q.shape[-1])
    root = np.float32(np.sqrt(np.float32(scale)))
    work = np.float64 if cdtype == np.float64 else np.float32
    scores = _grouped_matmul(q.astype(work) * root, (k.astype(work) * root).swapaxes(-1, -2))
    scores = scores.astype(cdtype)
    if score_mod is not None:
        scores = np.asarray(ctx.run_graph(score_mod, [scores])[0]).astype(cdtype)
    probs = _softmax_last_axis(scores.astype(work)).astype(cdtype)
    if prob_mod is not None:
        probs = np.asarray(ctx.run_graph(prob_mod, [probs])[0]).astype(cdtype)
    y = _grouped_matmul(probs.astype(work), v.astype(work))
    return y.astype(v.dtype)
