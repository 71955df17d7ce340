"""Tensors in the kernels' linear memory, and the copies in and out of it.

A device value is a `WasmTensor`: (block, byte offset, shape, element type). A `Block` owns
a piece of linear memory and frees it when the last tensor using it goes away (CPython's
reference counting, so the executor's liveness frees reuse memory at once). Reshape-like
operators make new tensors over the same block: no copy.

Small integer and boolean tensors (shapes, axes, indices, If conditions) also keep their
values as a Python tuple (`ints`), so operators that need them on the host (Reshape, Slice,
Equal, If, ...) never read memory.
Nothing here needs numpy: host values are numpy arrays where numpy exists, HostTensors
otherwise.

While a program is being recorded (program.py), `recorder` is set: blocks come from the
recording's pool, and every call, write and read goes through it.
"""
from __future__ import annotations

from typing import Optional

import threading
from array import array
from contextlib import contextmanager

from ...ir import dtypes
from ...ir.graph import element_count
from ...ir.host_tensor import HostTensor, have_numpy
from .build_info import load_module_bytes

SMALL_INTS = 64          # integer tensors up to this many elements keep a host copy
SPARE_MAX_BYTES = 1 << 16   # freed blocks up to this size are kept for reuse (WasmDevice.spare)
SPARE_PER_SIZE = 8          # ... at most this many of one size
# element types with a host copy, and their array module format
INT_FORMATS = {dtypes.INT64: "q", dtypes.INT32: "i", dtypes.BOOL: "B", dtypes.UINT8: "B",
               dtypes.INT8: "b", dtypes.INT16: "h", dtypes.UINT16: "H", dtypes.UINT32: "I",
               dtypes.UINT64: "Q"}
_COMPILED: dict = {}     # the module, compiled once per process per host kind
UNHELD_TYPES = frozenset({dtypes.STRING, dtypes.COMPLEX64, dtypes.COMPLEX128,
                          dtypes.FLOAT6E2M3, dtypes.FLOAT6E3M2})


def stored_itemsize(elem_type: int) -> int:
    """Bytes per element in linear memory: sub-byte types take one byte each, in its low
    bits (as ml_dtypes keeps them); ONNX packs them, so copies in and out unpack and pack."""
    return max(dtypes.elem_type(elem_type).bits // 8, 1)


def small_ints(elem_type: int, count: int, data) -> Optional[tuple]:
    """The values of an integer or bool tensor of at most SMALL_INTS elements, read from its
    little-endian bytes (bytes-like or numpy), which the device keeps on the host (`ints`);
    None for other tensors."""
    fmt = INT_FORMATS.get(elem_type)
    if fmt is None or count > SMALL_INTS:
        return None
    raw = data.tobytes() if hasattr(data, "tobytes") else bytes(data)   # array() would
    return tuple(array(fmt, raw))                                         # iterate a view


def unpack_narrow(data, bits: int, count: int) -> bytes:
    """ONNX's packed sub-byte values (lowest bits first) as one value per byte."""
    per_byte, mask = 8 // bits, (1 << bits) - 1
    return bytes((data[i // per_byte] >> (bits * (i % per_byte))) & mask for i in range(count))


def pack_narrow(data, bits: int) -> bytes:
    per_byte, mask = 8 // bits, (1 << bits) - 1
    out = bytearray((len(data) + per_byte - 1) // per_byte)
    for i, v in enumerate(data):
        out[i // per_byte] |= (v & mask) << (bits * (i % per_byte))
    return bytes(out)


class Block:
    """A block of linear memory, freed when garbage (to the recording pool it came from,
    while that pool's program lives). A block holding a session constant (a weight) keeps
    the conversions kernels made of it in `casts`, so they are made once per session."""

    __slots__ = ("device", "ptr", "nbytes", "pool", "casts")

    def __init__(self, device: "WasmDevice", nbytes: int):
        self.device = device
        self.nbytes = nbytes
        self.casts: Optional[dict] = None   # a dict once the block holds a constant
        recorder = device.recorder
        self.pool = None if recorder is None else recorder.pool
        self.ptr = device.alloc(nbytes) if self.pool is None else self.pool.take(nbytes)

    def __del__(self):
        if self.pool is None or not self.pool.keep(self.ptr, self.nbytes):
            self.device.release(self.ptr, self.nbytes)


class WasmTensor:
    __slots__ = ("block", "offset", "shape", "elem_type", "ints")

    def __init__(self, block: Block, shape: tuple, elem_type: int, offset: int = 0, ints=None):
        self.block = block
        self.offset = offset
        self.shape = tuple(shape)
        self.elem_type = elem_type
        self.ints = ints

    @property
    def ptr(self) -> int:
        return self.block.ptr + self.offset

    @property
    def size(self) -> int:
        return element_count(self.shape)

    @property
    def itemsize(self) -> int:
        return stored_itemsize(self.elem_type)

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize

    def view(self, shape) -> "WasmTensor":
        """The same memory with another shape (Reshape, Flatten, Squeeze, Unsqueeze)."""
        return WasmTensor(self.block, tuple(shape), self.elem_type, self.offset, self.ints)

    def part(self, byte_offset: int, shape) -> "WasmTensor":
        """A contiguous piece of this tensor's memory (a row block, one direction's weights)."""
        return WasmTensor(self.block, tuple(shape), self.elem_type, self.offset + byte_offset)

    def __repr__(self) -> str:
        return f"WasmTensor({dtypes.type_string(self.elem_type)}, {list(self.shape)}, @{self.ptr})"


class WasmDevice:
    """One instance of the kernels' module with its memory: allocation, copies, calls."""

    def __init__(self, host_factory):
        key = host_factory
        if key not in _COMPILED:
            _COMPILED[key] = load_module_bytes()
        self.module_bytes = _COMPILED[key]
        self.host = host_factory(self.module_bytes)
        self.call = self.host.call    # replaced by the recorder's while recording
        self.args_ptr = self.call("er_args_ptr")
        self.call("er_set_splat_loads", int(self.host.splat_loads))
        self.numpy = have_numpy()
        self.fallbacks: dict = {}     # op_type -> nodes run through the CPU kernel
        self.recorder = None          # the program.Recorder while a program is recorded
        self.programs = {"recorded": 0, "replayed": 0, "refused": {}}   # why not, per reason
        self.lock = threading.Lock()  # programs own memory: one record or replay at a time
        # Blocks freed by finalizers wait here for the next allocation: a finalizer must not
        # call into the module, as the garbage collector may have finalized its store already.
        self.garbage: list = []
        # Small freed blocks kept for the next allocation of their size (nbytes -> ptrs): a
        # run's feeds and outputs come back in the same sizes every run, and each er_alloc /
        # er_free is a call across the host boundary (in a page, Python -> JS -> wasm).
        self.spare: dict = {}

    # ---- allocation ---------------------------------------------------------------------

    def alloc(self, nbytes: int) -> int:
        spare = self.spare.get(nbytes)
        if spare:
            try:
                return spare.pop()
            except IndexError:        # another thread took the last one
                pass
        self.free_garbage()
        return self.host.alloc(nbytes)

    def release(self, ptr: int, nbytes: int) -> None:
        """A block no value holds any more (called from finalizers: no module call here)."""
        if nbytes <= SPARE_MAX_BYTES:
            spare = self.spare.setdefault(nbytes, [])
            if len(spare) < SPARE_PER_SIZE:
                spare.append(ptr)
                return
        self.garbage.append(ptr)

    def free_garbage(self) -> None:
        while self.garbage:
            self.host.free(self.garbage.pop())

    def empty(self, shape, elem_type: int = dtypes.FLOAT) -> WasmTensor:
        shape = tuple(int(d) for d in shape)
        nbytes = element_count(shape) * stored_itemsize(elem_type)
        return WasmTensor(Block(self, nbytes), shape, elem_type)

    def scratch(self, nbytes: int) -> Block:
        return Block(self, nbytes)

    def set_args(self, values) -> None:
        """Fill er_args (shapes and strides for the next call)."""
        self.write(self.args_ptr, array("i", values))

    def write(self, ptr: int, data) -> None:
        if self.recorder is not None:
            self.recorder.wrote(ptr, data)
        self.host.write(ptr, data)

    def read(self, ptr: int, nbytes: int) -> bytearray:
        if self.recorder is not None:
            self.recorder.reading(ptr, nbytes)
        return self.host.read(ptr, nbytes)

    @contextmanager
    def outside_recording(self):
        """Work that belongs to the session, not to the run being recorded (a weight's
        conversion, made once): its calls, writes and blocks stay out of the program."""
        recorder, call = self.recorder, self.call
        self.recorder, self.call = None, self.host.call
        try:
            yield
        finally:
            self.recorder, self.call = recorder, call

    # ---- host <-> device ----------------------------------------------------------------

    def upload(self, value):
        """`value` as a WasmTensor; what linear memory cannot hold (sequences, strings,
        sub-byte types) stays a host value, and nodes reading it run on the CPU kernel."""
        if value is None or isinstance(value, WasmTensor):
            return value
        if type(value) is DeviceValue:          # a download not read yet: its tensor as it was
            return value.source
        if isinstance(value, HostTensor):
            elem_type, shape, data = value.elem_type, value.shape, value.data
        elif hasattr(value, "dtype") and hasattr(value, "shape") and value.dtype.kind not in "OUS":
            elem_type = dtypes.BY_NUMPY.get(value.dtype.name)
            elem_type = elem_type.code if elem_type else None
            shape = value.shape
            import numpy as np
            data = np.ascontiguousarray(value)
        else:
            return value
        if elem_type is None or elem_type in UNHELD_TYPES:
            return value
        t = self.empty(shape, elem_type)
        if isinstance(value, HostTensor) and dtypes.elem_type(elem_type).bits < 8:
            data = unpack_narrow(data, dtypes.elem_type(elem_type).bits, t.size)
        self.write(t.ptr, data)
        t.ints = small_ints(elem_type, t.size, data)
        return t

    def download(self, t: WasmTensor):
        if not isinstance(t, WasmTensor):
            return t
        data = self.read(t.ptr, t.nbytes)
        if not self.numpy:
            bits = dtypes.elem_type(t.elem_type).bits
            return HostTensor(t.elem_type, t.shape, pack_narrow(data, bits) if bits < 8 else data)
        import numpy as np
        return np.frombuffer(data, dtypes.numpy_dtype(t.elem_type)).reshape(t.shape)

    def ints(self, t) -> Optional[tuple]:
        """The values of a small integer tensor (shape, axes, indices) as Python ints."""
        if t is None:
            return None
        if not isinstance(t, WasmTensor):
            return tuple(int(v) for v in (t.reshape(-1).tolist() if hasattr(t, "reshape")
                                         else t))
        if t.ints is None:
            fmt = INT_FORMATS.get(t.elem_type)
            if fmt is None:
                raise TypeError(f"expected an integer or bool tensor, got "
                                f"{dtypes.type_string(t.elem_type)}")
            t.ints = tuple(array(fmt, bytes(self.read(t.ptr, t.nbytes))))
        return t.ints

    def from_ints(self, values, shape, elem_type: int = dtypes.INT64) -> WasmTensor:
        """A small integer tensor computed on the host (shape arithmetic), uploaded."""
        values = tuple(int(v) for v in values)
        t = self.empty(shape, elem_type)
        self.write(t.ptr, array(INT_FORMATS[elem_type], values))
        t.ints = values
        return t

    def from_floats(self, values, shape) -> WasmTensor:
        """A small float32 tensor computed on the host (a scale), uploaded."""
        t = self.empty(shape, dtypes.FLOAT)
        self.write(t.ptr, array("f", [float(v) for v in values]))
        return t

    def fill(self, t: WasmTensor, element: bytes) -> WasmTensor:
        """Fill `t` with copies of one element given as its little-endian bytes."""
        if t.size:
            self.write(self.args_ptr, element)
            self.call("er_fill", t.ptr, self.args_ptr, t.itemsize, t.size)
        return t

    def zeros(self, shape, elem_type: int = dtypes.FLOAT) -> WasmTensor:
        t = self.empty(shape, elem_type)
        return self.fill(t, bytes(t.itemsize))

    def bytes_in_use(self) -> int:
        """Bytes held by live values (spare blocks are handed back first)."""
        for spare in list(self.spare.values()):
            while spare:
                self.garbage.append(spare.pop())
        self.free_garbage()
        return self.call("er_bytes_in_use")


class DeviceValue(HostTensor):
    """A tensor handed to the host while a program is recorded, read only if the host asks
    for its bytes. Uploading it again (an If branch's outputs, the captured graph's outputs)
    gives back the tensor itself: no copy out and in, and no read that would tie the
    recording to this run's data."""

    __slots__ = ("source", "_data")

    def __init__(self, source: WasmTensor):
        self.elem_type = source.elem_type
        self.shape = source.shape
        self.source = source
        self._data: Optional[bytearray] = None

    @property
    def data(self) -> bytearray:
        if self._data is None:
            self._data = self.source.block.device.read(self.source.ptr, self.source.nbytes)
        return self._data
