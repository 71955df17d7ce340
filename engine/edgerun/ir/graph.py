"""The in-memory model: what the ONNX decoder produces and every later stage reads.

Plain dataclasses, no numpy: the core must import inside Pyodide without numpy.
Names follow ONNX's protobuf messages so the mapping is obvious.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Union

from . import dtypes

Dim = Union[int, str, None]  # a fixed size, a symbolic name, or unknown
# The domain of edgerun's own operators (the optimizer's fusions: FusedConv, ElementwiseProgram,
# QuantizeDequantize, ...), which saved models carry as a custom opset
EDGERUN_DOMAIN = "com.edgerun"


def element_count(dims) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


@dataclass
class TypeInfo:
    """An ONNX TypeProto: kind is tensor, sparse_tensor, sequence, map or optional."""

    kind: str = "tensor"
    elem_type: int = 0                      # tensor / sparse_tensor element type
    shape: Optional[tuple] = None           # tuple of Dim, or None when the rank is unknown
    elem: Optional["TypeInfo"] = None       # sequence / optional element, map value
    key_type: int = 0                       # map key element type
    denotation: str = ""

    def type_string(self) -> str:
        """onnxruntime's NodeArg.type spelling: tensor(float), seq(tensor(int64)), ..."""
        if self.kind == "tensor":
            return dtypes.type_string(self.elem_type) if self.elem_type else "tensor(undefined)"
        if self.kind == "sparse_tensor":
            return "sparse_" + dtypes.type_string(self.elem_type)
        if self.kind == "sequence":
            return f"seq({self.elem.type_string() if self.elem else 'undefined'})"
        if self.kind == "optional":
            return f"optional({self.elem.type_string() if self.elem else 'undefined'})"
        if self.kind == "map":
            key = dtypes.elem_type(self.key_type).type_str
            return f"map({key},{self.elem.type_string() if self.elem else 'undefined'})"
        return self.kind


@dataclass
class ValueInfo:
    name: str
    type: Optional[TypeInfo] = None
    doc_string: str = ""


@dataclass
class Tensor:
    """A constant tensor (initializer, Constant value, tensor attribute).

    Numeric data is kept as little-endian bytes in `raw` (sub-byte types packed two or
    four per byte, as ONNX stores them); strings as a list of bytes in `strings`.
    """

    name: str
    elem_type: int
    dims: tuple
    raw: bytes = b""
    strings: Optional[list] = None
    doc_string: str = ""
    external: Optional[dict] = None   # the external_data key/values it was read from, if any

    @property
    def size(self) -> int:
        return element_count(self.dims)

    def numpy(self):
        from .tensor_numpy import tensor_to_numpy

        return tensor_to_numpy(self)


@dataclass
class SparseTensor:
    values: Tensor
    indices: Tensor
    dims: tuple

    @property
    def name(self) -> str:
        return self.values.name


class AttrType:
    UNDEFINED, FLOAT, INT, STRING, TENSOR, GRAPH = 0, 1, 2, 3, 4, 5
    FLOATS, INTS, STRINGS, TENSORS, GRAPHS = 6, 7, 8, 9, 10
    SPARSE_TENSOR, SPARSE_TENSORS, TYPE_PROTO, TYPE_PROTOS = 11, 12, 13, 14


@dataclass
class Attribute:
    """One node attribute. STRING values are bytes (ONNX strings are bytes)."""

    name: str
    type: int
    value: Any = None
    ref_attr_name: str = ""     # inside a function body: take the caller's attribute
    doc_string: str = ""


@dataclass
class Node:
    op_type: str
    inputs: list
    outputs: list
    attributes: dict = field(default_factory=dict)   # name -> Attribute
    domain: str = ""
    name: str = ""
    doc_string: str = ""
    overload: str = ""

    def attr(self, name: str, default: Any = None) -> Any:
        a = self.attributes.get(name)
        return default if a is None else a.value


@dataclass
class Graph:
    name: str = ""
    nodes: list = field(default_factory=list)
    inputs: list = field(default_factory=list)          # ValueInfo
    outputs: list = field(default_factory=list)         # ValueInfo
    initializers: dict = field(default_factory=dict)    # name -> Tensor
    sparse_initializers: list = field(default_factory=list)  # SparseTensor
    value_info: list = field(default_factory=list)      # ValueInfo
    doc_string: str = ""


@dataclass
class Function:
    """A model-local function (FunctionProto)."""

    name: str
    domain: str
    inputs: list
    outputs: list
    attributes: list = field(default_factory=list)        # names of attributes without default
    attribute_defaults: dict = field(default_factory=dict)  # name -> Attribute
    nodes: list = field(default_factory=list)
    opset_imports: dict = field(default_factory=dict)
    value_info: list = field(default_factory=list)
    doc_string: str = ""
    overload: str = ""


@dataclass
class Model:
    graph: Graph
    ir_version: int = 10
    opset_imports: dict = field(default_factory=lambda: {"": 21})   # domain -> version
    producer_name: str = ""
    producer_version: str = ""
    domain: str = ""
    model_version: int = 0
    doc_string: str = ""
    metadata_props: dict = field(default_factory=dict)
    functions: list = field(default_factory=list)
