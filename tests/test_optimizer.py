"""The graph optimizer: each pass rewrites its pattern (node counts before/after) and keeps
outputs equal.

Tolerances: rtol 1e-4, atol 1e-5 against the unoptimized model everywhere (constant folding,
Conv+BatchNormalization folding and the fusions reorder float math; observed differences
are ~1e-6 relative). Files written by optimizer.save are checked in onnxruntime with the
same tolerances.
"""
import json
import os

import numpy as np
import onnxruntime
import pytest
import onnx
from onnx import TensorProto, helper, numpy_helper

import edgerun
from edgerun.onnx import load_model
from edgerun.optimizer import ALL, BASIC, DISABLE_ALL, EXTENDED
from edgerun.optimizer import optimize as _optimize
from edgerun.optimizer.save import save_optimized
from edgerun.providers.registry import constant_evaluator
from edgerun.tools import conformance

from real_models import REAL_MODELS


def optimize(model, level=ALL, report=None):
    """The optimizer as sessions run it: constants folded by the CPU kernels."""
    return _optimize(model, level, report, evaluate=constant_evaluator())


RTOL, ATOL = 1e-4, 1e-5
LEVELS = [BASIC, EXTENDED, ALL]
F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, inits=(), opset=17, extra_opsets=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs,
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), *extra_opsets])
    m.ir_version = 8
    return m.SerializeToString()


def _vi(name, shape, elem=F):
    return helper.make_tensor_value_info(name, elem, shape)


def _unoptimized_session(model_or_bytes):
    """Sessions optimize by default: here the optimizer under test is the only one that runs."""
    opts = edgerun.SessionOptions()
    opts.graph_optimization_level = edgerun.GraphOptimizationLevel.ORT_DISABLE_ALL
    return edgerun.InferenceSession(model_or_bytes, sess_options=opts)


def _run(model_or_bytes, feeds):
    return _unoptimized_session(model_or_bytes).run(None, feeds)


def _ops(model):
    return sorted(n.op_type for n in model.graph.nodes)


def _check(data, feeds, level=ALL):
    """Optimize, compare with the unoptimized run; return the optimized model."""
    expected = _run(data, feeds)
    model = optimize(load_model(data), level)
    got = _run(model, feeds)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL)
    return model


def _check_saved_in_onnxruntime(model, feeds, expected, tmp_path, name="m"):
    path = os.path.join(str(tmp_path), f"{name}.onnx")
    save_optimized(model, path)
    so = onnxruntime.SessionOptions()
    so.log_severity_level = 3
    got = onnxruntime.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(
        None, feeds)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL, err_msg=name)


rng = np.random.default_rng(0)


def _rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)


# ---- basic passes on handmade graphs --------------------------------------------------------


def test_level_zero_changes_nothing():
    data = _model([helper.make_node("Identity", ["x"], ["y"])], [_vi("x", [2])], [_vi("y", [2])])
    assert _ops(optimize(load_model(data), 0)) == ["Identity"]


def test_identity_and_dropout_removed_output_names_kept():
    data = _model([helper.make_node("Relu", ["x"], ["r"]),
                   helper.make_node("Identity", ["r"], ["i"]),
                   helper.make_node("Dropout", ["i"], ["d"]),
                   helper.make_node("Sigmoid", ["d"], ["s"]),
                   helper.make_node("Identity", ["s"], ["y"])],
                  [_vi("x", [3, 4])], [_vi("y", [3, 4])])
    model = _check(data, {"x": _rand(3, 4)}, BASIC)
    assert _ops(model) == ["Relu", "Sigmoid"]
    assert [v.name for v in model.graph.outputs] == ["y"]
    assert model.graph.nodes[-1].outputs == ["y"]


def test_constant_folding_and_dead_nodes():
    data = _model([helper.make_node("Constant", [], ["c"], value_floats=[1.0, 2.0, 3.0]),
                   helper.make_node("Mul", ["c", "two"], ["c2"]),
                   helper.make_node("Neg", ["c2"], ["c3"]),
                   helper.make_node("Add", ["x", "c3"], ["y"]),
                   helper.make_node("Exp", ["x"], ["unused"]),
                   helper.make_node("RandomUniform", [], ["r"], shape=[3]),
                   helper.make_node("Add", ["y", "r"], ["z"])],
                  [_vi("x", [3])], [_vi("y", [3]), _vi("z", [3])],
                  [("two", np.float32(2)), ("dead_init", np.zeros(5, np.float32))])
    model = optimize(load_model(data), BASIC)
    assert _ops(model) == ["Add", "Add", "RandomUniform"]          # random op never folded
    assert "dead_init" not in model.graph.initializers
    x = _rand(3)
    np.testing.assert_allclose(_run(model, {"x": x})[0], x - [2, 4, 6], rtol=RTOL, atol=ATOL)


def test_constant_folding_does_not_balloon_the_model():
    data = _model([helper.make_node("ConstantOfShape", ["shape"], ["big"]),
                   helper.make_node("Add", ["x", "big"], ["y"])],
                  [_vi("x", [8192, 4096])], [_vi("y", [8192, 4096])],
                  [("shape", np.array([8192, 4096], np.int64))])     # 128 MiB > MAX_GROWTH
    model = optimize(load_model(data), ALL)
    assert "ConstantOfShape" in _ops(model)


def test_conv_batchnorm_and_conv_add_folded():
    c = 4
    data = _model([helper.make_node("Conv", ["x", "w", "b"], ["c1"], pads=[1, 1, 1, 1]),
                   helper.make_node("BatchNormalization", ["c1", "g", "beta", "m", "v"], ["bn"],
                                    epsilon=1e-3),
                   helper.make_node("Conv", ["bn", "w2"], ["c2"]),
                   helper.make_node("Add", ["bias2", "c2"], ["y"])],
                  [_vi("x", [2, 3, 6, 6])], [_vi("y", [2, c, 6, 6])],
                  [("w", _rand(c, 3, 3, 3)), ("b", _rand(c)), ("g", _rand(c)),
                   ("beta", _rand(c)), ("m", _rand(c)), ("v", np.abs(_rand(c)) + 0.5),
                   ("w2", _rand(c, c, 1, 1)), ("bias2", _rand(1, c, 1, 1))])
    model = _check(data, {"x": _rand(2, 3, 6, 6)}, BASIC)
    assert _ops(model) == ["Conv", "Conv"]
    assert len(model.graph.nodes[1].inputs) == 3


def test_conv_mul_add_folded_into_the_conv(tmp_path):
    """BatchNormalization exported as Mul + Add after a Conv (inception_v2): both fold, with
    and without a conv bias and for a scalar scale; a Mul that varies along a spatial axis
    stays."""
    c = 4
    data = _model([helper.make_node("Conv", ["x", "w"], ["c1"], pads=[1, 1, 1, 1]),
                   helper.make_node("Mul", ["c1", "scale"], ["m1"]),
                   helper.make_node("Add", ["m1", "shift"], ["a1"]),
                   helper.make_node("Relu", ["a1"], ["r1"]),
                   helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"]),
                   helper.make_node("Mul", ["half", "c2"], ["y"]),
                   helper.make_node("Conv", ["x", "w3"], ["c3"]),
                   helper.make_node("Mul", ["c3", "rows"], ["z"])],
                  [_vi("x", [2, 3, 6, 6])], [_vi("y", [2, c, 6, 6]), _vi("z", [2, c, 6, 6])],
                  [("w", _rand(c, 3, 3, 3)), ("scale", _rand(1, c, 1, 1)),
                   ("shift", _rand(c, 1, 1)), ("w2", _rand(c, c, 1, 1)), ("b2", _rand(c)),
                   ("half", np.array(0.5, np.float32)), ("w3", _rand(c, 3, 1, 1)),
                   ("rows", _rand(1, 1, 6, 1))])
    feeds = {"x": _rand(2, 3, 6, 6)}
    model = _check(data, feeds, BASIC)
    assert _ops(model) == ["Conv", "Conv", "Conv", "Mul", "Relu"]
    _check_saved_in_onnxruntime(model, feeds, _run(data, feeds), tmp_path)


def test_batchnorm_absorbs_the_per_channel_mul_and_add_after_it(tmp_path):
    """BN -> Mul -> Add -> Relu (densenet121's pre-activations, after a Concat): one
    BatchNormalization remains. A BN whose output has a second reader, and a Mul that varies
    along a spatial axis, stay."""
    c = 3
    bn_inputs = lambda tag: [f"s{tag}", f"b{tag}", f"m{tag}", f"v{tag}"]      # noqa: E731
    data = _model([helper.make_node("BatchNormalization", ["x"] + bn_inputs(1), ["n1"],
                                    epsilon=1e-3),
                   helper.make_node("Mul", ["n1", "scale"], ["p1"]),
                   helper.make_node("Add", ["shift", "p1"], ["a1"]),
                   helper.make_node("Relu", ["a1"], ["y"]),
                   helper.make_node("BatchNormalization", ["x"] + bn_inputs(2), ["n2"]),
                   helper.make_node("Mul", ["n2", "rows"], ["p2"]),
                   helper.make_node("Add", ["p2", "n2"], ["z"])],
                  [_vi("x", [2, c, 5, 4])], [_vi("y", [2, c, 5, 4]), _vi("z", [2, c, 5, 4])],
                  [(f"s{i}", _rand(c)) for i in (1, 2)] + [(f"b{i}", _rand(c)) for i in (1, 2)]
                  + [(f"m{i}", _rand(c)) for i in (1, 2)]
                  + [(f"v{i}", np.abs(_rand(c)) + 0.5) for i in (1, 2)]
                  + [("scale", _rand(c, 1, 1)), ("shift", _rand(1, c, 1, 1)),
                     ("rows", _rand(1, 1, 5, 1))])
    feeds = {"x": _rand(2, c, 5, 4)}
    model = _check(data, feeds, BASIC)
    assert _ops(model) == ["Add", "BatchNormalization", "BatchNormalization", "Mul", "Relu"]
    _check_saved_in_onnxruntime(model, feeds, _run(data, feeds), tmp_path)


def test_matmul_add_to_gemm_only_for_2d():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node("Add", ["m", "b"], ["y"])]
    inits = [("w", _rand(4, 5)), ("b", _rand(5))]
    data2 = _model(nodes, [_vi("x", [3, 4])], [_vi("y", [3, 5])], inits)
    assert _ops(_check(data2, {"x": _rand(3, 4)}, BASIC)) == ["Gemm"]
    data3 = _model(nodes, [_vi("x", [2, 3, 4])], [_vi("y", [2, 3, 5])], inits)
    assert _ops(_check(data3, {"x": _rand(2, 3, 4)}, BASIC)) == ["Add", "MatMul"]


ML = helper.make_opsetid("ai.onnx.ml", 1)


def _scaler_gemm_model(input_elem, cast, offset, scale, trans_b, alpha=1.0, beta=1.0,
                       bias=True):
    """x -> Scaler [-> Cast to float] -> Gemm (4 features -> 3)."""
    nodes = [helper.make_node("Scaler", ["x"], ["s"], domain="ai.onnx.ml", offset=offset,
                              scale=scale)]
    if cast:
        nodes.append(helper.make_node("Cast", ["s"], ["c"], to=F))
    nodes.append(helper.make_node("Gemm", ["c" if cast else "s", "w"] + (["b"] if bias else []),
                                  ["y"], transB=trans_b, alpha=alpha, beta=beta))
    inits = [("w", _rand(3, 4) if trans_b else _rand(4, 3))] + ([("b", _rand(3))] if bias else [])
    return _model(nodes, [_vi("x", [5, 4], input_elem)], [_vi("y", [5, 3])], inits,
                  extra_opsets=[ML])


@pytest.mark.parametrize("input_elem,cast,trans_b,alpha,beta,bias", [
    (F, True, 0, 1.0, 1.0, True), (TensorProto.DOUBLE, False, 1, 0.5, 2.0, True),
    (TensorProto.INT64, False, 0, 1.0, 0.0, True), (F, False, 1, 2.0, 1.0, False)])
def test_scaler_folds_into_gemm(input_elem, cast, trans_b, alpha, beta, bias, tmp_path):
    data = _scaler_gemm_model(input_elem, cast, [0.5, -1.0, 2.0, 0.0], [2.0, 0.5, 1.5, 3.0],
                              trans_b, alpha, beta, bias)
    x = (rng.standard_normal((5, 4)) * 3)
    feeds = {"x": x.astype(helper.tensor_dtype_to_np_dtype(input_elem))}
    model = _check(data, feeds, BASIC)
    assert _ops(model) == (["Gemm"] if input_elem == F else ["Cast", "Gemm"])
    _check_saved_in_onnxruntime(model, feeds, _run(data, feeds), tmp_path, "scaler")


@pytest.mark.parametrize("op,input_elem,cast,intercepts", [
    ("LinearClassifier", F, False, True), ("LinearClassifier", TensorProto.DOUBLE, True, True),
    ("LinearRegressor", F, True, False), ("LinearRegressor", TensorProto.INT64, False, True)])
def test_scaler_folds_into_linear_models(op, input_elem, cast, intercepts, tmp_path):
    """Scaler [-> Cast] -> LinearClassifier / LinearRegressor becomes the model (after a Cast
    where x is not float), its coefficients scaled and intercepts shifted: outputs as
    before, and as onnxruntime's."""
    nodes = [helper.make_node("Scaler", ["x"], ["s"], domain="ai.onnx.ml",
                              offset=[0.5, -1.0, 2.0, 0.0], scale=[2.0, 0.5, 1.5, 3.0])]
    if cast:
        nodes.append(helper.make_node("Cast", ["s"], ["c"], to=F))
    coefficients = [float(v) for v in _rand(3 * 4)]
    extra = {"intercepts": [0.5, -0.25, 1.0]} if intercepts else {}
    if op == "LinearClassifier":
        nodes.append(helper.make_node(op, ["c" if cast else "s"], ["label", "y"],
                                      domain="ai.onnx.ml", coefficients=coefficients,
                                      classlabels_ints=[0, 1, 2], post_transform="SOFTMAX",
                                      **extra))
        outputs = [_vi("label", [5], TensorProto.INT64), _vi("y", [5, 3])]
    else:
        nodes.append(helper.make_node(op, ["c" if cast else "s"], ["y"], domain="ai.onnx.ml",
                                      coefficients=coefficients, targets=3, **extra))
        outputs = [_vi("y", [5, 3])]
    data = _model(nodes, [_vi("x", [5, 4], input_elem)], outputs, extra_opsets=[ML])
    feeds = {"x": (rng.standard_normal((5, 4)) * 3).astype(
        helper.tensor_dtype_to_np_dtype(input_elem))}
    model = _check(data, feeds, BASIC)
    assert _ops(model) == ([op] if input_elem == F else sorted(["Cast", op]))
    _check_saved_in_onnxruntime(model, feeds, _run(data, feeds), tmp_path, "scaler_linear")


def test_scaler_with_a_large_offset_or_other_readers_stays():
    far = _scaler_gemm_model(F, True, [100.0, 0, 0, 0], [1.0, 1, 1, 1], 0)
    assert "Scaler" in _ops(_check(far, {"x": _rand(5, 4)}, BASIC))
    shared = _model([helper.make_node("Scaler", ["x"], ["s"], domain="ai.onnx.ml",
                                      offset=[1.0], scale=[2.0]),
                     helper.make_node("Gemm", ["s", "w"], ["y"]),
                     helper.make_node("Relu", ["s"], ["r"])],
                    [_vi("x", [5, 4])], [_vi("y", [5, 3]), _vi("r", [5, 4])],
                    [("w", _rand(4, 3))], extra_opsets=[ML])
    assert "Scaler" in _ops(_check(shared, {"x": _rand(5, 4)}, BASIC))


# ---- extended fusions -------------------------------------------------------------------------


def test_activation_fusion(tmp_path):
    data = _model([helper.make_node("Conv", ["x", "w"], ["c"]),
                   helper.make_node("LeakyRelu", ["c"], ["a"], alpha=0.2),
                   helper.make_node("Flatten", ["a"], ["f"]),
                   helper.make_node("Gemm", ["f", "gw", "gb"], ["g"], transB=1),
                   helper.make_node("HardSigmoid", ["g"], ["h"], alpha=0.3, beta=0.4),
                   helper.make_node("MatMul", ["h", "mw"], ["mm"]),
                   helper.make_node("Clip", ["mm", "lo", "hi"], ["y"])],
                  [_vi("x", [2, 3, 5, 5])], [_vi("y", [2, 6])],
                  [("w", _rand(4, 3, 3, 3)), ("gw", _rand(7, 36)), ("gb", _rand(7)),
                   ("mw", _rand(7, 6)), ("lo", np.float32(-0.5)), ("hi", np.float32(0.5))])
    feeds = {"x": _rand(2, 3, 5, 5)}
    model = _check(data, feeds, EXTENDED)
    assert _ops(model) == ["Flatten", "FusedConv", "FusedGemm", "FusedMatMul"]
    assert optimize(load_model(data), BASIC).graph.nodes[1].op_type == "LeakyRelu"
    _check_saved_in_onnxruntime(model, feeds, _run(data, feeds), tmp_path, "activations")


@pytest.mark.parametrize("provider", ["cpu", "wasm", "webgpu"])
def test_hard_swish_fuses_into_conv_and_gemm_on_every_provider(provider, tmp_path,
                                                               gpu_if_webgpu):
    """MobileNetV3 / PP-LCNet's Conv -> HardSwish (and a Gemm -> HardSwish head) become one
    fused node on each provider, matching onnxruntime on the unfused graph; the saved file
    (FusedConv kept, FusedGemm written as Gemm + HardSwish) loads in onnxruntime."""
    data = _model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                   helper.make_node("HardSwish", ["c"], ["a"]),
                   helper.make_node("Flatten", ["a"], ["f"]),
                   helper.make_node("Gemm", ["f", "gw", "gb"], ["g"], transB=1),
                   helper.make_node("HardSwish", ["g"], ["y"])],
                  [_vi("x", [1, 3, 5, 5])], [_vi("y", [1, 7])],
                  [("w", _rand(4, 3, 3, 3)), ("gw", _rand(7, 100)), ("gb", _rand(7))],
                  opset=14)
    feeds = {"x": _rand(1, 3, 5, 5) * 4}
    sess = edgerun.InferenceSession(data, providers=[provider])
    placed = {(n["op_type"], n["provider"]) for n in sess.explain()["nodes"]}
    assert placed == {("FusedConv", provider), ("Flatten", provider), ("FusedGemm", provider)}
    want = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_allclose(sess.run(None, feeds)[0], want[0], rtol=1e-4, atol=1e-4)
    if provider == "cpu":
        model = _check(data, feeds, EXTENDED)
        _check_saved_in_onnxruntime(model, feeds, want, tmp_path, "hard_swish_fused")


@pytest.mark.parametrize("provider", ["cpu", "wasm", "webgpu"])
def test_hard_swish_below_opset_14_fuses_into_conv_on_every_provider(provider, tmp_path,
                                                                      gpu_if_webgpu):
    """Below opset 14 fuse_hard_swish writes com.edgerun HardSwish (PaddleOCR's
    x * relu6(x + 3) / 6 at opset 11); fuse_activation takes that one too, so Conv +
    HardSwish is one FusedConv (ppocr cls: 18 pairs, det 24, rec 28), matching onnxruntime
    on the unfused graph; the saved file loads in onnxruntime."""
    nodes = [helper.make_node("Conv", ["img", "w", "b"], ["x"], pads=[1, 1, 1, 1])]
    nodes += _hard_swish_nodes("mul_then_div")
    data = _model(nodes, [_vi("img", [1, 3, 6, 5])], [_vi("y", [1, 4, 6, 5])],
                  [("w", _rand(4, 3, 3, 3)), ("b", _rand(4)), ("three", np.float32(3)),
                   ("zero", np.float32(0)), ("six", np.float32(6))], opset=11)
    feeds = {"img": _rand(1, 3, 6, 5) * 3}
    sess = edgerun.InferenceSession(data, providers=[provider])
    placed = {(n["op_type"], n["provider"]) for n in sess.explain()["nodes"]}
    assert placed == {("FusedConv", provider)}, placed
    want = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_allclose(sess.run(None, feeds)[0], want[0], rtol=1e-4, atol=1e-4)
    if provider == "cpu":
        model = _check(data, feeds, EXTENDED)
        assert model.graph.nodes[0].attr("activation") in (b"HardSwish", "HardSwish")
        _check_saved_in_onnxruntime(model, feeds, want, tmp_path, "hard_swish_opset11")


def _layer_norm_nodes(x="x", y="y", pow_form=True):
    square = (helper.make_node("Pow", ["d", "two"], ["sq"]) if pow_form
              else helper.make_node("Mul", ["d", "d"], ["sq"]))
    return [helper.make_node("ReduceMean", [x], ["mean"], axes=[-1]),
            helper.make_node("Sub", [x, "mean"], ["d"]),
            square,
            helper.make_node("ReduceMean", ["sq"], ["var"], axes=[-1]),
            helper.make_node("Add", ["var", "eps"], ["ve"]),
            helper.make_node("Sqrt", ["ve"], ["std"]),
            helper.make_node("Div", ["d", "std"], ["n"]),
            helper.make_node("Mul", ["n", "gamma"], ["ng"]),
            helper.make_node("Add", ["ng", "beta"], [y])]


@pytest.mark.parametrize("opset,pow_form", [(13, True), (13, False), (17, True)])
def test_layer_norm_fusion(opset, pow_form, tmp_path):
    data = _model(_layer_norm_nodes(pow_form=pow_form), [_vi("x", [2, 5, 8])],
                  [_vi("y", [2, 5, 8])],
                  [("two", np.float32(2)), ("eps", np.float32(1e-5)), ("gamma", _rand(8)),
                   ("beta", _rand(8))], opset=opset)
    feeds = {"x": _rand(2, 5, 8)}
    model = _check(data, feeds, EXTENDED)
    assert _ops(model) == ["LayerNormalization"]
    assert model.graph.nodes[0].domain == ("" if opset >= 17 else "com.edgerun")
    _check_saved_in_onnxruntime(model, feeds, _run(data, feeds), tmp_path, f"ln{opset}")


def _gelu_erf_nodes(half_first):
    if half_first:   # (x * 0.5) * (1 + erf(x / sqrt2))
        tail = [helper.make_node("Mul", ["half", "x"], ["hx"]),
                helper.make_node("Mul", ["hx", "p1"], ["y"])]
    else:            # (x * (1 + erf(x / sqrt2))) * 0.5
        tail = [helper.make_node("Mul", ["x", "p1"], ["xp"]),
                helper.make_node("Mul", ["xp", "half"], ["y"])]
    return [helper.make_node("Div", ["x", "sqrt2"], ["xs"]),
            helper.make_node("Erf", ["xs"], ["e"]),
            helper.make_node("Add", ["e", "one"], ["p1"])] + tail


def _gelu_tanh_nodes():
    return [helper.make_node("Pow", ["x", "three"], ["x3"]),
            helper.make_node("Mul", ["x3", "k1"], ["kx3"]),
            helper.make_node("Add", ["x", "kx3"], ["inner"]),
            helper.make_node("Mul", ["k2", "inner"], ["arg"]),
            helper.make_node("Tanh", ["arg"], ["t"]),
            helper.make_node("Add", ["t", "one"], ["p1"]),
            helper.make_node("Mul", ["x", "half"], ["hx"]),
            helper.make_node("Mul", ["hx", "p1"], ["y"])]


@pytest.mark.parametrize("form,opset", [("erf", 17), ("erf_half_first", 13), ("erf", 20),
                                        ("tanh", 17)])
def test_gelu_fusion(form, opset, tmp_path):
    nodes = _gelu_tanh_nodes() if form == "tanh" else _gelu_erf_nodes("half" in form)
    data = _model(nodes, [_vi("x", [3, 7])], [_vi("y", [3, 7])],
                  [("sqrt2", np.float32(np.sqrt(2))), ("one", np.float32(1)),
                   ("half", np.float32(0.5)), ("three", np.float32(3)),
                   ("k1", np.float32(0.044715)), ("k2", np.float32(np.sqrt(2 / np.pi)))],
                  opset=opset)
    feeds = {"x": _rand(3, 7) * 3}
    model = _check(data, feeds, EXTENDED)
    assert _ops(model) == ["Gelu"]
    assert model.graph.nodes[0].domain == ("" if opset >= 20 else "com.edgerun")
    _check_saved_in_onnxruntime(model, feeds, _run(data, feeds), tmp_path, f"gelu_{form}")


@pytest.mark.parametrize("form", ["erf", "erf_half_first", "tanh"])
def test_float16_gelu_fuses_and_matches_onnxruntime_on_cpu_and_wasm(form):
    """A float16 model's GELU (constants rounded to float16: sqrt(2) is 1.4140625) fuses too,
    computed in float32 and rounded once where it leaves the graph: within float16's precision of onnxruntime's run
    of the unfused float16 graph, on cpu and wasm."""
    nodes = _gelu_tanh_nodes() if form == "tanh" else _gelu_erf_nodes("half" in form)
    half = TensorProto.FLOAT16
    constants = {"sqrt2": np.sqrt(2), "one": 1, "half": 0.5, "three": 3, "k1": 0.044715,
                 "k2": np.sqrt(2 / np.pi)}
    data = _model(nodes, [_vi("x", [3, 7], half)], [_vi("y", [3, 7], half)],
                  [(k, np.float16(v)) for k, v in constants.items()])
    feeds = {"x": (_rand(3, 7) * 3).astype(np.float16)}
    so = onnxruntime.SessionOptions()
    so.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = onnxruntime.InferenceSession(data, so, providers=["CPUExecutionProvider"]).run(
        None, feeds)[0]
    # fused in float16, then computed in float32 (float16_as_float32): x cast in, y out
    assert _ops(optimize(load_model(data), EXTENDED)) == ["Cast", "Cast", "Gelu"]
    for provider in ("cpu", "wasm"):
        sess = edgerun.InferenceSession(data, providers=[provider])
        assert [(n["op_type"], n["provider"]) for n in sess.explain()["nodes"]] == \
            [("Cast", provider), ("Gelu", provider), ("Cast", provider)]
        got = sess.run(None, feeds)[0]
        assert got.dtype == np.float16
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32),
                                   rtol=4e-3, atol=4e-3, err_msg=provider)


def _attention_model(style, opset=17, batch=2, seq=5, heads=2, size=4):
    """A BERT-style self-attention block from a [batch, seq, hidden] input: projections,
    Reshape/Transpose to heads, scaled scores, additive mask, Softmax, MatMul, back."""
    hidden = heads * size
    split = np.array([batch, seq, heads, size], np.int64)
    nodes, inits = [], [("split", split), ("merge", np.array([batch, seq, hidden], np.int64))]
    for p in "qkv":
        inits.append((f"w{p}", _rand(hidden, hidden)))
        nodes += [helper.make_node("MatMul", ["x", f"w{p}"], [f"{p}p"]),
                  helper.make_node("Reshape", [f"{p}p", "split"], [f"{p}r"])]
    nodes += [helper.make_node("Transpose", ["qr"], ["q"], perm=[0, 2, 1, 3]),
              helper.make_node("Transpose", ["vr"], ["v"], perm=[0, 2, 1, 3])]
    if style == "bert":          # MatMul(Q, K^T) / sqrt(size), K^T straight from [b, s, h, d]
        nodes += [helper.make_node("Transpose", ["kr"], ["kt"], perm=[0, 2, 3, 1]),
                  helper.make_node("MatMul", ["q", "kt"], ["qk"]),
                  helper.make_node("Div", ["qk", "root"], ["scores"])]
        inits.append(("root", np.float32(np.sqrt(size))))
    else:                        # torch sdpa: Q and K^T each times sqrt(scale)
        nodes += [helper.make_node("Transpose", ["kr"], ["k"], perm=[0, 2, 1, 3]),
                  helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
                  helper.make_node("Mul", ["q", "s"], ["qs"]),
                  helper.make_node("Mul", ["kt", "s"], ["kts"]),
                  helper.make_node("MatMul", ["qs", "kts"], ["scores"])]
        inits.append(("s", np.float32(size ** -0.25)))
    nodes += [helper.make_node("Add", ["scores", "mask"], ["logits"]),
              helper.make_node("Softmax", ["logits"], ["probs"], axis=-1),
              helper.make_node("MatMul", ["probs", "v"], ["ctx"]),
              helper.make_node("Transpose", ["ctx"], ["ctxt"], perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", ["ctxt", "merge"], ["y"])]
    data = _model(nodes, [_vi("x", [batch, seq, hidden]), _vi("mask", [batch, 1, 1, seq])],
                  [_vi("y", [batch, seq, hidden])], inits, opset=opset)
    mask = np.zeros((batch, 1, 1, seq), np.float32)
    mask[0, ..., -2:] = -10000.0
    return data, {"x": _rand(batch, seq, hidden), "mask": mask}


@pytest.mark.parametrize("style,opset", [("bert", 17), ("sdpa", 17), ("sdpa", 23)])
def test_attention_fusion(style, opset, tmp_path):
    data, feeds = _attention_model(style, opset)
    before = len(load_model(data).graph.nodes)
    model = _check(data, feeds, EXTENDED)
    attention = [n for n in model.graph.nodes if n.op_type == "Attention"]
    assert len(attention) == 1
    assert attention[0].domain == "com.edgerun"
    assert "Softmax" not in _ops(model) and len(model.graph.nodes) < before
    _check_saved_in_onnxruntime(model, feeds, _run(data, feeds), tmp_path, f"{style}{opset}")



# mask shapes the fused Attention must broadcast like numpy's Add: BERT's [b, 1, 1, keys], one
# key column ([b, 1, q, 1], which the provider kernels would otherwise read as padding), a
# full causal [1, 1, q, keys], none
FUSED_MASKS = [(2, (2, 1, 1, 5)), (2, (2, 1, 4, 1)), (1, (1, 1, 4, 5)), (1, None)]


@pytest.mark.parametrize("provider", ["wasm", "webgpu"])
@pytest.mark.parametrize("batch,mask_shape", FUSED_MASKS)
def test_fused_attention_runs_on_the_page_providers(provider, batch, mask_shape, gpu_if_webgpu):
    """The com.edgerun Attention the optimizer makes runs on wasm and WebGPU themselves (a
    page has no numpy CPU provider behind them) and matches onnxruntime on the unfused
    graph (atol 1e-5)."""
    heads, seq_q, seq_k, size = 2, 4, 5, 8
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["qk"]),
             helper.make_node("Div", ["qk", "root"], ["scores"])]
    logits = "scores"
    if mask_shape is not None:
        nodes.append(helper.make_node("Add", ["scores", "mask"], ["logits"]))
        logits = "logits"
    nodes += [helper.make_node("Softmax", [logits], ["probs"], axis=-1),
              helper.make_node("MatMul", ["probs", "v"], ["y"])]
    inputs = [_vi("q", [batch, heads, seq_q, size]), _vi("k", [batch, heads, seq_k, size]),
              _vi("v", [batch, heads, seq_k, size])]
    rng = np.random.default_rng(batch)
    feeds = {n: rng.standard_normal((batch, heads, seq_q if n == "q" else seq_k, size))
             .astype(np.float32) for n in "qkv"}
    if mask_shape is not None:
        inputs.append(_vi("mask", list(mask_shape)))
        feeds["mask"] = np.where(rng.random(mask_shape) < 0.3, -10000.0, 0.0).astype(np.float32)
    data = _model(nodes, inputs, [_vi("y", [batch, heads, seq_q, size])],
                  [("root", np.float32(np.sqrt(size)))], opset=17)
    sess = edgerun.InferenceSession(data, providers=[provider])
    placed = {(n["op_type"], n["provider"]) for n in sess.explain()["nodes"]}
    assert placed == {("Attention", provider)}, placed
    want = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_allclose(sess.run(None, feeds)[0], want[0], rtol=1e-5, atol=1e-5)


@pytest.fixture
def gpu_if_webgpu(request):
    """The WebGPU adapter, required only for the webgpu cases."""
    if request.node.callspec.params.get("provider") == "webgpu":
        request.getfixturevalue("gpu")

def _hard_swish_nodes(form):
    if form == "hard_sigmoid":
        return [helper.make_node("HardSigmoid", ["x"], ["g"], alpha=1 / 6, beta=0.5),
                helper.make_node("Mul", ["g", "x"], ["y"])]
    nodes = [helper.make_node("Add", ["three", "x"], ["p"]),
             helper.make_node("Clip", ["p", "zero", "six"], ["c"])]
    if form == "mul_then_div":                    # PaddleOCR: (x * relu6(x + 3)) / 6
        return nodes + [helper.make_node("Mul", ["x", "c"], ["m"]),
                        helper.make_node("Div", ["m", "six"], ["y"])]
    return nodes + [helper.make_node("Mul", ["c", "sixth"], ["s"]),     # relu6(x + 3) / 6 * x
                    helper.make_node("Mul", ["s", "x"], ["y"])]


@pytest.mark.parametrize("form,opset", [("mul_then_div", 11), ("scale_then_mul", 14),
                                        ("hard_sigmoid", 13)])
def test_hard_swish_fusion(form, opset, tmp_path):
    data = _model(_hard_swish_nodes(form), [_vi("x", [2, 3, 5])], [_vi("y", [2, 3, 5])],
                  [("three", np.float32(3)), ("zero", np.float32(0)), ("six", np.float32(6)),
                   ("sixth", np.float32(1 / 6))], opset=opset)
    feeds = {"x": np.linspace(-5, 5, 30, dtype=np.float32).reshape(2, 3, 5)}  # every branch
    model = _check(data, feeds, EXTENDED)
    assert _ops(model) == ["HardSwish"]
    assert model.graph.nodes[0].domain == ("" if opset >= 14 else "com.edgerun")
    _check_saved_in_onnxruntime(model, feeds, _run(data, feeds), tmp_path, f"hswish_{form}")


def test_hard_swish_not_fused_with_other_bounds_or_readers():
    nodes = _hard_swish_nodes("mul_then_div")
    nodes[1] = helper.make_node("Clip", ["p", "zero", "five"], ["c"])       # relu5: not it
    data = _model(nodes, [_vi("x", [4])], [_vi("y", [4])],
                  [("three", np.float32(3)), ("zero", np.float32(0)), ("six", np.float32(6)),
                   ("five", np.float32(5))], opset=14)
    assert "HardSwish" not in _ops(_check(data, {"x": _rand(4)}, EXTENDED))
    nodes = _hard_swish_nodes("mul_then_div")        # the clipped value is also an output
    data = _model(nodes, [_vi("x", [4])], [_vi("y", [4]), _vi("c", [4])],
                  [("three", np.float32(3)), ("zero", np.float32(0)), ("six", np.float32(6))],
                  opset=14)
    assert "HardSwish" not in _ops(_check(data, {"x": _rand(4)}, EXTENDED))


def _swish_model(opset, sigmoid_reads=("c",)):
    """Conv -> x * Sigmoid(x) (SiLU as exports write it), then Add -> Sigmoid(d) * d (the
    operands the other way round) on its own."""
    nodes = [helper.make_node("Conv", ["img", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["c"], ["s"]),
             helper.make_node("Mul", ["c", "s"], ["a"]),
             helper.make_node("Add", ["a", "shift"], ["d"]),
             helper.make_node("Sigmoid", ["d"], ["t"]),
             helper.make_node("Mul", ["t", "d"], ["y"])]
    outputs = [_vi("y", [1, 4, 6, 5])] + [_vi(n, [1, 4, 6, 5]) for n in sigmoid_reads if n != "c"]
    return _model(nodes, [_vi("img", [1, 3, 6, 5])], outputs,
                  [("w", _rand(4, 3, 3, 3)), ("b", _rand(4)), ("shift", _rand(4, 1, 1))],
                  opset=opset)


@pytest.mark.parametrize("provider", ["cpu", "wasm", "webgpu"])
@pytest.mark.parametrize("opset", [17, 24])
def test_swish_fuses_into_conv_and_stands_alone_on_every_provider(provider, opset, tmp_path,
                                                                   gpu_if_webgpu):
    """x * Sigmoid(x) after a Conv becomes a FusedConv with a Swish activation, and after
    another node one Swish node (com.edgerun's below opset 24, the standard one from it), on
    each provider, matching onnxruntime on the unfused graph (1e-4); the saved file (Sigmoid
    and Mul again) loads in onnxruntime."""
    data = _swish_model(opset)
    feeds = {"img": _rand(1, 3, 6, 5) * 4}
    so = edgerun.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / f"swish_{provider}_{opset}.onnx")
    sess = edgerun.InferenceSession(data, so, providers=[provider])
    nodes = sess.explain()["nodes"]
    assert {(n["op_type"], n["provider"]) for n in nodes} == \
        {("FusedConv", provider), ("Add", provider), ("Swish", provider)}
    want = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_allclose(sess.run(None, feeds)[0], want[0], rtol=1e-4, atol=1e-4)
    saved = onnxruntime.InferenceSession(so.optimized_model_filepath,
                                         providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(saved.run(None, feeds)[0], want[0], rtol=1e-4, atol=1e-4)
    assert "Swish" not in {n.op_type for n in onnx.load(so.optimized_model_filepath).graph.node
                           if n.domain == "com.edgerun"}


def test_swish_not_fused_when_the_sigmoid_is_read_elsewhere_or_not_float32():
    """A sigmoid another node (here the graph's outputs) reads stays; so do float16 pairs."""
    def fused_ops(data):
        return {n["op_type"] for n in
                edgerun.InferenceSession(data, providers=["cpu"]).explain()["nodes"]}
    assert fused_ops(_swish_model(17, sigmoid_reads=("t",))) == {"FusedConv", "Add", "Sigmoid",
                                                                 "Mul"}
    half = _model([helper.make_node("Sigmoid", ["x"], ["s"]),
                   helper.make_node("Mul", ["x", "s"], ["y"])],
                  [_vi("x", [4], TensorProto.FLOAT16)], [_vi("y", [4], TensorProto.FLOAT16)])
    assert "Swish" not in fused_ops(half) and "Sigmoid" in fused_ops(half)


def _if_model_reading_outer_weight():
    """An If whose branches slice and transpose a weight of the main graph: the work the
    silero VAD exports do inside branches on every run."""
    then_graph = helper.make_graph(
        [helper.make_node("Slice", ["w", "starts", "ends", "axes"], ["ws"]),
         helper.make_node("Transpose", ["ws"], ["wt"], perm=[1, 0]),
         helper.make_node("MatMul", ["x", "wt"], ["out_then"])],
        "then", [], [_vi("out_then", [2, 3])])
    else_graph = helper.make_graph([helper.make_node("MatMul", ["x", "w2"], ["out_else"])],
                                   "else", [], [_vi("out_else", [2, 3])])
    nodes = [helper.make_node("If", ["cond"], ["y"], then_branch=then_graph,
                              else_branch=else_graph)]
    inits = [("w", _rand(6, 4)), ("w2", _rand(4, 3)), ("starts", np.array([1], np.int64)),
             ("ends", np.array([4], np.int64)), ("axes", np.array([0], np.int64))]
    return _model(nodes, [_vi("cond", [], TensorProto.BOOL), _vi("x", [2, 4])],
                  [_vi("y", [2, 3])], inits)


def test_subgraphs_fold_constants_of_enclosing_graphs():
    data = _if_model_reading_outer_weight()
    for cond in (True, False):
        model = _check(data, {"cond": np.array(cond), "x": _rand(2, 4)}, BASIC)
    then_graph = model.graph.nodes[0].attr("then_branch")
    assert sorted(n.op_type for n in then_graph.nodes) == ["MatMul"]   # Slice, Transpose folded
    folded = then_graph.nodes[0].inputs[1]
    assert folded in then_graph.initializers and then_graph.initializers[folded].dims == (4, 3)
    assert "w" not in model.graph.initializers            # no reader left: removed


def test_outer_constant_shadowed_by_a_branch_value_is_not_folded():
    """A branch that defines its own `w` (shadowing the outer one) must read its own."""
    then_graph = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["w"]),
         helper.make_node("Slice", ["w", "starts", "ends", "axes"], ["out_then"])],
        "then", [], [_vi("out_then", [1, 4])])
    else_graph = helper.make_graph([helper.make_node("Identity", ["x"], ["out_else"])],
                                   "else", [], [_vi("out_else", [2, 4])])
    data = _model([helper.make_node("If", ["cond"], ["y"], then_branch=then_graph,
                                    else_branch=else_graph)],
                  [_vi("cond", [], TensorProto.BOOL), _vi("x", [2, 4])], [_vi("y", None)],
                  [("w", _rand(6, 4)), ("starts", np.array([1], np.int64)),
                   ("ends", np.array([2], np.int64)), ("axes", np.array([0], np.int64))])
    x = _rand(2, 4)
    model = _check(data, {"cond": np.array(True), "x": x}, BASIC)
    assert "Slice" in [n.op_type for n in model.graph.nodes[0].attr("then_branch").nodes]


def test_passes_skip_graphs_without_their_operators(monkeypatch):
    """Views are built only for graphs a pass can change: one per graph for the passes that
    apply everywhere, none for fusions whose operators are absent."""
    from edgerun.optimizer import graph_edit
    built = []
    original = graph_edit.GraphView.__init__

    def counting(self, graph, ctx, outer=None):
        built.append(graph.name)
        original(self, graph, ctx, outer)

    monkeypatch.setattr(graph_edit.GraphView, "__init__", counting)
    optimize(load_model(_if_model_reading_outer_weight()), ALL)
    # the main graph holds only the If: infer_types, constant_folding x2, fold_shapes,
    # eliminate_dead x2; each branch: constant_folding x2, eliminate_dead x2, and the two
    # MatMul passes
    assert built.count("g") == 6
    assert built.count("then") == built.count("else") == 6


# ---- whole models and conformance cases -------------------------------------------------------


@pytest.mark.parametrize("name", sorted(REAL_MODELS))
def test_real_model_outputs_unchanged_at_every_level(name, tmp_path):
    path, feeds = REAL_MODELS[name]()
    expected = _run(path, feeds)
    count = len(load_model(path).graph.nodes)
    for level in LEVELS:
        model = optimize(load_model(path), level)
        assert len(model.graph.nodes) <= count
        for g, e in zip(_run(model, feeds), expected):
            assert g.dtype == e.dtype and g.shape == e.shape
            np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL, err_msg=f"{name} {level}")
    _check_saved_in_onnxruntime(model, feeds, expected, tmp_path, name)


def test_real_models_shrink():
    """The rewrites happen on real models (counts measured when the passes were written)."""
    for name, most in [("light_resnet50", 137), ("ppocr_mobile_cls", 161),
                       ("digits_mlp", 10), ("light_squeezenet", 41)]:
        path, _ = REAL_MODELS[name]()
        assert len(optimize(load_model(path), ALL).graph.nodes) <= most, name


_CASES = [c for c in conformance.load_cases() if c["name"] not in conformance.expected_failures()]


@pytest.mark.parametrize("level", LEVELS)
def test_conformance_cases_unchanged(level):
    """Every passing node case still passes with the model optimized (its own tolerances).
    (A case that passes only from some level on, as a float16 graph computed in float32
    does, is not broken by the levels below it: it fails unoptimized too.)"""
    failures = []
    for case in _CASES:
        problem = _run_case_optimized(case, level)
        if problem and not _run_case_optimized(case, DISABLE_ALL):
            failures.append(f"{case['name']}: {problem}")
    assert not failures, f"{len(failures)} cases broke: " + "; ".join(failures[:5])


def _run_case_optimized(case, level):
    import warnings

    shape_only = conformance._shape_only(case)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            sess = _unoptimized_session(optimize(load_model(case["model"]), level))
            names = [i.name for i in sess.get_inputs()]
            for inputs, expected in case["data_sets"]:
                got = sess.run(None, dict(zip(names, inputs)))
                problem = conformance.compare_outputs(expected, got, case["rtol"], case["atol"],
                                                      shape_only)
                if problem:
                    return problem
        except Exception as e:  # noqa: BLE001
            return f"{type(e).__name__}: {e}"
    return ""


def test_static_shape_arithmetic_folded():
    """Shape -> Gather -> Unsqueeze -> Concat of a known dim becomes a constant even when the
    batch dim is symbolic (needs edgerun.shape_inference to give the value)."""
    data = _model([helper.make_node("Shape", ["x"], ["s"]),
                   helper.make_node("Gather", ["s", "last"], ["d"], axis=0),
                   helper.make_node("Unsqueeze", ["d", "zero"], ["d1"]),
                   helper.make_node("Concat", ["minus1", "d1"], ["shape"], axis=0),
                   helper.make_node("Reshape", ["x", "shape"], ["y"])],
                  [_vi("x", ["batch", 3, 4])], [_vi("y", None)],
                  [("last", np.array(2, np.int64)), ("zero", np.array([0], np.int64)),
                   ("minus1", np.array([-1], np.int64))])
    try:
        from edgerun.shape_inference import infer_shapes
        known = infer_shapes(load_model(data)).values.get("shape")
    except ImportError as e:
        known = f"{e}"
    if known != [-1, 4]:
        pytest.skip(f"edgerun.shape_inference does not give the value yet: {known}")
    model = _check(data, {"x": _rand(2, 3, 4)}, BASIC)
    assert _ops(model) == ["Reshape"]
    assert model.graph.initializers[model.graph.nodes[0].inputs[1]].numpy().tolist() == [-1, 4]


def test_the_first_session_of_a_process_folds_constants():
    """Constant folding runs with the CPU kernels the session hands the optimizer, also in a
    fresh process where nothing imported the CPU provider yet (an Unsqueeze of a weight
    disappears into an initializer)."""
    import subprocess
    import sys

    data = _model([helper.make_node("Unsqueeze", ["w", "axes"], ["w1"]),
                   helper.make_node("Add", ["x", "w1"], ["y"])],
                  [_vi("x", [2, 3])], [_vi("y", [1, 2, 3])],
                  [("w", _rand(2, 3)), ("axes", np.array([0], np.int64))])
    code = ("import sys, edgerun\n"
            "s = edgerun.InferenceSession(sys.stdin.buffer.read(), providers=['cpu'])\n"
            "print([n['op_type'] for n in s.explain()['nodes']])\n")
    out = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout.decode().strip() == "['Add']"


def _page_model() -> bytes:
    """A model with something for every pass a page runs: constants to fold (a Reshape's
    shape made of Mul, Cast and Concat), Conv + BatchNormalization + Relu, Conv + per-channel
    Mul + Add, BatchNormalization + Mul + Add after a Concat, a GELU formula, a
    LayerNormalization formula, 2-D MatMul + Add, a string Constant nobody reads."""
    rng = np.random.default_rng(3)
    f = lambda *shape: rng.standard_normal(shape).astype(np.float32)   # noqa: E731
    nodes = [
        helper.make_node("Constant", [], ["half"], value_float=0.5),
        helper.make_node("Constant", [], ["s"], value_string="unread"),
        helper.make_node("Identity", ["s"], ["s2"]),
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "g", "beta", "mean", "var"], ["n1"],
                         epsilon=1e-3),
        helper.make_node("Relu", ["n1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"]),
        helper.make_node("Mul", ["c2", "m2"], ["s2m"]),
        helper.make_node("Add", ["s2m", "a2"], ["t2"]),
        helper.make_node("Concat", ["t2", "r1"], ["cat"], axis=1),
        helper.make_node("BatchNormalization", ["cat", "g2", "beta2", "mean2", "var2"], ["n2"]),
        helper.make_node("Mul", ["n2", "m3"], ["n2m"]),
        helper.make_node("Add", ["n2m", "a3"], ["n2a"]),
        helper.make_node("Mul", ["rows", "half"], ["rows_half"]),
        helper.make_node("Cast", ["rows_half"], ["rows64"], to=TensorProto.INT64),
        helper.make_node("Concat", ["rows64", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["n2a", "shape"], ["flat"]),
        # GELU: 0.5 * x * (1 + erf(x / sqrt 2))
        helper.make_node("Div", ["flat", "sqrt2"], ["g_div"]),
        helper.make_node("Erf", ["g_div"], ["g_erf"]),
        helper.make_node("Add", ["g_erf", "one"], ["g_add"]),
        helper.make_node("Mul", ["flat", "g_add"], ["g_mul"]),
        helper.make_node("Mul", ["g_mul", "half"], ["gelu"]),
        # LayerNorm over the last axis
        helper.make_node("ReduceMean", ["gelu"], ["mu"], axes=[-1]),
        helper.make_node("Sub", ["gelu", "mu"], ["d"]),
        helper.make_node("Pow", ["d", "two"], ["d2"]),
        helper.make_node("ReduceMean", ["d2"], ["v"], axes=[-1]),
        helper.make_node("Add", ["v", "eps"], ["ve"]),
        helper.make_node("Sqrt", ["ve"], ["sd"]),
        helper.make_node("Div", ["d", "sd"], ["nrm"]),
        helper.make_node("Mul", ["nrm", "ln_g"], ["lng"]),
        helper.make_node("Add", ["lng", "ln_b"], ["ln"]),
        helper.make_node("MatMul", ["ln", "wm"], ["mm"]),
        helper.make_node("Add", ["mm", "bm"], ["y"]),
    ]
    # w1 is above constant_math.SMALL (its new weights come from the kernels), the
    # per-channel vectors below it (computed in Python)
    inits = [("w1", f(48, 3, 3, 3)), ("b1", f(48)), ("g", f(48)), ("beta", f(48)),
             ("mean", f(48)), ("var", np.abs(f(48)) + 0.5), ("w2", f(4, 48, 1, 1)),
             ("m2", f(1, 4, 1, 1)), ("a2", f(4, 1, 1)), ("g2", f(52)), ("beta2", f(52)),
             ("mean2", f(52)), ("var2", np.abs(f(52)) + 0.5), ("m3", f(1, 52, 1, 1)),
             ("a3", f(52, 1, 1)),
             ("rows", np.float32([4])), ("minus1", np.int64([-1])),
             ("sqrt2", np.float32(np.sqrt(2))), ("one", np.float32(1)), ("two", np.float32(2)),
             ("eps", np.float32(1e-5)), ("ln_g", f(1040)), ("ln_b", f(1040)), ("wm", f(1040, 6)),
             ("bm", f(6))]
    return _model(nodes, [_vi("x", [2, 3, 5, 4])], [_vi("y", [2, 6])], inits, opset=13)


def test_without_numpy_the_page_folds_and_fuses_as_natively(tmp_path):
    """In a page there is no numpy: constants are HostTensors, and constant folding and the
    new weights of Conv + BatchNorm/Mul/Add run on the wasm provider's kernels. A
    numpy-blocked subprocess must make the graph the numpy path makes, with bit-identical
    initializers, and compute onnxruntime's answer (1e-4)."""
    import base64
    import subprocess
    import sys

    path = str(tmp_path / "m.onnx")
    with open(path, "wb") as f:
        f.write(_page_model())
    x = np.random.default_rng(4).standard_normal((2, 3, 5, 4)).astype(np.float32)
    code = ("import sys, json, base64; sys.modules['numpy'] = None\n"
            "import edgerun\n"
            "from edgerun.optimizer import optimize\n"
            "from edgerun.ir.host_tensor import HostTensor\n"
            "from edgerun.providers.registry import constant_evaluator\n"
            "from edgerun.session.inference_session import load_model\n"
            "report = {}\n"
            "model = optimize(load_model(sys.argv[1]), report=report,\n"
            "                 evaluate=constant_evaluator())\n"
            "s = edgerun.InferenceSession(sys.argv[1], providers=['wasm'])\n"
            "x = HostTensor(1, (2, 3, 5, 4), base64.b64decode(sys.argv[2]))\n"
            "y = s.run(None, {'x': x})[0]\n"
            "print(json.dumps({'ops': [n.op_type for n in model.graph.nodes],\n"
            "                  'report': report,\n"
            "                  'initializers': {k: base64.b64encode(t.raw).decode()\n"
            "                                   for k, t in model.graph.initializers.items()},\n"
            "                  'y': base64.b64encode(bytes(y.data)).decode()}))\n")
    out = subprocess.run([sys.executable, "-c", code, path, base64.b64encode(x.tobytes())],
                         capture_output=True, text=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.returncode == 0, out.stderr[-3000:]
    page = json.loads(out.stdout.strip().splitlines()[-1])
    native = _optimize(load_model(path), evaluate=constant_evaluator())
    assert page["ops"] == [n.op_type for n in native.graph.nodes]
    for name in ("constant_folding", "fuse_conv_bn", "fuse_conv_mul", "fuse_conv_add",
                 "fuse_bn_mul_add", "fuse_gelu", "fuse_layer_norm", "fuse_matmul_add",
                 "fuse_activation", "eliminate_identity"):
        assert page["report"].get(name), (name, page["report"])
    assert "Identity" not in page["ops"] and "Constant" not in page["ops"]
    assert sorted(page["initializers"]) == sorted(native.graph.initializers)
    for name, tensor in native.graph.initializers.items():
        assert base64.b64decode(page["initializers"][name]) == tensor.raw, name
    y = np.frombuffer(base64.b64decode(page["y"]), np.float32).reshape(2, 6)
    want = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


CONSTANT_MATH_WITHOUT_NUMPY = r"""
import sys, json, struct
sys.modules["numpy"] = None
from edgerun import ir
from edgerun.ir.host_tensor import HostTensor
from edgerun.optimizer.constant_math import ConstantMath
from edgerun.optimizer.graph_edit import PassContext
from edgerun.providers.registry import constant_evaluator

model = ir.Model(graph=ir.Graph(name="g", nodes=[], inputs=[], outputs=[], initializers={}))
m = ConstantMath(PassContext(model, constant_evaluator()))
t = lambda kind, values: HostTensor.from_values(kind, (len(values),), values)
F, D, H = 1, 11, 10
out = {
    "div": m.div(t(F, [1.0, -1.0, 0.0, 3.0]), t(F, [0.0, 0.0, 0.0, 7.0])),
    "sqrt": m.sqrt(t(D, [4.0, -1.0, 2.0])),
    "narrow": m.cast(t(D, [1e39, -1e39, 0.1, 65519.0]), F),
    "half": m.cast(t(D, [65519.0, 65520.0, 1e-8, 0.1]), H),
    "sum16": m.add(t(H, [0.1, 1000.0, 60000.0]), t(H, [0.2, 0.3, 60000.0])),
    "big": m.mul(t(F, [0.1 * i for i in range(3000)]), t(F, [3.0])),
}
print(json.dumps({k: [v.elem_type, list(v.values())] for k, v in out.items()}))
"""


def test_constant_math_without_numpy_matches_numpy_at_the_edges():
    """The page's constant arithmetic (optimizer/constant_math.py: Python floats for small
    tensors, the wasm kernels for large ones and for what Python raises on) gives numpy's
    values bit for bit (NaN as NaN): x/0, sqrt(-1), float32 and float16 overflow, float16
    rounding."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", CONSTANT_MATH_WITHOUT_NUMPY], capture_output=True,
                         text=True, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.returncode == 0, out.stderr[-3000:]
    got = {k: np.array(v, dtype={1: np.float32, 11: np.float64, 10: np.float16}[t])
           for k, (t, v) in json.loads(out.stdout.strip().splitlines()[-1]).items()}
    with np.errstate(all="ignore"):
        want = {"div": np.float32([1, -1, 0, 3]) / np.float32([0, 0, 0, 7]),
                "sqrt": np.sqrt(np.float64([4, -1, 2])),
                "narrow": np.float64([1e39, -1e39, 0.1, 65519]).astype(np.float32),
                "half": np.float64([65519, 65520, 1e-8, 0.1]).astype(np.float16),
                "sum16": np.float16([0.1, 1000, 60000]) + np.float16([0.2, 0.3, 60000]),
                "big": np.float32([0.1 * i for i in range(3000)]) * np.float32(3)}
    for name, value in want.items():
        assert got[name].dtype == value.dtype, name
        nan = np.isnan(value)      # a NaN's sign bit is the machine's (x86 gives -nan)
        assert (np.isnan(got[name]) == nan).all(), (name, got[name], value)
        assert got[name][~nan].tobytes() == value[~nan].tobytes(), (name, got[name], value)


def _float16_block(with_subgraph=False):
    """A float16 model: y = Softmax(x @ W + b) * ConstantOfShape(Shape(x), 0.5) and
    z = y + Cast(n) (n an int64 input), with y also an output, read inside the graph."""
    half = TensorProto.FLOAT16
    nodes = [helper.make_node("MatMul", ["x", "W"], ["xw"]),
             helper.make_node("Add", ["xw", "b"], ["s"]),
             helper.make_node("Softmax", ["s"], ["p"], axis=-1),
             helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("ConstantOfShape", ["shape"], ["halves"],
                              value=numpy_helper.from_array(np.float16([0.5]))),
             helper.make_node("Mul", ["p", "halves"], ["y"]),
             helper.make_node("Cast", ["n"], ["nf"], to=half),
             helper.make_node("Add", ["y", "nf"], ["z"])]
    if with_subgraph:
        branch = helper.make_graph([helper.make_node("Identity", ["z"], ["zz"])], "then", [],
                                   [_vi("zz", None, half)])
        nodes.append(helper.make_node("If", ["flag"], ["z2"], then_branch=branch,
                                      else_branch=branch))
    inputs = [_vi("x", [3, 8], half), _vi("n", [3, 1], TensorProto.INT64)] + \
        ([_vi("flag", [], TensorProto.BOOL)] if with_subgraph else [])
    outputs = [_vi("y", [3, 8], half), _vi("z", [3, 8], half)] + \
        ([_vi("z2", None, half)] if with_subgraph else [])
    weights = [("W", (_rand(8, 8) / 2).astype(np.float16)), ("b", _rand(8).astype(np.float16))]
    return _model(nodes, inputs, outputs, weights)


def test_float16_model_computes_in_float32_between_its_inputs_and_outputs():
    """float16_as_float32: float16 weights become float32, float16 inputs are cast where
    they enter and outputs where they leave, Cast(to=float16) and ConstantOfShape's float16
    fill become float32; the results are the float32 computation of the float16 values,
    rounded once (onnxruntime on the float32 twin of the model), on cpu and wasm; the
    signature stays float16. With a subgraph the model is left as it is."""
    data = _float16_block()
    model = optimize(load_model(data), EXTENDED)
    casts = [(n.inputs[0], n.attr("to")) for n in model.graph.nodes if n.op_type == "Cast"]
    assert sorted(to for _, to in casts) == [1, 1, 10, 10], casts      # x in, n, y and z out
    assert {t.elem_type for t in model.graph.initializers.values()} <= {1, 7}
    feeds = {"x": (_rand(3, 8) * 2).astype(np.float16), "n": np.int64([[1], [-2], [3]])}
    twin = onnx.load_from_string(data)
    for t in twin.graph.initializer:
        t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float32), t.name))
    for v in list(twin.graph.input[:1]) + list(twin.graph.output):
        v.type.tensor_type.elem_type = TensorProto.FLOAT
    for node in twin.graph.node:
        for a in node.attribute:
            if a.name == "to":
                a.i = TensorProto.FLOAT
            elif a.name == "value":
                a.t.CopyFrom(numpy_helper.from_array(np.float32([0.5])))
    wide = {"x": feeds["x"].astype(np.float32), "n": feeds["n"]}
    want = onnxruntime.InferenceSession(twin.SerializeToString(),
                                        providers=["CPUExecutionProvider"]).run(None, wide)
    for provider in ("cpu", "wasm"):
        sess = edgerun.InferenceSession(data, providers=[provider])
        assert [i.type for i in sess.get_inputs()] == ["tensor(float16)", "tensor(int64)"]
        for got, w in zip(sess.run(None, feeds), want):
            assert got.dtype == np.float16
            np.testing.assert_allclose(got.astype(np.float32), w.astype(np.float16).astype(
                np.float32), rtol=2 ** -10, atol=2 ** -24, err_msg=provider)
    report: dict = {}
    optimize(load_model(_float16_block(with_subgraph=True)), EXTENDED, report)
    assert report["float16_as_float32"] == 0


# ---- hoist_loop_invariants ---------------------------------------------------------------

def _decoder_loop_model(scan: bool = False):
    """A greedy-decoder-like Loop (or a Scan): each step projects the encoder output `enc`
    (an outer value) by W (a body weight) and by W2 carried through unchanged as a loop
    value (paddle2onnx's form), which is loop-invariant work; adds it to the running state;
    and emits the state, plus an invariant body output and a RandomUniformLike that must
    stay per step (its values are not compared)."""
    w = _rand(6, 5)
    w2 = _rand(5, 5)
    if scan:
        body_nodes = [
            helper.make_node("MatMul", ["enc", "w"], ["proj"]),
            helper.make_node("MatMul", ["proj", "w2_in"], ["proj2"]),
            helper.make_node("ReduceSum", ["proj2"], ["total"], keepdims=0),
            helper.make_node("Add", ["state", "total"], ["s1"]),
            helper.make_node("Mul", ["s1", "step_x"], ["state_out"]),
            helper.make_node("Identity", ["w2_in"], ["w2_out"]),
            helper.make_node("Identity", ["state_out"], ["y"]),
        ]
        body = helper.make_graph(
            body_nodes, "scan_body",
            [_vi("state", [5]), _vi("w2_in", [5, 5]), _vi("step_x", [5])],
            [_vi("state_out", [5]), _vi("w2_out", [5, 5]), _vi("y", [5])],
            [numpy_helper.from_array(w, "w")])
        # w2_out is an Identity of the input: unchanged all the same
        node = helper.make_node("Scan", ["s0", "w2", "xs"], ["s_final", "w2_final", "ys"],
                                body=body, num_scan_inputs=1)
        inputs = [_vi("enc", [4, 6]), _vi("s0", [5]), _vi("xs", [3, 5])]
        return _model([node], inputs, [_vi("s_final", None), _vi("ys", None)],
                      inits=[("w2", w2)], opset=17), {
            "enc": _rand(4, 6), "s0": _rand(5), "xs": _rand(3, 5)}
    body_nodes = [
        helper.make_node("MatMul", ["enc", "w"], ["proj"]),
        helper.make_node("MatMul", ["proj", "w2_in"], ["proj2"]),
        helper.make_node("ReduceSum", ["proj2"], ["total"], axes=[0], keepdims=0, ),
        helper.make_node("Add", ["state", "total"], ["state_out"]),
        helper.make_node("RandomUniformLike", ["state"], ["noise"]),
        helper.make_node("Identity", ["cond"], ["cond_out"]),
        helper.make_node("Identity", ["state_out"], ["y"]),
    ]
    body = helper.make_graph(
        body_nodes, "loop_body",
        [_vi("i", [], TensorProto.INT64), _vi("cond", [], TensorProto.BOOL), _vi("state", [5]),
         _vi("w2_in", [5, 5])],
        [_vi("cond_out", [], TensorProto.BOOL), _vi("state_out", [5]), _vi("w2_in", [5, 5]),
         _vi("y", [5]), _vi("proj2", [4, 5]), _vi("noise", [5])],
        [numpy_helper.from_array(w, "w")])
    node = helper.make_node("Loop", ["trips", "", "s0", "w2"],
                            ["s_final", "w2_final", "ys", "projs", "noises"], body=body)
    inputs = [_vi("enc", [4, 6]), _vi("s0", [5]), _vi("trips", [], TensorProto.INT64)]
    model = helper.make_model(helper.make_graph(
        [node], "g", inputs, [_vi("s_final", None), _vi("ys", None), _vi("projs", None)],
        [numpy_helper.from_array(w2, "w2")]),
        opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 8
    return model.SerializeToString(), {"enc": _rand(4, 6), "s0": _rand(5),
                                       "trips": np.array(3, np.int64)}


@pytest.mark.parametrize("scan", [False, True], ids=["Loop", "Scan"])
def test_loop_invariant_work_runs_once_before_the_loop(scan):
    """hoist_loop_invariants: the body's projections of an outer value by a body weight and
    by a weight carried through unchanged move before the loop (the body keeps what reads
    the iteration, the RandomUniformLike included); outputs equal onnxruntime's, with 3
    iterations and with none."""
    data, feeds = _decoder_loop_model(scan)
    report = {}
    model = optimize(load_model(data), BASIC, report)
    loop = [n for n in model.graph.nodes if n.op_type in ("Loop", "Scan")][0]
    body_ops = sorted(n.op_type for n in loop.attributes["body"].value.nodes)
    outer_ops = _ops(model)
    assert report["hoist_loop_invariants"] >= 1
    assert outer_ops.count("MatMul") == 2 and "ReduceSum" in outer_ops, outer_ops
    assert "MatMul" not in body_ops, body_ops
    if not scan:
        assert "RandomUniformLike" in body_ops, body_ops
    expected = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(
        None, feeds)
    for level in LEVELS:
        got = edgerun.InferenceSession(data, sess_options=_level_options(level)).run(None, feeds)
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL, err_msg=f"level {level}")
    if not scan:
        feeds["trips"] = np.array(0, np.int64)
        got = edgerun.InferenceSession(data).run(None, feeds)
        want = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(
            None, feeds)
        for g, e in zip(got, want):
            assert g.shape == e.shape
            np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL)


def _carried_through_model(step: str, add: float = 0.0):
    """A Loop carrying `feat` through each step as paddle2onnx writes an assignment,
    Squeeze(Unsqueeze(feat, [0]) + add, [0]) (`step` "pair"), or with the Squeeze's axes
    differing ("other axes"), and projecting it by a weight every step."""
    squeeze_axes = [0] if step == "pair" else [1]
    body_nodes = [
        helper.make_node("MatMul", ["feat_in", "w"], ["proj"]),
        helper.make_node("ReduceSum", ["proj"], ["total"], axes=[0], keepdims=0),
        helper.make_node("Add", ["state", "total"], ["state_out"]),
        helper.make_node("Identity", ["cond"], ["cond_out"]),
        helper.make_node("Unsqueeze", ["feat_in"], ["u"], axes=[0]),
        helper.make_node("Add", ["u", "shift"], ["shifted"]),
        helper.make_node("Squeeze", ["shifted"], ["feat_out"], axes=squeeze_axes),
    ]
    body = helper.make_graph(
        body_nodes, "loop_body",
        [_vi("i", [], TensorProto.INT64), _vi("cond", [], TensorProto.BOOL), _vi("state", [5]),
         _vi("feat_in", [4, 6] if step == "pair" else [1, 6])],
        [_vi("cond_out", [], TensorProto.BOOL), _vi("state_out", [5]),
         _vi("feat_out", None)],
        [numpy_helper.from_array(_rand(6, 5), "w"),
         numpy_helper.from_array(np.array([add], np.float32), "shift")])
    node = helper.make_node("Loop", ["trips", "", "s0", "feat"], ["s_final", "feat_final"],
                            body=body)
    inputs = [_vi("feat", [4, 6] if step == "pair" else [1, 6]), _vi("s0", [5]),
              _vi("trips", [], TensorProto.INT64)]
    model = helper.make_model(helper.make_graph(
        [node], "g", inputs, [_vi("s_final", None), _vi("feat_final", None)]),
        opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 8
    return model.SerializeToString(), {"feat": _rand(4, 6) if step == "pair" else _rand(1, 6),
                                       "s0": _rand(5), "trips": np.array(3, np.int64)}


@pytest.mark.parametrize("step, add, hoisted", [("pair", 0.0, True), ("pair", 1.0, False),
                                                ("other axes", 0.0, False)])
def test_a_value_carried_through_unchanged_steps_is_hoisted(step, add, hoisted):
    """A loop value carried as Squeeze(Unsqueeze(x) + 0) of the same axes (SLANet's encoder
    features, projected at every one of 500 steps) holds its initial value: what reads it
    moves before the loop. Adding 1 (a counter), or squeezing other axes, changes it: the
    body keeps the product. Outputs equal onnxruntime's."""
    data, feeds = _carried_through_model(step, add)
    model = optimize(load_model(data), BASIC)
    loop = [n for n in model.graph.nodes if n.op_type == "Loop"][0]
    body_ops = [n.op_type for n in loop.attributes["body"].value.nodes]
    assert ("MatMul" not in body_ops) == hoisted, body_ops
    expected = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(
        None, feeds)
    got = edgerun.InferenceSession(data).run(None, feeds)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL)


def _level_options(level):
    opts = edgerun.SessionOptions()
    opts.graph_optimization_level = {BASIC: edgerun.GraphOptimizationLevel.ORT_ENABLE_BASIC,
                                     EXTENDED: edgerun.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
                                     ALL: edgerun.GraphOptimizationLevel.ORT_ENABLE_ALL}[level]
    return opts
