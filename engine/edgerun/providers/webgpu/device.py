"""The device-facing interface of the WebGPU provider: what a GPU backend must offer.

Two implementations share everything above this interface:
- `wgpu_device.WgpuDevice`: wgpu-native through wgpu-py (desktop: Vulkan, Metal, D3D12);
- `browser_device.BrowserDevice`: `navigator.gpu` through Pyodide's FFI. There, reading a
  buffer back is asynchronous (`mapAsync`); `read_buffer` waits for it through JSPI
  (`pyodide.ffi.run_sync`), so the executor stays synchronous (`read_buffer_async` serves
  callers that await instead); everything else maps one to one onto the JavaScript API
  (createBuffer, queue.writeBuffer, createComputePipeline, one command encoder per
  `run_batch`).

Handles (buffers, pipelines) are opaque to callers. All work of a batch goes into one command
encoder with one compute pass; WebGPU orders dispatches within it, so a dispatch sees the
writes of every earlier one.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from ...errors import KernelRefused


class Unsupported(KernelRefused):
    """A kernel or the device cannot take these inputs (a layout without a kernel, a tensor
    larger than the adapter binds): the session's next provider runs the node instead
    (runtime/refusals.py)."""


class GpuError(RuntimeError):
    """A device call failed; the message names the kernel and the node it was running."""


@dataclass
class Binding:
    buffer: object        # device buffer handle
    nbytes: int           # bytes bound from offset 0 (a multiple of 4, at least 4)


@dataclass
class Dispatch:
    """One recorded compute dispatch, submitted later with the rest of its batch."""
    pipeline: object      # from create_pipeline
    label: str            # "node 'x' (Op): family/kernel", for error messages
    bindings: list        # Binding per binding 1.. (output first, then inputs)
    params_offset: int    # this dispatch's slice of the batch's params bytes (binding 0)
    params_size: int
    groups: tuple         # (x, y, z) workgroup counts


class BindGroupCache:
    """Bind groups by what they bind. A plan's dispatches bind the same pooled buffers at the
    same parameter offsets run after run, and making a bind group costs more than recording
    the dispatch (a struct per binding through the FFI), so runs after the first reuse
    them. An entry holds the objects it binds: an id in a key is never a newer object's."""

    def __init__(self, make, capacity: int = 8192):
        self._make = make              # (dispatch, params buffer) -> bind group
        self._entries: OrderedDict = OrderedDict()
        self.capacity = capacity
        self.made = 0

    def get(self, d: "Dispatch", params_buffer):
        key = (id(d.pipeline), id(params_buffer), d.params_offset, d.params_size) + \
            tuple((id(b.buffer), b.nbytes) for b in d.bindings)
        entry = self._entries.get(key)
        if entry is not None and entry[0] is d.pipeline and entry[1] is params_buffer and \
                all(held is b.buffer for held, b in zip(entry[2], d.bindings)):
            self._entries.move_to_end(key)
            return entry[3]
        group = self._make(d, params_buffer)
        self.made += 1
        self._entries[key] = (d.pipeline, params_buffer, [b.buffer for b in d.bindings], group)
        if len(self._entries) > self.capacity:
            self._entries.popitem(last=False)
        return group

    def clear(self) -> None:
        self._entries.clear()

    def forget(self, buffers) -> None:
        """Drop the bind groups over any of `buffers` (destroyed ones)."""
        gone = {id(b) for b in buffers}
        for key in [k for k, e in self._entries.items() if any(id(b) in gone for b in e[2])]:
            del self._entries[key]


class GpuDevice:
    """Interface; see the module docstring. Sizes are in bytes."""

    description = ""              # adapter, for messages and explain()
    adapter_type = ""             # the adapter's type ("CPU" for lavapipe, SwiftShader)
    backend = ""                  # "Vulkan", "Metal", "D3D12", "GL", "browser"
    params_alignment = 256        # alignment of each dispatch's params slice
    lost_reason = ""              # why the device was lost ("" while it works)
    _bind_groups: BindGroupCache  # each device caches its bind groups

    @property
    def software(self) -> bool:
        """A CPU adapter (lavapipe, SwiftShader): kernels skip what only pays on a GPU."""
        return self.adapter_type.upper() in ("CPU", "ADAPTERTYPE.CPU")

    def create_buffer(self, nbytes: int):
        raise NotImplementedError

    def destroy_buffer(self, buffer) -> None:
        raise NotImplementedError

    def destroy_buffers(self, buffers) -> None:
        """Free `buffers`' device memory now, and the cached bind groups over them."""
        for buffer in buffers:
            self.destroy_buffer(buffer)
        self._bind_groups.forget(buffers)

    def write_buffer(self, buffer, data) -> None:
        """Copy `data` (bytes-like, length a multiple of 4) to the start of `buffer`. Ordered
        after all work already submitted and before work submitted later."""
        raise NotImplementedError

    def read_buffer(self, buffer, nbytes: int) -> bytes:
        """The first `nbytes` of `buffer`, after all submitted work (blocking; native only)."""
        raise NotImplementedError

    async def read_buffer_async(self, buffer, nbytes: int) -> bytes:
        return self.read_buffer(buffer, nbytes)

    def copy_buffer(self, source, target, nbytes: int) -> None:
        """Copy the first `nbytes` (a multiple of 4) of `source` to `target`, ordered like
        write_buffer: after submitted work, before later work."""
        raise NotImplementedError

    def create_pipeline(self, label: str, source: str):
        """A compute pipeline for WGSL `source` with entry point `main` and layout 'auto'."""
        raise NotImplementedError

    def run_batch(self, params: bytes, dispatches: list, copies_before: tuple = (),
                  copies_after: tuple = ()) -> None:
        """Upload `params`, record `dispatches` into one command encoder and submit it;
        buffer copies (source, target, nbytes) go into the same encoder before and after
        the compute pass (a recorded program's inputs and outputs)."""
        raise NotImplementedError
