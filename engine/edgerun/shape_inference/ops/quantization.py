"""Quantization: output element types come from zero points, scales or output_dtype."""
from __future__ import annotations

from ...ir import dtypes
from ..context import tensor
from ..registry import infer
from ._common import same_as_input, scalar
from .matmul import matmul_shape


@infer("QuantizeLinear")
def quantize_linear(ctx):
    elem = ctx.elem(2) if ctx.has(2) else (ctx.attr("output_dtype", 0) or dtypes.UINT8)
    return [same_as_input(ctx, elem_type=elem)]


@infer("DequantizeLinear")
def dequantize_linear(ctx):
    elem = ctx.attr("output_dtype", 0) or ctx.elem(1)
    return [same_as_input(ctx, elem_type=elem)]


@infer("DynamicQuantizeLinear")
def dynamic_quantize_linear(ctx):
    return [same_as_input(ctx, elem_type=dtypes.UINT8), scalar(dtypes.FLOAT),
            scalar(dtypes.UINT8)]


@infer("MatMulInteger")
def matmul_integer(ctx):
    return [tensor(dtypes.INT32, matmul_shape(ctx, ctx.shape(0), ctx.shape(1)))]


@infer("MatMulIntegerToFloat", domain="com.microsoft")
def matmul_integer_to_float(ctx):
    """onnxruntime's contrib operator (the optimizer's fusion of MatMulInteger -> Cast -> Mul
    [-> Add]): the integer product's shape, in its scales' float type."""
    return [tensor(ctx.elem(2) or dtypes.FLOAT, matmul_shape(ctx, ctx.shape(0), ctx.shape(1)))]


@infer("DynamicQuantizeMatMul", domain="com.microsoft")
def dynamic_quantize_matmul(ctx):
    """onnxruntime's contrib operator (the optimizer's fusion of DynamicQuantizeLinear ->
    MatMulIntegerToFloat): float32 A's product shape."""
    return [tensor(dtypes.FLOAT, matmul_shape(ctx, ctx.shape(0), ctx.shape(1)))]


@infer("QLinearMatMul")
def qlinear_matmul(ctx):
    return [tensor(ctx.elem(7) or ctx.elem(0), matmul_shape(ctx, ctx.shape(0), ctx.shape(3)))]
