"""Calibration: the ranges of a model's float tensors over a reader's batches, computed by
running the model in edgerun (the tensors added as graph outputs), as onnxruntime's
MinMaxCalibrater computes them with ReduceMin/ReduceMax nodes in onnxruntime.
"""
from __future__ import annotations

from typing import Any, Optional

import abc
import copy
import math

from .. import ir
from ..ir import dtypes
from . import arith
from .quant_types import CalibrationMethod


class CalibrationDataReader(metaclass=abc.ABCMeta):
    """onnxruntime's reader: get_next() returns one feed dict (input name -> array) per call,
    then None. rewind() (optional) starts again from the first batch."""

    @classmethod
    def __subclasshook__(cls, subclass):
        return (hasattr(subclass, "get_next") and callable(subclass.get_next)) or NotImplemented

    @abc.abstractmethod
    def get_next(self) -> dict:
        raise NotImplementedError

    def rewind(self) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not implement rewind()")

    def __iter__(self):
        return self

    def __next__(self):
        result = self.get_next()
        if result is None:
            raise StopIteration
        return result

    def __len__(self):
        raise NotImplementedError

    def set_range(self, start_index: int, end_index: int):
        raise NotImplementedError


class TensorData:
    """A tensor's calibrated range: lowest, highest (float32 values as Python floats)."""

    def __init__(self, lowest: float, highest: float):
        self.lowest = lowest
        self.highest = highest

    @property
    def range_value(self) -> tuple:
        return self.lowest, self.highest

    def __repr__(self):
        return f"TensorData(lowest={self.lowest!r}, highest={self.highest!r})"


class TensorsData:
    def __init__(self, calibration_method, data: dict):
        self.calibration_method = calibration_method
        self.data = {k: v if isinstance(v, TensorData) else TensorData(*v)
                     for k, v in data.items()}

    def __iter__(self):
        return iter(self.data)

    def __contains__(self, key):
        return key in self.data

    def __getitem__(self, key):
        return self.data[key]

    def __setitem__(self, key, value):
        self.data[key] = value if isinstance(value, TensorData) else TensorData(*value)

    def keys(self):
        return self.data.keys()

    def values(self):
        return self.data.values()

    def items(self):
        return self.data.items()


def value_types(model: ir.Model) -> dict:
    """name -> element type of every tensor of the main graph whose type is known: declared
    (inputs, outputs, value_info), initializers, and edgerun's shape inference."""
    from ..shape_inference import infer_shapes

    g = model.graph
    types: dict = {}
    inferred: Any
    try:
        inferred = infer_shapes(model)
    except Exception:     # noqa: BLE001 - inference failed: the declared types only
        inferred = {}
    for name, t in inferred.items():
        if t is not None and t.kind == "tensor" and t.elem_type:
            types[name] = t.elem_type
    for v in list(g.value_info) + list(g.outputs) + list(g.inputs):
        if v.type is not None and v.type.kind == "tensor" and v.type.elem_type:
            types[v.name] = v.type.elem_type
    for name, t in g.initializers.items():
        types[name] = t.elem_type
    return types


class MinMaxCalibrater:
    """onnxruntime's MinMaxCalibrater over an edgerun session: the inputs and outputs of the
    nodes whose type is in `op_types_to_calibrate` (all nodes when empty) that are float
    tensors and not initializers."""

    def __init__(self, model: ir.Model, op_types_to_calibrate=None, symmetric=False,
                 moving_average=False, averaging_constant=0.01, providers=None,
                 types: dict | None = None):
        if moving_average and not 0 <= averaging_constant <= 1:
            raise ValueError("Invalid averaging constant, which should not be < 0 or > 1.")
        self.model = model
        self.op_types = set(op_types_to_calibrate or [])
        self.symmetric = symmetric
        self.moving_average = moving_average
        self.averaging_constant = averaging_constant
        self.providers = providers
        self.types = types if types is not None else value_types(model)
        self.tensors = self.select_tensors_to_calibrate()
        self.batches: list = []           # per batch: {name: (min, max)}
        self.calibrate_tensors_range: Optional[TensorsData] = None
        self._session: Any = None

    def select_tensors_to_calibrate(self) -> list:
        g = self.model.graph
        out: dict = {}
        for n in g.nodes:
            if self.op_types and n.op_type not in self.op_types:
                continue
            for name in list(n.inputs) + list(n.outputs):
                if (name and name not in g.initializers
                        and self.types.get(name) == dtypes.FLOAT):
                    out[name] = None
        return list(out)

    def _create_session(self):
        from .. import GraphOptimizationLevel, InferenceSession, SessionOptions
        from ..onnx.writer import model_to_bytes

        augmented = copy.copy(self.model)
        g = copy.copy(self.model.graph)
        augmented.graph = g
        declared = {v.name for v in g.outputs} | {v.name for v in g.inputs}
        g.outputs = list(g.outputs) + [
            ir.ValueInfo(name=name, type=ir.TypeInfo(elem_type=dtypes.FLOAT))
            for name in self.tensors if name not in declared]
        providers = self.providers
        if providers is None:        # numpy's CPU provider, or where numpy is absent wasm
            providers = ["cpu"] if arith.numpy_or_none() is not None else ["wasm"]
        options = SessionOptions()
        options.graph_optimization_level = GraphOptimizationLevel.ORT_DISABLE_ALL
        self._session = InferenceSession(model_to_bytes(augmented), sess_options=options,
                                         providers=providers)
        self._output_names = [o.name for o in self._session.get_outputs()]
        self._input_names = {i.name for i in self._session.get_inputs()}

    def collect_data(self, data_reader) -> None:
        if self._session is None:
            self._create_session()
        count = 0
        while True:
            feeds = data_reader.get_next()
            if not feeds:
                break
            count += 1
            values = dict(zip(self._output_names, self._session.run(None, feeds)))
            batch = {}
            for name in self.tensors:
                value = feeds.get(name) if name in feeds else values.get(name)
                if value is not None:
                    batch[name] = _value_min_max(value)
            self.batches.append(batch)
        if not count and self.calibrate_tensors_range is None:
            raise ValueError("No data is collected.")
        self.compute_data()
        self.batches = []

    def compute_data(self) -> Optional[TensorsData]:
        if not self.batches:
            return self.calibrate_tensors_range
        pairs = {}
        for name in self.tensors:
            seen = [b[name] for b in self.batches if b.get(name) is not None]
            if not seen:
                continue
            if self.moving_average:
                lo = arith.f32(_nanmean([s[0] for s in seen]))
                hi = arith.f32(_nanmean([s[1] for s in seen]))
            else:
                lo = _nan_reduce(min, [s[0] for s in seen])
                hi = _nan_reduce(max, [s[1] for s in seen])
            if self.symmetric:
                m = max(abs(lo), abs(hi))
                lo, hi = -m, m
            pairs[name] = (lo, hi)
        new = TensorsData(CalibrationMethod.MinMax, pairs)
        if self.calibrate_tensors_range is None:
            self.calibrate_tensors_range = new
        else:
            old = self.calibrate_tensors_range
            for name, td in new.items():
                if name not in old:
                    continue
                (olo, ohi), (nlo, nhi) = old[name].range_value, td.range_value
                if self.moving_average:
                    a = self.averaging_constant
                    new[name] = (arith.f32(olo + a * (nlo - olo)),
                                 arith.f32(ohi + a * (nhi - ohi)))
                else:
                    new[name] = (min(olo, nlo), max(ohi, nhi))
            self.calibrate_tensors_range = new
        return self.calibrate_tensors_range


EMPTY = (float("inf"), float("-inf"))      # ReduceMin / ReduceMax of an empty tensor


def _value_min_max(value):
    """(min, max) of a float tensor: a numpy array, an edgerun HostTensor or OrtValue (None
    when it is not a float32 tensor)."""
    if getattr(value, "elem_type", None) is not None and hasattr(value, "data"):
        if value.elem_type != dtypes.FLOAT:                         # a HostTensor
            return None
        if not value.size:
            return EMPTY
        return arith.min_max(arith.floats(value.data))
    if hasattr(value, "numpy") and not hasattr(value, "dtype"):
        value = value.numpy()                # OrtValue
    if hasattr(value, "dtype"):
        np = arith.numpy_or_none()
        arr = np.asarray(value)
        if arr.dtype != np.float32:
            return None
        if arr.size == 0:
            return EMPTY
        return arith.min_max(arr.reshape(-1))
    return None


def _nan_reduce(fn, values):
    clean = [v for v in values if not math.isnan(v)]
    return fn(clean) if clean else float("nan")


def _nanmean(values):
    clean = [v for v in values if not math.isnan(v)]
    return sum(clean) / len(clean) if clean else float("nan")
