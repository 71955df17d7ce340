"""What a session tells about its model: NodeArg and ModelMetadata, as onnxruntime names them."""
from __future__ import annotations

from dataclasses import dataclass, field

from .. import ir


@dataclass(frozen=True)
class NodeArg:
    name: str
    type: str                 # "tensor(float)", "seq(tensor(int64))", ...
    shape: object             # list of int | str | None, or None for non-tensors

    @classmethod
    def from_value_info(cls, vi: ir.ValueInfo) -> "NodeArg":
        t = vi.type
        if t is None:
            return cls(vi.name, "unknown", None)
        shape = None
        if t.kind in ("tensor", "sparse_tensor"):
            shape = list(t.shape) if t.shape is not None else None
        return cls(vi.name, t.type_string(), shape)


@dataclass(frozen=True)
class ModelMetadata:
    producer_name: str
    graph_name: str
    domain: str
    description: str
    graph_description: str
    version: int
    custom_metadata_map: dict = field(default_factory=dict)

    @classmethod
    def from_model(cls, model: ir.Model) -> "ModelMetadata":
        return cls(model.producer_name, model.graph.name, model.domain, model.doc_string,
                   model.graph.doc_string, model.model_version, dict(model.metadata_props))
