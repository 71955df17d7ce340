"""The QNN graph form: what QnnTensor_createGraphTensor and QnnGraph_addNode receive, as
plain data serializing to the JSON layout QNN's converters write next to model.cpp
("graph" -> "tensors" by name with id/type/dataType/dims, "nodes" by name with
package/type/input_names/output_names/tensor_params/scalar_params).
"""
from __future__ import annotations

from typing import Any

import base64
from dataclasses import dataclass, field

from ..edge_common import count_types
from . import spec


@dataclass
class QnnTensor:
    name: str
    id: int
    type: str                   # Qnn_TensorType_t name: APP_WRITE, APP_READ, NATIVE, STATIC
    data_type: str              # Qnn_DataType_t name
    dims: tuple
    data: Any = None            # numpy array when STATIC

    def to_json(self) -> dict:
        out = {"id": self.id, "type": spec.TENSOR_TYPES[f"QNN_TENSOR_TYPE_{self.type}"],
               "type_name": self.type, "dataType": spec.DATA_TYPES[self.data_type],
               "dataType_name": self.data_type, "dims": list(self.dims)}
        if self.data is not None:
            out["data_base64"] = base64.b64encode(self.data.tobytes()).decode()
        return out


@dataclass
class QnnParam:
    """A scalar param (value, data type) or a tensor param (a static numpy array)."""
    name: str
    value: Any
    data_type: str

    def to_json(self) -> dict:
        if hasattr(self.value, "shape"):
            return {"dataType": spec.DATA_TYPES[self.data_type], "dims": list(self.value.shape),
                    "data": self.value.reshape(-1).tolist()}
        return {self.data_type: self.value}


@dataclass
class QnnOp:
    name: str
    type: str
    inputs: list                # tensor names
    outputs: list
    params: list = field(default_factory=list)   # QnnParam
    package: str = spec.PACKAGE

    def param(self, name: str, default=None):
        for p in self.params:
            if p.name == name:
                return p.value
        return default

    def to_json(self) -> dict:
        tensors = {p.name: p.to_json() for p in self.params if hasattr(p.value, "shape")}
        scalars = {p.name: p.to_json() for p in self.params if not hasattr(p.value, "shape")}
        return {"package": self.package, "type": self.type, "input_names": self.inputs,
                "output_names": self.outputs, "tensor_params": tensors,
                "scalar_params": scalars}


@dataclass
class QnnGraph:
    name: str
    backend: str
    tensors: dict = field(default_factory=dict)     # name -> QnnTensor
    ops: list = field(default_factory=list)
    inputs: list = field(default_factory=list)      # tensor names, in graph-input order
    outputs: list = field(default_factory=list)
    input_positions: list = field(default_factory=list)
    fp16_precision: bool = False

    def to_json(self) -> dict:
        return {"format": "edgerun.qnn.graph/1", "op_package": spec.PACKAGE,
                "opset_version": spec.OPSET_VERSION, "backend": self.backend,
                "graph": {"name": self.name,
                          "tensors": {n: t.to_json() for n, t in self.tensors.items()},
                          "nodes": {op.name: op.to_json() for op in self.ops}},
                "inputs": self.inputs, "outputs": self.outputs,
                "htp_fp16_precision": self.fp16_precision}

    def op_counts(self) -> dict:
        return count_types(self.ops)
