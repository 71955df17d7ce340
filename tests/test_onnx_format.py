"""The pure-Python ONNX decoder against the `onnx` package, field for field."""
import os

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from edgerun import InvalidGraph, InvalidProtobuf
from edgerun.onnx import load_model
from edgerun.runtime.attributes import attribute_value
from edgerun.tools.conformance import load_cases

LIGHT_DIR = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def _check_graph(ours, theirs):
    assert ours.name == theirs.name
    assert [v.name for v in ours.inputs] == [v.name for v in theirs.input]
    assert [v.name for v in ours.outputs] == [v.name for v in theirs.output]
    for v, w in zip(ours.inputs + ours.outputs, list(theirs.input) + list(theirs.output)):
        _check_type(v.type, w.type)
    assert len(ours.nodes) == len(theirs.node)
    for n, m in zip(ours.nodes, theirs.node):
        assert (n.op_type, n.domain, n.name) == (m.op_type, m.domain, m.name)
        assert n.inputs == list(m.input) and n.outputs == list(m.output)
        assert list(n.attributes) == [a.name for a in m.attribute]
        for a in m.attribute:
            _check_attribute(n.attributes[a.name], a)
    assert list(ours.initializers) == [t.name for t in theirs.initializer]
    for t in theirs.initializer:
        _check_tensor(ours.initializers[t.name].numpy(), t)


def _check_type(ours, theirs):
    which = theirs.WhichOneof("value")
    if which == "tensor_type":
        assert ours.kind == "tensor" and ours.elem_type == theirs.tensor_type.elem_type
        if theirs.tensor_type.HasField("shape"):
            want = tuple(d.dim_value if d.HasField("dim_value") else
                         (d.dim_param if d.HasField("dim_param") else None)
                         for d in theirs.tensor_type.shape.dim)
            assert ours.shape == want
        else:
            assert ours.shape is None
    elif which == "sequence_type":
        assert ours.kind == "sequence"
        _check_type(ours.elem, theirs.sequence_type.elem_type)
    elif which == "optional_type":
        assert ours.kind == "optional"
        _check_type(ours.elem, theirs.optional_type.elem_type)


def _check_tensor(arr, proto):
    want = numpy_helper.to_array(proto)
    assert arr.shape == want.shape and arr.dtype == want.dtype, proto.name
    if want.dtype == object:
        assert arr.tolist() == [s.decode() if isinstance(s, bytes) else s
                                for s in want.reshape(-1).tolist()] or \
            np.array_equal(arr, want)
    else:
        assert arr.tobytes() == np.ascontiguousarray(want).tobytes(), proto.name


def _check_attribute(ours, theirs):
    assert ours.type == theirs.type
    value = attribute_value(ours)
    if theirs.type == onnx.AttributeProto.GRAPH:
        _check_graph(value, theirs.g)
    elif theirs.type == onnx.AttributeProto.TENSOR:
        _check_tensor(value, theirs.t)
    elif theirs.type == onnx.AttributeProto.GRAPHS:
        for g, h in zip(value, theirs.graphs):
            _check_graph(g, h)
    elif theirs.type in (onnx.AttributeProto.SPARSE_TENSOR, onnx.AttributeProto.TYPE_PROTO,
                         onnx.AttributeProto.TENSORS):
        pass   # covered by the conformance cases that use them
    else:
        want = helper.get_attribute_value(theirs)
        if theirs.type == onnx.AttributeProto.STRING:
            want = want.decode()
        elif theirs.type == onnx.AttributeProto.STRINGS:
            want = [s.decode() for s in want]
        if theirs.type in (onnx.AttributeProto.FLOAT, onnx.AttributeProto.FLOATS):
            np.testing.assert_array_equal(np.float32(value), np.float32(want))
        else:
            assert value == want


def test_every_conformance_model_decodes_field_for_field():
    cases = load_cases()
    assert len(cases) == 1884
    for case in cases:
        theirs = onnx.load_from_string(case["model"])
        ours = load_model(case["model"])
        assert ours.ir_version == theirs.ir_version
        assert ours.opset_imports == {o.domain: o.version for o in theirs.opset_import}
        assert [f.name for f in ours.functions] == [f.name for f in theirs.functions]
        _check_graph(ours.graph, theirs.graph)


LIGHT_MODELS = sorted(n for n in os.listdir(LIGHT_DIR) if n.endswith(".onnx"))


def test_onnx_ships_the_nine_light_models():
    assert len(LIGHT_MODELS) == 9


@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_light_models_decode(name):
    path = os.path.join(LIGHT_DIR, name)
    theirs = onnx.load(path)
    ours = load_model(path)
    _check_graph(ours.graph, theirs.graph)


def test_tensors_of_every_dtype_in_typed_fields():
    """Typed (non-raw) storage: int32_data for small types, int64_data, doubles, strings."""
    for code in [1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 16, 17, 18, 19, 20, 21, 22, 23]:
        np_type = helper.tensor_dtype_to_np_dtype(code)
        values = np.arange(-3, 3).astype(np.float32) if code not in (2, 4, 12, 13, 21) \
            else np.arange(0, 6).astype(np.float32)
        if code == 9:
            values = values > 0
        arr = values.astype(np_type)
        proto = helper.make_tensor("t", code, [2, 3], arr.reshape(-1).tolist() if code not in (
            10, 16, 17, 18, 19, 20, 21, 22, 23) else arr.reshape(2, 3), raw=False)
        graph = helper.make_graph([], "g", [], [], initializer=[proto])
        model = helper.make_model(graph)
        ours = load_model(model.SerializeToString())
        _check_tensor(ours.graph.initializers["t"].numpy(), proto)
    strings = helper.make_tensor("s", onnx.TensorProto.STRING, [2], [b"ab", "ü".encode()])
    model = helper.make_model(helper.make_graph([], "g", [], [], initializer=[strings]))
    assert load_model(model.SerializeToString()).graph.initializers["s"].numpy().tolist() == \
        ["ab", "ü"]


def _model_with_external(tmp_path, location, offset="0", length=None):
    arr = np.arange(12, dtype=np.float32).reshape(3, 4)
    tensor = numpy_helper.from_array(arr, "w")
    tensor.data_location = onnx.TensorProto.EXTERNAL
    for k, v in {"location": location, "offset": offset,
                 "length": str(arr.nbytes) if length is None else length}.items():
        entry = tensor.external_data.add()
        entry.key, entry.value = k, v
    node = helper.make_node("Identity", ["w"], ["y"])
    graph = helper.make_graph([node], "g", [], [helper.make_tensor_value_info(
        "y", onnx.TensorProto.FLOAT, [3, 4])], initializer=[tensor])
    path = tmp_path / "model.onnx"
    path.write_bytes(helper.make_model(graph).SerializeToString())
    return path, arr


def test_external_data_inside_the_model_folder(tmp_path):
    path, arr = _model_with_external(tmp_path, "weights.bin")
    (tmp_path / "weights.bin").write_bytes(arr.tobytes())
    model = load_model(str(path))
    np.testing.assert_array_equal(model.graph.initializers["w"].numpy(), arr)


@pytest.mark.parametrize("location", ["../outside.bin", "/etc/passwd", "sub/../../x.bin"])
def test_external_data_escaping_the_model_folder_is_refused(tmp_path, location):
    model_dir = tmp_path / "m"
    model_dir.mkdir()
    path, arr = _model_with_external(model_dir, location)
    (tmp_path / "outside.bin").write_bytes(arr.tobytes())
    with pytest.raises(InvalidGraph, match="external data location"):
        load_model(str(path))


def test_external_data_from_bytes_needs_a_folder(tmp_path):
    path, _ = _model_with_external(tmp_path, "weights.bin")
    with pytest.raises(InvalidGraph, match="given as bytes"):
        load_model(path.read_bytes())


def test_missing_external_file_is_named(tmp_path):
    path, _ = _model_with_external(tmp_path, "weights.bin")
    with pytest.raises(InvalidGraph, match="weights.bin"):
        load_model(str(path))


@pytest.mark.parametrize("offset,length,message", [
    ("0", str(10 ** 12), "has length 1000000000000, but its dims"),     # allocates nothing
    ("abc", None, "offset 'abc' is not a non-negative integer"),
    ("-4", None, "offset '-4' is not a non-negative integer"),
    ("1.5", None, "offset '1.5'"),
    ("40", None, "run past the end of the file"),
])
def test_external_data_offsets_and_lengths_are_checked_before_reading(tmp_path, offset, length,
                                                                      message):
    path, arr = _model_with_external(tmp_path, "weights.bin", offset, length)
    (tmp_path / "weights.bin").write_bytes(arr.tobytes())
    with pytest.raises(InvalidGraph, match=message):
        load_model(str(path))


def test_external_data_location_with_a_nul_is_refused(tmp_path):
    path, arr = _model_with_external(tmp_path, "weights\0.bin")
    with pytest.raises(InvalidGraph, match="NUL"):
        load_model(str(path))


def test_external_data_that_is_not_a_regular_file_is_refused_without_hanging(tmp_path):
    """A FIFO in the model's folder: open() would wait for a writer forever."""
    path, _ = _model_with_external(tmp_path, "weights.bin")
    os.mkfifo(tmp_path / "weights.bin")
    with pytest.raises(InvalidGraph, match="not a regular file"):
        load_model(str(path))
    path, _ = _model_with_external(tmp_path, "folder")
    (tmp_path / "folder").mkdir()
    with pytest.raises(InvalidGraph, match="not a regular file|cannot open"):
        load_model(str(path))


def _digits_bytes():
    from conftest import ROOT
    with open(os.path.join(ROOT, "examples", "digits", "digits_mlp.onnx"), "rb") as f:
        return f.read()


@pytest.mark.parametrize("cut", [1, 7, 100, 1000, -3])
def test_truncated_model_is_invalid_protobuf(cut):
    data = _digits_bytes()
    with pytest.raises(InvalidProtobuf, match="not a valid ONNX model"):
        load_model(data[:cut])


def test_garbage_and_empty_models_are_invalid_protobuf(tmp_path):
    with pytest.raises(InvalidProtobuf):
        load_model(b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff")
    with pytest.raises(InvalidProtobuf, match="empty"):
        load_model(b"")
    with pytest.raises(InvalidProtobuf):
        load_model(b"this is not an onnx model at all, it is text")
    with pytest.raises(InvalidProtobuf, match="cannot read"):
        load_model(str(tmp_path / "nope.onnx"))


def test_writer_round_trips_every_conformance_model():
    """decode(encode(m)) == m, and onnx's checker accepts what the writer produced."""
    from edgerun.onnx.writer import model_to_bytes

    for case in load_cases():
        model = load_model(case["model"])
        data = model_to_bytes(model)
        assert load_model(data) == model, case["name"]
        onnx.checker.check_model(onnx.load_from_string(data))


@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_writer_round_trips_light_models_against_onnx(name):
    from edgerun.onnx.writer import model_to_bytes

    theirs = onnx.load(os.path.join(LIGHT_DIR, name))
    ours = load_model(model_to_bytes(load_model(os.path.join(LIGHT_DIR, name))))
    _check_graph(ours.graph, theirs.graph)


@pytest.mark.parametrize("dtype", ["int4", "uint4", "int2", "uint2", "float4_e2m1fn",
                                   "float6_e2m3fn", "float6_e3m2fn"])
@pytest.mark.parametrize("count", [1, 3, 4, 5, 13])
def test_sub_byte_packing_matches_onnx(dtype, count):
    import ml_dtypes

    from edgerun.ir.tensor_numpy import numpy_to_tensor, tensor_to_numpy

    values = np.linspace(-3, 3, count) if not dtype.startswith("u") else np.arange(count) % 3
    arr = values.astype(getattr(ml_dtypes, dtype))
    theirs = numpy_helper.from_array(arr, "x")
    ours = numpy_to_tensor(arr, "x")
    assert ours.raw == theirs.raw_data
    back = tensor_to_numpy(ours)
    assert back.dtype == arr.dtype and back.tobytes() == arr.tobytes()


def test_model_and_external_data_sizes_are_session_limits(tmp_path):
    import edgerun

    path, arr = _model_with_external(tmp_path, "weights.bin")
    (tmp_path / "weights.bin").write_bytes(arr.tobytes())
    options = edgerun.SessionOptions()
    options.max_external_data_bytes = 40            # the tensor holds 48
    with pytest.raises(InvalidGraph, match="max_external_data_bytes"):
        edgerun.InferenceSession(str(path), options)
    options = edgerun.SessionOptions()
    options.max_model_bytes = 50
    with pytest.raises(InvalidProtobuf, match="larger than SessionOptions.max_model_bytes"):
        edgerun.InferenceSession(str(path), options)
    with pytest.raises(InvalidProtobuf, match="larger than SessionOptions.max_model_bytes"):
        edgerun.InferenceSession(path.read_bytes(), options)
    edgerun.InferenceSession(str(path))                   # the defaults take it


def test_a_model_path_that_is_not_a_regular_file_is_refused_without_hanging(tmp_path):
    os.mkfifo(tmp_path / "model.onnx")
    with pytest.raises(InvalidProtobuf, match="not a regular file"):
        load_model(str(tmp_path / "model.onnx"))
