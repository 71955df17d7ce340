"""What the JavaScript API (web/index.js) calls inside Pyodide.

Values cross as (type, dims, bytes) with onnxruntime-web's type names ("float32", "int64",
...), so nothing here needs numpy: Pyodide here has none, and the wasm and WebGPU providers
keep tensors in their own memory. A string tensor crosses as (type "string", dims, a list of
str): a HostTensor of strings on this side, onnxruntime-web's string Tensor on the other.

GPU buffers (onnxruntime-web's `preferredOutputLocation: "gpu-buffer"` and
`Tensor.fromGpuBuffer` feeds) cross as (type, dims, GPUBuffer, "gpu-buffer"): an output
named in `gpu_outputs` stays on the GPU in a new buffer the page owns; a float32, int32 or
uint32 feed in a GPU buffer is read in place. The run then goes through an IOBinding, so the
executor plans those values on the WebGPU device instead of copying them to the host.

Python custom operators (edgerun.custom_ops) registered in this Pyodide are enabled in every
session: in a page, running their source (the JavaScript API's registerCustomOps) is the
opt-in that SessionOptions.register_custom_ops_library is in Python.
"""
from __future__ import annotations

from typing import Optional

import gc
import importlib
import pkgutil

from ..custom_ops import get_library_path
from ..ir import dtypes
from ..ir.host_tensor import HostTensor, have_numpy
from ..session import InferenceSession, RunOptions, SessionOptions
from ..session.ort_value import OrtValue

GPU_BUFFER = "gpu-buffer"

# onnxruntime-web's Tensor type names <-> ONNX element types
WEB_TYPES = {"float32": dtypes.FLOAT, "float64": dtypes.DOUBLE, "float16": dtypes.FLOAT16,
             "int8": dtypes.INT8, "uint8": dtypes.UINT8, "int16": dtypes.INT16,
             "uint16": dtypes.UINT16, "int32": dtypes.INT32, "uint32": dtypes.UINT32,
             "int64": dtypes.INT64, "uint64": dtypes.UINT64, "bool": dtypes.BOOL,
             "string": dtypes.STRING, "int4": dtypes.INT4, "uint4": dtypes.UINT4}
_WEB_NAME = {code: name for name, code in WEB_TYPES.items()}
_BY_TYPE_STR = {t.type_str: t.code for t in dtypes.BY_CODE.values()}
MAX_TICKETS = 8    # recorded programs a page replays itself, per session (replay_ticket)
_LEVELS = {"disabled": 0, "basic": 1, "extended": 2, "all": 99}
# Never imported by a page's session: command-line tools, packaging, the numpy CPU provider
# and the phone adapters.
_NOT_PRELOADED = ("edgerun.tools", "edgerun.pack", "edgerun.cli", "edgerun.__main__",
                  "edgerun.providers.cpu", "edgerun.providers.coreml", "edgerun.providers.nnapi",
                  "edgerun.providers.qnn")


def preload(package: str = "edgerun") -> list:
    """Import every engine module a page's session may import, so that a start-up snapshot
    taken after this (scripts/make_snapshot.mjs) holds them compiled. Modules that cannot
    import here (they need numpy or a native library) are skipped; returns their names."""
    if package == "edgerun":
        from ..ir.op_types import op_types
        from ..providers.wasm.build_info import load_module_bytes
        load_module_bytes()          # read and checked once: a restored page has it in memory
        op_types()                   # the type table, parsed once (~70 KB of JSON)
    skipped = []
    for module in pkgutil.iter_modules(importlib.import_module(package).__path__, package + "."):
        if module.name.startswith(_NOT_PRELOADED):
            continue
        try:
            importlib.import_module(module.name)
        except ImportError:
            skipped.append(module.name)
            continue
        if module.ispkg:
            skipped += preload(module.name)
    return skipped


class WebSession:
    def __init__(self, model: bytes, providers: list, graph_optimization_level: str = "all",
                 gpu_outputs=()):
        opts = SessionOptions()
        level = _LEVELS.get(str(graph_optimization_level))
        if level is None:
            raise ValueError(f"graphOptimizationLevel must be one of {sorted(_LEVELS)}, got "
                             f"'{graph_optimization_level}'")
        opts.graph_optimization_level = level
        opts.register_custom_ops_library(get_library_path())
        self.session = InferenceSession(as_bytes(model), sess_options=opts,
                                        providers=list(providers) or None)
        self.input_names = [a.name for a in self.session.get_inputs()]
        self.output_names = [a.name for a in self.session.get_outputs()]
        self.webgpu = next((p for p in self.session._providers if p.device == "webgpu"), None)
        self.gpu_outputs = set(self._numeric_outputs() if gpu_outputs == "all" else
                               (gpu_outputs or ()))
        unknown = sorted(self.gpu_outputs - set(self.output_names))
        if unknown:
            raise ValueError(f"preferredOutputLocation names {unknown}, which are not outputs "
                             f"of the model ({self.output_names})")
        self._tickets: list = []     # the programs replay_ticket handed to the page
        if self.gpu_outputs and self.webgpu is None:
            raise ValueError(f"preferredOutputLocation '{GPU_BUFFER}' needs the webgpu "
                             f"execution provider; this session runs on "
                             f"{self.session.get_providers()}")

    def release(self) -> None:
        """InferenceSession.release() in the page: device memory the providers hold for the
        session (its weights, a captured graph's pinned GPU buffers) is freed now, not at the
        next garbage collection. The session lives in reference cycles, so its buffers only
        return to the pool once collected; the pool then gives the free ones back to the
        GPU (the next session allocates its own sizes)."""
        for provider in self.session._providers:
            provider.release()
        gpu = self.webgpu.gpu if self.webgpu is not None else None
        self.session = self.webgpu = None      # type: ignore[assignment]
        self._tickets = []
        if gpu is not None:
            gc.collect()
            gpu.pool.trim()

    def _numeric_outputs(self) -> list:
        """The outputs a GPU buffer can hold: every tensor output but strings."""
        return [a.name for a in self.session.get_outputs()
                if a.type.startswith("tensor(") and a.type != "tensor(string)"]

    def gpu_device(self):
        """The GPUDevice the WebGPU provider computes on (onnxruntime-web's env.webgpu.device),
        or None."""
        return getattr(self.webgpu.gpu.device, "device", None) if self.webgpu else None

    def metadata(self) -> dict:
        def describe(args):
            return [{"name": a.name, "type": a.type, "shape": a.shape} for a in args]
        return {"inputs": describe(self.session.get_inputs()),
                "outputs": describe(self.session.get_outputs()),
                "providers": self.session.get_providers()}

    def describe(self) -> dict:
        """What the JavaScript InferenceSession keeps: names, onnxruntime-web style metadata
        ({name, isTensor, type, shape}, symbolic dims as their names or null) and placement."""
        def meta(args):
            return [{"name": a.name, "isTensor": a.type.startswith("tensor("),
                     "type": _web_type(a.type), "shape": list(a.shape or [])} for a in args]
        return {"inputNames": self.input_names, "outputNames": self.output_names,
                "inputMetadata": meta(self.session.get_inputs()),
                "outputMetadata": meta(self.session.get_outputs()),
                "explain": self.session.explain(), "webgpu": self.webgpu is not None}

    def run(self, feeds: list, output_names: Optional[list] = None, signal=None) -> list:
        """feeds: [(name, type, dims, bytes or strs)] -> the same for the outputs; `signal`: a
        JavaScript AbortSignal whose abort stops the run before its next node."""
        names = list(output_names) if output_names else self.output_names
        options = _SignalRunOptions(signal) if signal is not None else None
        feeds = [tuple(item) for item in feeds]
        if self.gpu_outputs.intersection(names) or any(len(item) > 4 for item in feeds):
            return self._run_bound(feeds, names, options)
        outputs = self.session.run(names, _host_values(feeds), options)
        return [(name, *_from_host(name, value)) for name, value in zip(names, outputs)]

    def replay_ticket(self, feeds: list) -> Optional[dict]:
        """What web/engine.js needs to replay this run's recorded wasm program itself, with
        no call into Python: the module's exports, the program's word list, and where each
        input is written and each output read in linear memory. None unless the session's
        plan is one captured program (providers/wasm/capture.py) that these feeds (a run
        with them just finished) recorded.

        The program is kept alive here, so the blocks it owns stay valid while the page
        holds the ticket (at most MAX_TICKETS per session). A run the page replays is the
        same computation as one Python replays: the same words on the same blocks."""
        steps = self.session._executor.plan.steps
        if len(steps) != 1 or self.session._profiler or len(self._tickets) >= MAX_TICKETS:
            return None
        step = steps[0]
        program_for = getattr(step.fn, "program_for", None)
        if program_for is None:
            return None
        values = _host_values(feeds)
        inputs = [values.get(name) if name else None for name in step.node.inputs]
        program = program_for(inputs)
        if program is None or program in self._tickets or \
                any(dtypes.elem_type(t.elem_type).bits < 8 for t in program.outputs):
            return None
        self._tickets.append(program)
        return {"exports": program.dev.host.exports, "words": program.words_ptr,
                "nwords": program.nwords,
                "inputs": [None if t is None else
                           {"name": name, "type": _web_name(name, t.elem_type),
                            "dims": list(t.shape), "ptr": t.ptr, "nbytes": t.nbytes,
                            "ints": None if t.ints is None else bytes(values[name].data)}
                           for name, t in zip(step.node.inputs, program.inputs)],
                "outputs": [{"name": name, "type": _web_name(name, t.elem_type),
                             "dims": list(t.shape), "ptr": t.ptr, "nbytes": t.nbytes}
                            for name, t in zip(step.node.outputs, program.outputs)]}

    def kernels_module(self):
        """The wasm kernels' module bytes the tickets' programs run on (a JavaScript
        Uint8Array), for web/kept.js to keep with the memory it restores; None before the
        first ticket."""
        if not self._tickets:
            return None
        from pyodide.ffi import to_js
        return to_js(self._tickets[0].dev.module_bytes)

    def _run_bound(self, feeds: list, names: list, options) -> list:
        """A run with GPU-buffer feeds or outputs, through an IOBinding."""
        binding = self.session.io_binding()
        for name, type_name, dims, data, *location in feeds:
            if location:
                value = OrtValue(self._adopt(name, type_name, dims, data), "webgpu", self.webgpu)
            else:
                value = OrtValue(_to_host(name, type_name, dims, data))
            binding.bind_ortvalue_input(name, value)
        for name in names:
            binding.bind_output(name, "webgpu" if name in self.gpu_outputs else "cpu")
        self.session.run_with_iobinding(binding, options)
        results = []
        for name, value in zip(names, binding.get_outputs()):
            if name in self.gpu_outputs:
                code = value.element_type()
                assert self.webgpu is not None     # gpu_outputs are only set with it
                buffer = self.webgpu.gpu.export(value._value, code)
                results.append((name, _web_name(name, code), value.shape(), buffer, GPU_BUFFER))
            else:
                results.append((name, *_from_host(name, value.numpy())))
        return results

    def _adopt(self, name, type_name, dims, buffer):
        """A feed's GPUBuffer as the WebGPU provider's tensor, read in place."""
        if self.webgpu is None:
            raise TypeError(f"input '{name}' is a GPU buffer, and this session has no webgpu "
                            f"execution provider ({self.session.get_providers()}): pass it "
                            f"as a CPU tensor (await tensor.getData())")
        code = WEB_TYPES.get(type_name)
        try:
            return self.webgpu.gpu.adopt(buffer, int(buffer.size), dims, code)
        except Exception as e:         # noqa: BLE001 - named for the input
            raise TypeError(f"input '{name}': {e}") from None

    def explain(self) -> dict:
        return self.session.explain()


def as_bytes(data) -> bytes:
    """Python bytes of a bytes-like value or a JavaScript typed array (a Pyodide JsProxy),
    copied in one block: bytes() on a JsProxy would walk it element by element."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    to_bytes = getattr(data, "to_bytes", None)       # pyodide.ffi.JsBuffer
    return to_bytes() if callable(to_bytes) else bytes(data)


def _web_type(onnx_type: str) -> str:
    """"tensor(float)" -> "float32"; other kinds (sequences, maps) as ONNX spells them."""
    if onnx_type.startswith("tensor(") and onnx_type.endswith(")"):
        code = _BY_TYPE_STR.get(onnx_type[7:-1])
        if code in _WEB_NAME:
            return _WEB_NAME[code]
    return onnx_type


def _host_values(feeds: list) -> dict:
    """name -> host value of feeds [(name, type, dims, bytes or strs)]."""
    return {name: _to_host(name, type_name, dims, data)
            for name, type_name, dims, data in feeds}


def _to_host(name, type_name, dims, data):
    code = WEB_TYPES.get(type_name)
    if code is None:
        raise TypeError(f"input '{name}': unsupported tensor type '{type_name}'")
    if code == dtypes.STRING:
        strings = _strings(data)
        bad = next((i for i, s in enumerate(strings) if not isinstance(s, str)), None)
        if bad is not None:
            raise TypeError(f"input '{name}': a string tensor holds strings; element {bad} is "
                            f"{type(strings[bad]).__name__}")
        tensor = HostTensor(code, dims, strings)
    else:
        tensor = HostTensor(code, dims, as_bytes(data))
    return tensor.numpy() if have_numpy() else tensor


def _strings(data) -> list:
    """A string tensor's elements: a Python list, or a JavaScript array (a JsProxy)."""
    to_py = getattr(data, "to_py", None)
    return list(to_py() if callable(to_py) else data)


def _from_host(name, value):
    if isinstance(value, HostTensor):
        if value.elem_type == dtypes.STRING:
            return "string", list(value.shape), list(value.data)
        return _web_name(name, value.elem_type), list(value.shape), bytes(value.data)
    from ..ir.tensor_numpy import numpy_to_tensor

    t = numpy_to_tensor(value, name)
    if t.elem_type == dtypes.STRING:
        return "string", list(t.dims), [s.decode("utf-8", errors="surrogateescape")
                                        for s in (t.strings or [])]
    return _web_name(name, t.elem_type), list(t.dims), t.raw


def _web_name(name, code) -> str:
    web = _WEB_NAME.get(code)
    if web is None:
        raise TypeError(f"output '{name}': {dtypes.type_string(code)} has no onnxruntime-web "
                        f"Tensor type")
    return web


class _SignalRunOptions(RunOptions):
    """RunOptions whose terminate is an AbortSignal's aborted (read at each check)."""

    def __init__(self, signal):
        super().__init__()
        self._signal = signal

    @property
    def terminate(self) -> bool:
        return bool(self._signal.aborted)

    @terminate.setter
    def terminate(self, value) -> None:
        pass                    # RunOptions.__init__ sets it; the signal decides
