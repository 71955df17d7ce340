"""Host values as the WebGPU provider reads and makes them, with or without numpy.

Natively host values are numpy arrays. Inside a Pyodide without numpy (the browser build
here has none) they are `HostTensor`s (element type, shape, little-endian bytes). The
provider only ever needs a few things from them: their element type and shape, their values
as Python numbers (shapes, axes, Clip bounds, Resize scales, Gather indices), their bytes
(uploads), and new small ones (Shape's result, ConstantOfShape). This module does those for
both kinds, so the kernels never import numpy.
"""
from __future__ import annotations

from typing import Any

import struct
from array import array

from ...ir import dtypes
from ...ir.host_tensor import HostTensor

np: Any
try:
    import numpy as np
except ImportError:          # Pyodide without numpy
    np = None

# element type -> array module typecode (all little-endian on every platform edgerun runs on)
FORMATS = {dtypes.FLOAT: "f", dtypes.DOUBLE: "d", dtypes.INT8: "b", dtypes.UINT8: "B",
           dtypes.BOOL: "B", dtypes.INT16: "h", dtypes.UINT16: "H", dtypes.INT32: "i",
           dtypes.UINT32: "I", dtypes.INT64: "q", dtypes.UINT64: "Q"}
INTEGER_TYPES = {dtypes.INT8, dtypes.UINT8, dtypes.BOOL, dtypes.INT16, dtypes.UINT16,
                 dtypes.INT32, dtypes.UINT32, dtypes.INT64, dtypes.UINT64}

# Element types a GPU buffer holds, 4 bytes each: element type -> typecode of the 32-bit word.
# WGSL has no 64-bit integers and no byte arrays, so int64 lives as int32 (values must fit:
# uploads check, as onnxruntime-web does) and bool as a u32 0 or 1.
GPU_WORDS = {dtypes.FLOAT: "f", dtypes.INT32: "i", dtypes.INT64: "i", dtypes.BOOL: "I",
             dtypes.UINT32: "I"}
INT32_MIN, INT32_MAX = -2**31, 2**31 - 1


def is_host_tensor(value) -> bool:
    return isinstance(value, HostTensor) or (np is not None and isinstance(value, np.ndarray))


def elem_type(value) -> int:
    """The ONNX element type of a host tensor (numpy array or HostTensor) or GpuTensor."""
    if isinstance(value, HostTensor):
        return value.elem_type
    found = dtypes.BY_NUMPY.get(getattr(value.dtype, "name", value.dtype))
    if found is None:
        raise TypeError(f"no ONNX element type for numpy dtype {value.dtype}")
    return found.code


def shape(value) -> tuple:
    return tuple(int(d) for d in value.shape)


def values(value) -> list:
    """The elements of a host tensor, flattened, as Python numbers."""
    if isinstance(value, HostTensor):
        if value.elem_type == dtypes.STRING:
            return list(value.data)
        if value.elem_type == dtypes.FLOAT16:
            data = bytes(value.data)
            return list(struct.unpack(f"<{len(data) // 2}e", data))
        fmt = FORMATS.get(value.elem_type)
        if fmt is None:
            raise TypeError(f"cannot read {dtypes.type_string(value.elem_type)} values on the "
                            f"host without numpy")
        return array(fmt, bytes(value.data)).tolist()
    if np is not None:
        return np.asarray(value).reshape(-1).tolist()
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def raw(value) -> tuple:
    """(element type, shape, bytes) of a host tensor, for an upload."""
    if isinstance(value, HostTensor):
        return value.elem_type, value.shape, bytes(value.data)
    value = np.asarray(value)
    return elem_type(value), shape(value), np.ascontiguousarray(value).tobytes()


def make(code: int, dims, items) -> object:
    """A new host tensor of element type `code`: numpy where numpy exists."""
    dims = tuple(int(d) for d in dims)
    if np is not None:
        return np.array(items, dtype=dtypes.numpy_dtype(code)).reshape(dims)
    if code == dtypes.FLOAT16:
        items = list(items)
        return HostTensor(code, dims, struct.pack(f"<{len(items)}e", *items))
    return HostTensor(code, dims, array(FORMATS[code], items).tobytes())


def as_float32(value) -> object:
    """A host tensor converted to float32 (an integer Pow exponent, a double constant)."""
    if np is not None and not isinstance(value, HostTensor):
        return np.asarray(value, dtype=np.float32)
    return make(dtypes.FLOAT, shape(value), [float(v) for v in values(value)])


def filled(code: int, dims, value) -> object:
    """A host tensor of `dims` whose every element is `value` (ConstantOfShape)."""
    n = 1
    for d in dims:
        n *= int(d)
    if np is not None:
        return np.full(tuple(int(d) for d in dims), value, dtype=dtypes.numpy_dtype(code))
    return HostTensor(code, dims, array(FORMATS[code], [value]).tobytes() * n)


def reshaped(value, dims) -> object:
    if isinstance(value, HostTensor):
        return HostTensor(value.elem_type, dims, value.data)
    return value.reshape(dims)


def copied(value) -> object:
    """A copy the caller may change (HostTensor bytes are immutable: itself)."""
    if isinstance(value, HostTensor):
        return value
    return np.array(value, copy=True)


def from_bytes(code: int, dims, data: bytes) -> object:
    """A downloaded tensor as a host value (numpy where numpy exists)."""
    if np is not None:
        return np.frombuffer(data, dtype=dtypes.numpy_dtype(code)).reshape(dims).copy()
    return HostTensor(code, dims, data)


def to_gpu_words(code: int, data: bytes):
    """A host tensor's bytes as GPU words (see GPU_WORDS), or None when int64 values do not
    fit in int32."""
    word = GPU_WORDS[code]
    if FORMATS[code] == word:
        return bytes(data)
    if np is not None:
        items = np.frombuffer(data, dtype=dtypes.numpy_dtype(code))
        if code == dtypes.INT64 and items.size and (items.min() < INT32_MIN or
                                                    items.max() > INT32_MAX):
            return None
        return items.astype(np.int32 if word == "i" else np.uint32).tobytes()
    items = array(FORMATS[code], bytes(data))
    if code == dtypes.INT64 and items and (min(items) < INT32_MIN or max(items) > INT32_MAX):
        return None
    return array(word, items).tobytes()


def from_gpu_words(code: int, dims, words: bytes) -> object:
    """GPU words read back as a host tensor of element type `code`."""
    word = GPU_WORDS[code]
    if FORMATS[code] == word:
        return from_bytes(code, dims, words)
    if np is not None:
        items = np.frombuffer(words, dtype=np.int32 if word == "i" else np.uint32)
        return items.astype(dtypes.numpy_dtype(code)).reshape(dims)
    items = array(word, words)
    if code == dtypes.BOOL:
        items = [1 if v else 0 for v in items]
    return HostTensor(code, dims, array(FORMATS[code], items).tobytes())


def row_block(value, start: int, stop: int) -> object:
    """Rows [start, stop) of a host tensor (axis 0), without copying more than they hold."""
    if isinstance(value, HostTensor):
        row = len(value.data) // value.shape[0]
        return HostTensor(value.elem_type, (stop - start,) + value.shape[1:],
                          bytes(value.data[start * row:stop * row]))
    return value[start:stop]


def broadcast_shapes(*shapes) -> tuple:
    """numpy's broadcasting rule over shapes, in plain Python."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for axis in range(rank):
        dims = {int(s[axis - rank + len(s)]) for s in shapes if axis - rank + len(s) >= 0}
        dims.discard(1)
        if len(dims) > 1:
            raise ValueError(f"shapes {[list(s) for s in shapes]} do not broadcast")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def element_count(value) -> int:
    n = 1
    for d in value.shape:
        n *= int(d)
    return n
