"""GPU tensors and the buffer pool behind them.

A `GpuTensor` is a shape over an `Allocation` (one pooled buffer). Views (Reshape, Squeeze,
Identity...) share the allocation; when the last tensor over it is dropped (the executor
frees values after their last use) the buffer returns to the pool, to be reused by any later
tensor of the same size class: with dynamic shapes, memory is reused, not reallocated.

Reuse is hazard-free because of how WebGPU orders work: dispatches recorded in one command
encoder run in order, so a buffer freed after its last reader was recorded can be the output
of a later dispatch of the same batch. A host upload (`queue.writeBuffer`) however runs
before the not-yet-submitted batch, so uploads only take buffers freed before it (`free`),
never ones freed during it (`recent`).

A recorded program (program.py) pins the buffers its command stream touches: the pool hands
them to no one else until the program unpins them, and a pinned buffer released meanwhile
waits in `held` for that.

The shelves only grow while sessions run (a run's buffers come back for the next run); a
session released in a page hands its buffers back, and `trim` then gives the device memory
of every free one back to the GPU, so that a page going from model to model holds the
current model's memory, not the sum of all of them.
"""
from __future__ import annotations

import threading

from . import host_values

MIN_BYTES = 256
SMALL_MIRROR = 64      # uploaded tensors up to this many elements keep a host copy


def size_class(nbytes: int) -> int:
    """Round up to 256 B, then to 4 steps per power of two (at most 25% slack)."""
    n = max(int(nbytes), MIN_BYTES)
    top = 1 << (n - 1).bit_length()          # the power of two >= n
    step = max(top // 8, MIN_BYTES)          # quarters of the octave [top/2, top]
    return -(-n // step) * step


class BufferPool:
    def __init__(self, device):
        self.device = device
        self.lock = threading.RLock()
        self.free: dict = {}       # size class -> [buffer]: safe for any use
        self.recent: dict = {}     # freed while a batch is pending: dispatch outputs only
        self.batch_pending = False
        self.created = 0           # buffers ever created (tests check reuse)
        self.bytes_created = 0
        # Every buffer created, so that none is only reachable from an Allocation: when a
        # reference cycle (a traceback's frames holding GpuTensors) is collected, Python runs
        # the finalizers of everything in it, the buffer's too (wgpu-py then releases its
        # handle), before Allocation.__del__ hands it back to the pool, dead.
        self._owned: dict = {}     # id(buffer) -> buffer
        self.pinned: dict = {}     # id(buffer) -> how many recorded programs use it
        self.held: dict = {}       # id(buffer) -> (buffer, size class): pinned and released

    def acquire(self, nbytes: int, for_upload: bool = False) -> "Allocation":
        cls = size_class(nbytes)
        with self.lock:
            buffer = None
            if not for_upload and self.recent.get(cls):
                buffer = self.recent[cls].pop()
            elif self.free.get(cls):
                buffer = self.free[cls].pop()
        if buffer is None:
            buffer = self.device.create_buffer(cls)
            with self.lock:
                self._owned[id(buffer)] = buffer
            self.created += 1
            self.bytes_created += cls
        return Allocation(self, buffer, cls)

    def release(self, buffer, cls: int) -> None:
        with self.lock:
            if id(buffer) in self.pinned:
                self.held[id(buffer)] = (buffer, cls)
                return
            self._shelve(buffer, cls)

    def _shelve(self, buffer, cls: int) -> None:
        shelf = self.recent if self.batch_pending else self.free
        shelf.setdefault(cls, []).append(buffer)

    def pin(self, buffers) -> None:
        """Keep `buffers` from every later acquire (taken off the shelves if they are free)
        until each pin is undone by unpin: programs sharing a buffer (a weight, a cached
        small upload) each hold a pin on it."""
        with self.lock:
            new = set()
            for b in {id(b): b for b in buffers}.values():
                count = self.pinned.get(id(b), 0)
                self.pinned[id(b)] = count + 1
                if not count:
                    new.add(id(b))
            for shelves in (self.free, self.recent):
                for cls, shelf in shelves.items():
                    for b in shelf:
                        if id(b) in new:
                            self.held[id(b)] = (b, cls)
                    shelf[:] = [b for b in shelf if id(b) not in new]

    def unpin(self, buffers) -> None:
        """Undo one pin of each of `buffers`; one no longer pinned that was released meanwhile
        returns to the shelves."""
        with self.lock:
            for b in {id(b): b for b in buffers}.values():
                count = self.pinned.get(id(b), 0) - 1
                if count > 0:
                    self.pinned[id(b)] = count
                    continue
                self.pinned.pop(id(b), None)
                entry = self.held.pop(id(b), None)
                if entry is not None:
                    self._shelve(*entry)

    def trim(self) -> int:
        """Destroy every buffer on the free shelves and return their bytes. None of them is
        in a tensor, a recorded program or a batch not yet submitted (those are held, pinned
        or on `recent`), and work already submitted keeps a destroyed buffer until it ends."""
        with self.lock:
            buffers = [b for shelf in self.free.values() for b in shelf]
            nbytes = sum(cls * len(shelf) for cls, shelf in self.free.items())
            self.free.clear()
            for b in buffers:
                del self._owned[id(b)]
        if buffers:
            self.device.destroy_buffers(buffers)
        return nbytes

    def batch_submitted(self) -> None:
        with self.lock:
            for cls, buffers in self.recent.items():
                self.free.setdefault(cls, []).extend(buffers)
            self.recent.clear()
            self.batch_pending = False


class Allocation:
    __slots__ = ("pool", "buffer", "nbytes")

    def __init__(self, pool: BufferPool, buffer, nbytes: int):
        self.pool, self.buffer, self.nbytes = pool, buffer, nbytes

    def __del__(self):
        try:
            self.pool.release(self.buffer, self.nbytes)
        except Exception:   # noqa: BLE001 - interpreter shutdown: nothing to give back to
            pass


class ForeignAllocation:
    """A buffer the caller owns (a GPUBuffer a page passed in): read in place, never pooled
    nor destroyed here."""
    __slots__ = ("buffer", "nbytes")

    def __init__(self, buffer, nbytes: int):
        self.buffer, self.nbytes = buffer, nbytes


# GpuTensor.dtype -> the WGSL type of its 4-byte elements (host_values.GPU_WORDS)
WGSL_TYPES = {"float32": "f32", "int32": "i32", "int64": "i32", "bool": "u32", "uint32": "u32",
              "int8": "i32", "uint8": "i32", "int16": "i32", "uint16": "i32", "float16": "f32"}


class GpuTensor:
    """A tensor living in a GPU buffer, 4 bytes an element. `dtype` is the element type's
    numpy name (numpy is optional): "float32", "int32", "int64" (stored as int32), "bool"
    (stored as u32 0/1), "uint32", or an 8/16-bit type (gpu.NARROW_TYPES: integers as i32,
    float16 as f32); `wgsl` is the type kernels read it as."""
    __slots__ = ("alloc", "shape", "dtype", "host")

    def __init__(self, alloc: "Allocation | ForeignAllocation", shape: tuple,
                 dtype="float32", host=None):
        self.alloc = alloc
        self.shape = tuple(int(d) for d in shape)
        if not isinstance(dtype, str):      # a numpy dtype or scalar type
            dtype = getattr(dtype, "name", None) or dtype.__name__
        self.dtype = dtype
        self.host = host           # a host copy of small uploaded tensors (scalars, scales)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def wgsl(self) -> str:
        return WGSL_TYPES[self.dtype]

    @property
    def buffer(self):
        return self.alloc.buffer

    def view(self, shape) -> "GpuTensor":
        """The same elements under another shape (Reshape and friends: no copy)."""
        return GpuTensor(self.alloc, shape, self.dtype,
                         None if self.host is None else host_values.reshaped(self.host, shape))

    def __repr__(self):
        return f"GpuTensor(shape={self.shape}, dtype={self.dtype})"


class GpuTensorParts:
    """A float32 tensor larger than one storage binding (a big fully-connected weight), as
    blocks of rows (axis 0) in several GPU tensors, uploaded once. Kernels that know how
    take the blocks one by one (Gemm with transB=1); others run on the host from `host`."""
    __slots__ = ("parts", "shape", "dtype", "host")

    def __init__(self, parts: list, host):
        self.parts = parts
        self.shape = (sum(p.shape[0] for p in parts),) + tuple(parts[0].shape[1:])
        self.dtype = "float32"
        self.host = host

    def __repr__(self):
        return f"GpuTensorParts(shape={self.shape}, parts={len(self.parts)})"
