"""`GpuDevice` on the browser's WebGPU (`navigator.gpu`) through Pyodide's FFI.

Everything maps one to one onto the JavaScript API except waiting: requesting the adapter
and device, and reading a buffer back (`mapAsync`), return promises, while the executor
and the interface above are synchronous. The device waits with JSPI (JavaScript Promise
Integration: `pyodide.ffi.run_sync`), which suspends the WebAssembly stack until the promise
settles. JSPI needs Chromium 137+ (or another engine that has `WebAssembly.Suspending`) and
a Python call entered asynchronously: `await pyFunc.callPromising(...)` or
`await pyodide.runPythonAsync(...)`. Entered synchronously, the first wait raises a GpuError
saying so.

Errors: WebGPU reports errors to error scopes, not to the failing call. Each pipeline
creation, upload and dispatch runs inside validation scopes labelled with the kernel and node
it serves; buffer creations, uploads and submissions also inside out-of-memory scopes, and
submissions inside internal-error scopes (a shader the driver fails to build), so that no
failed call leaves a pooled buffer's old contents to be read back as a result. Pipeline
scopes are checked at once (with the WGSL compiler's messages), the others at the next
readback, where the first error raises a GpuError naming its label. A lost device (a driver
reset, a GPU process gone) raises at the next check, and the next session opens a new one.
"""
from __future__ import annotations

from .device import BindGroupCache, GpuDevice, GpuError, Unsupported

try:
    import js
    from pyodide.ffi import JsException, can_run_sync, jsnull, run_sync, to_js
except ImportError:          # not in Pyodide: the provider uses wgpu_device instead
    js = None

MAX_STORAGE_BUFFERS = 10
CHECKED = ("validation",)                          # what each recorded dispatch may raise
ALLOCATING = ("validation", "out-of-memory")       # buffer creations and uploads
SUBMITTING = ("validation", "out-of-memory", "internal")
MAX_PENDING_SCOPES = 4096
ENTRY_HINT = ("enter Python asynchronously: `await pyFunc.callPromising(...)` or "
              "`await pyodide.runPythonAsync(...)`, in a browser with JSPI (Chromium 137+)")


def adapter_problem() -> str:
    """"" when this page has WebGPU, else why not (the adapter itself is requested later,
    when the first session opens the device: that needs an asynchronous entry)."""
    if js is None:
        return "not running inside Pyodide"
    navigator = getattr(js, "navigator", None)
    if navigator is None or getattr(navigator, "gpu", None) is None:
        return ("this page has no WebGPU (navigator.gpu is undefined: it needs a secure "
                "context, http://localhost or https, and a browser with WebGPU enabled)")
    return ""


def entry_problem() -> str:
    """"" when this Python call can wait for GPU promises, else why not (not cached: it
    depends on how JavaScript entered Python this time)."""
    if js is None or can_run_sync():
        return ""
    return f"waiting for the GPU needs an asynchronous entry: {ENTRY_HINT}"


def ensure_can_wait(what: str) -> None:
    """Raise before any GPU work is issued if this call could not wait for its result."""
    if not can_run_sync():
        raise GpuError(f"{what} must wait for the GPU, and this Python call cannot: "
                       f"{ENTRY_HINT}")


def wait(promise, what: str):
    """The value of a JavaScript promise, waiting synchronously through JSPI."""
    ensure_can_wait(what)
    try:
        return run_sync(promise)
    except JsException as e:
        raise GpuError(f"{what} failed: {e}") from e


def _js(value):
    """A Python descriptor (dicts, lists, JS objects inside) as plain JavaScript objects."""
    return to_js(value, dict_converter=js.Object.fromEntries)


class _Pipeline:
    __slots__ = ("pipeline", "layout", "label")

    def __init__(self, pipeline, label: str):
        self.pipeline = pipeline
        self.layout = pipeline.getBindGroupLayout(0)
        self.label = label


class BrowserDevice(GpuDevice):
    backend = "browser"

    def __init__(self):
        problem = adapter_problem()
        if problem:
            raise GpuError(problem)
        adapter = wait(js.navigator.gpu.requestAdapter(), "navigator.gpu.requestAdapter()")
        if _missing(adapter):
            raise GpuError("navigator.gpu.requestAdapter() found no adapter")
        self.adapter_type, self.description = _describe(adapter)
        limits = adapter.limits
        wanted = {"maxStorageBuffersPerShaderStage":
                  min(MAX_STORAGE_BUFFERS, limits.maxStorageBuffersPerShaderStage),
                  "maxStorageBufferBindingSize": limits.maxStorageBufferBindingSize,
                  "maxBufferSize": limits.maxBufferSize}
        self.device = wait(adapter.requestDevice(_js({"requiredLimits": wanted})),
                           "GPUAdapter.requestDevice()")
        self.queue = self.device.queue
        self.params_alignment = max(256, int(self.device.limits.minStorageBufferOffsetAlignment))
        self.max_binding_size = int(self.device.limits.maxStorageBufferBindingSize)
        usage = js.GPUBufferUsage
        self._usage = usage.STORAGE | usage.COPY_SRC | usage.COPY_DST
        self._params_usage = usage.STORAGE | usage.COPY_DST
        self._staging_usage = usage.MAP_READ | usage.COPY_DST
        self._params_buffer, self._params_capacity = None, 0
        self._bind_groups = BindGroupCache(self._bind_group)
        self._staging, self._staging_capacity = None, 0
        self._scopes = []          # [(promise of GPUError or null, label)] not yet checked
        self.device.lost.then(self._on_lost)

    # ---- error scopes -----------------------------------------------------------------------

    def _push(self, filters: tuple = CHECKED) -> None:
        for kind in filters:
            self.device.pushErrorScope(kind)

    def _pop(self, label: str, filters: tuple = CHECKED) -> None:
        for _ in filters:
            self._scopes.append((self.device.popErrorScope(), label))
        if len(self._scopes) >= MAX_PENDING_SCOPES and can_run_sync():
            self.check_errors()     # runs that never read back must not pile scopes up

    def _on_lost(self, info) -> None:
        self.lost_reason = f"{info.reason or 'unknown'}: {info.message}"

    def _settle(self) -> None:
        """Let the event loop run once (the device's `lost` callback among what is queued)."""
        wait(js.Promise.new(lambda resolve, reject: js.setTimeout(resolve, 0)),
             "waiting for the event loop")

    def _raise_if_lost(self) -> None:
        if self.lost_reason:
            raise GpuError(f"the WebGPU device was lost ({self.lost_reason}); results of work "
                           f"since are gone: create the session again")

    def check_errors(self) -> None:
        """Raise a GpuError for the first failed call since the last check (one wait), or
        for a lost device."""
        self._raise_if_lost()
        if not self._scopes:
            return
        scopes, self._scopes = self._scopes, []
        errors = wait(js.Promise.all(to_js([p for p, _ in scopes])), "checking WebGPU errors")
        for error, (_, label) in zip(errors, scopes):
            if not _missing(error):
                raise GpuError(f"{label} failed: {error.constructor.name}: {error.message}")

    # ---- buffers ----------------------------------------------------------------------------

    def create_buffer(self, nbytes: int):
        if nbytes > self.max_binding_size:
            raise Unsupported(f"a {nbytes}-byte tensor exceeds this adapter's largest storage "
                              f"binding ({self.max_binding_size} bytes)")
        self._push(ALLOCATING)
        buffer = self.device.createBuffer(size=nbytes, usage=self._usage)
        self._pop(f"creating a {nbytes}-byte buffer", ALLOCATING)
        return buffer

    def destroy_buffer(self, buffer) -> None:
        buffer.destroy()

    def write_buffer(self, buffer, data) -> None:
        chunk = js.Uint8Array.new(len(data))
        chunk.assign(data)
        self._push(ALLOCATING)
        self.queue.writeBuffer(buffer, 0, chunk)
        self._pop(f"uploading {len(data)} bytes", ALLOCATING)

    def copy_buffer(self, source, target, nbytes: int) -> None:
        encoder = self.device.createCommandEncoder()
        encoder.copyBufferToBuffer(source, 0, target, 0, nbytes)
        self._push()
        self.queue.submit(to_js([encoder.finish()]))
        self._pop(f"copying {nbytes} bytes")

    def read_buffer(self, buffer, nbytes: int) -> bytes:
        what = f"reading back {nbytes} bytes"
        ensure_can_wait(what)
        staging = self._staging_for(nbytes)
        encoder = self.device.createCommandEncoder()
        encoder.copyBufferToBuffer(buffer, 0, staging, 0, nbytes)
        self._push()
        self.queue.submit(to_js([encoder.finish()]))
        self._pop(what)
        try:
            wait(staging.mapAsync(js.GPUMapMode.READ, 0, nbytes), what)
            data = js.Uint8Array.new(staging.getMappedRange(0, nbytes)).to_bytes()
        except GpuError:
            self._settle()          # a loss rejects the map before `lost` settles
            self._raise_if_lost()
            raise
        finally:
            if staging.mapState != "unmapped":    # also cancels a map that failed midway
                staging.unmap()
        self.check_errors()
        return data

    async def read_buffer_async(self, buffer, nbytes: int) -> bytes:
        """The same without JSPI, for callers that await (the executor does not)."""
        staging = self._staging_for(nbytes)
        encoder = self.device.createCommandEncoder()
        encoder.copyBufferToBuffer(buffer, 0, staging, 0, nbytes)
        self.queue.submit(to_js([encoder.finish()]))
        await staging.mapAsync(js.GPUMapMode.READ, 0, nbytes)
        try:
            return js.Uint8Array.new(staging.getMappedRange(0, nbytes)).to_bytes()
        finally:
            if staging.mapState != "unmapped":
                staging.unmap()

    def _staging_for(self, nbytes: int):
        if nbytes > self._staging_capacity:
            if self._staging is not None:
                self._staging.destroy()
            self._staging_capacity = max(nbytes, 2 * self._staging_capacity, 1 << 16)
            self._staging = self.device.createBuffer(size=self._staging_capacity,
                                                     usage=self._staging_usage)
        return self._staging

    def _params_for(self, nbytes: int):
        if nbytes > self._params_capacity:
            if self._params_buffer is not None:
                self._params_buffer.destroy()
                self._bind_groups.clear()
            self._params_capacity = max(nbytes, 2 * self._params_capacity, 1 << 16)
            self._params_buffer = self.device.createBuffer(size=self._params_capacity,
                                                           usage=self._params_usage)
        return self._params_buffer

    # ---- kernels ----------------------------------------------------------------------------

    def create_pipeline(self, label: str, source: str):
        self._push()
        module = self.device.createShaderModule(code=source, label=label)
        pipeline = self.device.createComputePipeline(_js({
            "label": label, "layout": "auto",
            "compute": {"module": module, "entryPoint": "main"}}))
        error = wait(self.device.popErrorScope(), f"compiling WGSL kernel {label}")
        if not _missing(error):
            raise GpuError(f"compiling WGSL kernel {label} failed: {error.message}"
                           f"{_compiler_messages(module)}")
        return _Pipeline(pipeline, label)

    def run_batch(self, params: bytes, dispatches: list, copies_before: tuple = (),
                  copies_after: tuple = ()) -> None:
        if not dispatches:
            return
        params_buffer = self._params_for(len(params))
        self.write_buffer(params_buffer, params)
        encoder = self.device.createCommandEncoder()
        for source, target, nbytes in copies_before:
            encoder.copyBufferToBuffer(source, 0, target, 0, nbytes)
        compute = encoder.beginComputePass()
        for d in dispatches:
            self._push()
            compute.setPipeline(d.pipeline.pipeline)
            compute.setBindGroup(0, self._bind_groups.get(d, params_buffer))
            compute.dispatchWorkgroups(*d.groups)
            self._pop(f"recording {d.label}")
        compute.end()
        for source, target, nbytes in copies_after:
            encoder.copyBufferToBuffer(source, 0, target, 0, nbytes)
        self._push(SUBMITTING)
        self.queue.submit(to_js([encoder.finish()]))
        self._pop(f"submitting {len(dispatches)} dispatches ({dispatches[0].label} ... "
                  f"{dispatches[-1].label})", SUBMITTING)

    def _bind_group(self, d, params_buffer):
        entries = [{"binding": 0, "resource": {"buffer": params_buffer,
                                               "offset": d.params_offset,
                                               "size": d.params_size}}]
        for i, b in enumerate(d.bindings, start=1):
            entries.append({"binding": i, "resource": {"buffer": b.buffer, "offset": 0,
                                                       "size": b.nbytes}})
        return self.device.createBindGroup(_js({"layout": d.pipeline.layout,
                                                "entries": entries}))


def _missing(value) -> bool:
    """JavaScript's null and undefined (promises resolve to null for 'no error')."""
    return value is None or value is jsnull


def _describe(adapter) -> tuple:
    """(adapter type, description): software adapters (SwiftShader) report type "CPU"."""
    info = adapter.info
    words = [str(getattr(info, k, "") or "") for k in ("vendor", "architecture", "device",
                                                       "description")]
    text = " ".join(w for w in words if w) or "unknown adapter"
    fallback = bool(getattr(info, "isFallbackAdapter", False))
    software = fallback or "swiftshader" in text.lower()
    return ("CPU" if software else "GPU"), f"{text} (browser WebGPU)"


def _compiler_messages(module) -> str:
    try:
        info = wait(module.getCompilationInfo(), "reading the WGSL compiler's messages")
    except GpuError:
        return ""
    lines = [f"line {m.lineNum}: {m.message}" for m in info.messages]
    return ("; " + "; ".join(lines)) if lines else ""
