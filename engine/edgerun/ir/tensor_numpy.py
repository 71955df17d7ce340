"""Conversions between ir.Tensor (bytes) and numpy arrays. Imported only where numpy exists."""
from __future__ import annotations

import numpy as np

from . import dtypes
from .graph import Tensor

_SIGNED_SUB_BYTE = {dtypes.INT4: 4, dtypes.INT2: 2}
_UNSIGNED_SUB_BYTE = {dtypes.UINT4: 4, dtypes.UINT2: 2, dtypes.FLOAT4E2M1: 4,
                      dtypes.FLOAT6E2M3: 6, dtypes.FLOAT6E3M2: 6}
_FLOAT_SUB_BYTE = {dtypes.FLOAT4E2M1, dtypes.FLOAT6E2M3, dtypes.FLOAT6E3M2}


def _unpack_bits(raw: bytes, bits: int, count: int) -> np.ndarray:
    """Sub-byte values as ONNX packs them: an LSB-first bit stream, element 0 in the lowest
    bits of byte 0 (two int4 per byte, four int2 per byte, four float6 per three bytes)."""
    stream = np.unpackbits(np.frombuffer(raw, dtype=np.uint8), bitorder="little")
    if stream.size < count * bits:
        raise ValueError(f"{len(raw)} bytes hold fewer than {count} {bits}-bit values")
    groups = stream[:count * bits].reshape(count, bits)
    return np.packbits(groups, axis=1, bitorder="little").reshape(count)


def _pack_bits(values: np.ndarray, bits: int) -> bytes:
    flat = values.reshape(-1).astype(np.uint8)
    stream = np.unpackbits(flat[:, None], axis=1, bitorder="little")[:, :bits]
    return np.packbits(stream.reshape(-1), bitorder="little").tobytes()


def tensor_to_numpy(t: Tensor) -> np.ndarray:
    shape = tuple(t.dims)
    if t.elem_type == dtypes.STRING:
        items = [s.decode("utf-8", errors="surrogateescape") if isinstance(s, bytes) else s
                 for s in (t.strings or [])]
        arr = np.empty(len(items), dtype=object)
        arr[:] = items
        return arr.reshape(shape)
    dtype = dtypes.numpy_dtype(t.elem_type)
    count = t.size
    if t.elem_type in _SIGNED_SUB_BYTE:
        bits = _SIGNED_SUB_BYTE[t.elem_type]
        u = _unpack_bits(t.raw, bits, count).astype(np.int8)
        signed = np.where(u >= (1 << (bits - 1)), u - (1 << bits), u)
        return signed.astype(dtype).reshape(shape)
    if t.elem_type in _UNSIGNED_SUB_BYTE:
        bits = _UNSIGNED_SUB_BYTE[t.elem_type]
        u = _unpack_bits(t.raw, bits, count)
        if t.elem_type in _FLOAT_SUB_BYTE:
            return u.view(dtype).reshape(shape)
        return u.astype(dtype).reshape(shape)
    expected = count * dtype.itemsize
    if len(t.raw) != expected:
        raise ValueError(
            f"tensor '{t.name}': {len(t.raw)} bytes of data for shape {list(shape)} "
            f"of {dtypes.elem_type(t.elem_type).name}, expected {expected}")
    return np.frombuffer(t.raw, dtype=dtype.newbyteorder("<")).astype(dtype, copy=True).reshape(shape)


def numpy_to_tensor(arr, name: str = "") -> Tensor:
    arr = np.asarray(arr)
    code = dtypes.code_of_numpy(arr.dtype)
    dims = tuple(int(d) for d in arr.shape)
    if code == dtypes.STRING:
        strings = [s.encode("utf-8", errors="surrogateescape") if isinstance(s, str) else bytes(s)
                   for s in arr.reshape(-1).tolist()]
        return Tensor(name, code, dims, strings=strings)
    if code in _SIGNED_SUB_BYTE or code in _UNSIGNED_SUB_BYTE:
        bits = _SIGNED_SUB_BYTE.get(code) or _UNSIGNED_SUB_BYTE[code]
        if code in _FLOAT_SUB_BYTE:
            ints = arr.view(np.uint8)
        else:
            ints = arr.astype(np.int8).view(np.uint8)
        return Tensor(name, code, dims, raw=_pack_bits(ints, bits))
    little = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
    return Tensor(name, code, dims, raw=np.ascontiguousarray(little).tobytes())
