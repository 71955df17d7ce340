"""The WebAssembly CPU provider: SIMD128 kernels (wasm_kernels/*.c, one .wasm) on tensors
that live in the module's linear memory.

Natively the module runs under wasmtime (tests, servers); inside Pyodide (sys.platform
"emscripten") the same module runs in the JS engine's own WebAssembly (host_js.py), behind
the same five host operations (host.py).
Operators and what they accept are in ops/; `capability` reports the precise reason for
anything refused, and the CPU provider takes it.
"""
from __future__ import annotations

import sys

from ..base import ExecutionProvider
from . import ops
from .build_info import StaleBuild, load_module_bytes
from .device import WasmDevice, WasmTensor
from .host import WasmtimeHost, wasmtime_available
from .host_js import JsHost, js_available
from .ops.common import host_fallback


class WasmProvider(ExecutionProvider):
    name = "wasm"
    ort_name = "WasmExecutionProvider"
    device = "wasm"

    @staticmethod
    def default_host():
        """The host for this interpreter: the JS engine's WebAssembly inside Pyodide,
        wasmtime elsewhere."""
        return JsHost if sys.platform == "emscripten" else WasmtimeHost

    @classmethod
    def available(cls) -> tuple:
        ok, why = js_available() if sys.platform == "emscripten" else wasmtime_available()
        if not ok:
            return ok, why
        try:
            load_module_bytes()
        except StaleBuild as e:
            return False, str(e)
        return True, ""

    def __init__(self, options: dict = None, host_factory=None):
        super().__init__(options)
        self.dev = WasmDevice(host_factory or self.default_host())

    @property
    def stats(self) -> dict:
        """Nodes run through the CPU kernel because of their element type, and memory."""
        return {"host_fallbacks": dict(self.dev.fallbacks),
                "bytes_in_use": self.dev.bytes_in_use()}

    def capability(self, node, opset) -> tuple:
        entry = ops.lookup(node.op_type, node.domain)
        if entry is None:
            return False, f"no wasm kernel for {node.domain or 'ai.onnx'}::{node.op_type}"
        why = entry[0](node, opset)
        return (not why), why

    def kernel(self, node, opset):
        fast = ops.lookup(node.op_type, node.domain)[1](self.dev, node, opset)
        slow = host_fallback(self.dev, node, opset)

        def run(ctx, *inputs, **attrs):
            for v in inputs:        # a value the kernels cannot hold stayed on the host
                if v is not None and type(v) is not WasmTensor:
                    return slow(ctx, *inputs, **attrs)
            return fast(ctx, *inputs, **attrs)
        return run

    def to_device(self, value):
        return self.dev.upload(value)

    def to_host(self, value):
        return self.dev.download(value) if isinstance(value, WasmTensor) else value
