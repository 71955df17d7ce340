"""A host tensor that needs no numpy: element type, shape and little-endian bytes.

Where numpy exists, host values are numpy arrays. Inside a Pyodide without numpy (the
browser build here has none) values crossing the API are HostTensors instead, and only
providers that keep their own memory (wasm, webgpu) can run the model.
"""
from __future__ import annotations

import functools

from ..ir import dtypes
from ..ir.graph import element_count


@functools.cache   # asked per input and per kernel; a failed import is slow in Pyodide (~0.1 ms)
def have_numpy() -> bool:
    try:
        import numpy  # noqa: F401
    except ImportError:
        return False
    return True


class HostTensor:
    __slots__ = ("elem_type", "shape", "data")

    def __init__(self, elem_type: int, shape, data):
        self.elem_type = int(elem_type)
        self.shape = tuple(int(d) for d in shape)
        self.data = data if isinstance(data, (bytes, bytearray, memoryview)) else bytes(data)
        expected = (self.size * dtypes.elem_type(self.elem_type).bits + 7) // 8
        if self.elem_type != dtypes.STRING and len(self.data) != expected:
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
        return cls(t.elem_type, t.dims, t.raw)

    def numpy(self):
        from ..ir import Tensor

        return Tensor("", self.elem_type, self.shape, raw=bytes(self.data)).numpy()

    def __repr__(self) -> str:
        return f"HostTensor({dtypes.type_string(self.elem_type)}, {list(self.shape)})"
