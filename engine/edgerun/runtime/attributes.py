"""Attribute values as kernels receive them (see providers/cpu/ops/README.md)."""
from __future__ import annotations

import sys

from ..ir import Attribute, AttrType, SparseTensor
from ..ir.host_tensor import HostTensor, have_numpy


def kernel_attributes(attributes: dict) -> dict:
    """A kernel's keyword arguments. The names are interned: Python binds an interned keyword
    to its parameter by identity, and a decoded name by string comparison against each
    parameter (a node with 16 attributes: ~2 us a call against ~0.4)."""
    return {sys.intern(name): attribute_value(a) for name, a in attributes.items()}


def attribute_value(a: Attribute):
    t, v = a.type, a.value
    if t == AttrType.STRING:
        return _text(v)
    if t == AttrType.STRINGS:
        return [_text(s) for s in v]
    if t == AttrType.FLOATS:
        return [float(x) for x in v]
    if t == AttrType.TENSOR:
        return initializer_value(v)
    if t == AttrType.TENSORS:
        return [initializer_value(x) for x in v]
    if t == AttrType.SPARSE_TENSOR:
        return sparse_to_numpy(v)
    if t == AttrType.SPARSE_TENSORS:
        return [sparse_to_numpy(x) for x in v]
    return v


def _text(s) -> str:
    return s.decode("utf-8", errors="surrogateescape") if isinstance(s, bytes) else s


def sparse_to_numpy(s: SparseTensor):
    """A dense array from ONNX COO form (indices [NNZ] linear or [NNZ, rank])."""
    import numpy as np

    values = s.values.numpy().reshape(-1)
    indices = s.indices.numpy().astype(np.int64)
    dense = np.zeros(int(np.prod(s.dims, dtype=np.int64)), dtype=values.dtype)
    if indices.ndim == 2:
        indices = np.ravel_multi_index(tuple(indices.T), s.dims)
    dense[indices.reshape(-1)] = values
    return dense.reshape(s.dims)


def initializer_value(t):
    """A constant as kernels see it: numpy where numpy exists, else a HostTensor."""
    if not have_numpy():
        if isinstance(t, SparseTensor):
            raise NotImplementedError("sparse initializers need numpy")
        return HostTensor.from_ir(t)
    return sparse_to_numpy(t) if isinstance(t, SparseTensor) else t.numpy()

