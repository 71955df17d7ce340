"""WebGpuProvider: runs claimed nodes as WGSL kernels on one process-wide GPU device.

Device values are `GpuTensor`s (float32 in GPU buffers) or, for integer shape tensors, host
numpy arrays: shape arithmetic stays on the host and never costs a GPU round trip. Kernels
record dispatches; the batch is submitted when a value is read back (`to_host`) and at
`end_run`, so one run is normally one command encoder. Initializers are uploaded once, at
session creation. A node whose inputs are all host values (shape arithmetic) runs the CPU
kernel on the host; a kernel that meets inputs it has no GPU layout for raises Unsupported
and the CPU kernel runs that node instead (counted in `stats["fallbacks"]`).

The device is wgpu-native natively and the browser's `navigator.gpu` inside Pyodide
(sys.platform "emscripten": browser_device.py). Without numpy (Pyodide here) there is no CPU
kernel to fall back on: host values are HostTensors, the host-only operators run their own
pure-Python versions, and a node the GPU kernel refuses is an error that names it.
"""
from __future__ import annotations

import sys
import threading

from ...errors import NotImplementedOp
from ...ir import dtypes
from ...runtime.host_tensor import have_numpy
from ..base import ExecutionProvider
from ..cpu import registry as cpu_registry
from . import host_values
from .device import GpuError
from .gpu import GpuContext
from .kernels import lookup
from .kernels.registry import Unsupported
from .memory import GpuTensor

_shared = {"context": None, "problem": None}
_shared_lock = threading.Lock()
IN_BROWSER = sys.platform == "emscripten"


def _device_problem() -> str:
    if _shared["problem"] is None:
        if IN_BROWSER:
            from .browser_device import adapter_problem
        else:
            from .wgpu_device import adapter_problem
        _shared["problem"] = adapter_problem()
    return _shared["problem"]


def shared_context() -> GpuContext:
    """The process-wide GPU context (adapter + device open once: ~0.5 s)."""
    with _shared_lock:
        if _shared["context"] is None:
            if IN_BROWSER:
                from .browser_device import BrowserDevice as Device
            else:
                from .wgpu_device import WgpuDevice as Device
            _shared["context"] = GpuContext(Device())
        return _shared["context"]


def _cpu_kernel(node, opset):
    """The CPU provider's kernel for `node`, or None where numpy (which it needs) is absent."""
    if not have_numpy():
        return None
    return cpu_registry.lookup(node.op_type, node.domain, opset)


class WebGpuProvider(ExecutionProvider):
    name = "webgpu"
    ort_name = "WebGpuExecutionProvider"
    device = "webgpu"

    @classmethod
    def available(cls) -> tuple:
        problem = _device_problem()
        if not problem and IN_BROWSER:        # a synchronous entry could never read back
            from .browser_device import entry_problem
            problem = entry_problem()
        return (not problem, problem)

    @classmethod
    def is_hardware(cls) -> bool:
        """True on a real GPU; False on software adapters (lavapipe, SwiftShader: type CPU)."""
        if not cls.available()[0]:
            return False
        return shared_context().device.adapter_type.upper() not in ("CPU", "ADAPTERTYPE.CPU")

    def __init__(self, options: dict = None, context: GpuContext = None):
        super().__init__(options)
        self.gpu = context or shared_context()

    @property
    def stats(self) -> dict:
        return self.gpu.stats

    def capability(self, node, opset):
        op = lookup(node.op_type, node.domain)
        if op is None:
            domain = node.domain or "ai.onnx"
            return False, f"no WGSL kernel for {domain}::{node.op_type}"
        if have_numpy() and _cpu_kernel(node, opset) is None:
            return False, f"no CPU kernel to fall back on for {node.op_type}"
        if op.check is not None:
            why = op.check(node, opset)
            if why:
                return False, f"{why} is not supported by the WGSL kernel"
        return True, ""

    def kernel(self, node, opset):
        op = lookup(node.op_type, node.domain)
        cpu_fn = _cpu_kernel(node, opset)
        gpu = self.gpu
        label = f"node '{node.name or '(unnamed)'}' ({node.op_type})"

        def on_host(ctx, inputs, attrs):
            host = [gpu.download(v) if isinstance(v, GpuTensor) else v for v in inputs]
            return cpu_fn(ctx, *host, **attrs)

        def run(ctx, *inputs, **attrs):
            on_gpu = any(isinstance(v, GpuTensor) for v in inputs)
            if cpu_fn is not None and (op.host_only or not on_gpu):
                return on_host(ctx, inputs, attrs)
            gpu.label = label
            try:
                return op.run(gpu, ctx, *inputs, **attrs)
            except Unsupported as why:
                if cpu_fn is None:
                    raise NotImplementedOp(
                        f"{label}: the WGSL kernel cannot take {why}, and the CPU kernel "
                        f"that would run it instead needs numpy, which is not installed"
                    ) from None
                gpu.stats["fallbacks"] += 1
                gpu.fallback_log.append(f"{label}: {why}")
                del gpu.fallback_log[:-100]
                return on_host(ctx, inputs, attrs)
            except GpuError:
                raise
        return run

    def to_device(self, value):
        """float32 arrays go to the GPU; everything else (integer shapes, strings...) stays
        on the host, as do tensors larger than the adapter can bind."""
        if host_values.is_host_tensor(value) and host_values.elem_type(value) == dtypes.FLOAT:
            limit = getattr(self.gpu.device, "max_binding_size", None)
            if limit is None or 4 * host_values.element_count(value) <= limit:
                return self.gpu.upload(value)
        return value

    def to_host(self, value):
        if isinstance(value, GpuTensor):
            return self.gpu.download(value)
        return value

    def end_run(self) -> None:
        self.gpu.flush()
