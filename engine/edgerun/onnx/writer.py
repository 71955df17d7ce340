"""Encode an `ir.Model` as ONNX ModelProto bytes (the inverse of reader.py).

Numeric tensors are written as `raw_data` (little-endian), strings as `string_data`.
Tensors that were read from external data are written inline unless `external_dir` is given.
"""
from __future__ import annotations

from .. import ir
from ..ir import AttrType
from .wire import (field_bytes, field_f32, field_packed_fixed, field_packed_varints, field_str,
                   field_varint)


def save_model(model: ir.Model, path: str) -> None:
    with open(path, "wb") as f:
        f.write(model_to_bytes(model))


def model_to_bytes(model: ir.Model) -> bytes:
    out = [field_varint(1, model.ir_version)]
    if model.producer_name:
        out.append(field_str(2, model.producer_name))
    if model.producer_version:
        out.append(field_str(3, model.producer_version))
    if model.domain:
        out.append(field_str(4, model.domain))
    if model.model_version:
        out.append(field_varint(5, model.model_version))
    if model.doc_string:
        out.append(field_str(6, model.doc_string))
    out.append(field_bytes(7, _graph(model.graph)))
    for domain, version in model.opset_imports.items():
        out.append(field_bytes(8, _opset(domain, version)))
    for k, v in model.metadata_props.items():
        out.append(field_bytes(14, _entry(k, v)))
    for f in model.functions:
        out.append(field_bytes(25, _function(f)))
    return b"".join(out)


def _opset(domain: str, version: int) -> bytes:
    return field_str(1, domain) + field_varint(2, version)


def _entry(k: str, v: str) -> bytes:
    return field_str(1, k) + field_str(2, v)


def _graph(g: ir.Graph) -> bytes:
    out = [field_bytes(1, _node(n)) for n in g.nodes]
    if g.name:
        out.append(field_str(2, g.name))
    out += [field_bytes(5, _tensor(t)) for t in g.initializers.values()]
    if g.doc_string:
        out.append(field_str(10, g.doc_string))
    out += [field_bytes(11, _value_info(v)) for v in g.inputs]
    out += [field_bytes(12, _value_info(v)) for v in g.outputs]
    out += [field_bytes(13, _value_info(v)) for v in g.value_info]
    out += [field_bytes(15, _sparse(s)) for s in g.sparse_initializers]
    return b"".join(out)


def _function(f: ir.Function) -> bytes:
    out = [field_str(1, f.name)]
    out += [field_str(4, n) for n in f.inputs]
    out += [field_str(5, n) for n in f.outputs]
    out += [field_str(6, n) for n in f.attributes]
    out += [field_bytes(7, _node(n)) for n in f.nodes]
    if f.doc_string:
        out.append(field_str(8, f.doc_string))
    out += [field_bytes(9, _opset(d, v)) for d, v in f.opset_imports.items()]
    out.append(field_str(10, f.domain))
    out += [field_bytes(11, _attribute(a)) for a in f.attribute_defaults.values()]
    out += [field_bytes(12, _value_info(v)) for v in f.value_info]
    if f.overload:
        out.append(field_str(13, f.overload))
    return b"".join(out)


def _node(n: ir.Node) -> bytes:
    out = [field_str(1, i) for i in n.inputs]
    out += [field_str(2, o) for o in n.outputs]
    if n.name:
        out.append(field_str(3, n.name))
    out.append(field_str(4, n.op_type))
    out += [field_bytes(5, _attribute(a)) for a in n.attributes.values()]
    if n.doc_string:
        out.append(field_str(6, n.doc_string))
    if n.domain:
        out.append(field_str(7, n.domain))
    if n.overload:
        out.append(field_str(8, n.overload))
    return b"".join(out)


def _attribute(a: ir.Attribute) -> bytes:
    out = [field_str(1, a.name)]
    t, v = a.type, a.value
    if a.ref_attr_name:
        out.append(field_str(21, a.ref_attr_name))
    elif t == AttrType.FLOAT:
        out.append(field_f32(2, v))
    elif t == AttrType.INT:
        out.append(field_varint(3, v))
    elif t == AttrType.STRING:
        out.append(field_bytes(4, v if isinstance(v, bytes) else v.encode("utf-8")))
    elif t == AttrType.TENSOR:
        out.append(field_bytes(5, _tensor(v)))
    elif t == AttrType.GRAPH:
        out.append(field_bytes(6, _graph(v)))
    elif t == AttrType.FLOATS:
        out.append(field_packed_fixed(7, v, "f") if v else b"")
    elif t == AttrType.INTS:
        out.append(field_packed_varints(8, v) if v else b"")
    elif t == AttrType.STRINGS:
        out += [field_bytes(9, s if isinstance(s, bytes) else s.encode("utf-8")) for s in v]
    elif t == AttrType.TENSORS:
        out += [field_bytes(10, _tensor(x)) for x in v]
    elif t == AttrType.GRAPHS:
        out += [field_bytes(11, _graph(x)) for x in v]
    elif t == AttrType.TYPE_PROTO:
        out.append(field_bytes(14, _type(v)))
    elif t == AttrType.TYPE_PROTOS:
        out += [field_bytes(15, _type(x)) for x in v]
    elif t == AttrType.SPARSE_TENSOR:
        out.append(field_bytes(22, _sparse(v)))
    elif t == AttrType.SPARSE_TENSORS:
        out += [field_bytes(23, _sparse(x)) for x in v]
    if a.doc_string:
        out.append(field_str(13, a.doc_string))
    out.append(field_varint(20, t))
    return b"".join(out)


def _tensor(t: ir.Tensor) -> bytes:
    out = [field_packed_varints(1, t.dims) if t.dims else b"", field_varint(2, t.elem_type)]
    if t.strings is not None:
        out += [field_bytes(6, s) for s in t.strings]
    if t.name:
        out.append(field_str(8, t.name))
    if t.strings is None:
        out.append(field_bytes(9, t.raw))
    if t.doc_string:
        out.append(field_str(12, t.doc_string))
    return b"".join(out)


def _sparse(s: ir.SparseTensor) -> bytes:
    return (field_bytes(1, _tensor(s.values)) + field_bytes(2, _tensor(s.indices))
            + (field_packed_varints(3, s.dims) if s.dims else b""))


def _value_info(v: ir.ValueInfo) -> bytes:
    out = [field_str(1, v.name)]
    if v.type is not None:
        out.append(field_bytes(2, _type(v.type)))
    if v.doc_string:
        out.append(field_str(3, v.doc_string))
    return b"".join(out)


def _type(t: ir.TypeInfo) -> bytes:
    if t.kind in ("tensor", "sparse_tensor"):
        body = field_varint(1, t.elem_type)
        if t.shape is not None:
            body += field_bytes(2, b"".join(field_bytes(1, _dim(d)) for d in t.shape))
        out = field_bytes(1 if t.kind == "tensor" else 8, body)
    elif t.kind in ("sequence", "optional"):
        inner = field_bytes(1, _type(t.elem)) if t.elem is not None else b""
        out = field_bytes(4 if t.kind == "sequence" else 9, inner)
    elif t.kind == "map":
        inner = field_varint(1, t.key_type) + (field_bytes(2, _type(t.elem)) if t.elem else b"")
        out = field_bytes(5, inner)
    elif t.kind == "opaque":
        out = field_bytes(7, b"")
    else:
        out = b""
    if t.denotation:
        out += field_str(6, t.denotation)
    return out


def _dim(d) -> bytes:
    if isinstance(d, int):
        return field_varint(1, d)
    if isinstance(d, str):
        return field_str(2, d)
    return b""
