"""Elementwise float32 kernels in one pass each (cpu_kernels/elementwise.c, softmax.c): GELU's
erf form, DynamicQuantizeLinear (two passes, its scalars computed between them), 8-bit
QuantizeLinear, DequantizeLinear and their pair with one scale and zero point, each equal bit
for bit to the numpy path it stands in for (the same operations in the same order and
precision); LayerNormalization, whose row statistics are summed in double (so within ~1e-7 of
the numpy path's float32 sums, not bit for bit); Softmax along the last axis, whose exp is
a polynomial (within ~1e-6 relative); and the ai.onnx.ml rows' SOFTMAX and Normalizer steps
(ml_scores.c: libm's expf, within an ulp of numpy's); and large float32 Add, Sub, Mul and
Div split over threads (numpy's bits: one IEEE operation a value). Callers use them where
`available()` and keep numpy's path elsewhere."""
from __future__ import annotations

import numpy as np

from . import parallel
from .library import address, library
from .library import available as available  # callers ask the module they use
from .row_buffers import FEW_ROWS, RowBuffers


def gelu(x: np.ndarray, p: np.ndarray, q: np.ndarray, limit: float) -> np.ndarray:
    """x * Phi(x) of float32 x by the rational fit p, q (float64, lowest order first), x
    clipped to [-limit, limit] (see providers/cpu/ops/erf.py)."""
    x = _contiguous(x, np.float32)
    out = np.empty(x.shape, np.float32)
    if x.size:
        library().er_cpu_gelu(address(x), address(out), x.size, address(p),
                              address(q), limit)
    return out


def dynamic_quantize(x: np.ndarray) -> tuple:
    """DynamicQuantizeLinear of float32 x: (uint8 y, float32 scale, uint8 zero point), the
    last two 0-d."""
    x = _contiguous(x, np.float32)
    y = np.empty(x.shape, np.uint8)
    scale, zero = np.empty((), np.float32), np.empty((), np.uint8)
    library().er_cpu_dynamic_quantize(address(x), x.size, address(y), address(scale),
                                      address(zero))
    return y, scale, zero


def quantize(x: np.ndarray, scale, zero_point: int, dtype) -> np.ndarray:
    """QuantizeLinear of float32 x to uint8 or int8 (`dtype`) with one scale and zero point:
    clip(rint(x / scale), low - z, high - z) + z, NaN to low."""
    x = _contiguous(x, np.float32)
    out = np.empty(x.shape, dtype)
    if x.size:
        low, high = _RANGES[out.dtype.char]
        library().er_cpu_quantize(address(x), x.size, float(scale), int(zero_point), low,
                                  high, address(out))
    return out


def quantize_dequantize(x: np.ndarray, scale, zero_point: int, dtype) -> np.ndarray:
    """DequantizeLinear(QuantizeLinear(x)) of float32 x through `dtype` (uint8 or int8)."""
    low, high = _RANGES[np.dtype(dtype).char]
    return quantize_dequantize_with(x, (float(scale), int(zero_point), low, high))


def pair_operands(scale: np.ndarray, zero_point, dtype) -> tuple:
    """The pair's scalar operands (scale, zero point, low, high) for quantize_dequantize_with:
    one float32 scale, a zero point or none, through `dtype` (uint8 or int8)."""
    point = 0 if zero_point is None else int(zero_point.reshape(()))
    return (float(scale.reshape(())), point) + _RANGES[np.dtype(dtype).char]


def quantize_dequantize_with(x: np.ndarray, operands: tuple) -> np.ndarray:
    """quantize_dequantize with its operands worked out (pair_operands)."""
    if not x.flags.c_contiguous:
        x = np.ascontiguousarray(x)
    out = np.empty(x.shape, np.float32)
    if x.size:
        library().er_cpu_quantize_dequantize(address(x), x.size, *operands, address(out))
    return out


def dequantize(x: np.ndarray, zero_point: int, scale) -> np.ndarray:
    """(float32(x) - zero_point) * scale of uint8 or int8 x."""
    x = _contiguous(x, x.dtype)
    out = np.empty(x.shape, np.float32)
    if x.size:
        library().er_cpu_dequantize(address(x), x.size, int(x.dtype.char == "b"),
                                    int(zero_point), float(scale), address(out))
    return out


def lookup_table(x: np.ndarray, table: np.ndarray) -> np.ndarray:
    """table[x's bytes] of 8-bit x by a 256-entry 8-bit table (com.edgerun LookupTable)."""
    x = _contiguous(x, x.dtype)
    table = np.ascontiguousarray(table)
    out = np.empty(x.shape, table.dtype)
    if x.size:
        library().er_cpu_lookup_table(address(x), x.size, address(table), address(out))
    return out


def softmax_rows(x: np.ndarray) -> np.ndarray:
    """Softmax of float32 x along its last axis (cpu_kernels/softmax.c: within ~1e-6 of
    numpy's path, its exp a polynomial)."""
    x = _contiguous(x, np.float32)
    out = np.empty(x.shape, np.float32)
    if x.size:
        length = x.shape[-1]
        library().er_cpu_softmax_rows(address(x), address(out), x.size // length, length)
    return out


ML_ROWS = {"SOFTMAX": 0, "MAX": 1, "L1": 2, "L2": 3, "LOGISTIC": 4}  # ml_scores.c's steps


_ML_ROW_BUFFERS: dict = {}    # columns -> RowBuffers (few rows go through them)


def ml_rows(x: np.ndarray, step: str) -> np.ndarray:
    """A fresh [N, C] float32 array: each row of float32 scores x [N, C] through the
    ai.onnx.ml SOFTMAX or LOGISTIC transform, or Normalizer's MAX, L1 or L2
    (cpu_kernels/ml_scores.c)."""
    rows, columns = x.shape
    if 0 < rows <= FEW_ROWS:        # in place on this thread's buffer (row_buffers.py)
        few = _ML_ROW_BUFFERS.get(columns)
        if few is None:
            few = _ML_ROW_BUFFERS.setdefault(columns, RowBuffers((columns, np.float32)))
        (view,), (at,) = few.views[rows], few.at
        view[...] = x
        library().er_cpu_ml_rows(at, rows, columns, ML_ROWS[step], at)
        return view.copy()
    x = np.ascontiguousarray(x, np.float32)
    out = np.empty(x.shape, np.float32)
    if x.size:
        library().er_cpu_ml_rows(address(x), x.shape[0], x.shape[1], ML_ROWS[step],
                                 address(out))
    return out


def layer_norm(x: np.ndarray, depth: int, scale: np.ndarray, bias, epsilon: float) -> np.ndarray:
    """LayerNormalization of float32 x over its trailing `depth` values per row, with float32
    scale and bias (None) of `depth` values each."""
    x = _contiguous(x, np.float32)
    out = np.empty(x.shape, np.float32)
    if x.size:
        scale = np.ascontiguousarray(scale, np.float32)
        bias = None if bias is None else np.ascontiguousarray(bias, np.float32)
        library().er_cpu_layer_norm(address(x), x.size // depth, depth, address(scale),
                                    address(bias), epsilon, address(out))
    return out


_RANGES = {"B": (0, 255), "b": (-128, 127)}


def _contiguous(x: np.ndarray, dtype) -> np.ndarray:
    """x as a C-contiguous array of `dtype`, of x's own shape (a 0-d one stays 0-d)."""
    y = np.ascontiguousarray(x, dtype)
    return y if y.ndim == np.ndim(x) else y.reshape(np.shape(x))


# numpy's function -> binary_rows' op code
BINARY_OPS = {np.add: 0, np.subtract: 1, np.multiply: 2, np.divide: 3}


def split_binary(fn, a: np.ndarray, b: np.ndarray):
    """fn(a, b) for float32 a and b on several threads: b of a's shape, or one value per
    channel of an (N, C, ...) a (b shaped (C, 1, ...) or (1, C, 1, ...)), both C-contiguous
    and large enough for parallel.value_ranges to split; None otherwise (numpy's one thread
    then: the same bits)."""
    op = BINARY_OPS.get(fn)
    if op is None or not available() or a.dtype != np.float32 or b.dtype != np.float32:
        return None
    if op in (0, 2) and _per_channel(b, a):       # bias + x, scale * x
        a, b = b, a
    if not (a.flags.c_contiguous and b.flags.c_contiguous):
        return None
    ranges = parallel.value_ranges(a.size)
    if len(ranges) == 1:
        return None
    if b.shape == a.shape:
        period, rows, cols = 0, 1, a.size
    elif _per_channel(a, b):
        period, rows = a.shape[1], a.shape[0] * a.shape[1]
        cols = a.size // rows
    else:
        return None
    y = np.empty(a.shape, np.float32)
    aa, ba, ya = address(a), address(b), address(y)
    if period == 0:           # one row, split along its values
        words = [parallel.part_addresses(aa, ranges), parallel.part_addresses(ba, ranges),
                 parallel.part_addresses(ya, ranges), 1, parallel.part_lengths(ranges), 0, 0, op]
    else:                     # whole rows, each part counting its first row for b's index
        ranges = parallel.split(rows, len(ranges))
        words = [parallel.part_addresses(aa, ranges, 4 * cols), ba,
                 parallel.part_addresses(ya, ranges, 4 * cols), parallel.part_lengths(ranges),
                 cols, period, [r for r, _ in ranges], op]
    parallel.run_split("er_cpu_binary_rows", words, len(ranges))
    return y


def _per_channel(a: np.ndarray, b: np.ndarray) -> bool:
    """b broadcasts to a as one value per channel of a's axis 1 (b (C, 1, ...) or
    (1, C, 1, ...): C values, right-aligned on that axis), each channel's row long enough
    for a vector loop."""
    lead = a.ndim - b.ndim
    return a.ndim >= 3 and lead in (0, 1) and b.size == a.shape[1] and \
        b.shape[1 - lead] == a.shape[1] and a.size // max(a.shape[0] * a.shape[1], 1) >= 16
