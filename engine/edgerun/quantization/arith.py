"""Scale, zero point and quantized values, computed as onnxruntime.quantization computes them.

onnxruntime (quant_utils.compute_scale_zp, quantize_nparray) works in numpy with these steps,
each reproduced here in plain Python floats (IEEE doubles) so the integers come out the same:

- the range [rmin, rmax] (float32 values) is widened to include 0; symmetric makes it
  [-absmax, absmax];
- scale = (rmax - rmin) / (qmax - qmin) in float64, stored as float32; a float64 scale below
  float32's smallest normal gives scale 1, zero point 0;
- zero point = round((qmin + qmax) / 2) when symmetric, else round(qmin - rmin / scale) with
  the float64 scale (round half to even, numpy's and Python's);
- q = clip(round(float32(x / scale)) + zero point, type min, type max): x / scale is float32
  division, which equals the float64 quotient rounded to float32 (`array('f')` does that).

Bulk work (min/max, quantizing a tensor) has a numpy path used when numpy imports; both paths
give the same bytes (tests/test_quantization.py checks it with numpy blocked).
"""
from __future__ import annotations

import math
import struct
import sys
from array import array

from ..ir import dtypes

F32_TINY = 1.1754943508222875e-38          # numpy.finfo(numpy.float32).tiny
INT32_MIN, INT32_MAX = -2147483648, 2147483647

_FULL = {dtypes.INT8: (-128, 127), dtypes.UINT8: (0, 255)}
_SYMMETRIC = {dtypes.INT8: (-127, 127)}
_REDUCED = {dtypes.INT8: (-64, 64), dtypes.UINT8: (0, 127)}
_ARRAY_CODE = {dtypes.INT8: "b", dtypes.UINT8: "B"}

_np = None
_np_checked = False


def numpy_or_none():
    """numpy when it imports (cached), else None."""
    global _np, _np_checked
    if not _np_checked:
        _np_checked = True
        try:
            import numpy
            _np = numpy
        except ImportError:
            _np = None
    return _np


def f32(x: float) -> float:
    """x rounded to the nearest float32 (beyond its range: infinity, as numpy casts)."""
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return float("inf") if x > 0 else float("-inf")


def qrange(qtype: int, reduce_range: bool = False, symmetric: bool = False) -> tuple:
    """onnxruntime's get_qmin_qmax_for_qType."""
    if reduce_range:
        return _REDUCED[qtype]
    if symmetric and qtype in _SYMMETRIC:
        return _SYMMETRIC[qtype]
    return _FULL[qtype]


def compute_scale_zp(rmin: float, rmax: float, qmin: int, qmax: int, symmetric: bool = False,
                     min_real_range: float | None = None) -> tuple:
    """(zero_point: int, scale: float holding a float32 value); onnxruntime's compute_scale_zp."""
    if qmin > 0 or qmax < 0:
        raise ValueError(f"qmin and qmax must meet qmin <= 0 <= qmax, got {qmin}, {qmax}")
    rmin = min(rmin, 0.0)
    rmax = max(rmax, 0.0)
    if min_real_range is not None:
        rmax = max(rmax, f32(rmin + f32(min_real_range)))
    if symmetric:
        absmax = max(abs(rmin), abs(rmax))
        rmin, rmax = -absmax, absmax
    scale = (rmax - rmin) / (float(qmax) - float(qmin))
    if scale < F32_TINY:
        return 0, 1.0
    if symmetric:
        zero_point = (qmin + qmax) / 2.0
    else:
        zero_point = qmin - rmin / scale
    # an infinite range gives an infinite scale and a NaN zero point, which numpy casts to 0
    zero_point = round(zero_point) if math.isfinite(zero_point) else 0
    return int(zero_point), f32(scale)


def data_quant_params(rmin: float, rmax: float, count: int, qtype: int, symmetric: bool,
                      reduce_range: bool = False, min_real_range: float | None = None) -> tuple:
    """onnxruntime's compute_data_quant_params from a tensor's min and max: (zp, scale)."""
    qmin, qmax = qrange(qtype, reduce_range, symmetric)
    if not count:
        return 0, 1.0
    return compute_scale_zp(rmin, rmax, qmin, qmax, symmetric, min_real_range)


# --- float tensors -------------------------------------------------------------------------

def floats(raw: bytes):
    """float32 little-endian bytes as numpy float32 (numpy present) or array('f')."""
    np = numpy_or_none()
    if np is not None:
        return np.frombuffer(raw, dtype="<f4")
    values = array("f")
    values.frombytes(bytes(raw))
    if sys.byteorder != "little":
        values.byteswap()
    return values


def min_max(values) -> tuple:
    """(min, max) as Python floats, NaN ignored (numpy's nanmin/nanmax); (0, 0) when empty
    or all NaN."""
    np = numpy_or_none()
    if np is not None and hasattr(values, "dtype"):
        if values.size == 0:
            return 0.0, 0.0
        lo, hi = values.min(), values.max()
        if math.isnan(lo) or math.isnan(hi):
            finite = values[~np.isnan(values)]
            if finite.size == 0:
                return 0.0, 0.0
            lo, hi = finite.min(), finite.max()
        return float(lo), float(hi)
    clean = [v for v in values if not math.isnan(v)]
    if not clean:
        return 0.0, 0.0
    return min(clean), max(clean)


def channel_slices(dims, axis: int) -> tuple:
    """(outer, channels, inner) for a tensor's shape split at `axis`."""
    outer = 1
    for d in dims[:axis]:
        outer *= d
    inner = 1
    for d in dims[axis + 1:]:
        inner *= d
    return outer, dims[axis], inner


def channel_min_max(values, dims, axis: int) -> list:
    """[(min, max)] per index of `axis` (onnxruntime: weights.take(i, axis))."""
    outer, channels, inner = channel_slices(dims, axis)
    np = numpy_or_none()
    if np is not None and hasattr(values, "dtype"):
        v = values.reshape(outer, channels, inner)
        return [min_max(np.ascontiguousarray(v[:, c, :]).reshape(-1)) for c in range(channels)]
    out = []
    for c in range(channels):
        part = [values[(o * channels + c) * inner + i] for o in range(outer) for i in range(inner)]
        out.append(min_max(part))
    return out


# --- quantizing ----------------------------------------------------------------------------

def quantize(values, scale: float, zero_point: int, qtype: int) -> bytes:
    """onnxruntime's quantize_nparray for a per-tensor scale: the quantized bytes."""
    lo, hi = _FULL[qtype]
    np = numpy_or_none()
    if np is not None and hasattr(values, "dtype"):
        q = (np.asarray(values, dtype=np.float32) / np.float32(scale)).round()
        q += np.float32(zero_point)
        q[np.isnan(q)] = zero_point          # NaN, as the plain path
        np.clip(q, lo, hi, out=q)
        return q.astype(np.int8 if qtype == dtypes.INT8 else np.uint8).tobytes()
    out = array(_ARRAY_CODE[qtype], _quantize_list(values, scale, zero_point, lo, hi))
    if sys.byteorder != "little":
        out.byteswap()
    return out.tobytes()


def _quantize_list(values, scale, zero_point, lo, hi) -> list:
    quotients = array("f", [v / scale for v in values])     # float32 division
    out = []
    for q in quotients:
        if math.isnan(q):                # NaN: numpy's cast of NaN is 0 on the machines tested
            out.append(min(max(zero_point, lo), hi))
            continue
        if q >= hi - zero_point + 1:
            out.append(hi)
        elif q <= lo - zero_point - 1:
            out.append(lo)
        else:
            out.append(min(max(round(q) + zero_point, lo), hi))
    return out


def quantize_per_channel(values, dims, axis: int, scales: list, zero_points: list,
                         qtype: int) -> bytes:
    """Each index of `axis` quantized with its own scale and zero point, in place."""
    outer, channels, inner = channel_slices(dims, axis)
    lo, hi = _FULL[qtype]
    np = numpy_or_none()
    if np is not None and hasattr(values, "dtype"):
        v = np.asarray(values, dtype=np.float32).reshape(outer, channels, inner)
        q = np.empty_like(v)
        for c in range(channels):
            part = (v[:, c, :] / np.float32(scales[c])).round()
            part += np.float32(zero_points[c])
            part[np.isnan(part)] = zero_points[c]
            q[:, c, :] = part
        np.clip(q, lo, hi, out=q)
        return q.astype(np.int8 if qtype == dtypes.INT8 else np.uint8).reshape(-1).tobytes()
    result = [0] * (outer * channels * inner)
    for c in range(channels):
        index = [(o * channels + c) * inner + i for o in range(outer) for i in range(inner)]
        part = _quantize_list([values[j] for j in index], scales[c], zero_points[c], lo, hi)
        for j, q in zip(index, part):
            result[j] = q
    out = array(_ARRAY_CODE[qtype], result)
    if sys.byteorder != "little":
        out.byteswap()
    return out.tobytes()


def quantize_bias(values, scales: list) -> bytes:
    """int32 bias: round(float64(b) / float64(scale)) clipped to int32 (one scale, or one per
    element)."""
    n = len(values)
    if len(scales) == 1:
        scales = scales * n
    out = []
    for v, s in zip((float(x) for x in values), scales):
        q = v / s
        if math.isnan(q):
            out.append(0)
        elif q >= INT32_MAX:
            out.append(INT32_MAX)
        elif q <= INT32_MIN:
            out.append(INT32_MIN)
        else:
            out.append(min(max(round(q), INT32_MIN), INT32_MAX))
    return struct.pack(f"<{n}i", *out)
