"""8-bit integer matrix products on the CPU's dot-product instructions (cpu_kernels/qgemm.c):
(A - a_zero_point) @ (B - b_zero_point) as int32, or scaled to float32 plus a bias, for
MatMulInteger, MatMulIntegerToFloat and QLinearMatMul.

A is uint8 or int8 of any rank ([..., M, K], rows flattened), with a zero point per tensor or
per row ([M]); B is a uint8 or int8 matrix [K, N] with a zero point per tensor or per column
([N]), packed once per weight (`PackedB`). Anything else (a batched B, 16-bit operands, zero
points of other shapes) is not `applicable`, and the kernel keeps its numpy path. The int32
sums wrap as ONNX's int32 outputs do.
"""
from __future__ import annotations

from typing import Optional

import ctypes

import numpy as np

from .library import address, isa_code, library

EIGHT_BIT = "Bb"                           # numpy's type characters of uint8, int8


class PackedB:
    """B (with its zero point) in the kernels' panel layout, with its column sums."""
    __slots__ = ("packed", "colsum", "zb", "k", "n", "signed", "_pointers")

    def __init__(self, b: np.ndarray, b_zero_point=None):
        lib = library()
        b = b if b.strides[-1] == 1 else np.ascontiguousarray(b)
        self.k, self.n = b.shape
        self.signed = b.dtype.char == "b"
        self.packed = np.empty(lib.er_cpu_qgemm_packed_size(self.k, self.n), np.int8)
        self.colsum = np.empty(self.n, np.int32)
        packed, colsum = address(self.packed), address(self.colsum)
        if lib.er_cpu_qgemm_pack_b(address(b), b.strides[0], self.k, self.n,
                                   int(self.signed), packed, colsum):
            raise MemoryError(f"no memory to pack an 8-bit [{self.k}, {self.n}] matrix")
        self.zb = as_int32(b_zero_point)
        self._pointers = (packed, colsum, self.n, int(self.signed), address(self.zb),
                          count(self.zb))


class BoundB(ctypes.Structure):
    """What a call takes of a bound B (cpu_kernels/qgemm.c's BoundB): one pointer per call."""
    _fields_ = [("packed", ctypes.c_void_p), ("colsum", ctypes.c_void_p),
                ("k", ctypes.c_int64), ("n", ctypes.c_int64), ("b_signed", ctypes.c_int64),
                ("zb", ctypes.c_void_p), ("zb_count", ctypes.c_int64),
                ("bias", ctypes.c_void_p)]


class ScaledB:
    """MatMulIntegerToFloat's constant operands, B packed and its bias ([N] float32 or None),
    bound once, so that `times` makes one native call of few arguments (its scales may
    change every run: in quantize_dynamic's files b_scale is a_scale x w_scale)."""
    __slots__ = ("packed", "bias", "_bound", "_address", "_b_scale")

    def __init__(self, b: np.ndarray, b_zero_point, bias):
        self.packed = PackedB(b, b_zero_point)
        self.bias = None if bias is None else np.ascontiguousarray(bias, np.float32)
        packed, colsum, n, signed, zb, zb_count = self.packed._pointers
        self._bound = BoundB(packed, colsum, self.packed.k, n, signed, zb, zb_count,
                             address(self.bias))
        self._address = ctypes.addressof(self._bound)
        self._b_scale: tuple = (None, None)   # (the last b_scale, its address)

    def takes(self, a: np.ndarray, a_zero_point, b_scale: np.ndarray) -> bool:
        """Whether `times` takes these: an 8-bit A [..., K], not empty, its zero point of its
        type and one value, or none; a float32 b_scale of one value or one a column."""
        return a.dtype.char in EIGHT_BIT and a.ndim >= 1 and a.shape[-1] == self.packed.k and \
            a.size > 0 and (a_zero_point is None or (a_zero_point.dtype.char == a.dtype.char
                                                     and a_zero_point.size == 1)) and \
            self.takes_scale(b_scale)

    def takes_scale(self, b_scale: np.ndarray) -> bool:
        return b_scale.dtype == np.float32 and b_scale.ndim <= 1 and \
            b_scale.size in (1, self.packed.n)

    def times(self, a: np.ndarray, a_zero_point, a_scale: float,
              b_scale: np.ndarray) -> np.ndarray:
        """float32 (a - a_zero_point) @ (B - zb) * (a_scale * b_scale) + bias, for operands
        that `takes`."""
        k = self.packed.k
        rows = a if a.ndim == 2 else a.reshape(-1, k)
        m = rows.shape[0]
        if rows.strides[-1] != 1 or (m > 1 and rows.strides[0] < k):
            rows = np.ascontiguousarray(rows)
        out = np.empty(a.shape[:-1] + (self.packed.n,), np.float32)
        status = library().er_cpu_qgemm_bound(
            self._address, address(rows), rows.strides[0] if m > 1 else k, m,
            int(rows.dtype.char == "b"), 0 if a_zero_point is None else a_zero_point.item(),
            a_scale, self._scale_address(b_scale), b_scale.size, address(out))
        if status:
            raise_status(status, m, k, self.packed.n)
        return out

    def takes_float(self, a: np.ndarray, b_scale: np.ndarray) -> bool:
        """Whether `times_float` takes these: a float32 A [..., K] and a b_scale `takes`."""
        return a.dtype == np.float32 and a.ndim >= 1 and a.shape[-1] == self.packed.k and \
            self.takes_scale(b_scale)

    def times_float(self, a: np.ndarray, b_scale: np.ndarray) -> np.ndarray:
        """com.microsoft DynamicQuantizeMatMul: float32 a quantized as DynamicQuantizeLinear
        does, then `times` with that scale and zero point (the same values, one call)."""
        if not a.flags.c_contiguous:
            a = np.ascontiguousarray(a)
        out = np.empty(a.shape[:-1] + (self.packed.n,), np.float32)
        m = a.size // self.packed.k if self.packed.k else 0
        status = library().er_cpu_qgemm_dynamic(self._address, address(a), m,
                                                self._scale_address(b_scale), b_scale.size,
                                                address(out))
        if status:
            raise_status(status, m, self.packed.k, self.packed.n)
        return out

    def _scale_address(self, b_scale: np.ndarray):
        """b_scale's address, remembered while the same constant comes back (b_scale is
        usually the weight's own scale)."""
        last, where = self._b_scale
        if last is b_scale:
            return where
        if not b_scale.flags.c_contiguous:
            b_scale = np.ascontiguousarray(b_scale)
        self._b_scale = (b_scale, address(b_scale))
        return self._b_scale[1]


def applicable(a: np.ndarray, a_zero_point, b: np.ndarray, b_zero_point) -> bool:
    """Whether these operands take the native product (see the module docstring)."""
    if not isa_code() or a.dtype.char not in EIGHT_BIT or b.dtype.char not in EIGHT_BIT:
        return False
    if b.ndim != 2 or a.ndim < 1 or a.shape[-1] != b.shape[0] or not a.size or not b.size:
        return False
    rows = a.shape[-2] if a.ndim >= 2 else 1
    return zero_points_fit(a_zero_point, a.dtype.char, rows) and \
        zero_points_fit(b_zero_point, b.dtype.char, b.shape[1])


def zero_points_fit(zero_point, char: str, count: int) -> bool:
    if zero_point is None:
        return True
    z = np.asarray(zero_point)
    return z.dtype.char == char and (z.size == 1 or (z.ndim == 1 and z.size == count))


def product(a: np.ndarray, a_zero_point, packed: PackedB, a_scale: float = 1.0,
            b_scale: Optional[np.ndarray] = None,
            bias: Optional[np.ndarray] = None) -> np.ndarray:
    """(a - a_zero_point) @ (B - its zero point) as int32 [..., N]; with `b_scale` (float32,
    one value or [N]), that as float32 times float32(a_scale * b_scale) plus `bias` ([N]
    float32 or None). `applicable` must hold for a, a_zero_point and B."""
    k, n = packed.k, packed.n
    rows = a if a.ndim == 2 else a.reshape(-1, k)
    m = rows.shape[0]
    if rows.strides[-1] != 1 or (m > 1 and rows.strides[0] < k):
        rows = np.ascontiguousarray(rows)
    za = as_int32(a_zero_point)
    if za is not None and za.size > 1 and m != za.size:          # per-row points, batched A
        za = np.ascontiguousarray(np.broadcast_to(za, (m // za.size, za.size)).reshape(-1))
    out = np.empty((m, n), np.int32 if b_scale is None else np.float32)
    if b_scale is not None:
        b_scale = np.ascontiguousarray(b_scale, np.float32)
    status = library().er_cpu_qgemm(
        address(rows), rows.strides[0] if m > 1 else k, m, k, int(a.dtype.char == "b"),
        address(za), count(za), *packed._pointers, a_scale, address(b_scale),
        count(b_scale), address(bias), address(out), n)
    if status:
        raise_status(status, m, k, n)
    return out.reshape(a.shape[:-1] + (n,))


def raise_status(status: int, m: int, k: int, n: int):
    if status == -1:
        raise MemoryError(f"the native integer product of [{m}, {k}] by [{k}, {n}] found no "
                          f"scratch memory")
    raise RuntimeError("the native integer product has no instruction set on this CPU")


def as_int32(zero_point) -> Optional[np.ndarray]:
    if zero_point is None:
        return None
    return np.ascontiguousarray(np.asarray(zero_point).reshape(-1), np.int32)


def count(array: Optional[np.ndarray]) -> int:
    return 0 if array is None else array.size

