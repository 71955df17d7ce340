"""Fused operators the optimizer introduces (com.edgerun, and onnxruntime's com.microsoft
spellings): the base operator's rule."""
from __future__ import annotations

from ...ir import EDGERUN_DOMAIN as DOMAIN
from ..registry import infer
from . import attention, conv, matmul, normalization
from ._common import same_as_input

MICROSOFT = "com.microsoft"       # onnxruntime's spellings of the same fusions

for domain in (DOMAIN, MICROSOFT):
    infer("FusedConv", domain=domain)(conv.conv)
    infer("FusedGemm", domain=domain)(matmul.gemm)
    infer("FusedMatMul", domain=domain)(matmul.matmul)


infer("LayerNormalization", domain=DOMAIN)(normalization.layer_normalization)


@infer("Gelu", "HardSwish", "Swish", "FusedBatchNormalization", "ElementwiseProgram",
       domain=DOMAIN)
@infer("Gelu", "FastGelu", "BiasGelu", domain=MICROSOFT)
def elementwise_activation(ctx):
    return [same_as_input(ctx)]


@infer("Attention", domain=DOMAIN)
def attention_4d(ctx):
    q, v = ctx.shape(0), ctx.shape(2)
    out = None if q is None else tuple(q[:3]) + ((v[3],) if v is not None else (None,))
    return [attention.tensor(ctx.elem(0), out)]


@infer("QuantizeDequantize", domain=DOMAIN)
def quantize_dequantize(ctx):
    """x's shape, in the scale's (float) type."""
    return [same_as_input(ctx, 0, elem_type=ctx.elem(1) or None)]


@infer("LookupTable", domain=DOMAIN)
def lookup_table(ctx):
    """x's shape, in the table's type."""
    return [same_as_input(ctx, 0, elem_type=ctx.elem(1) or None)]
