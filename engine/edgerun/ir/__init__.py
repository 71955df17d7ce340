"""The intermediate representation: Model, Graph, Node, values, tensors and types."""
from . import dtypes
from .graph import (EDGERUN_DOMAIN, Attribute, AttrType, Dim, Function, Graph, Model, Node,
                    SparseTensor, Tensor, TypeInfo, ValueInfo)

__all__ = ["dtypes", "EDGERUN_DOMAIN", "Attribute", "AttrType", "Dim", "Function", "Graph",
           "Model", "Node", "SparseTensor", "Tensor", "TypeInfo", "ValueInfo"]
