"""Quantized models on the GPU: DequantizeLinear and QuantizeLinear (per tensor or per axis),
DynamicQuantizeLinear (quantize.wgsl), MatMulInteger and com.microsoft MatMulIntegerToFloat
(integer_matmul.wgsl), ConvInteger (conv.wgsl on i32). 8/16-bit tensors are one word an
element (gpu.NARROW_TYPES); these kernels know their ranges, so they are registered
`narrow`. Blocked scales, float8 and float4 types, and non-float32 division precision raise
Unsupported (the CPU kernel runs)."""
from __future__ import annotations

from ....ir import dtypes
from .. import host_values
from ..memory import GpuTensor
from ..shaders import WORKGROUP_SIZE
from .common import as_gpu_any, count, lanes_here, normalize_axis
from .conv import check_conv, conv
from .matmul import k_lanes
from .registry import Unsupported, gpu_op

INTEGER_RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767),
                  "uint16": (0, 65535)}
EIGHT_BIT = ("int8", "uint8")
FLOATS = ("float32", "float16")


def _per_axis(gpu, param, shape: tuple, axis: int, what: str) -> tuple:
    """(GPU tensor, inner, len) of a scale or zero point: one value (inner 1, len 1) or one
    per index of `axis` (a 1-D tensor of that axis's length)."""
    t = as_gpu_any(gpu, param)
    if t.size == 1:
        return t, 1, 1
    if len(shape) <= 1:
        axis = 0
    else:
        axis = normalize_axis(axis, len(shape))
    if t.ndim != 1 or t.size != shape[axis]:
        raise Unsupported(f"a {what} of shape {list(t.shape)} for an input of shape "
                          f"{list(shape)} along axis {axis} (blocked quantization)")
    return t, count(shape[axis + 1:]), shape[axis]


def _typed_zero_point(gpu, zero_point, x_dtype: str, shape, axis: int) -> tuple:
    """_per_axis of a zero point, checked to be of its values' type."""
    t, inner, length = _per_axis(gpu, zero_point, shape, axis, "zero point")
    if t.dtype != x_dtype:
        raise Unsupported(f"a {t.dtype} zero point for {x_dtype} values")
    return t, inner, length


def _zero_point(gpu, zero_point, x_dtype: str, shape, axis: int, length: int):
    """The zero point's GPU tensor (zeros when absent), checked to be of x's type."""
    if zero_point is None:
        return gpu.zeros(length)
    return _typed_zero_point(gpu, zero_point, x_dtype, shape, axis)[0]


def _type_name(types: dict, name: str) -> str:
    t = types.get(name) if name else None
    if t is None or t.kind != "tensor" or not t.elem_type:
        return ""
    return dtypes.BY_CODE[t.elem_type].numpy_name


def check_quantize(node, opset, types) -> str:
    """The forms the kernels take: no blocks, 8/16-bit integers (not float8, 4-bit, 2-bit)."""
    if node.attr("block_size", 0):
        return "blocked quantization"
    if node.op_type == "QuantizeDequantize" and \
            _type_name(types, node.inputs[0]) not in ("", "float32"):
        return f"a QuantizeDequantize of {_type_name(types, node.inputs[0])} values"
    if node.op_type == "DequantizeLinear":
        quantized = _type_name(types, node.inputs[0])
    elif len(node.inputs) > 2 and node.inputs[2]:
        quantized = _type_name(types, node.inputs[2])
    else:
        quantized = dtypes.BY_CODE[node.attr("output_dtype", 0) or dtypes.UINT8].numpy_name
    return "" if not quantized or quantized in INTEGER_RANGES else f"{quantized} values"


@gpu_op("DequantizeLinear", narrow=True, check=check_quantize, typed=True)
def dequantize_linear(gpu, ctx, x, x_scale, x_zero_point=None, axis=1, block_size=0,
                      output_dtype=0):
    x = as_gpu_any(gpu, x)
    if block_size:
        raise Unsupported("blocked quantization")
    if x.dtype not in INTEGER_RANGES:
        raise Unsupported(f"DequantizeLinear of {x.dtype}")
    scale, inner, length = _per_axis(gpu, x_scale, x.shape, axis, "scale")
    out_dtype = dtypes.BY_CODE[output_dtype].numpy_name if output_dtype else scale.dtype
    if scale.dtype not in FLOATS or out_dtype not in FLOATS:
        raise Unsupported(f"a {scale.dtype} scale to {out_dtype}")
    zero = _zero_point(gpu, x_zero_point, x.dtype, x.shape, axis, length)
    out = gpu.empty(x.shape, out_dtype)
    return gpu.dispatch("quantize", "dequantize", out, [x, scale, zero], [inner, length],
                        x.size, {"ROUND": "as_half(v)" if out_dtype == "float16" else "v"})


@gpu_op("QuantizeLinear", narrow=True, check=check_quantize, typed=True)
def quantize_linear(gpu, ctx, x, y_scale, y_zero_point=None, axis=1, saturate=1, block_size=0,
                    output_dtype=0, precision=0):
    x, scale, zero, params, target = _quantize_operands(gpu, x, y_scale, y_zero_point, axis,
                                                        block_size, output_dtype, precision)
    return gpu.dispatch("quantize", "quantize", gpu.empty(x.shape, target), [x, scale, zero],
                        params, x.size, {"OT": "i32", "READ_BACK": "false"})


@gpu_op("QuantizeDequantize", domain="com.edgerun", narrow=True, check=check_quantize,
        typed=True)
def quantize_dequantize(gpu, ctx, x, y_scale, y_zero_point=None, axis=1, saturate=1,
                        block_size=0, output_dtype=0, precision=0):
    """DequantizeLinear(QuantizeLinear(x)) with the pair's scale and zero point (the
    optimizer's fusion of a QDQ model's activation pairs): one dispatch instead of two, and
    no 8-bit tensor in between."""
    x, scale, zero, params, _ = _quantize_operands(gpu, x, y_scale, y_zero_point, axis,
                                                   block_size, output_dtype, precision)
    if x.dtype != "float32":
        raise Unsupported(f"QuantizeDequantize of {x.dtype}")
    return gpu.dispatch("quantize", "quantize", gpu.empty(x.shape), [x, scale, zero], params,
                        x.size, {"OT": "f32", "READ_BACK": "true"})


def _quantize_operands(gpu, x, y_scale, y_zero_point, axis, block_size, output_dtype,
                       precision) -> tuple:
    """(x, scale, zero point, kernel params, quantized type) of QuantizeLinear's forms here:
    float x, one float32 scale or one per index of `axis`, 8/16-bit integers."""
    x = as_gpu_any(gpu, x)
    scale, inner, length = _per_axis(gpu, y_scale, x.shape, axis, "scale")
    if block_size or x.dtype not in FLOATS or scale.dtype != "float32" or \
            precision not in (0, dtypes.FLOAT):
        raise Unsupported(f"QuantizeLinear of {x.dtype} by a {scale.dtype} scale"
                          + (" in blocks" if block_size else ""))
    if y_zero_point is not None:
        target = as_gpu_any(gpu, y_zero_point).dtype
    else:
        target = dtypes.BY_CODE[output_dtype or dtypes.UINT8].numpy_name
    if target not in INTEGER_RANGES:
        raise Unsupported(f"QuantizeLinear to {target}")
    zero = _zero_point(gpu, y_zero_point, target, x.shape, axis, length)
    low, high = INTEGER_RANGES[target]
    return x, scale, zero, [inner, length, low, high], target


PARTIALS = 1024      # work items of DynamicQuantizeLinear's first range step


@gpu_op("DynamicQuantizeLinear", narrow=True)
def dynamic_quantize_linear(gpu, ctx, x):
    """uint8 x with the scale and zero point of its range widened to include 0, all on the
    GPU: partial ranges, folded into the scale and zero point (one dispatch writes both),
    then the quantization."""
    x = as_gpu_any(gpu, x)
    if x.dtype not in FLOATS:
        raise Unsupported(f"DynamicQuantizeLinear of {x.dtype}")
    parts = min(PARTIALS, x.size)
    partials = gpu.dispatch("quantize", "range_partials", gpu.empty((2 * max(parts, 1),)),
                            [x], [x.size], parts)
    lanes = lanes_here(gpu, WORKGROUP_SIZE)
    zero = gpu.empty((), "uint8")
    scale = gpu.dispatch("quantize", "dynamic_scale", gpu.empty((), "float32"),
                         [partials, zero], [parts], lanes, {"LANES": lanes})
    y = gpu.dispatch("quantize", "dynamic_quantize", gpu.empty(x.shape, "uint8"),
                     [x, scale, zero], [], x.size)
    return y, scale, zero


@gpu_op("ConvInteger", narrow=True, check=check_conv)
def conv_integer(gpu, ctx, x, w, x_zero_point=None, w_zero_point=None, **attrs):
    """conv(x - x_zero_point, w - w_zero_point) as int32: both centered (padding then adds
    0, as the zero point would), then conv.wgsl's direct convolution on i32."""
    x, w = as_gpu_any(gpu, x), as_gpu_any(gpu, w)
    if x.dtype not in EIGHT_BIT or w.dtype not in EIGHT_BIT or w.ndim < 3 or \
            (x_zero_point is not None and count(host_values.shape(x_zero_point)) != 1):
        raise Unsupported(f"ConvInteger of {x.dtype} {list(x.shape)} and {w.dtype} "
                          f"{list(w.shape)}")
    return conv(gpu, _centered(gpu, x, x_zero_point, 0), _centered(gpu, w, w_zero_point, 0),
                integer=True, **attrs)


def _centered(gpu, t: GpuTensor, zero_point, axis: int) -> GpuTensor:
    """t minus its zero point (one value, or one per index of `axis`) as int32."""
    if zero_point is None:
        return GpuTensor(t.alloc, t.shape, "int32")      # the same i32 words
    zero, inner, length = _typed_zero_point(gpu, zero_point, t.dtype, t.shape, axis)
    out = gpu.empty(t.shape, "int32")
    return gpu.dispatch("quantize", "center", out, [t, zero], [inner, length], t.size)


def _integer_operands(gpu, a, b, a_zero_point, b_zero_point) -> tuple:
    """(a, b, output shape, N, kernel params, zero-point tensors) of an 8-bit product: A of
    any rank (1-D as one row, batches), B one [K, N] matrix."""
    a, b = as_gpu_any(gpu, a), as_gpu_any(gpu, b)
    if a.dtype not in EIGHT_BIT or b.dtype not in EIGHT_BIT:
        raise Unsupported(f"an integer product of {a.dtype} and {b.dtype}")
    if b.ndim != 2 or a.ndim == 0:
        raise Unsupported(f"an integer product of shapes {list(a.shape)} and {list(b.shape)} "
                          f"(B must be one matrix)")
    k, n = b.shape
    m = a.shape[-2] if a.ndim >= 2 else 1
    if a.shape[-1] != k:
        raise ValueError(f"MatMulInteger: A's last dimension {a.shape[-1]} does not match "
                         f"B's first {k}")
    shape = a.shape[:-1] + (n,)
    zeros = []
    for zp, operand, lines, what in ((a_zero_point, a, m, "A"), (b_zero_point, b, n, "B")):
        if zp is None:
            zeros.append((gpu.zeros(1), 0))
            continue
        t = as_gpu_any(gpu, zp)
        if t.dtype != operand.dtype or t.size not in (1, lines) or t.ndim > 1:
            raise Unsupported(f"{what}'s zero point of {t.dtype} {list(t.shape)}")
        zeros.append((t, int(t.size > 1)))
    params = [m, n, k, zeros[0][1], zeros[1][1]]
    return a, b, shape, n, params, [zeros[0][0], zeros[1][0]]


@gpu_op("MatMulInteger", narrow=True)
def matmul_integer(gpu, ctx, a, b, a_zero_point=None, b_zero_point=None):
    a, b, shape, _, params, zeros = _integer_operands(gpu, a, b, a_zero_point, b_zero_point)
    out = gpu.empty(shape, "int32")
    return _integer_dispatch(gpu, "integer", out, [a, b] + zeros, params)


def _integer_dispatch(gpu, kernel: str, out, inputs: list, params: list):
    """`kernel` of integer_tiles.wgsl (4x4 tiles of vec4 words) where K and N are multiples
    of 4, else of integer_matmul.wgsl (an element each); the sums of a tile or element along
    K shared by k_lanes' lanes. params: M, N, K, a_per_row, b_per_col, then the kernel's."""
    n, k = params[1:3]
    if k % 4 == 0 and n % 4 == 0 and out.size:
        rows = out.size // n
        tiles = -(-rows // 4) * (n // 4)
        lanes = k_lanes(gpu, tiles, k // 4)
        return gpu.dispatch("integer_tiles", kernel, out, inputs, params[:5] + [rows]
                            + params[5:], tiles * lanes, {"LANES": lanes})
    lanes = k_lanes(gpu, out.size, k)
    return gpu.dispatch("integer_matmul", kernel, out, inputs, params, out.size * lanes,
                        {"LANES": lanes})


@gpu_op("MatMulIntegerToFloat", domain="com.microsoft", narrow=True)
def matmul_integer_to_float(gpu, ctx, a, b, a_scale, b_scale, a_zero_point=None,
                            b_zero_point=None, bias=None):
    a, b, shape, n, params, zeros = _integer_operands(gpu, a, b, a_zero_point, b_zero_point)
    a_scale, b_scale = as_gpu_any(gpu, a_scale), as_gpu_any(gpu, b_scale)
    floats = [a_scale, b_scale]
    if bias is not None:
        bias = as_gpu_any(gpu, bias)
        floats.append(bias)
        if bias.size != n:                   # the contrib op's bias is [N]
            raise Unsupported(f"a bias of shape {list(bias.shape)} for {n} columns")
    if a_scale.size != 1 or b_scale.size not in (1, n) or \
            any(t.dtype != "float32" for t in floats):
        raise Unsupported(f"scales of shapes {list(a_scale.shape)} and {list(b_scale.shape)} "
                          f"({', '.join(t.dtype for t in floats)})")
    if bias is None:
        bias = gpu.zeros(n)
    out = gpu.empty(shape, "float32")
    return _integer_dispatch(gpu, "scaled", out, [a, b] + zeros + [a_scale, b_scale, bias],
                             params + [int(b_scale.size > 1)])
