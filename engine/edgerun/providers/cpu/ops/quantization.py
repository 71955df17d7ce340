"""Linear quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, and the
quantized products QLinearMatMul, QLinearConv, MatMulInteger, ConvInteger.

Conventions shared by every kernel here:
- rounding is half-to-even (`np.rint`), then saturation to the target type's range;
- scale and zero point are per tensor (scalar), per axis (1-D) or blocked (same rank as the
  input, one entry per `block_size` elements along `axis`): `_expand_param` makes them
  broadcast against the input;
- integer products run as float BLAS matmuls, exactly: float32 (sgemm) when K times the
  largest centered magnitudes of A and B stays below 2**24, so that every product and every
  partial sum, in whatever order BLAS adds them, is an integer float32 holds exactly; past
  that, float32 products over blocks of K that each stay below it, added in float64; float64
  otherwise (every partial sum of 8/16-bit operands is far below 2**53). The result then
  wraps to int32 as the spec allows ("accumulation may overflow if and only if in 32 bits").
  A constant B (the weights) is centered and converted once per node. Where the native
  kernels run here (native/qgemm.py: AVX2 or AVX-512 VNNI), 8-bit products of a B matrix
  with per-tensor or per-column zero points take them instead, B packed once per node
  (integer convolutions keep Conv's float methods: an im2col of 8-bit values in numpy costs
  more than the float convolution it would replace);
- the 8-bit float32 per-tensor paths of QuantizeLinear, DequantizeLinear, their fused pair
  and DynamicQuantizeLinear run as one native pass each where the kernels run
  (native/elementwise.py), equal bit for bit to the numpy passes they replace.
"""
from __future__ import annotations

from typing import Optional

import math

import numpy as np

from ....ir import EDGERUN_DOMAIN as EDGERUN
from ....ir import dtypes
from ..native import elementwise as native
from ..native import qconv, qgemm
from ..registry import kernel
from .cast import FLOAT8_CODES, cast_array
from .clamp import clip_to
from .conv import convolve


INTEGER_RANGES = {
    dtypes.UINT8: (0, 255),
    dtypes.INT8: (-128, 127),
    dtypes.UINT16: (0, 65535),
    dtypes.INT16: (-32768, 32767),
    dtypes.UINT4: (0, 15),
    dtypes.INT4: (-8, 7),
    dtypes.UINT2: (0, 3),
    dtypes.INT2: (-2, 1),
}
EIGHT_BIT_CODES = (dtypes.UINT8, dtypes.INT8)
# Quantized float formats: float8 saturates per `saturate`; float4/float6 have no inf to
# overflow into, so their conversion always saturates.
FLOAT_QUANT_CODES = FLOAT8_CODES | {dtypes.FLOAT4E2M1, 27, 28}   # 27, 28: FLOAT6E2M3, FLOAT6E3M2


def _code_of(array: np.ndarray) -> int:
    return dtypes.code_of_numpy(np.asarray(array).dtype)


def _normalize_axis(axis: int, rank: int) -> int:
    if rank == 0:
        return 0
    if rank == 1:   # a 1-D input has only one axis to quantize along
        return 0
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} is out of range for a rank-{rank} input")
    return axis % rank


def _expand_param(param: np.ndarray, shape: tuple, axis: int, block_size: int) -> np.ndarray:
    """Reshape a scale or zero point so it broadcasts element-wise against `shape`."""
    param = np.asarray(param)
    if param.ndim == 0 or (param.size == 1 and not block_size):
        return param.reshape(())
    axis = _normalize_axis(axis, len(shape))
    if block_size and block_size > 0:
        if param.ndim != len(shape):
            raise ValueError(
                f"blocked quantization needs a scale of rank {len(shape)}, got shape {param.shape}")
        full = np.repeat(param, block_size, axis=axis)
        full = np.take(full, np.arange(shape[axis]), axis=axis)
        if full.shape != tuple(shape):
            raise ValueError(
                f"scale shape {param.shape} with block_size {block_size} along axis {axis} "
                f"does not tile input shape {tuple(shape)}")
        return full
    if block_size < 0:
        raise ValueError(f"block_size must be positive, got {block_size}")
    if param.ndim != 1 or param.size != shape[axis]:
        raise ValueError(
            f"per-axis scale must be 1-D of length {shape[axis]} (axis {axis} of "
            f"{tuple(shape)}), got shape {param.shape}")
    dims = [1] * len(shape)
    dims[axis] = param.size
    return param.reshape(dims)


def _float_view(array: np.ndarray, compute=np.float32) -> np.ndarray:
    """Any numeric array (ml_dtypes included) as a plain float array."""
    if array.dtype == compute:
        return array
    return cast_array(array, dtypes.code_of_numpy(compute))


def quantize_values(values: np.ndarray, zero_point, code: int, saturate: bool = True):
    """Real-valued `values` (already divided by the scale) to element type `code`."""
    if code in INTEGER_RANGES:
        low, high = INTEGER_RANGES[code]
        q = np.rint(values.astype(np.float64))
        if zero_point is not None:
            q = q + zero_point.astype(np.float64)
        q = np.asarray(np.clip(q, low, high))       # 0-d stays an array (numpy gives a scalar)
        _nan_to_lowest(q, low)             # NaN quantizes to the lowest value, as onnxruntime's
        return q.astype(dtypes.numpy_dtype(code))
    if code in FLOAT_QUANT_CODES:
        if zero_point is not None:
            values = values.astype(np.float32) + _float_view(zero_point)
        return cast_array(values, code, saturate=saturate)
    raise TypeError(f"{dtypes.elem_type(code).name} is not a quantized type")


def _quantized_code(zero_point, output_dtype: int) -> int:
    if zero_point is None:
        return output_dtype or dtypes.UINT8
    code = _code_of(zero_point)
    if output_dtype and output_dtype != code:
        raise TypeError(
            f"output_dtype {dtypes.elem_type(output_dtype).name} differs from the zero point's "
            f"type {dtypes.elem_type(code).name}")
    return code


def _quantize_float32_per_tensor(x, scale, zero_point, code: int):
    """x / scale rounded half to even, plus the zero point, saturated: for float32 x, one
    float32 scale and an 8-bit result, in float32 (x / scale is the general path's float32
    quotient; its rounding and the small integer sums are exact there)."""
    if native.available():
        return native.quantize(x, scale.reshape(()), _scalar_point(zero_point),
                               dtypes.numpy_dtype(code))
    values, z = _steps_around_zero_point(x, scale, zero_point, code)
    if z:
        values += np.float32(z)
    return values.astype(dtypes.numpy_dtype(code))


def _scalar_point(zero_point) -> int:
    return 0 if zero_point is None else int(zero_point.reshape(()))


def _steps_around_zero_point(x, scale, zero_point, code: int):
    """(rint(x / scale) saturated to [low - z, high - z] as float32, NaN at low - z; z): the
    8-bit value minus its zero point, which QuantizeLinear's fast path and the fused pair
    share. The same as clip(rint(x / scale) + z, low, high) - z: integers that small add
    exactly, and past them both saturate."""
    low, high = INTEGER_RANGES[code]
    z = 0 if zero_point is None else int(zero_point.reshape(()))
    values = np.empty(x.shape, np.float32)          # an array even for a 0-d x
    np.divide(x, scale.reshape(()), out=values)
    np.rint(values, out=values)
    clip_to(values, low - z, high - z, out=values)
    _nan_to_lowest(values, low - z)
    return values, z


def _nan_to_lowest(values: np.ndarray, low) -> None:
    """NaN quantizes to the lowest value, as onnxruntime's (clipping keeps NaN); the maximum
    (NaN if any value is) finds whether there is any faster than a sum or a NaN mask."""
    if values.size and np.isnan(values.max()):
        values[np.isnan(values)] = low


def _is_8bit_float32_per_tensor(x, scale, zero_point, code: int, block_size, precision) -> bool:
    """Whether QuantizeLinear takes the float32 per-tensor 8-bit fast path."""
    return code in (dtypes.UINT8, dtypes.INT8) and x.dtype == np.float32 and \
        scale.dtype == np.float32 and scale.size == 1 and not block_size and \
        precision in (0, dtypes.FLOAT) and (zero_point is None or zero_point.size == 1)


@kernel("QuantizeLinear", since=10)
def quantize_linear(ctx, x, y_scale, y_zero_point=None, axis=1, saturate=1, block_size=0,
                    output_dtype=0, precision=0):
    code = _quantized_code(y_zero_point, output_dtype)
    if _is_8bit_float32_per_tensor(x, y_scale, y_zero_point, code, block_size, precision):
        return _quantize_float32_per_tensor(x, y_scale, y_zero_point, code)
    # The scale's type (or `precision`) sets the precision of the division.
    compute = dtypes.numpy_dtype(precision) if precision else np.asarray(y_scale).dtype
    scale = _expand_param(y_scale, x.shape, axis, block_size)
    scaled = _float_view(x, compute) / _float_view(scale, compute)
    zero_point = None
    if y_zero_point is not None:
        zero_point = _expand_param(y_zero_point, x.shape, axis, block_size)
    return quantize_values(scaled, zero_point, code, bool(saturate))


EIGHT_BIT = (np.dtype(np.uint8), np.dtype(np.int8))


def _dequantize_8bit_per_tensor(x, scale, zero_point):
    """(x - zero_point) * scale of 8-bit x with one float32 scale (and zero point), in
    float32: every 8-bit value and difference is exact there, so this equals the general
    path's int64 -> float32 route in one pass fewer (one pass natively)."""
    if native.available():
        return native.dequantize(x, _scalar_point(zero_point), scale.reshape(()))
    values = x.astype(np.float32)
    if zero_point is not None:
        values -= np.float32(zero_point.reshape(()))
    values *= scale.reshape(())
    return values


@kernel("DequantizeLinear", since=10)
def dequantize_linear(ctx, x, x_scale, x_zero_point=None, axis=1, block_size=0, output_dtype=0):
    if x.dtype in EIGHT_BIT and x_scale.dtype == np.float32 and x_scale.size == 1 and \
            output_dtype in (0, dtypes.FLOAT) and not block_size and \
            (x_zero_point is None or (x_zero_point.dtype == x.dtype and x_zero_point.size == 1)):
        return _dequantize_8bit_per_tensor(x, x_scale, x_zero_point)
    out_dtype = dtypes.numpy_dtype(output_dtype) if output_dtype else np.asarray(x_scale).dtype
    compute = np.float64 if out_dtype == np.float64 else np.float32
    code = _code_of(x)
    if code in INTEGER_RANGES or code == dtypes.INT32:
        centered = x.astype(np.int64)
        if x_zero_point is not None:
            centered = centered - _expand_param(x_zero_point, x.shape, axis, block_size).astype(np.int64)
        centered = centered.astype(compute)
    else:   # float8/float4/float6: the zero point is zero in practice, kept for the formula
        centered = _float_view(x, compute)
        if x_zero_point is not None:
            centered = centered - _float_view(_expand_param(x_zero_point, x.shape, axis, block_size),
                                              compute)
    scale = _float_view(_expand_param(x_scale, x.shape, axis, block_size), compute)
    return cast_array(centered * scale, dtypes.code_of_numpy(out_dtype))


@kernel("QuantizeDequantize", domain=EDGERUN)
def quantize_dequantize(ctx, x, scale, zero_point=None, axis=1, saturate=1, block_size=0,
                        output_dtype=0, precision=0):
    """DequantizeLinear(QuantizeLinear(x)) with one scale and zero point (the optimizer's
    fusion of a QDQ model's activation pairs; QuantizeLinear's attributes). A QDQ model runs
    hundreds of these on small tensors, so the native pass's operands are worked out once
    per node (the scale and zero point are its constants)."""
    if ctx is not None and x.dtype == np.float32 and native.available():
        pass_operands = ctx.prepared("quantize_dequantize", (scale, zero_point), lambda: _pair_operands(
            x, scale, zero_point, output_dtype, block_size, precision))
        if pass_operands is not None:
            return native.quantize_dequantize_with(x, pass_operands)
    code = _quantized_code(zero_point, output_dtype)
    if _is_8bit_float32_per_tensor(x, scale, zero_point, code, block_size, precision):
        return _quantize_dequantize_float32_per_tensor(x, scale, zero_point, code)
    q = quantize_linear(ctx, x, scale, zero_point, axis, saturate, block_size, output_dtype,
                        precision)
    return dequantize_linear(ctx, q, scale, zero_point, axis, block_size)


@kernel("LookupTable", domain=EDGERUN)
def lookup_table(ctx, x, table):
    """table[x] of 8-bit x by a 256-entry table indexed by x's byte (int8 -1 is entry 255,
    as Gather's negative indices read it): optimizer/fuse_quantized_table.py's chains."""
    if x.dtype.char not in qgemm.EIGHT_BIT or table.shape != (256,):
        raise ValueError(f"LookupTable takes 8-bit x and a 256-entry table, got "
                         f"{x.dtype} x and a table of shape {table.shape}")
    if native.available() and table.dtype.char in qgemm.EIGHT_BIT:
        return native.lookup_table(x, table)
    return np.take(table, x.view(np.uint8))


def quantize_dequantize_on_grid(x: np.ndarray, params) -> np.ndarray:
    """The pair of a QDQ model as fused nodes carry it, params [scale, zero point, low, high]
    (uint8's grid from 0, int8's from -128): QuantizeDequantize's kernel, the same values as
    the separate node."""
    scale, zero, low = params[0], params[1], params[2]
    point = np.array(int(zero), np.uint8 if low == 0 else np.int8)
    return quantize_dequantize(None, x, np.array(scale, np.float32), point)


def _pair_operands(x, scale, zero_point, output_dtype: int, block_size, precision):
    """The native pass's operands of a float32 8-bit per-tensor pair, else None."""
    code = _quantized_code(zero_point, output_dtype)
    if not _is_8bit_float32_per_tensor(x, scale, zero_point, code, block_size, precision):
        return None
    return native.pair_operands(scale, zero_point, dtypes.numpy_dtype(code))


def _quantize_dequantize_float32_per_tensor(x, scale, zero_point, code: int):
    """The float32 path's (8-bit value - z) * s without the 8-bit tensor: five passes
    instead of nine (one natively)."""
    if native.available():
        return native.quantize_dequantize(x, scale.reshape(()), _scalar_point(zero_point),
                                          dtypes.numpy_dtype(code))
    values, _ = _steps_around_zero_point(x, scale, zero_point, code)
    values += np.float32(0)         # -0.0 (x / s in (-0.5, 0)) to +0.0, as the 8-bit value gives
    values *= scale.reshape(())
    return values


@kernel("DynamicQuantizeLinear", since=11)
def dynamic_quantize_linear(ctx, x):
    """uint8 quantization with a scale and zero point chosen from x's range (widened to 0)."""
    x = x.astype(np.float32, copy=False)
    if native.available():
        return native.dynamic_quantize(x)
    high = np.float32(max(0.0, float(x.max()))) if x.size else np.float32(0)
    low = np.float32(min(0.0, float(x.min()))) if x.size else np.float32(0)
    # onnxruntime uses scale 1 for a constant-zero input, where the formula would divide by 0.
    scale = np.float32((high - low) / np.float32(255)) if high != low else np.float32(1)
    zero_point = np.array(np.rint(np.clip(np.float32(0) - low / scale, 0, 255)), np.uint8)
    scale = np.array(scale, np.float32)
    return _quantize_float32_per_tensor(x, scale, zero_point, dtypes.UINT8), scale, zero_point


# ---- integer products ----------------------------------------------------------------------

def _centered(x: np.ndarray, zero_point) -> np.ndarray:
    """x - zero_point as exact float64 values (broadcasting the zero point as given)."""
    values = _float_view(x, np.float64)
    if zero_point is not None:
        values = values - _float_view(np.asarray(zero_point), np.float64)
    return values


def _per_row(param, a: np.ndarray):
    """A 1-D per-row parameter of `a` ([M] for an [..., M, K] input) as an [M, 1] column."""
    if param is None:
        return None
    param = np.asarray(param)
    if param.ndim == 1 and param.size > 1 and a.ndim >= 2:
        return param.reshape(-1, 1)
    return param


def _wrap_int32(exact: np.ndarray) -> np.ndarray:
    if exact.dtype == np.int32:           # the native products' sums, wrapped already
        return exact
    if exact.dtype == np.float32:         # exact integers below 2**24: no rounding, no wrap
        return exact.astype(np.int32)
    return np.rint(exact).astype(np.int64).astype(np.int32)


def _is_integer(array: np.ndarray) -> bool:
    return _code_of(array) in INTEGER_RANGES


EXACT_FLOAT32 = 2.0 ** 24


class _Centered:
    """An integer operand minus its zero point, as float32 (exact for 8/16-bit values), with
    a bound on its magnitude: what decides whether a float32 product is exact. `bound` comes
    from the types alone; `peak` scans the values (once, and only when asked)."""
    __slots__ = ("values", "bound", "_peak", "_wide")

    def __init__(self, x: np.ndarray, zero_point):
        if zero_point is None:
            self.values = x.astype(np.float32)
        else:
            self.values = np.subtract(x, np.asarray(zero_point), dtype=np.float32)
        self.bound = _magnitude_bound(x, zero_point)
        self._peak: Optional[float] = None
        self._wide: Optional[np.ndarray] = None

    @property
    def peak(self) -> float:
        if self._peak is None:
            values = self.values
            self._peak = float(np.abs(values).max()) if values.size else 0.0
        return self._peak

    def wide(self) -> np.ndarray:
        if self._wide is None:
            self._wide = self.values.astype(np.float64)
        return self._wide


def _exact_in_float32(depth: int, left: _Centered, right: _Centered) -> bool:
    """Whether a product of depth `depth` sums below 2**24 (every partial sum exact in
    float32): by A's type bound first, which needs no scan, else by its scanned peak."""
    return depth * left.bound * right.peak < EXACT_FLOAT32 or \
        depth * left.peak * right.peak < EXACT_FLOAT32


def _magnitude_bound(x: np.ndarray, zero_point) -> float:
    """The largest |x - zero_point| x's integer type allows (inf for other types)."""
    if x.dtype.kind not in "iu" or x.dtype.itemsize > 2:
        return math.inf
    info = np.iinfo(x.dtype)
    z = np.asarray(zero_point if zero_point is not None else 0)
    if z.size == 0:
        z = np.zeros(1, np.int64)
    return float(max(int(info.max) - int(z.min()), int(z.max()) - int(info.min)))


def _centered_operand(ctx, name: str, x, zero_point, shaped=None) -> "_Centered":
    """_Centered(x, shaped(zero_point)) (the zero point as given without `shaped`), built
    once per node while x and zero_point are the same arrays (weights)."""
    def build():
        return _Centered(x, zero_point if shaped is None else shaped(zero_point))
    return build() if ctx is None else ctx.prepared(name, (x, zero_point), build)


def _integer_product(ctx, a, a_zero_point, b, b_zero_point) -> np.ndarray:
    """(a - a_zero_point) @ (b - b_zero_point) of integer tensors, exactly, as float32 or
    float64 integers (see the module docstring)."""
    left = _Centered(a, _per_row(a_zero_point, a))
    right = _centered_operand(ctx, "integer_matmul_b", b, b_zero_point)
    depth = a.shape[-1] if a.ndim else 1
    if _exact_in_float32(depth, left, right):
        return np.matmul(left.values, right.values)
    step = left.peak * right.peak
    block = int((EXACT_FLOAT32 - 1) // step) if step else depth
    if block >= MIN_EXACT_BLOCK:
        return _blocked_product(left.values, right.values, depth, block)
    return np.matmul(left.wide(), right.wide())


# K blocks shorter than this are not worth a float32 product each (16-bit operands)
MIN_EXACT_BLOCK = 64


def _blocked_product(a: np.ndarray, b: np.ndarray, depth: int, block: int) -> np.ndarray:
    """a @ b as float64 integers from float32 products over K blocks of `block`, each exact
    in float32 (a block's sums stay below 2**24), added in float64 (exact): 8-bit products
    with K past 2**24 / (255 * 128) = 514 at float32's speed rather than float64's."""
    def block_product(k: int) -> np.ndarray:
        rows = b[k:k + block] if b.ndim == 1 else b[..., k:k + block, :]
        return np.matmul(a[..., k:k + block], rows)
    total = block_product(0).astype(np.float64)
    for k in range(block, depth, block):
        total += block_product(k)
    return total


def _native_product(ctx, a, a_zero_point, b, b_zero_point, a_scale=1.0, b_scale=None,
                    bias=None):
    """The product through the native kernels (int32; float32 with b_scale, see
    qgemm.product), or None where they do not take these operands."""
    if not qgemm.applicable(a, a_zero_point, b, b_zero_point):
        return None
    packed = ctx.prepared("qgemm_packed_b", (b, b_zero_point),
                          lambda: qgemm.PackedB(b, b_zero_point)) \
        if ctx is not None else qgemm.PackedB(b, b_zero_point)
    return qgemm.product(a, a_zero_point, packed, a_scale, b_scale, bias)


@kernel("MatMulInteger", since=10)
def matmul_integer(ctx, A, B, a_zero_point=None, b_zero_point=None):
    native = _native_product(ctx, A, a_zero_point, B, b_zero_point)
    if native is not None:
        return native
    return _wrap_int32(_integer_product(ctx, A, a_zero_point, B, b_zero_point))


@kernel("MatMulIntegerToFloat", domain="com.microsoft")
def matmul_integer_to_float(ctx, A, B, a_scale, b_scale, a_zero_point=None, b_zero_point=None,
                            bias=None):
    """onnxruntime's contrib operator: (A - a_zero_point) @ (B - b_zero_point) as float32,
    times a_scale * b_scale (each one value, or b_scale one per column), plus bias. What the
    optimizer makes of MatMulInteger -> Cast -> Mul [-> Add]: float32 of the int32 product,
    scaled in place (the chain's values, one pass instead of three)."""
    if ctx is not None and a_scale.size == 1:
        bound = _bound_b(ctx, B, b_zero_point, bias)
        if bound is not None and bound.takes(A, a_zero_point, b_scale):
            return bound.times(A, a_zero_point, a_scale.item(), b_scale)
    if np.size(a_scale) == 1 and np.ndim(b_scale) <= 1 and np.size(b_scale) in (1, B.shape[-1]) \
            and (bias is None or (bias.dtype == np.float32 and bias.shape == (B.shape[-1],)
                                  and bias.flags.c_contiguous)):
        native = _native_product(ctx, A, a_zero_point, B, b_zero_point,
                                 float(np.float32(np.asarray(a_scale).reshape(()))), b_scale,
                                 bias)
        if native is not None:
            return native
    exact = _integer_product(ctx, A, a_zero_point, B, b_zero_point)
    y = exact if exact.dtype == np.float32 else _wrap_int32(exact).astype(np.float32)
    y *= np.asarray(a_scale, np.float32) * np.asarray(b_scale, np.float32)
    if bias is not None:
        y += bias
    return y


@kernel("DynamicQuantizeMatMul", domain="com.microsoft")
def dynamic_quantize_matmul(ctx, A, B, b_scale, b_zero_point=None, bias=None):
    """onnxruntime's contrib operator: A quantized to uint8 as DynamicQuantizeLinear does,
    then MatMulIntegerToFloat with that scale and zero point. What the optimizer makes of
    DynamicQuantizeLinear -> MatMulIntegerToFloat (fuse_dynamic_quantize_matmul); natively
    one call, the two nodes' values."""
    if ctx is not None and A.dtype == np.float32:
        bound = _bound_b(ctx, B, b_zero_point, bias)
        if bound is not None and bound.takes_float(A, b_scale):
            return bound.times_float(A, b_scale)
    quantized, scale, zero_point = dynamic_quantize_linear(ctx, A)
    return matmul_integer_to_float(ctx, quantized, B, scale, b_scale, zero_point,
                                   b_zero_point, bias)


def _bound_b(ctx, b, b_zero_point, bias):
    """MatMulIntegerToFloat's B side bound once per node as qgemm.ScaledB, or None where the
    native kernels do not take it."""
    return ctx.prepared("qgemm_scaled_b", (b, b_zero_point, bias), lambda: (
        qgemm.ScaledB(b, b_zero_point, bias) if _scaled_b_fits(b, b_zero_point, bias)
        else None))


def _scaled_b_fits(b, b_zero_point, bias) -> bool:
    """Whether MatMulIntegerToFloat's B side binds as qgemm.ScaledB: an 8-bit [K, N] B with
    its zero point (qgemm's forms) and a float32 [N] bias or none, where the native kernels
    run."""
    n = b.shape[-1] if b.ndim else 0
    return bool(qgemm.isa_code()) and b.ndim == 2 and b.dtype.char in qgemm.EIGHT_BIT and b.size > 0 and \
        qgemm.zero_points_fit(b_zero_point, b.dtype.char, n) and \
        (bias is None or (bias.dtype == np.float32 and bias.shape == (n,)))


@kernel("QLinearMatMul", since=10)
def qlinear_matmul(ctx, a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale,
                   y_zero_point=None):
    native = _native_product(ctx, a, a_zero_point, b, b_zero_point)
    if native is not None:
        product = native.astype(np.float64)
    elif _is_integer(a) and _is_integer(b):
        product = _wrap_int32(_integer_product(ctx, a, a_zero_point, b, b_zero_point)
                              ).astype(np.float64)
    else:
        product = np.matmul(_centered(a, _per_row(a_zero_point, a)), _centered(b, b_zero_point))
    # The requantization multiplier is formed in the scales' own type, as the spec's TS.
    multiplier = (_per_row(a_scale, a) * np.asarray(b_scale)) / np.asarray(y_scale)
    values = product * _float_view(np.asarray(multiplier), np.float64)
    code = _code_of(y_zero_point) if y_zero_point is not None else _code_of(a)
    return quantize_values(values, y_zero_point, code)


# ---- integer convolution -------------------------------------------------------------------

def _conv_pads(in_sizes, kernel_sizes, strides, dilations, pads, auto_pad):
    """(begin, end) padding per spatial axis, resolving auto_pad."""
    rank = len(in_sizes)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begins, ends = [], []
        for size, k, s, d in zip(in_sizes, kernel_sizes, strides, dilations):
            out = -(-size // s)
            total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
            small, large = total // 2, total - total // 2
            begins.append(small if auto_pad == "SAME_UPPER" else large)
            ends.append(large if auto_pad == "SAME_UPPER" else small)
        return begins, ends
    if auto_pad == "VALID" or not pads:
        return [0] * rank, [0] * rank
    if auto_pad not in ("NOTSET", ""):
        raise ValueError(f"unknown auto_pad {auto_pad!r}")
    return list(pads[:rank]), list(pads[rank:])


def _conv_exact(x, w, group, strides, pads, dilations, auto_pad):
    """N-D grouped convolution of float64 arrays holding integers, by im2col + matmul (the
    path past float32's exact bound; below it _integer_conv takes Conv's own methods).

    x: (N, C, *spatial), w: (M, C/group, *kernel) -> (N, M, *out).
    """
    n, channels = x.shape[:2]
    spatial = x.shape[2:]
    rank = len(spatial)
    out_channels = w.shape[0]
    kernel_sizes = w.shape[2:]
    strides = list(strides or [1] * rank)
    dilations = list(dilations or [1] * rank)
    if channels != w.shape[1] * group or out_channels % group:
        raise ValueError(
            f"input has {channels} channels, weight {tuple(w.shape)} with group {group} expects "
            f"{w.shape[1] * group}")
    begins, ends = _conv_pads(spatial, kernel_sizes, strides, dilations, pads, auto_pad)
    padded = np.pad(x, [(0, 0), (0, 0)] + list(zip(begins, ends)))
    extents = [(k - 1) * d + 1 for k, d in zip(kernel_sizes, dilations)]
    windows = np.lib.stride_tricks.sliding_window_view(padded, extents, axis=tuple(range(2, 2 + rank)))
    # windows: (N, C, *positions, *extents); keep every stride-th position, dilation-th tap.
    windows = windows[(slice(None), slice(None))
                      + tuple(slice(None, None, s) for s in strides)
                      + tuple(slice(None, None, d) for d in dilations)]
    out_sizes = windows.shape[2:2 + rank]
    positions, taps = math.prod(out_sizes), math.prod(kernel_sizes)
    per_group_in, per_group_out = channels // group, out_channels // group
    # (N, C, *out, *k) -> (N, G, *out, Cg, *k) -> (N, G, P, Cg * K): every group in one
    # batched product (depthwise layers have as many groups as channels)
    cols = windows.reshape((n, group, per_group_in) + tuple(out_sizes) + tuple(kernel_sizes))
    cols = np.moveaxis(cols, 2, 2 + rank).reshape(n, group, positions, per_group_in * taps)
    weights = w.reshape(group, per_group_out, per_group_in * taps).transpose(0, 2, 1)
    result = np.matmul(cols, weights)                      # (N, G, P, Mg)
    result = np.moveaxis(result, 2, 3).reshape((n, out_channels) + tuple(out_sizes))
    return result


def _native_integer_conv(ctx, x, x_zero_point, w, w_zero_point, group, strides, pads,
                         dilations, auto_pad, requantization=None, requantization_sources=()):
    """conv(x - x_zero_point, w - w_zero_point) as int32 on the integer product kernels
    (native/qconv.py), or with `requantization` (a callable giving a qconv.Requantization
    made of `requantization_sources`) QLinearConv's 8-bit outputs; None where they do not
    apply: depthwise convs (one input channel a group: products of one row, which the float
    path's direct kernels do better), windows of other than 1 or 2 axes, operands the
    products do not take. The call is bound once per node and input shape
    (qconv.BoundConv)."""
    channels, out_channels = x.shape[1], w.shape[0]
    if channels == group or x.ndim < 3 or channels != w.shape[1] * group or out_channels % group:
        return None

    x_point = None if x_zero_point is None else np.asarray(x_zero_point)
    w_point = None if w_zero_point is None else np.asarray(w_zero_point).reshape(-1)
    if not qconv.applicable(x, x_point, w, w_point):
        return None
    weights = ctx.prepared("integer_conv_rows", (w, w_zero_point),
                           lambda: qconv.ConvWeights(w, w_point, group)) if ctx is not None \
        else qconv.ConvWeights(w, w_point, group)

    def bind():
        return weights.bind(x.shape, x.dtype, w.shape[2:], strides, pads, dilations, auto_pad,
                            None if requantization is None else requantization())
    bound = bind() if ctx is None else ctx.prepared(
        ("integer_conv_call", x.shape, x.dtype.char, requantization is not None),
        (weights,) + tuple(requantization_sources),
        bind)
    return None if bound is None else \
        bound(x, 0 if x_point is None else int(x_point.reshape(())))


def _integer_conv(ctx, x, x_zero_point, w, w_zero_point, group, strides, pads, dilations,
                  auto_pad, kernel_shape) -> np.ndarray:
    """conv(x - x_zero_point, w - w_zero_point) as exact integers in floats: Conv's own
    methods in float32 (Winograd aside) when a product of the weight's depth (C/group x
    kernel) sums below 2**24 there (every partial sum then exact), else im2col in float64.
    The weight is centered once per node (_centered_operand)."""
    native_result = _native_integer_conv(ctx, x, x_zero_point, w, w_zero_point, group, strides,
                                         pads, dilations, auto_pad)
    if native_result is not None:
        return native_result
    left = _Centered(x, x_zero_point)
    right = _centered_operand(ctx, "integer_conv_w", w, w_zero_point,
                              lambda z: _weight_zero_point(z, w))
    if _exact_in_float32(math.prod(w.shape[1:]), left, right):
        return convolve(left.values, right.values, None, auto_pad, dilations, group,
                        kernel_shape, pads, strides, ctx, exact=True)
    return _conv_exact(left.wide(), right.wide(), group, strides, pads, dilations, auto_pad)


def _per_channel(param, rank: int):
    """A scalar or per-output-channel 1-D parameter, shaped to broadcast over (N, M, *spatial)."""
    param = np.asarray(param)
    if param.ndim == 1 and param.size > 1:
        return param.reshape((-1,) + (1,) * (rank - 2))
    return param.reshape(()) if param.size == 1 else param


def _weight_zero_point(w_zero_point, w):
    """Per-output-channel weight zero points broadcast over (M, C/group, *kernel)."""
    return None if w_zero_point is None else _per_channel(w_zero_point, w.ndim + 1)


@kernel("ConvInteger", since=10)
def conv_integer(ctx, x, w, x_zero_point=None, w_zero_point=None, auto_pad="NOTSET",
                 dilations=None, group=1, kernel_shape=None, pads=None, strides=None):
    return _wrap_int32(_integer_conv(ctx, x, x_zero_point, w, w_zero_point, group, strides,
                                     pads, dilations, auto_pad, kernel_shape))


@kernel("QLinearConv", since=10)
def qlinear_conv(ctx, x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale,
                 y_zero_point=None, B=None, auto_pad="NOTSET", dilations=None, group=1,
                 kernel_shape=None, pads=None, strides=None):
    def multiplier():
        return (np.asarray(x_scale) * _per_channel(w_scale, x.ndim)) / np.asarray(y_scale)
    code = _code_of(y_zero_point) if y_zero_point is not None else _code_of(x)
    native = _native_integer_conv(
        ctx, x, x_zero_point, w, w_zero_point, group, strides, pads, dilations, auto_pad,
        lambda: _requantization(w.shape[0], B, multiplier(), y_zero_point, code),
        (x_scale, w_scale, y_scale, y_zero_point, B)) \
        if code in EIGHT_BIT_CODES and \
        all(np.asarray(s).dtype == np.float32 for s in (x_scale, w_scale, y_scale)) else None
    if native is not None:
        return native
    acc = _wrap_int32(_integer_conv(ctx, x, x_zero_point, w, w_zero_point, group, strides,
                                     pads, dilations, auto_pad, kernel_shape))
    if B is not None:
        acc = (acc.astype(np.int64) + B.astype(np.int64).reshape(
            (-1,) + (1,) * (x.ndim - 2))).astype(np.int32)       # int32 sums wrap
    # in float32, as onnxruntime requantizes (and the native epilogue)
    values = acc.astype(np.float32) * _float_view(np.asarray(multiplier()), np.float32)
    return quantize_values(values, y_zero_point, code)


def _requantization(channels: int, bias, multiplier: np.ndarray, y_zero_point, code: int):
    """QLinearConv's output step for the native products (qconv.Requantization: the same
    bytes as the numpy path's)."""
    point = 0 if y_zero_point is None else int(np.asarray(y_zero_point).reshape(-1)[0])
    return qconv.Requantization(channels, bias, multiplier, point, dtypes.numpy_dtype(code))
