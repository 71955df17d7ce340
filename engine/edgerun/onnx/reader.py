"""Decode ONNX ModelProto bytes into an `ir.Model` without the `onnx` package.

Field numbers follow onnx/onnx.proto (IR version 14). Unknown fields are skipped, as protobuf
readers do, so newer files still load. External data is read only from files inside the
model's folder.
"""
from __future__ import annotations

import os
import stat
import struct
from typing import Optional

from .. import ir
from ..errors import InvalidGraph, InvalidProtobuf
from ..ir import AttrType, dtypes
from . import wire
from .wire import LENGTH, WireError


# Wire types of the fields each message reads (onnx.proto): a field sent with another type
# is a corrupt file, refused naming the message (it used to surface as a TypeError).
_MODEL = wire.message("ModelProto", V=(1, 5), L=(2, 3, 4, 6, 7, 8, 14, 25))
_OPSET = wire.message("OperatorSetIdProto", L=(1,), V=(2,))
_ENTRY = wire.message("StringStringEntryProto", L=(1, 2))
_GRAPH = wire.message("GraphProto", L=(1, 2, 5, 10, 11, 12, 13, 15))
_FUNCTION = wire.message("FunctionProto", L=(1, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13))
_NODE = wire.message("NodeProto", L=(1, 2, 3, 4, 5, 6, 7, 8))
_ATTRIBUTE = wire.message("AttributeProto", L=(1, 4, 5, 6, 9, 10, 11, 13, 14, 15, 21, 22, 23),
                          V=(3, 20), S32=(2,), F32=(7,), P=(8,))
_VALUE_INFO = wire.message("ValueInfoProto", L=(1, 2, 3))
_TYPE = wire.message("TypeProto", L=(1, 4, 5, 6, 7, 8, 9))
_ELEMENT_TYPE = wire.message("TypeProto.Sequence/Optional", L=(1,))
_MAP_TYPE = wire.message("TypeProto.Map", V=(1,), L=(2,))
_TENSOR_TYPE = wire.message("TypeProto.Tensor", V=(1,), L=(2,))
_SHAPE = wire.message("TensorShapeProto", L=(1,))
_DIM = wire.message("TensorShapeProto.Dimension", V=(1,), L=(2, 3))
_TENSOR = wire.message("TensorProto", P=(1, 5, 7, 11), V=(2, 14), L=(3, 6, 8, 9, 12, 13),
                       F32=(4,), F64=(10,))
_SPARSE = wire.message("SparseTensorProto", L=(1, 2), P=(3,))
# Subgraphs and types nest; past this depth a file is refused (protobuf's own limit is 100)
MAX_NESTING = 100


def load_model(path_or_bytes, base_dir: Optional[str] = None, load_external: bool = True,
               max_bytes: Optional[int] = None,
               max_external_bytes: Optional[int] = None) -> ir.Model:
    """Decode a model from a file path or bytes.

    External data is resolved against `base_dir` (default: the model file's folder).
    `max_bytes` bounds the model file and `max_external_bytes` the external data it reads
    (SessionOptions.max_model_bytes, max_external_data_bytes), checked before reading.
    """
    if isinstance(path_or_bytes, (str, os.PathLike)):
        path = os.fspath(path_or_bytes)
        data = _read_model_file(path, max_bytes)
        base_dir = base_dir or os.path.dirname(os.path.abspath(path))
        where = f"'{path}'"
    else:
        data = bytes(path_or_bytes)
        where = f"model bytes ({len(data)} bytes)"
        if max_bytes is not None and len(data) > max_bytes:
            raise InvalidProtobuf(f"{where}: larger than SessionOptions.max_model_bytes "
                                  f"({max_bytes})")
    if not data:
        raise InvalidProtobuf(f"{where}: empty model")
    reader = _Reader(base_dir, load_external)
    reader.external_budget = max_external_bytes
    try:
        model = reader.model(memoryview(data))
    except (WireError, UnicodeDecodeError, struct.error) as e:
        raise InvalidProtobuf(f"{where} is not a valid ONNX model (truncated or corrupt protobuf: "
                              f"{e})") from None
    if model.graph is None:
        raise InvalidProtobuf(f"{where} is not a valid ONNX model: it has no graph")
    return model


def _read_model_file(path: str, max_bytes) -> bytes:
    """A model file's bytes: a regular file (a FIFO would block), within `max_bytes`."""
    fd, size = _open_regular(path, InvalidProtobuf, f"model file '{path}'")
    if max_bytes is not None and size > max_bytes:
        os.close(fd)
        raise InvalidProtobuf(f"model file '{path}' ({size} bytes) is larger than "
                              f"SessionOptions.max_model_bytes ({max_bytes})")
    with os.fdopen(fd, "rb") as f:
        return f.read()


def _open_regular(path: str, error, what: str) -> tuple:
    """(file descriptor, size) of a regular file opened without blocking (a FIFO or a
    device would wait forever), or `error` naming `what`."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise error(f"cannot read {what}: {e.strerror}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise error(f"{what} is not a regular file")
    return fd, info.st_size


def _str(v) -> str:
    return bytes(v).decode("utf-8")


class _Reader:
    def __init__(self, base_dir, load_external):
        self.base_dir = base_dir
        self.load_external = load_external
        self.depth = 0
        self.external_budget = None     # bytes of external data still allowed (None: any)

    # ---- containers ----------------------------------------------------------------------

    def model(self, buf) -> ir.Model:
        # the graph is field 7; a model without one is refused when validated
        m = ir.Model(graph=None, ir_version=0, opset_imports={})  # type: ignore[arg-type]
        for num, wt, v in wire.fields(buf, _MODEL):
            if num == 1:
                m.ir_version = v
            elif num == 2:
                m.producer_name = _str(v)
            elif num == 3:
                m.producer_version = _str(v)
            elif num == 4:
                m.domain = _str(v)
            elif num == 5:
                m.model_version = wire.to_signed64(v)
            elif num == 6:
                m.doc_string = _str(v)
            elif num == 7:
                m.graph = self.graph(v)
            elif num == 8:
                domain, version = self.opset(v)
                m.opset_imports[domain] = version
            elif num == 14:
                k, val = self.entry(v)
                m.metadata_props[k] = val
            elif num == 25:
                m.functions.append(self.function(v))
        return m

    def opset(self, buf) -> tuple:
        domain, version = "", 0
        for num, wt, v in wire.fields(buf, _OPSET):
            if num == 1:
                domain = _str(v)
            elif num == 2:
                version = wire.to_signed64(v)
        return domain, version

    def entry(self, buf) -> tuple:
        k = val = ""
        for num, wt, v in wire.fields(buf, _ENTRY):
            if num == 1:
                k = _str(v)
            elif num == 2:
                val = _str(v)
        return k, val

    def graph(self, buf) -> ir.Graph:
        with self.nested("graph"):
            return self._graph(buf)

    def nested(self, what: str):
        """Counts one level of subgraph or type nesting while its message is read."""
        reader = self

        class _Level:
            def __enter__(self):
                reader.depth += 1
                if reader.depth > MAX_NESTING:
                    raise WireError(f"{what}s nested more than {MAX_NESTING} levels deep")

            def __exit__(self, *exc):
                reader.depth -= 1

        return _Level()

    def _graph(self, buf) -> ir.Graph:
        g = ir.Graph()
        for num, wt, v in wire.fields(buf, _GRAPH):
            if num == 1:
                g.nodes.append(self.node(v))
            elif num == 2:
                g.name = _str(v)
            elif num == 5:
                t = self.tensor(v)
                g.initializers[t.name] = t
            elif num == 15:
                g.sparse_initializers.append(self.sparse_tensor(v))
            elif num == 10:
                g.doc_string = _str(v)
            elif num == 11:
                g.inputs.append(self.value_info(v))
            elif num == 12:
                g.outputs.append(self.value_info(v))
            elif num == 13:
                g.value_info.append(self.value_info(v))
        return g

    def function(self, buf) -> ir.Function:
        f = ir.Function(name="", domain="", inputs=[], outputs=[])
        for num, wt, v in wire.fields(buf, _FUNCTION):
            if num == 1:
                f.name = _str(v)
            elif num == 4:
                f.inputs.append(_str(v))
            elif num == 5:
                f.outputs.append(_str(v))
            elif num == 6:
                f.attributes.append(_str(v))
            elif num == 11:
                a = self.attribute(v)
                f.attribute_defaults[a.name] = a
            elif num == 7:
                f.nodes.append(self.node(v))
            elif num == 8:
                f.doc_string = _str(v)
            elif num == 9:
                domain, version = self.opset(v)
                f.opset_imports[domain] = version
            elif num == 10:
                f.domain = _str(v)
            elif num == 12:
                f.value_info.append(self.value_info(v))
            elif num == 13:
                f.overload = _str(v)
        return f

    def node(self, buf) -> ir.Node:
        n = ir.Node(op_type="", inputs=[], outputs=[])
        for num, wt, v in wire.fields(buf, _NODE):
            if num == 1:
                n.inputs.append(_str(v))
            elif num == 2:
                n.outputs.append(_str(v))
            elif num == 3:
                n.name = _str(v)
            elif num == 4:
                n.op_type = _str(v)
            elif num == 5:
                a = self.attribute(v)
                n.attributes[a.name] = a
            elif num == 6:
                n.doc_string = _str(v)
            elif num == 7:
                n.domain = _str(v)
            elif num == 8:
                n.overload = _str(v)
        return n

    def attribute(self, buf) -> ir.Attribute:
        a = ir.Attribute(name="", type=AttrType.UNDEFINED)
        singles: dict = {}
        repeated: dict = {7: [], 8: [], 9: [], 10: [], 11: [], 23: [], 15: []}
        for num, wt, v in wire.fields(buf, _ATTRIBUTE):
            if num == 1:
                a.name = _str(v)
            elif num == 20:
                a.type = v
            elif num == 21:
                a.ref_attr_name = _str(v)
            elif num == 13:
                a.doc_string = _str(v)
            elif num == 2:
                singles[AttrType.FLOAT] = wire.unpack_f32(v)
            elif num == 3:
                singles[AttrType.INT] = wire.to_signed64(v)
            elif num == 4:
                singles[AttrType.STRING] = bytes(v)
            elif num == 5:
                singles[AttrType.TENSOR] = self.tensor(v)
            elif num == 6:
                singles[AttrType.GRAPH] = self.graph(v)
            elif num == 22:
                singles[AttrType.SPARSE_TENSOR] = self.sparse_tensor(v)
            elif num == 14:
                singles[AttrType.TYPE_PROTO] = self.type(v)
            elif num == 7:
                repeated[7] += (wire.packed_fixed(wt, v, "f") if wt == LENGTH
                                else [wire.unpack_f32(v)])
            elif num == 8:
                repeated[8] += [wire.to_signed64(x) for x in wire.packed_varints(wt, v)]
            elif num == 9:
                repeated[9].append(bytes(v))
            elif num == 10:
                repeated[10].append(self.tensor(v))
            elif num == 11:
                repeated[11].append(self.graph(v))
            elif num == 23:
                repeated[23].append(self.sparse_tensor(v))
            elif num == 15:
                repeated[15].append(self.type(v))
        if a.type == AttrType.UNDEFINED:   # very old files omit the type: infer it
            a.type = next(iter(singles), None) or next(
                (_REPEATED_TYPE[k] for k, vals in repeated.items() if vals), AttrType.UNDEFINED)
        if a.type in singles:
            a.value = singles[a.type]
        elif a.type in _FIELD_OF_REPEATED:
            a.value = repeated[_FIELD_OF_REPEATED[a.type]]
        elif not a.ref_attr_name and a.type not in _SINGLE_TYPES:
            raise WireError(f"attribute '{a.name}' has unknown type {a.type}")
        elif not a.ref_attr_name and a.type not in _SINGLE_DEFAULTS:
            raise WireError(f"attribute '{a.name}' of type {a.type} (a tensor, graph or type) "
                            f"holds no value")
        else:
            a.value = _SINGLE_DEFAULTS.get(a.type)   # an unset number or string: its default
        return a

    def value_info(self, buf) -> ir.ValueInfo:
        vi = ir.ValueInfo(name="")
        for num, wt, v in wire.fields(buf, _VALUE_INFO):
            if num == 1:
                vi.name = _str(v)
            elif num == 2:
                vi.type = self.type(v)
            elif num == 3:
                vi.doc_string = _str(v)
        return vi

    def type(self, buf) -> ir.TypeInfo:
        with self.nested("type"):
            return self._type(buf)

    def _type(self, buf) -> ir.TypeInfo:
        t = ir.TypeInfo(kind="undefined")
        for num, wt, v in wire.fields(buf, _TYPE):
            if num in (1, 8):      # tensor_type, sparse_tensor_type
                t.kind = "tensor" if num == 1 else "sparse_tensor"
                t.elem_type, t.shape = self.tensor_type(v)
            elif num in (4, 9):    # sequence_type, optional_type
                t.kind = "sequence" if num == 4 else "optional"
                for n2, _, v2 in wire.fields(v, _ELEMENT_TYPE):
                    if n2 == 1:
                        t.elem = self.type(v2)
            elif num == 5:         # map_type
                t.kind = "map"
                for n2, _, v2 in wire.fields(v, _MAP_TYPE):
                    if n2 == 1:
                        t.key_type = v2
                    elif n2 == 2:
                        t.elem = self.type(v2)
            elif num == 7:
                t.kind = "opaque"
            elif num == 6:
                t.denotation = _str(v)
        return t

    def tensor_type(self, buf) -> tuple:
        elem_type, shape = 0, None
        for num, wt, v in wire.fields(buf, _TENSOR_TYPE):
            if num == 1:
                elem_type = v
            elif num == 2:
                shape = tuple(self.dim(d) for n2, _, d in wire.fields(v, _SHAPE) if n2 == 1)
        if elem_type and elem_type not in dtypes.BY_CODE:
            raise WireError(f"a value's type has unknown element type {elem_type}")
        return elem_type, shape

    def dim(self, buf):
        value = None
        for num, wt, v in wire.fields(buf, _DIM):
            if num == 1:
                value = wire.to_signed64(v)
            elif num == 2:
                value = _str(v)
        return value

    # ---- tensors -------------------------------------------------------------------------

    def tensor(self, buf) -> ir.Tensor:
        t = ir.Tensor(name="", elem_type=0, dims=())
        dims, typed, strings, external = [], [], [], {}
        typed_field = None
        raw = None
        location = 0
        for num, wt, v in wire.fields(buf, _TENSOR):
            if num == 1:
                dims += [wire.to_signed64(x) for x in wire.packed_varints(wt, v)]
            elif num == 2:
                t.elem_type = v
            elif num == 8:
                t.name = _str(v)
            elif num == 9:
                raw = bytes(v)
            elif num == 6:
                strings.append(bytes(v))
            elif num in (5, 7, 11):
                typed += wire.packed_varints(wt, v)
                typed_field = num
            elif num == 4:
                typed += (wire.packed_fixed(wt, v, "f") if wt == LENGTH else [wire.unpack_f32(v)])
                typed_field = num
            elif num == 10:
                typed += (wire.packed_fixed(wt, v, "d") if wt == LENGTH else [wire.unpack_f64(v)])
                typed_field = num
            elif num == 12:
                t.doc_string = _str(v)
            elif num == 13:
                k, val = self.entry(v)
                external[k] = val
            elif num == 14:
                location = v
            elif num == 3:
                raise WireError(f"tensor '{t.name}' uses segments, which no runtime supports")
        t.dims = tuple(dims)
        if any(d < 0 for d in t.dims):
            raise WireError(f"tensor '{t.name}' has negative dims {list(t.dims)}")
        if t.elem_type not in dtypes.BY_CODE:
            raise WireError(f"tensor '{t.name}' has unknown data_type {t.elem_type}")
        if t.elem_type == dtypes.STRING:
            t.strings = strings
            if len(strings) != t.size:
                raise WireError(f"tensor '{t.name}' holds {len(strings)} strings for dims "
                                f"{list(t.dims)} ({t.size} elements)")
        elif location == 1:
            t.external = external
            t.raw = self.external_data(t, external) if self.load_external else b""
        elif raw is not None:
            t.raw = raw
        else:
            if typed and _TYPED_FIELD.get(t.elem_type, 5) != typed_field:
                raise WireError(f"tensor '{t.name}' of {dtypes.elem_type(t.elem_type).name} "
                                f"stores its values in field {typed_field}, which holds "
                                f"another element type")
            t.raw = _typed_to_raw(t.elem_type, typed)
        if t.elem_type != dtypes.STRING and (location != 1 or self.load_external) and \
                len(t.raw) != _nbytes(t):
            raise WireError(f"tensor '{t.name}' holds {len(t.raw)} bytes of data, but its dims "
                            f"{list(t.dims)} of {dtypes.elem_type(t.elem_type).name} need "
                            f"{_nbytes(t)}")
        return t

    def sparse_tensor(self, buf) -> ir.SparseTensor:
        values = indices = None
        dims = []
        for num, wt, v in wire.fields(buf, _SPARSE):
            if num == 1:
                values = self.tensor(v)
            elif num == 2:
                indices = self.tensor(v)
            elif num == 3:
                dims += [wire.to_signed64(x) for x in wire.packed_varints(wt, v)]
        if values is None or indices is None:
            raise WireError("sparse tensor without values or indices")
        return ir.SparseTensor(values, indices, tuple(dims))

    def external_data(self, t: ir.Tensor, info: dict) -> bytes:
        location = info.get("location", "")
        if self.base_dir is None:
            raise InvalidGraph(
                f"tensor '{t.name}' stores its data in external file '{location}', but the model "
                f"was given as bytes: load it from its path, or pass the folder it lives in")
        path = resolve_external_path(self.base_dir, location, t.name)
        offset = _external_int(info, "offset", t.name, 0)
        expected = _nbytes(t)
        length = _external_int(info, "length", t.name, expected)
        if length != expected:          # checked before reading: a huge length allocates nothing
            raise InvalidGraph(f"tensor '{t.name}': external data '{location}' has length "
                               f"{length}, but its dims {list(t.dims)} need {expected} bytes")
        if self.external_budget is not None:
            if length > self.external_budget:
                raise InvalidGraph(f"tensor '{t.name}': its external data takes the model past "
                                   f"SessionOptions.max_external_data_bytes")
            self.external_budget -= length
        return read_file_range(path, offset, length, f"tensor '{t.name}': external data "
                                                     f"'{location}'")


def _external_int(info: dict, key: str, tensor_name: str, default: int) -> int:
    text = info.get(key)
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise InvalidGraph(f"tensor '{tensor_name}': external data {key} '{text}' is not a "
                           f"non-negative integer")
    return value


def read_file_range(path: str, offset: int, length: int, what: str) -> bytes:
    """`length` bytes at `offset` of a regular file, or InvalidGraph naming `what`; the
    file's size is checked before reading."""
    fd, size = _open_regular(path, InvalidGraph, what)
    with os.fdopen(fd, "rb") as f:
        if offset + length > size:
            raise InvalidGraph(f"{what}: {length} bytes at offset {offset} run past the end of "
                               f"the file ({size} bytes)")
        f.seek(offset)
        data = f.read(length)
    if len(data) != length:
        raise InvalidGraph(f"{what}: read {len(data)} bytes at offset {offset}, expected {length}")
    return data


def resolve_external_path(base_dir: str, location: str, tensor_name: str) -> str:
    """The file an external-data `location` names, refusing anything outside `base_dir`."""
    if not location:
        raise InvalidGraph(f"tensor '{tensor_name}' has external data without a location")
    if "\0" in location:
        raise InvalidGraph(f"tensor '{tensor_name}': external data location {location!r} holds "
                           f"a NUL character")
    base = os.path.realpath(base_dir)
    if os.path.isabs(location) or location.startswith(("/", "\\")):
        raise InvalidGraph(f"tensor '{tensor_name}': external data location '{location}' is an "
                           f"absolute path; it must be relative to the model's folder")
    path = os.path.realpath(os.path.join(base, location))
    if os.path.commonpath([base, path]) != base:
        raise InvalidGraph(f"tensor '{tensor_name}': external data location '{location}' "
                           f"escapes the model's folder '{base}'")
    return path


def _nbytes(t: ir.Tensor) -> int:
    bits = dtypes.elem_type(t.elem_type).bits
    return (t.size * bits + 7) // 8


# The typed field each element type's values go in (onnx.proto): float_data 4, int64_data 7,
# double_data 10, uint64_data 11; int32_data 5 for every other (narrow and 16-bit) type.
_TYPED_FIELD = {dtypes.FLOAT: 4, dtypes.COMPLEX64: 4, dtypes.INT64: 7, dtypes.DOUBLE: 10,
                dtypes.COMPLEX128: 10, dtypes.UINT32: 11, dtypes.UINT64: 11}

# Typed (non-raw) fields: how each element type's values are packed into raw bytes.
_STRUCT_OF = {
    dtypes.FLOAT: "f", dtypes.COMPLEX64: "f", dtypes.DOUBLE: "d", dtypes.COMPLEX128: "d",
    dtypes.INT32: "i", dtypes.INT64: "q", dtypes.UINT32: "I", dtypes.UINT64: "Q",
    dtypes.INT16: "H", dtypes.UINT16: "H", dtypes.FLOAT16: "H", dtypes.BFLOAT16: "H",
}


def _typed_to_raw(elem_type: int, values: list) -> bytes:
    fmt = _STRUCT_OF.get(elem_type)
    if fmt is None:                     # 8-bit and packed sub-byte types: one byte per entry
        return bytes(v & 0xFF for v in values)
    if fmt == "H":
        values = [v & 0xFFFF for v in values]
    elif fmt == "i":
        values = [wire.to_signed32(v) for v in values]
    elif fmt == "q":
        values = [wire.to_signed64(v) for v in values]
    return struct.pack(f"<{len(values)}{fmt}", *values)


_FIELD_OF_REPEATED = {AttrType.FLOATS: 7, AttrType.INTS: 8, AttrType.STRINGS: 9,
                      AttrType.TENSORS: 10, AttrType.GRAPHS: 11, AttrType.SPARSE_TENSORS: 23,
                      AttrType.TYPE_PROTOS: 15}
_REPEATED_TYPE = {v: k for k, v in _FIELD_OF_REPEATED.items()}
_SINGLE_TYPES = {AttrType.FLOAT, AttrType.INT, AttrType.STRING, AttrType.TENSOR, AttrType.GRAPH,
                 AttrType.SPARSE_TENSOR, AttrType.TYPE_PROTO}
_SINGLE_DEFAULTS = {AttrType.FLOAT: 0.0, AttrType.INT: 0, AttrType.STRING: b""}
