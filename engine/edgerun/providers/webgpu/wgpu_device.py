"""`GpuDevice` on wgpu-native through wgpu-py (`pip install wgpu==0.32.0`).

wgpu-py raises validation errors from the failing call, so each call is wrapped to say which
kernel and node it served (the role WebGPU error scopes play in the browser).
"""
from __future__ import annotations

from .device import BindGroupCache, GpuDevice, GpuError, Unsupported

try:
    import wgpu
except ImportError:          # the provider reports itself unavailable
    wgpu = None

_STORAGE = 0


def adapter_problem() -> str:
    """"" when wgpu can open an adapter here, else why not (cached by the caller)."""
    if wgpu is None:
        return "the wgpu package is not installed (pip install wgpu==0.32.0)"
    try:
        adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    except Exception as e:   # noqa: BLE001 - any failure means: no usable adapter
        return f"wgpu found no GPU adapter ({type(e).__name__}: {e})"
    if adapter is None:
        return "wgpu found no GPU adapter"
    return ""


class WgpuDevice(GpuDevice):
    def __init__(self):
        if wgpu is None:
            raise GpuError("the wgpu package is not installed (pip install wgpu==0.32.0)")
        self.adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
        info = self.adapter.info
        self.backend = str(info.get("backend_type", ""))
        self.adapter_type = str(info.get("adapter_type", ""))
        self.description = f"{info.get('device', '?')} ({self.backend}, {self.adapter_type})"
        limits = self.adapter.limits
        self.device = self.adapter.request_device_sync(required_limits={
            "max-storage-buffers-per-shader-stage":
                min(10, limits["max-storage-buffers-per-shader-stage"]),
            "max-storage-buffer-binding-size": limits["max-storage-buffer-binding-size"],
            "max-buffer-size": limits["max-buffer-size"]})
        self.params_alignment = max(256, self.device.limits["min-storage-buffer-offset-alignment"])
        self.max_binding_size = self.device.limits["max-storage-buffer-binding-size"]
        self._usage = (wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC
                       | wgpu.BufferUsage.COPY_DST)
        self._params_buffer = None
        self._params_capacity = 0
        self._bind_groups = BindGroupCache(self._bind_group)

    def create_buffer(self, nbytes: int):
        if nbytes > self.max_binding_size:
            raise Unsupported(f"a {nbytes}-byte tensor exceeds this adapter's largest storage "
                           f"binding ({self.max_binding_size} bytes)")
        try:
            return self.device.create_buffer(size=nbytes, usage=self._usage)
        except Exception as e:   # noqa: BLE001
            raise GpuError(f"creating a {nbytes}-byte buffer failed: {e}") from e

    def destroy_buffer(self, buffer) -> None:
        buffer.destroy()

    def write_buffer(self, buffer, data) -> None:
        self.device.queue.write_buffer(buffer, 0, data)

    def copy_buffer(self, source, target, nbytes: int) -> None:
        encoder = self.device.create_command_encoder()
        encoder.copy_buffer_to_buffer(source, 0, target, 0, nbytes)
        self.device.queue.submit([encoder.finish()])

    def read_buffer(self, buffer, nbytes: int) -> bytes:
        return bytes(self.device.queue.read_buffer(buffer, 0, nbytes))

    def create_pipeline(self, label: str, source: str):
        try:
            module = self.device.create_shader_module(label=label, code=source)
            return self.device.create_compute_pipeline(
                label=label, layout="auto", compute={"module": module, "entry_point": "main"})
        except Exception as e:   # noqa: BLE001 - say which kernel failed to compile
            raise GpuError(f"compiling WGSL kernel {label} failed: {e}") from e

    def run_batch(self, params: bytes, dispatches: list, copies_before: tuple = (),
                  copies_after: tuple = ()) -> None:
        if not dispatches:
            return
        params_buffer = self._params_for(len(params))
        self.device.queue.write_buffer(params_buffer, 0, params)
        encoder = self.device.create_command_encoder()
        for source, target, nbytes in copies_before:
            encoder.copy_buffer_to_buffer(source, 0, target, 0, nbytes)
        compute = encoder.begin_compute_pass()
        for d in dispatches:
            try:
                group = self._bind_groups.get(d, params_buffer)
                compute.set_pipeline(d.pipeline)
                compute.set_bind_group(0, group)
                compute.dispatch_workgroups(*d.groups)
            except Exception as e:   # noqa: BLE001
                raise GpuError(f"recording {d.label} failed: {e}") from e
        compute.end()
        for source, target, nbytes in copies_after:
            encoder.copy_buffer_to_buffer(source, 0, target, 0, nbytes)
        try:
            self.device.queue.submit([encoder.finish()])
        except Exception as e:   # noqa: BLE001
            raise GpuError(f"submitting {len(dispatches)} dispatches ({dispatches[0].label} "
                           f"... {dispatches[-1].label}) failed: {e}") from e

    def _params_for(self, nbytes: int):
        if nbytes > self._params_capacity:
            if self._params_buffer is not None:
                self._params_buffer.destroy()
                self._bind_groups.clear()
            self._params_capacity = max(nbytes, 2 * self._params_capacity, 1 << 16)
            self._params_buffer = self.device.create_buffer(
                size=self._params_capacity,
                usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_DST)
        return self._params_buffer

    def _bind_group(self, d, params_buffer):
        entries = [{"binding": 0, "resource": {"buffer": params_buffer,
                                               "offset": d.params_offset,
                                               "size": d.params_size}}]
        for i, b in enumerate(d.bindings, start=1):
            entries.append({"binding": i, "resource": {"buffer": b.buffer, "offset": 0,
                                                       "size": b.nbytes}})
        return self.device.create_bind_group(layout=d.pipeline.get_bind_group_layout(0),
                                             entries=entries)
