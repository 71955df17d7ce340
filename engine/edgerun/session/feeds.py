"""Checks on what `run()` is given: names, dtypes, ranks and fixed dims, with messages that
say which input, what was expected and what was got."""
from __future__ import annotations

from typing import Optional

from .. import ir
from ..errors import InvalidArgument
from ..ir import dtypes
from ..ir.host_tensor import HostTensor
from .ort_value import OrtValue


class _Shaped:
    """What _check_shape reads (shape, ndim) of a value that is not an array."""

    def __init__(self, shape):
        self.shape = tuple(shape)
        self.ndim = len(self.shape)


class FeedChecker:
    """`check_feeds` for one session's inputs, with what it needs computed once: numpy
    arrays that already have an input's exact dtype, rank and fixed dims pass in a few
    comparisons (the per-run cost matters on models that run in a fraction of a ms)."""

    def __init__(self, inputs: list, overridable: list):
        self.inputs = inputs
        self.by_name = {v.name: v for v in inputs}
        self.overridable = {v.name for v in overridable}
        self.exact = {}          # name -> (numpy dtype, rank, ((axis, dim), ...))
        self.ndarray = None
        try:
            from numpy import ndarray
        except ImportError:      # Pyodide without numpy: HostTensors take the full check
            return
        self.ndarray = ndarray
        for v in inputs:
            spec = _exact_spec(v.type)
            if spec is not None:
                self.exact[v.name] = spec

    def __call__(self, feeds: dict) -> dict:
        """The checked feeds. Each numpy array is handed on as a new view of its memory: a
        kernel or a remembered result keyed by an input's identity (weights prepared once,
        shape_memo) must not take a caller's array, refilled in place between runs, for the
        same value."""
        if type(feeds) is dict and self.exact:
            out = {}
            for name, value in feeds.items():
                spec = self.exact.get(name)
                if spec is None or type(value) is not self.ndarray or not _matches(value, spec):
                    break
                out[name] = value.view()
            else:
                if len(out) == len(self.exact) == len(self.inputs):
                    return out
        checked = check_feeds(feeds, self.inputs, self.overridable, self.by_name)
        for name, value in checked.items():
            if self.ndarray is not None and type(value) is self.ndarray:
                checked[name] = value.view()
        return checked


def _exact_spec(t):
    if t is None or t.kind != "tensor" or not t.elem_type or t.shape is None or \
            t.elem_type == dtypes.STRING:
        return None
    try:
        dtype = dtypes.numpy_dtype(t.elem_type)
    except Exception:   # noqa: BLE001 - no numpy (Pyodide) or no such dtype: the full check
        return None
    fixed = tuple((axis, d) for axis, d in enumerate(t.shape) if isinstance(d, int) and d >= 0)
    return dtype, len(t.shape), fixed


def _matches(value, spec) -> bool:
    dtype, rank, fixed = spec
    if value.dtype != dtype or value.ndim != rank:
        return False
    shape = value.shape
    for axis, d in fixed:        # a loop: all() over a generator costs more at these sizes
        if shape[axis] != d:
            return False
    return True


def check_feeds(feeds: dict, inputs: list, overridable: set,
                by_name: Optional[dict] = None) -> dict:
    """Validated feeds as numpy values; `inputs` are the model's ValueInfo inputs."""
    if not isinstance(feeds, dict):
        raise InvalidArgument(f"input_feed must be a dict of name -> array, got "
                              f"{type(feeds).__name__}")
    by_name = by_name or {v.name: v for v in inputs}
    out = {name: check_feed(name, value, by_name, overridable, inputs)
           for name, value in feeds.items()}
    missing = [v for v in inputs if v.name not in out and v.name not in overridable]
    missing = [v for v in missing if not (v.type and v.type.kind == "optional")]
    if missing:
        v = missing[0]
        raise InvalidArgument(f"missing input '{v.name}' ({_describe(v.type)}); "
                              f"the model needs {_names(inputs)}")
    return out


def check_feed(name: str, value, by_name: dict, overridable: set, inputs: list):
    """One validated feed: `by_name` maps the model's input names to their ValueInfo. An
    OrtValue (IO binding) is checked by element type and shape and returned as is."""
    if name not in by_name:
        if name in overridable:
            if isinstance(value, OrtValue):
                value = value.numpy()
            return value if isinstance(value, HostTensor) else _numpy().asarray(value)
        raise InvalidArgument(f"unknown input '{name}'; the model's inputs are "
                              f"{_names(inputs)}")
    return _check_value(name, value, by_name[name].type)


def _check_value(name: str, value, t: Optional[ir.TypeInfo]):
    if t is None or t.kind in ("undefined", "opaque", "map"):
        return value
    if t.kind == "optional":
        return None if value is None else _check_value(name, value, t.elem)
    if t.kind == "sequence":
        if not isinstance(value, (list, tuple)):
            raise InvalidArgument(f"input '{name}': expected {t.type_string()} (a list of "
                                  f"arrays), got {type(value).__name__}")
        return [_check_value(f"{name}[{i}]", v, t.elem) for i, v in enumerate(value)]
    if value is None:
        raise InvalidArgument(f"input '{name}': expected {_describe(t)}, got None")
    if isinstance(value, (HostTensor, OrtValue)):
        code = value.element_type() if isinstance(value, OrtValue) else value.elem_type
        if t.elem_type and code != t.elem_type:
            raise InvalidArgument(f"input '{name}': expected {dtypes.type_string(t.elem_type)}, "
                                  f"got {dtypes.type_string(code)}")
        _check_shape(name, _Shaped(value.shape() if isinstance(value, OrtValue)
                                   else value.shape), t.shape)
        return value
    arr = _as_array(name, value, t.elem_type)
    _check_dtype(name, arr, t.elem_type)
    _check_shape(name, arr, t.shape)
    return arr


def _numpy():
    try:
        import numpy
    except ImportError:
        raise InvalidArgument("numpy is not installed: pass inputs as edgerun HostTensor "
                              "values") from None
    return numpy


def _as_array(name, value, elem_type):
    np = _numpy()
    if isinstance(value, np.ndarray):
        return value
    try:
        if elem_type == dtypes.STRING:
            return np.asarray(value, dtype=object)
        if not elem_type:                  # the file leaves the type unset: take the value's
            return np.asarray(value)
        return np.asarray(value, dtype=dtypes.numpy_dtype(elem_type))
    except (TypeError, ValueError) as e:
        raise InvalidArgument(f"input '{name}': cannot convert {type(value).__name__} to "
                              f"{dtypes.type_string(elem_type)}: {e}") from None


_CODES: dict = {}    # numpy dtype -> ONNX element type, filled as feeds arrive


def _check_dtype(name, arr, elem_type):
    if not elem_type:
        return
    got = _CODES.get(arr.dtype)
    if got is None:
        got = _code_of(name, arr, elem_type)
        if got != dtypes.STRING:      # string dtypes differ per length: not worth keeping
            _CODES[arr.dtype] = got
    if got != elem_type:
        raise InvalidArgument(f"input '{name}': expected {dtypes.type_string(elem_type)}, "
                              f"got {dtypes.type_string(got)} (numpy {arr.dtype})")


def _code_of(name, arr, elem_type) -> int:
    if arr.dtype.kind in "OUS":
        got = dtypes.STRING
    else:
        try:
            got = dtypes.code_of_numpy(arr.dtype)
        except (KeyError, ValueError):
            raise InvalidArgument(f"input '{name}': expected {dtypes.type_string(elem_type)}, "
                                  f"got unsupported numpy dtype {arr.dtype}") from None
    return got


def _check_shape(name, arr, shape):
    if shape is None:
        return
    if arr.ndim != len(shape):
        raise InvalidArgument(f"input '{name}': expected rank {len(shape)} "
                              f"{_shape_text(shape)}, got rank {arr.ndim} {list(arr.shape)}")
    for axis, (want, got) in enumerate(zip(shape, arr.shape)):
        if isinstance(want, int) and want >= 0 and want != got:
            raise InvalidArgument(f"input '{name}': dimension {axis} must be {want} "
                                  f"{_shape_text(shape)}, got {got} {list(arr.shape)}")


def _shape_text(shape) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def _describe(t) -> str:
    if t is None:
        return "unknown type"
    if t.kind == "tensor" and t.shape is not None:
        return f"{t.type_string()} {_shape_text(t.shape)}"
    return t.type_string()


def _names(values) -> str:
    return ", ".join(f"'{v.name}'" for v in values) or "(none)"
