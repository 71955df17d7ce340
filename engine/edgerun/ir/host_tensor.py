"""A host tensor that needs no numpy: element type, shape and little-endian bytes.

Where numpy exists, host values are numpy arrays. Inside a Pyodide without numpy (the
browser build here has none) values crossing the API are HostTensors instead, and only
providers that keep their own memory (wasm, webgpu) can run the model.
"""
from __future__ import annotations

from typing import Any

import struct

from . import dtypes
from .graph import Tensor, element_count
from .optional_numpy import have_numpy  # noqa: F401 - callers of HostTensor import it here


# element type -> struct format of one element (the types Python reads as numbers)
STRUCT_FORMATS = {dtypes.FLOAT: "f", dtypes.DOUBLE: "d", dtypes.FLOAT16: "e", dtypes.INT8: "b",
                  dtypes.UINT8: "B", dtypes.BOOL: "?", dtypes.INT16: "h", dtypes.UINT16: "H",
                  dtypes.INT32: "i", dtypes.UINT32: "I", dtypes.INT64: "q", dtypes.UINT64: "Q"}


class HostTensor:
    """`data` is little-endian bytes, except for strings: a tuple of `str`, row-major."""
    __slots__ = ("elem_type", "shape", "data", "__weakref__")

    def __init__(self, elem_type: int, shape, data):
        self.data: Any
        self.elem_type = int(elem_type)
        self.shape = tuple(int(d) for d in shape)
        if self.elem_type == dtypes.STRING:
            self.data = tuple(s.decode("utf-8", errors="surrogateescape")
                              if isinstance(s, bytes) else str(s) for s in data)
            if len(self.data) != self.size:
                raise ValueError(f"{len(self.data)} strings for shape {list(self.shape)}")
            return
        self.data = data if isinstance(data, (bytes, bytearray, memoryview)) else bytes(data)
        expected = (self.size * dtypes.elem_type(self.elem_type).bits + 7) // 8
        if len(self.data) != expected:
            raise ValueError(f"{len(self.data)} bytes for a {dtypes.type_string(self.elem_type)}"
                             f" of shape {list(self.shape)}, expected {expected}")

    @property
    def size(self) -> int:
        return element_count(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @classmethod
    def from_ir(cls, t) -> "HostTensor":
        if t.elem_type == dtypes.STRING:
            return cls(t.elem_type, t.dims, t.strings or ())
        return cls(t.elem_type, t.dims, t.raw)

    def to_ir(self, name: str):
        """This tensor as an ir.Tensor (an initializer) named `name`; the bytes are shared."""
        if self.elem_type == dtypes.STRING:
            return Tensor(name, self.elem_type, self.shape,
                          strings=[s.encode("utf-8", errors="surrogateescape") for s in self.data])
        return Tensor(name, self.elem_type, self.shape, raw=bytes(self.data))

    def numpy(self):
        if self.elem_type == dtypes.STRING:
            return Tensor("", self.elem_type, self.shape, strings=list(self.data)).numpy()
        return Tensor("", self.elem_type, self.shape, raw=bytes(self.data)).numpy()

    def values(self) -> list:
        """The elements as a flat list of Python str, float, int or bool."""
        if self.elem_type == dtypes.STRING:
            return list(self.data)
        fmt = STRUCT_FORMATS.get(self.elem_type)
        if fmt is None:
            raise TypeError(f"{dtypes.type_string(self.elem_type)} values cannot be read "
                            f"without numpy")
        return list(struct.unpack(f"<{self.size}{fmt}", bytes(self.data)))

    @classmethod
    def from_values(cls, elem_type: int, shape, values) -> "HostTensor":
        """A tensor of `elem_type` holding a flat list of Python values."""
        if elem_type == dtypes.STRING:
            return cls(elem_type, shape, values)
        fmt = STRUCT_FORMATS.get(elem_type)
        if fmt is None:
            raise TypeError(f"{dtypes.type_string(elem_type)} values cannot be written "
                            f"without numpy")
        return cls(elem_type, shape, struct.pack(f"<{len(values)}{fmt}", *values))

    def __repr__(self) -> str:
        return f"HostTensor({dtypes.type_string(self.elem_type)}, {list(self.shape)})"


def flat_values(value) -> list:
    """The elements of a numpy array or HostTensor as a flat list of Python values."""
    if isinstance(value, HostTensor):
        return value.values()
    return value.reshape(-1).tolist()
