"""Fused operators the graph optimizer introduces (domain com.edgerun).

- FusedConv, FusedGemm, FusedMatMul, FusedBatchNormalization (inference form, opset 7's
  attributes): the standard operator, then an activation applied to its result in place.
  Attributes: the base operator's own, plus `activation` (Relu, LeakyRelu, Sigmoid, Tanh,
  Clip, HardSigmoid, HardSwish, QuantizeDequantize) and `activation_params` (floats:
  LeakyRelu [alpha], Clip [min, max], HardSigmoid [alpha, beta], QuantizeDequantize [scale,
  zero point, low, high]: a QDQ model's pair after the operator, its 8-bit grid from low to
  high, uint8's or int8's).
- LayerNormalization, Gelu and HardSwish: the standard operators (opset 17, 20 and 14) for
  models that import an older opset, same attributes.
- Attention: softmax(Q·Kᵀ·scale + mask)·V on 4-D [batch, heads, seq, head_size] tensors,
  the subset of ONNX Attention (opset 23) that BERT-style exports spell out in primitives;
  inputs (Q, K, V, mask?), attribute `scale`.
- QuantizeDequantize (in quantization.py, with its parts): DequantizeLinear(QuantizeLinear(x))
  with one scale and zero point, a QDQ model's activation pair; QuantizeLinear's attributes.

optimizer/save.py rewrites these into onnxruntime's com.microsoft spellings or standard
operators when an optimized model is written to a file.
"""
from __future__ import annotations

import numpy as np

from ....ir import EDGERUN_DOMAIN as DOMAIN
from ....ir.unary_ops import UNARY_OPS
from ..registry import binds, kernel
from . import unary
from .activations import gelu, hard_swish, leaky_relu_of, relu, sigmoid, sigmoid_fresh, tanh
from .clamp import clip_to, maximum_of
from .conv import convolve_activated
from ..native import conv as native_conv
from .float_errors import ignored_float_errors
from .matmul import gemm, matmul
from .normalization import batch_norm_activated, layer_normalization
from .quantization import quantize_dequantize_on_grid
from .softmax import softmax_13



def _clip(ctx, y, params):
    low = params[0] if len(params) > 0 else -np.inf
    high = params[1] if len(params) > 1 else np.inf
    return np.clip(y, np.asarray(low, y.dtype), np.asarray(high, y.dtype))


# activation name -> fn(ctx, y, params): the hand-written kernels; every other ir/unary_ops.py
# row through its formula
ACTIVATIONS = {
    "Relu": lambda ctx, y, p: relu(ctx, y),
    "Sigmoid": lambda ctx, y, p: sigmoid(ctx, y),
    "Tanh": lambda ctx, y, p: tanh(ctx, y),
    "HardSwish": lambda ctx, y, p: hard_swish(ctx, y),
    "Clip": _clip,
    "QuantizeDequantize": lambda ctx, y, p: quantize_dequantize_on_grid(y, p),
}


def _activate(ctx, y, activation, params):
    fn = ACTIVATIONS.get(activation)
    if fn is not None:
        return fn(ctx, y, list(params or []))
    if activation in UNARY_OPS:
        return unary.apply(activation, y, params)
    raise ValueError(f"unsupported fused activation {activation!r}; expected one of "
                     f"{sorted(set(ACTIVATIONS) | set(UNARY_OPS))}")


# ---- the same activations overwriting a fresh float32/float64 result (no new buffers) ----

def _relu_in_place(y, p):
    return maximum_of(y, 0, out=y)


def _leaky_relu_in_place(y, p):
    alpha = p[0] if p else 0.01
    done = leaky_relu_of(y, alpha, out=y)
    return done if done is not None else np.multiply(y, y.dtype.type(alpha), out=y, where=y < 0)


def _sigmoid_in_place(y, p):
    return sigmoid_fresh(y)        # two small buffers, no errstate: cheaper than in place


def _tanh_in_place(y, p):
    return np.tanh(y, out=y)


def _hard_sigmoid_in_place(y, p):
    alpha = p[0] if len(p) > 0 else 0.2
    beta = p[1] if len(p) > 1 else 0.5
    with ignored_float_errors():
        y *= y.dtype.type(alpha)
        y += y.dtype.type(beta)
    return clip_to(y, 0, 1, out=y)


def _hard_swish_in_place(y, p):
    gate = np.multiply(y, y.dtype.type(1 / 6))      # x * clip(x / 6 + 1/2, 0, 1)
    gate += y.dtype.type(0.5)
    clip_to(gate, 0, 1, out=gate)
    y *= gate
    return y


def _clip_in_place(y, p):
    low = p[0] if len(p) > 0 else -np.inf
    high = p[1] if len(p) > 1 else np.inf
    return clip_to(y, low, high, out=y)


_IN_PLACE_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))

IN_PLACE = {
    "Relu": _relu_in_place,
    "LeakyRelu": _leaky_relu_in_place,
    "Sigmoid": _sigmoid_in_place,
    "Tanh": _tanh_in_place,
    "HardSigmoid": _hard_sigmoid_in_place,
    "HardSwish": _hard_swish_in_place,
    "Clip": _clip_in_place,
    "QuantizeDequantize": quantize_dequantize_on_grid,
}


def _activate_fresh(ctx, y, out_dtype, activation, params):
    """The activation of `y`, a fresh result in the compute dtype, returned in out_dtype."""
    if y.dtype != out_dtype or y.dtype not in _IN_PLACE_DTYPES:
        return _activate(ctx, y.astype(out_dtype, copy=False), activation, params)
    if native_conv.activate_in_place(y, activation, params or ()):
        return y
    fn = IN_PLACE.get(activation)
    return fn(y, params or ()) if fn is not None else _activate(ctx, y, activation, params)


@kernel("FusedConv", domain=DOMAIN)
def fused_conv(ctx, x, w, b=None, activation="Relu", activation_params=None, **conv_attrs):
    y, activated = convolve_activated(x, w, b, activation, activation_params, ctx=ctx,
                                      **conv_attrs)
    if activated:
        return y.astype(x.dtype, copy=False)
    return _activate_fresh(ctx, y, x.dtype, activation, activation_params)


@kernel("FusedBatchNormalization", domain=DOMAIN)
def fused_batch_normalization(ctx, x, scale, bias, mean, var, epsilon=1e-5,
                              activation="Relu", activation_params=None):
    """BatchNormalization's inference form (opset 7 on) with an activation after it, in the
    same native pass where the pass takes it (its code and parameters worked out once per
    node: they are attributes)."""
    act = None
    if x.dtype == np.float32:
        def code():
            return native_conv.activation_code(activation, activation_params)
        act = code() if ctx is None else ctx.prepared("activation_code", (), code)
    y, activated = batch_norm_activated(x, scale, bias, mean, var, epsilon, ctx, act)
    if activated:
        return y
    return _activate_fresh(ctx, y, x.dtype, activation, activation_params)


def _bind_fused_gemm(ctx, attrs: dict):
    """FusedGemm with its attributes read once: the bound Gemm, then the activation in
    place (numpy's in-place form where a native pass does not pay: the same bits)."""
    gemm_attrs = {k: v for k, v in attrs.items() if k not in ("activation", "activation_params")}
    product = gemm.bind(ctx, gemm_attrs)      # type: ignore[attr-defined]
    activation, params = attrs.get("activation", "Relu"), attrs.get("activation_params")
    in_place = IN_PLACE.get(activation)

    def run(ctx, a, b, c=None):
        y = product(ctx, a, b, c)
        if in_place is not None and y.dtype == a.dtype == np.float32 and \
                not native_conv.pass_pays(activation, y.size):
            return in_place(y, params or ())
        return _activate_fresh(ctx, y, a.dtype, activation, params)
    return run


@binds(_bind_fused_gemm)
@kernel("FusedGemm", domain=DOMAIN)
def fused_gemm(ctx, a, b, c=None, activation="Relu", activation_params=None, **gemm_attrs):
    # gemm and matmul return fresh arrays, so the activation may overwrite them
    return _activate_fresh(ctx, gemm(ctx, a, b, c, **gemm_attrs), a.dtype, activation,
                           activation_params)


@kernel("FusedMatMul", domain=DOMAIN)
def fused_matmul(ctx, a, b, activation="Relu", activation_params=None):
    return _activate_fresh(ctx, matmul(ctx, a, b), a.dtype, activation, activation_params)


@kernel("LayerNormalization", domain=DOMAIN)
def fused_layer_normalization(ctx, x, scale, bias=None, axis=-1, epsilon=1e-5, stash_type=1):
    return layer_normalization(ctx, x, scale, bias, axis=axis, epsilon=epsilon,
                               stash_type=stash_type)


@kernel("Gelu", domain=DOMAIN)
def fused_gelu(ctx, x, approximate="none"):
    return gelu(ctx, x, approximate=approximate)


@kernel("HardSwish", domain=DOMAIN)
def fused_hard_swish(ctx, x):
    return hard_swish(ctx, x)


@kernel("Attention", domain=DOMAIN)
def fused_attention(ctx, q, k, v, mask=None, scale=None):
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ValueError(f"Attention expects 4-D Q, K, V [batch, heads, seq, head_size], "
                         f"got {q.shape}, {k.shape}, {v.shape}")
    if scale is None:
        scale = 1.0 / np.sqrt(q.shape[-1])
    scores = matmul(ctx, q, np.swapaxes(k, -1, -2))
    scores = scores * np.asarray(scale, scores.dtype)
    if mask is not None:
        scores = scores + mask.astype(scores.dtype, copy=False)
    return matmul(ctx, softmax_13(ctx, scores, axis=-1), v)


# ---- onnxruntime's com.microsoft spellings: optimized files edgerun writes use them ----------
MICROSOFT = "com.microsoft"


@kernel("FusedConv", domain=MICROSOFT)
def microsoft_fused_conv(ctx, x, w, b=None, z=None, activation="Relu", activation_params=None,
                         **conv_attrs):
    if z is not None:
        raise ValueError("com.microsoft FusedConv with a Z (sum) input is not supported")
    return fused_conv(ctx, x, w, b, activation, activation_params, **conv_attrs)


@kernel("FusedGemm", domain=MICROSOFT)
def microsoft_fused_gemm(ctx, a, b, c=None, activation="Relu", activation_alpha=None,
                         activation_beta=None, activation_gamma=None, **gemm_attrs):
    params = [p for p in (activation_alpha, activation_beta) if p is not None]
    return fused_gemm(ctx, a, b, c, activation, params, **gemm_attrs)

