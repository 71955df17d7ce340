"""The NNAPI model form: what ANeuralNetworksModel_addOperand / setOperandValue /
addOperation / identifyInputsAndOutputs receive, as plain data that serializes to JSON.

Operands are numbered in the order they are added (NNAPI's operand index); an operation
lists its operation code and the indices of its input and output operands; scalar
parameters (padding, strides, fused activation, axis ...) are operands too, with lifetime
CONSTANT_COPY.
"""
from __future__ import annotations

from typing import Any

import base64
from dataclasses import dataclass, field

from ..edge_common import count_types
from . import spec


@dataclass
class Operand:
    type: str                   # an OPERAND_TYPES name, e.g. "TENSOR_FLOAT32", "INT32"
    dims: tuple = ()            # empty for scalars
    lifetime: str = "TEMPORARY_VARIABLE"
    value: Any = None           # numpy array or Python scalar when CONSTANT_COPY
    name: str = ""              # the ONNX value it carries, for reading dumps

    def to_json(self) -> dict:
        out = {"type": self.type, "type_code": spec.OPERAND_TYPES[self.type],
               "dimensions": list(self.dims), "lifetime": self.lifetime}
        if self.name:
            out["name"] = self.name
        if self.value is not None:
            if self.dims or hasattr(self.value, "tobytes"):
                out["value_base64"] = base64.b64encode(
                    self.value.astype(self.value.dtype.newbyteorder("<")).tobytes()).decode()
            else:
                out["value"] = self.value
        return out


@dataclass
class Operation:
    type: str                   # an OPERATIONS name, e.g. "CONV_2D"
    inputs: list
    outputs: list

    def to_json(self) -> dict:
        return {"type": self.type, "code": spec.code_of(self.type), "inputs": self.inputs,
                "outputs": self.outputs}


@dataclass
class NnapiModel:
    feature_level: int
    operands: list = field(default_factory=list)
    operations: list = field(default_factory=list)
    inputs: list = field(default_factory=list)        # operand indices, model input order
    outputs: list = field(default_factory=list)       # operand indices, model output order
    input_names: list = field(default_factory=list)   # the partition's ONNX input per input
    output_names: list = field(default_factory=list)
    input_positions: list = field(default_factory=list)  # index among the partition's inputs
    relax_float32_to_float16: bool = False

    def to_json(self) -> dict:
        return {"format": "edgerun.nnapi.model/1", "feature_level": self.feature_level,
                "operands": [o.to_json() for o in self.operands],
                "operations": [o.to_json() for o in self.operations],
                "inputs": self.inputs, "outputs": self.outputs,
                "input_names": self.input_names, "output_names": self.output_names,
                "relax_computation_float32_to_float16": self.relax_float32_to_float16}

    def operation_counts(self) -> dict:
        return count_types(self.operations)
