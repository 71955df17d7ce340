"""GpuContext: the scheduling shared by every device implementation.

Kernels call `dispatch(...)`; nothing reaches the device until `flush()`, which hands the
whole batch (one parameter buffer, one command encoder) to the device. A run flushes when a
value must be read back (`download`, the provider's `to_host`) and at `end_run`. Pipelines
are cached by (family, kernel, substitutions); buffers come from the size-class pool.

While `recorder` is set (a captured graph's first run of a signature, program.py), every
upload and submitted batch is also logged to it, and a read of device data taints it: the
host may have decided something from values a replay would not show it.
"""
from __future__ import annotations

from typing import Optional

import struct
import threading
import weakref
from collections import OrderedDict

from ...ir import dtypes
from ...runtime import cancel
from . import host_values
from .device import Binding, Dispatch, GpuDevice, GpuError, Unsupported
from .memory import SMALL_MIRROR, BufferPool, ForeignAllocation, GpuTensor, GpuTensorParts
from .shaders import WORKGROUP_SIZE, ShaderLibrary

MAX_GROUPS_X = 65535
# dispatches per submitted batch while a run watches RunOptions.terminate (work on the GPU
# cannot be recalled: the batches bound how long a terminated run takes to stop)
WATCHED_BATCH = 8
SMALL_CACHE = 256          # small host tensors whose GPU copies upload_small keeps
# element type -> GpuTensor.dtype (how each is stored: host_values.GPU_WORDS)
GPU_TYPES = {dtypes.FLOAT: "float32", dtypes.INT32: "int32", dtypes.INT64: "int64",
             dtypes.BOOL: "bool", dtypes.UINT32: "uint32"}
# 8- and 16-bit element types (quantized and float16 models): one word an element on the GPU,
# their own bytes on the host; packed.wgsl widens uploads and narrows downloads. Only kernels
# registered `narrow` (kernels/registry.py) take them: the rest would compute in 32 bits
# where these wrap or round.
NARROW_TYPES = {dtypes.INT8: "int8", dtypes.UINT8: "uint8", dtypes.INT16: "int16",
                dtypes.UINT16: "uint16", dtypes.FLOAT16: "float16"}
GPU_TYPES.update(NARROW_TYPES)
CODES = {name: code for code, name in GPU_TYPES.items()}
# element types whose GPU words are their ONNX layout: buffers can be shared as they are
ADOPTABLE = {dtypes.FLOAT: "float32", dtypes.INT32: "int32", dtypes.UINT32: "uint32"}


class GpuContext:
    def __init__(self, device: GpuDevice, shaders: Optional[ShaderLibrary] = None):
        self.device = device
        self.shaders = shaders or ShaderLibrary()
        self.pool = BufferPool(device)
        self.lock = threading.RLock()
        self._pipelines: dict = {}
        self._pending: list = []
        self._params = bytearray()
        self._zeros: Optional[GpuTensor] = None
        self._constants: dict = {}     # key -> GpuTensor uploaded once (attribute vectors)
        # id -> (host value, its bytes, GpuTensor): upload_small
        self._small: OrderedDict = OrderedDict()
        # id -> [weak reference to a host value, GpuTensor or None]: small constants
        # (keep_constant), whose GPU copies upload_small makes once and keeps while they live
        self._constants_kept: dict = {}
        self.label = ""            # the node being run, for error messages
        self.recorder = None       # program.Recorder while a captured graph records
        self.fallback_log: list = []   # the last nodes that ran on the CPU instead, and why
        self.stats: dict = {"dispatches": 0, "flushes": 0, "uploads": 0, "downloads": 0,
                            "pipelines": 0, "fallbacks": 0,
                            # captured graphs (program.py): signatures recorded, runs replayed
                            "programs": 0, "replays": 0}
        self.programs_refused: dict = {}   # why a recorded run could not be replayed -> count

    # ---- tensors ----------------------------------------------------------------------------

    def empty(self, shape, dtype="float32") -> GpuTensor:
        n = 1
        for d in shape:
            n *= int(d)
        return GpuTensor(self.pool.acquire(max(n, 1) * 4), shape, dtype)

    def upload(self, value) -> GpuTensor:
        """A host tensor (numpy array or, without numpy, HostTensor) copied to the GPU.
        Raises Unsupported for element types GPU buffers do not hold (GPU_TYPES) and for
        int64 values beyond int32."""
        code, shape, data = host_values.raw(value)
        if code not in GPU_TYPES:
            raise Unsupported(f"a {dtypes.type_string(code)} tensor (GPU tensors are "
                              f"{', '.join(sorted(CODES))})")
        if code in NARROW_TYPES:
            return self._upload_narrow(code, shape, data)
        words = host_values.to_gpu_words(code, data)
        if words is None:
            raise Unsupported("int64 values beyond the int32 range GPU tensors hold")
        with self.lock:
            alloc = self.pool.acquire(max(len(words), 4), for_upload=True)
            if words:
                self._write(alloc.buffer, words)
            self.stats["uploads"] += 1
        n = len(words) // 4
        host = host_values.from_bytes(code, shape, data) if n <= SMALL_MIRROR else None
        return GpuTensor(alloc, shape, GPU_TYPES[code], host)

    def _upload_narrow(self, code: int, shape, data: bytes) -> GpuTensor:
        """An 8/16-bit tensor: its bytes uploaded as they are, widened on the GPU."""
        bits = dtypes.BY_CODE[code].bits
        out = self.empty(shape, GPU_TYPES[code])
        words = max(-(-len(data) // 4), 1)
        with self.lock:
            packed = GpuTensor(self.pool.acquire(4 * words, for_upload=True), (words,), "uint32")
            if data:
                self._write(packed.buffer, data + b"\0" * (-len(data) % 4))
            self.stats["uploads"] += 1
        self.dispatch("packed", "widen", out, [packed], [], out.size,
                      {"BITS": bits, "KIND": _narrow_kind(code), "OT": out.wgsl})
        if out.size <= SMALL_MIRROR:
            out.host = host_values.from_bytes(code, shape, data)
        return out

    def upload_small(self, value) -> GpuTensor:
        """upload() for tensors of at most SMALL_MIRROR elements, reusing the GPU copy while
        the same host object holds the same bytes: small integer constants (axes, indices,
        a Where's scalar) stay on the host for shape arithmetic, yet feed a kernel every run."""
        kept = self._constants_kept.get(id(value))
        if kept is not None and kept[0]() is value:
            if kept[1] is None:
                kept[1] = self.upload(value)
            return kept[1]
        code, shape, data = host_values.raw(value)
        if len(data) > 8 * SMALL_MIRROR:
            return self.upload(value)
        key = (id(value), code, shape)
        with self.lock:
            hit = self._small.get(key)
            if hit is not None and hit[0] is value and hit[1] == data:
                self._small.move_to_end(key)
                return hit[2]
            t = self.upload(value)
            self._small[key] = (value, data, t)     # holding `value` keeps its id unique
            if len(self._small) > SMALL_CACHE:
                self._small.popitem(last=False)
            return t

    def keep_constant(self, value) -> None:
        """A small constant the host keeps (shape arithmetic reads it) but kernels may also
        bind: its GPU copy stays while the constant (its session) lives. upload_small's
        cache alone would evict it in a model with more small constants than the cache
        holds (a QDQ model's hundreds of zero points), re-uploading each one every run. An
        8/16-bit constant (a zero point: only kernels read it) is uploaded now, so that its
        widening is not part of a captured graph's first run; others at first use."""
        key = id(value)
        try:
            ref = weakref.ref(value, lambda _: self._constants_kept.pop(key, None))
        except TypeError:       # a value without weak references: upload_small's cache alone
            return
        narrow = host_values.elem_type(value) in NARROW_TYPES
        with self.lock:
            self._constants_kept[key] = [ref, self.upload(value) if narrow else None]

    def _write(self, buffer, data) -> None:
        self.device.write_buffer(buffer, data)
        if self.recorder is not None:
            self.recorder.wrote(buffer, data)

    def _taint(self, why: str) -> None:
        if self.recorder is not None:
            self.recorder.taint(why)

    def download(self, t: GpuTensor):
        """`t` on the host: a numpy array, or a HostTensor where numpy is absent."""
        self._taint(f"{self.label}: the host read a value computed in the run")
        if t.dtype in CODES and CODES[t.dtype] in NARROW_TYPES:
            return self._download_narrow(t)
        with self.lock:
            self.flush()
            data = self.device.read_buffer(t.buffer, max(t.size, 1) * 4) if t.size else b""
            self.stats["downloads"] += 1
        return host_values.from_gpu_words(CODES[t.dtype], t.shape, data[:t.size * 4])

    def _download_narrow(self, t: GpuTensor):
        """An 8/16-bit tensor narrowed to its own bytes on the GPU, then read back."""
        packed = self._narrowed(t, CODES[t.dtype])
        with self.lock:
            self.flush()
            data = self.device.read_buffer(packed.buffer, packed.size * 4) if t.size else b""
            self.stats["downloads"] += 1
        return _from_packed(t, data)

    def _narrowed(self, t: GpuTensor, code: int) -> GpuTensor:
        bits = dtypes.BY_CODE[code].bits
        packed = self.empty((-(-t.size * bits // 32),), "uint32")
        return self.dispatch("packed", "narrow", packed, [t], [t.size], packed.size,
                             {"BITS": bits, "KIND": _narrow_kind(code), "T": t.wgsl})

    async def download_async(self, t: GpuTensor):
        """For an awaiting caller (mapAsync readback without JSPI)."""
        self._taint(f"{self.label}: the host read a value computed in the run")
        code = CODES[t.dtype]
        source = self._narrowed(t, code) if code in NARROW_TYPES else t
        with self.lock:
            self.flush()
        data = await self.device.read_buffer_async(source.buffer, max(source.size, 1) * 4)
        self.stats["downloads"] += 1
        if code in NARROW_TYPES:
            return _from_packed(t, data)
        return host_values.from_gpu_words(code, t.shape, data[:t.size * 4])

    def export(self, value, code: int):
        """A new buffer the caller owns (never pooled) holding `value` as ONNX lays out
        element type `code` (int64 as 8 bytes, bool as 1): onnxruntime-web's GPU-buffer
        outputs. Kept on the GPU where the layouts agree (float32, int32, uint32), else
        through the host. Its size is rounded up to 16 bytes, as onnxruntime-web's."""
        self._taint("a GPU buffer was exported during the run")
        with self.lock:
            if isinstance(value, GpuTensor) and value.dtype in ADOPTABLE.values() and \
                    CODES[value.dtype] == code:
                nbytes = value.size * 4
                buffer = self.device.create_buffer(_exported_size(nbytes))
                self.flush()
                if nbytes:
                    self.device.copy_buffer(value.buffer, buffer, nbytes)
                return buffer
            host = self.download(value) if isinstance(value, GpuTensor) else \
                value.host if isinstance(value, GpuTensorParts) else value
            data = host_values.raw(host)[2]
            buffer = self.device.create_buffer(_exported_size(len(data)))
            if data:
                self.device.write_buffer(buffer, data + b"\0" * (-len(data) % 4))
            self.stats["uploads"] += 1
            return buffer

    def adopt(self, buffer, nbytes: int, shape, code: int) -> GpuTensor:
        """A caller's buffer of `nbytes` read in place as a tensor of `shape` and `code`
        (float32, int32 or uint32: the types whose layout is the GPU tensors' own)."""
        if code not in ADOPTABLE:
            raise Unsupported(f"a {dtypes.type_string(code)} GPU buffer (read in place: "
                              f"{', '.join(sorted(ADOPTABLE.values()))})")
        t = GpuTensor(ForeignAllocation(buffer, nbytes), shape, ADOPTABLE[code])
        if t.size * 4 > nbytes:
            raise ValueError(f"the GPU buffer holds {nbytes} bytes; a "
                             f"{dtypes.type_string(code)} tensor of shape {list(t.shape)} "
                             f"needs {t.size * 4}")
        return t

    def host_values(self, t):
        """A small tensor's values on the host (Clip bounds, Resize scales): the mirror kept
        at upload, else a read back (counted, it stalls the batch)."""
        if not isinstance(t, GpuTensor):
            return t
        if t.host is not None:
            if self.recorder is not None:
                self.recorder.read_mirror(t)
            return t.host
        self.stats["fallbacks"] += 1
        return self.download(t)

    def zeros(self, count: int) -> GpuTensor:
        """A shared read-only tensor of at least `count` zeros (an absent bias)."""
        count = max(count, 64)
        if self._zeros is None or self._zeros.size < count:
            self._zeros = self.upload(host_values.filled(dtypes.FLOAT, (count,), 0.0))
        return self._zeros

    def constant(self, key, make) -> GpuTensor:
        """A read-only tensor built by `make()` and uploaded on first use of `key` (values an
        operator takes as attributes, such as Scaler's offsets), then reused by every run."""
        found = self._constants.get(key)
        if found is None:
            found = self._constants[key] = self.upload(make())
        return found

    # ---- kernels ----------------------------------------------------------------------------

    def pipeline(self, family: str, kernel: str, subs: dict):
        key = (family, kernel, tuple(sorted(subs.items())))
        found = self._pipelines.get(key)
        if found is None:
            label = f"{family}/{kernel}" + "".join(f" {k}={v}" for k, v in sorted(subs.items()))
            source = self.shaders.source(family, kernel, subs)
            found = self.device.create_pipeline(label, source)
            self._pipelines[key] = found
            self.stats["pipelines"] += 1
        return found

    def dispatch(self, family: str, kernel: str, out: GpuTensor, inputs: list, params: list,
                 threads: int, subs: Optional[dict] = None) -> GpuTensor:
        """Record kernel `family/kernel` writing `out` from `inputs`, `threads` work items.

        `params` follows the kernel's documented layout: Python floats are stored as f32,
        ints as u32 (i32 when negative); params[0] is always the work-item count."""
        if threads <= 0:
            return out
        subs = subs or {}
        with self.lock:
            try:
                pipeline = self.pipeline(family, kernel, subs)
            except GpuError as e:
                raise GpuError(f"{self.label}: {e}") from e
            offset = self._append_params([threads] + list(params))
            groups = -(-threads // WORKGROUP_SIZE)
            gx = min(groups, MAX_GROUPS_X)
            bindings = [Binding(t.buffer, max(t.size, 1) * 4) for t in [out] + list(inputs)]
            self._pending.append(Dispatch(pipeline, f"{self.label}: {family}/{kernel}",
                                          bindings, offset, len(self._params) - offset,
                                          (gx, -(-groups // gx), 1)))
            self.pool.batch_pending = True
            self.stats["dispatches"] += 1
            if len(self._pending) >= WATCHED_BATCH and cancel.watched() is not None:
                self.flush()                # a run that may be terminated: small batches,
                self._wait_for_device()     # each finished before more is recorded
        return out

    def _wait_for_device(self) -> None:
        """Returns when the work submitted so far has run (a 4-byte read waits for it)."""
        self.device.read_buffer(self.zeros(1).buffer, 4)

    def _append_params(self, values: list) -> int:
        align = self.device.params_alignment
        pad = (-len(self._params)) % align
        self._params.extend(b"\0" * pad)
        offset = len(self._params)
        self._params.extend(pack_params(values))
        return offset

    def flush(self) -> None:
        with self.lock:
            if not self._pending:
                return
            pending, params = self._pending, bytes(self._params)
            self._pending, self._params = [], bytearray()
            if self.recorder is not None:
                self.recorder.submitted(params, pending)
            watched = cancel.watched()
            if watched is not None and watched.terminate:
                self.pool.batch_submitted()      # the batch is dropped, never submitted
                cancel.check(watched)
            try:
                self.device.run_batch(params, pending)
            finally:
                self.pool.batch_submitted()
                self.stats["flushes"] += 1


def _from_packed(t: GpuTensor, data) -> object:
    """An 8/16-bit tensor's host value from the packed words _narrowed made of it."""
    code = CODES[t.dtype]
    nbytes = t.size * dtypes.BY_CODE[code].bits // 8
    return host_values.from_bytes(code, t.shape, bytes(data[:nbytes]))


def _narrow_kind(code: int) -> int:
    """packed.wgsl's KIND: 0 signed integer, 1 unsigned, 2 float16."""
    return 2 if code == dtypes.FLOAT16 else 1 if code in (dtypes.UINT8, dtypes.UINT16) else 0


def _exported_size(nbytes: int) -> int:
    """A GPU-buffer output's size: rounded up to 16 bytes, at least 16 (onnxruntime-web's)."""
    return max(-(-nbytes // 16) * 16, 16)


def pack_params(values: list) -> bytes:
    """Floats as f32, ints as u32 (i32 when negative), in one struct.pack."""
    codes, words = [], []
    for v in values:
        if isinstance(v, float) or type(v).__name__.startswith("float"):   # numpy floats too
            codes.append("f")
            words.append(float(v))
        else:
            v = int(v)
            codes.append("i" if v < 0 else "I")
            words.append(v)
    return struct.pack("<" + "".join(codes), *words)
