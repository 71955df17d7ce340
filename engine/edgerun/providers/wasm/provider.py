"""The WebAssembly CPU provider: SIMD128 kernels (wasm_kernels/*.c, one .wasm) on tensors
that live in the module's linear memory.

Natively the module runs under wasmtime (tests, servers); inside Pyodide (sys.platform
"emscripten") the same module runs in the JS engine's own WebAssembly (host_js.py), behind
the same five host operations (host.py).
Operators and what they accept are in ops/; `capability` reports the precise reason for
anything refused, and the CPU provider takes it. Where numpy is absent (Pyodide, and the
numpy-free native path), a model the provider runs whole is captured (capture.py): after the
first run of each input signature, a run is one recorded program. Provider option
`graph_capture` (default True) turns that off. With numpy the CPU provider is the faster
choice anyway, and host copies are numpy arrays that a recording cannot follow.
"""
from __future__ import annotations

from typing import Optional

import sys

from ... import custom_ops
from ...errors import KernelRefused
from ..base import ExecutionProvider
from . import capture, ops
from .build_info import StaleBuild, load_module_bytes
from .device import WasmDevice, WasmTensor
from .host import WasmtimeHost, wasmtime_available
from .host_js import JsHost, js_available
from .ops.common import HOST_VALUES, refuse
from ...ir.walk import subgraphs
from ...ir.host_tensor import HostTensor
from ...runtime.attributes import kernel_attributes
from ...runtime.kernel_context import KernelContext


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

    def __init__(self, options: Optional[dict] = None, host_factory=None):
        super().__init__(options)
        self.dev = WasmDevice(host_factory or self.default_host())
        self._constants: dict = {}     # id(initializer bytes) -> [those bytes, device copy]
        self._custom_ops = False       # SessionOptions.register_custom_ops_library was called

    def configure(self, sess_options) -> None:
        self._custom_ops = custom_ops.enabled(sess_options)

    @property
    def stats(self) -> dict:
        """Nodes whose inputs the kernels refused at run time (their element type), run by
        the next provider instead; memory; programs recorded, replayed and refused (with the
        reason)."""
        return {"host_fallbacks": dict(self.dev.fallbacks),
                "bytes_in_use": self.dev.bytes_in_use(),
                "programs": {k: dict(v) if isinstance(v, dict) else v
                             for k, v in self.dev.programs.items()}}

    def prepare_model(self, model, ahead: tuple = ()) -> None:
        # keyed by the bytes object and what it holds: equal short bytes objects are one
        # object in CPython (b"\x00" is shared by an int8 and a uint8 zero point)
        self._constants = {(id(t.raw), t.elem_type, tuple(t.dims)): [t.raw, None]
                           for t in _initializers(model.graph)}
        if self.options.get("graph_capture", True) and not self.dev.numpy:
            capture.capture(model, self, ahead)

    def capability(self, node, opset) -> tuple:
        if self._custom_op(node) is not None:
            return True, ""
        entry = ops.lookup(node.op_type, node.domain)
        if entry is None:
            return False, (custom_ops.refusal(node) or
                           f"no wasm kernel for {node.domain or 'ai.onnx'}::{node.op_type}")
        why = entry[0](node, opset)
        return (not why), why

    def _custom_op(self, node):
        return custom_ops.lookup(node.op_type, node.domain) if self._custom_ops else None

    def kernel(self, node, opset):
        custom = self._custom_op(node)
        if custom is not None:       # Python on host copies; string results stay there
            return custom.host_kernel(self.to_host, self.to_device)
        fast = ops.lookup(node.op_type, node.domain)[1](self.dev, node, opset)
        if node.op_type == capture.OP_TYPE and node.domain == capture.DOMAIN or \
                getattr(fast, HOST_VALUES, False):
            return fast                      # takes any values: a whole graph, sequences

        def run(ctx, *inputs, **attrs):
            for v in inputs:        # a value the kernels cannot hold stayed on the host
                if v is not None and type(v) is not WasmTensor:
                    refuse(node, *inputs)
            return fast(ctx, *inputs, **attrs)
        return run

    def refused(self, node, why) -> None:
        self.dev.fallbacks[node.op_type] = self.dev.fallbacks.get(node.op_type, 0) + 1

    def to_device(self, value):
        if type(value) is HostTensor:
            entry = self._constants.get((id(value.data), value.elem_type, tuple(value.shape)))
            if entry is not None and entry[0] is value.data:
                # an initializer an If/Loop body reads from its enclosing graph: the executor
                # copies it in every run; its bytes never change, so upload them once
                if entry[1] is None:
                    entry[1] = self.dev.upload(value)
                if self.dev.recorder is not None:
                    self.dev.recorder.hold(entry[1])
                return entry[1]
        if self.dev.recorder is not None:
            self.dev.recorder.copied_in(value)
        return self.dev.upload(value)

    def constant_to_device(self, value):
        """A weight, uploaded once at load: its block remembers the conversions kernels make
        of it (converted() in ops/common.py)."""
        t = self.to_device(value)
        if isinstance(t, WasmTensor):
            t.block.casts = {}
        return t

    def to_host(self, value):
        if isinstance(value, list):                      # a sequence
            return [self.to_host(v) for v in value]
        if not isinstance(value, WasmTensor):
            return value
        if self.dev.recorder is not None:
            return self.dev.recorder.download(value)      # read only if the host needs it
        return self.dev.download(value)


class NodeEvaluator:
    """Runs one node on host values (HostTensors) with the wasm kernels: constant folding's
    evaluator where numpy is absent (a page; providers.registry.constant_evaluator). Its
    module is instantiated on the first node it runs, so a model with nothing to fold pays
    nothing."""

    def __init__(self):
        self._provider = None

    def _ready(self) -> WasmProvider:
        if self._provider is None:
            self._provider = WasmProvider({"graph_capture": False})
        return self._provider

    def __call__(self, node, opset: int, args: list):
        provider = self._ready()
        ok, why = provider.capability(node, opset)
        if not ok:
            raise LookupError(why)
        kernel = provider.kernel(node, opset)
        inputs = [provider.to_device(a) if isinstance(a, HostTensor) else a for a in args]
        try:
            result = kernel(KernelContext(node, opset), *inputs,
                            **kernel_attributes(node.attributes))
        except KernelRefused as e:
            raise LookupError(str(e)) from None
        if isinstance(result, tuple):
            return tuple(provider.to_host(v) for v in result)
        return provider.to_host(result)

    def runs(self, node, opset: int) -> bool:
        """Whether a wasm kernel takes `node` at `opset`."""
        return self._ready().capability(node, opset)[0]


evaluate_node = NodeEvaluator()


def _initializers(graph):
    """Every initializer of `graph` and of the subgraphs of its nodes, recursively."""
    yield from graph.initializers.values()
    for node in graph.nodes:
        for g in subgraphs(node):
            yield from _initializers(g)
