"""What the JavaScript API (web/index.js) calls inside Pyodide.

Values cross as (type, dims, bytes) with onnxruntime-web's type names ("float32", "int64",
...), so nothing here needs numpy: Pyodide here has none, and the wasm and WebGPU providers
keep tensors in their own memory. A string tensor crosses as (type "string", dims, a list of
str): a HostTensor of strings on this side, onnxruntime-web's string Tensor on the other.
"""
from __future__ import annotations

from ..ir import dtypes
from ..runtime.host_tensor import HostTensor, have_numpy
from ..session import InferenceSession, RunOptions, SessionOptions

# onnxruntime-web's Tensor type names <-> ONNX element types
WEB_TYPES = {"float32": dtypes.FLOAT, "float64": dtypes.DOUBLE, "float16": dtypes.FLOAT16,
             "int8": dtypes.INT8, "uint8": dtypes.UINT8, "int16": dtypes.INT16,
             "uint16": dtypes.UINT16, "int32": dtypes.INT32, "uint32": dtypes.UINT32,
             "int64": dtypes.INT64, "uint64": dtypes.UINT64, "bool": dtypes.BOOL,
             "string": dtypes.STRING, "int4": dtypes.INT4, "uint4": dtypes.UINT4}
_WEB_NAME = {code: name for name, code in WEB_TYPES.items()}
_BY_TYPE_STR = {t.type_str: t.code for t in dtypes.BY_CODE.values()}
_LEVELS = {"disabled": 0, "basic": 1, "extended": 2, "all": 99}


class WebSession:
    def __init__(self, model: bytes, providers: list, graph_optimization_level: str = "all"):
        opts = SessionOptions()
        level = _LEVELS.get(str(graph_optimization_level))
        if level is None:
            raise ValueError(f"graphOptimizationLevel must be one of {sorted(_LEVELS)}, got "
                             f"'{graph_optimization_level}'")
        opts.graph_optimization_level = level
        self.session = InferenceSession(as_bytes(model), sess_options=opts,
                                        providers=list(providers) or None)
        self.input_names = [a.name for a in self.session.get_inputs()]
        self.output_names = [a.name for a in self.session.get_outputs()]

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
                "explain": self.session.explain()}

    def run(self, feeds: list, output_names: list = None, signal=None) -> list:
        """feeds: [(name, type, dims, bytes or strs)] -> the same for the outputs; `signal`: a
        JavaScript AbortSignal whose abort stops the run before its next node."""
        values = {name: _to_host(name, type_name, dims, data)
                  for name, type_name, dims, data in feeds}
        names = list(output_names) if output_names else self.output_names
        options = _SignalRunOptions(signal) if signal is not None else None
        outputs = self.session.run(names, values, options)
        return [(name, *_from_host(name, value)) for name, value in zip(names, outputs)]

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
