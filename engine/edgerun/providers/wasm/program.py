"""Recorded programs: a graph's kernel calls for one input signature, replayed in ONE call.

Run node by node, every node costs Python shape work and a few host->wasm calls (~20 us
per node inside Pyodide, more than many kernels take). But once the input shapes are
fixed, the calls a run makes are fixed too: the same kernels, on the same addresses, with
the same shapes. So the first run of a signature is recorded:

    recorder = Recorder(dev)            # dev.call, writes, reads and allocations now go through it
    inputs = recorder.own_inputs(xs)    # the program's own blocks, holding the host inputs
    outputs = run the graph node by node on `inputs`
    program = recorder.finish(inputs, outputs)     # None when it cannot be replayed

and later runs with the same signature (program.replay) only write the host inputs into
those blocks, call er_run_program (wasm_kernels/program.c) on the recorded word list and
read the outputs: in a page, one JavaScript call per input and output and one for the run.

Why the replay is the same computation:
- every block allocated while recording comes from the recording's `Pool` and goes back to
  it when freed: memory is reused inside the run as usual, but never handed to anyone else
  while the program lives, so recorded addresses stay valid. Weights and other constants
  were allocated before and live as long as the session;
- everything the host decided (shapes, which kernel, which If branch) came from input
  shapes, the values of small integer inputs (both in the signature), constants, and bytes
  it wrote itself (recorded and written again on replay). A run whose host read memory
  written during the run (a data-dependent If, a node refused at run time) or copied a host value in
  (another provider's output) is "tainted": it runs normally and is not kept.
"""
from __future__ import annotations

import struct
import weakref
from array import array

from ...ir import dtypes
from .device import DeviceValue, WasmTensor, small_ints
from .signatures import export_signatures

MAX_PROGRAMS = 8            # signatures kept per captured graph (least recently used dropped)
HEADER = 16                 # er_alloc's block header (alloc.c)
_TABLES: dict = {}          # module bytes -> {kernel name: (program id, parameter kinds)}


def size_class(nbytes: int) -> int:
    """The size er_alloc reserves for `nbytes` (alloc.c's class_of): a pooled block of the
    same class can hold any request of that class."""
    n = max(max(int(nbytes), 1) + HEADER, 64)
    m = n - 1
    k = m.bit_length() - 1
    return ((m >> (k - 2)) + 1) << (k - 2)


def kernel_table(dev) -> dict:
    """{kernel name: (program id, parameter kinds)} for the kernels er_run_program calls:
    names from the module (er_program_kernels), kinds from its export signatures."""
    table = _TABLES.get(dev.module_bytes)
    if table is None:
        ptr = dev.host.call("er_program_kernels") & 0xFFFFFFFF
        text = bytes(dev.host.read(ptr, 1024)).split(b"\0")[0].decode()
        signatures = export_signatures(dev.module_bytes)
        table = {name: (i + 1, signatures[name][0]) for i, name in enumerate(text.split())}
        _TABLES[dev.module_bytes] = table
    return table


class Pool:
    """The blocks a recording allocated: freed blocks wait here for the next request of
    their size class, and stay out of the allocator until the pool is closed."""

    def __init__(self, dev):
        self.dev = dev
        self.free: dict = {}        # size class -> [ptr]
        self.ranges: list = []      # (ptr, size) of every block taken from the allocator
        self.closed = False

    def take(self, nbytes: int) -> int:
        size = size_class(nbytes)
        free = self.free.get(size)
        if free:
            return free.pop()
        ptr = self.dev.alloc(nbytes)
        self.ranges.append((ptr, size - HEADER))
        return ptr

    def keep(self, ptr: int, nbytes: int) -> bool:
        """Take back a freed block; False once closed (the block goes to the allocator)."""
        if self.closed:
            return False
        self.free.setdefault(size_class(nbytes), []).append(ptr)
        return True

    def overlaps(self, ptr: int, nbytes: int) -> bool:
        return any(p < ptr + nbytes and ptr < p + n for p, n in self.ranges)

    def close(self) -> None:
        """Hand the waiting blocks back to the allocator (on the device's next allocation:
        this runs from a finalizer)."""
        self.closed = True
        for free in self.free.values():
            self.dev.garbage.extend(free)
        self.free = {}


class Recorder:
    """Records what a run does on the device (see the module docstring)."""

    def __init__(self, dev):
        self.dev = dev
        self.kernels = kernel_table(dev)
        self.pool = Pool(dev)
        self.log: list = []          # (kernel name, args) or (None, (ptr, bytes written))
        self.taint = ""              # why this run cannot be replayed ("" = it can)
        self.downloads: list = []    # weak references to the DeviceValues handed out
        self.held: list = []         # tensors made before the run that the program reads
        self._call = dev.host.call
        dev.recorder = self
        dev.call = self.call

    def call(self, name: str, *args):
        self.log.append((name, args))
        return self._call(name, *args)

    def wrote(self, ptr: int, data) -> None:
        self.log.append((None, (ptr, bytes(memoryview(data).cast("B")))))

    def reading(self, ptr: int, nbytes: int) -> None:
        if not self.taint and self.pool.overlaps(ptr, nbytes):
            self.taint = "the host read a value computed during the run"

    def copied_in(self, value) -> None:
        """A host value entering the device (an executor copy): data the program would
        bake in as a constant."""
        if value is not None and not isinstance(value, (WasmTensor, DeviceValue)):
            self.taint = self.taint or f"a host value ({type(value).__name__}) was copied in"

    def hold(self, t: WasmTensor) -> None:
        """Keep `t` (made outside the run, e.g. a cached constant) alive with the program."""
        self.held.append(t)

    def download(self, t: WasmTensor) -> DeviceValue:
        value = DeviceValue(t)
        self.downloads.append(weakref.ref(value))
        return value

    def own_inputs(self, values) -> list:
        """The program's own copy of each input (host values, written unlogged: replays
        write the new inputs themselves)."""
        owned: list = []
        for v in values:
            if v is None:
                owned.append(None)
                continue
            mine = self.dev.empty(v.shape, v.elem_type)
            if mine.nbytes:
                self.dev.host.write(mine.ptr, v.data)
            mine.ints = small_ints(v.elem_type, mine.size, v.data)
            owned.append(mine)
        return owned

    def stop(self) -> None:
        """End the recording; DeviceValues still held elsewhere read their bytes now, before
        a replay could overwrite them."""
        self.dev.recorder = None
        self.dev.call = self._call
        for ref in self.downloads:
            value = ref()
            if value is not None:
                value.data    # noqa: B018 - reads and keeps the bytes

    def finish(self, inputs: list, outputs: list):
        """A Program replaying this run, or None when it cannot be replayed."""
        stats = self.dev.programs
        if not all(type(v) is WasmTensor for v in outputs):
            self.taint = self.taint or "an output is not a device tensor"
        encoded = None if self.taint else self._encode()
        if encoded is None:
            self.pool.close()
            stats["refused"][self.taint] = stats["refused"].get(self.taint, 0) + 1
            return None
        stats["recorded"] += 1
        words, data = encoded
        return Program(self.dev, self.pool, words, data, inputs, outputs, self.held)

    def _encode(self):
        """(words, data): the program and the bytes its copies read, or None (taint set)."""
        words, data, copies = array("I"), bytearray(), []
        for name, args in self.log:
            if name is None:                       # a host write: copy from the data block
                ptr, payload = args
                copies.append((len(words) + 2, len(data)))
                words.extend((3 << 8, ptr & 0xFFFFFFFF, 0, len(payload)))
                data += payload + bytes(-len(payload) % 16)
                continue
            entry = self.kernels.get(name)
            if entry is None or len(entry[1]) != len(args):
                self.taint = f"{name} is not a kernel programs can call"
                return None
            kid, kinds = entry
            words.append(kid | len(args) << 8)
            for kind, value in zip(kinds, args):
                words.append(_f32_bits(value) if kind == "f32" else int(value) & 0xFFFFFFFF)
        return words, (data, copies)


def _f32_bits(value) -> int:
    return struct.unpack("<I", struct.pack("<f", float(value)))[0]


class Program:
    """A recorded run: its word list in linear memory, the blocks it owns, its inputs'
    and outputs' tensors."""

    def __init__(self, dev, pool: Pool, words: array, data, inputs: list, outputs: list,
                 held: list):
        payload, copies = data
        self.dev = dev
        self.pool = pool
        self.inputs = inputs
        self.outputs = outputs
        self.held = held
        self.nwords = len(words)
        self.block = dev.empty((len(payload) + 4 * len(words),), dtypes.UINT8)
        base = self.block.ptr
        for at, offset in copies:                  # copies read from the data block
            words[at] = base + offset
        dev.write(base, payload)
        self.words_ptr = base + len(payload)
        dev.write(self.words_ptr, words)

    def replay(self, values):
        """The outputs (host values) for these inputs (host values of the recorded
        signature), or None when a kernel failed (an index out of range: the caller runs
        node by node to raise the precise error)."""
        host = self.dev.host
        for mine, v in zip(self.inputs, values):
            if mine is not None and mine.nbytes:
                host.write(mine.ptr, v.data)
        if self.nwords and host.call("er_run_program", self.words_ptr, self.nwords):
            return None
        self.dev.programs["replayed"] += 1
        download = self.dev.download
        return tuple(download(t) for t in self.outputs)

    def __del__(self):
        pool = getattr(self, "pool", None)     # absent when __init__ failed
        if pool is not None:
            pool.close()
