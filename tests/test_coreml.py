"""The CoreML provider: capability reasons, availability off Apple, and lowering proven on
real models. Each partition is lowered to an ML Program, converted, saved as .mlpackage and
validated by coremltools (spec reload + MIL re-parse), then run by edgerun's numpy
interpreter of the emitted MIL ops and compared with the CPU provider (rtol 1e-3, atol 1e-4).
"""
import os
import sys
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import edgerun
from conftest import need
from edgerun.ir import Attribute, AttrType, Node
from edgerun.providers.coreml.provider import COREMLTOOLS_PIN, CoreMLProvider
from real_models import REAL_MODELS

RTOL, ATOL = 1e-3, 1e-4
CNN_MODELS = ["digits_mlp", "ppocr_mobile_cls"] + sorted(
    n for n in REAL_MODELS if n.startswith("light_"))


def _have_coremltools():
    try:
        import coremltools  # noqa: F401
    except ImportError:
        return False
    return True


def _need_coremltools():
    need(_have_coremltools(), "coremltools", f"pip install {COREMLTOOLS_PIN}")


def _reference_provider(tmp_path):
    return CoreMLProvider({"runner": "reference", "cache_dir": str(tmp_path)})


def _cpu_outputs(model, feeds):
    return edgerun.InferenceSession(model, providers=["cpu"]).run(None, feeds)


# ---- availability and capability ---------------------------------------------------------

@pytest.mark.skipif(sys.platform == "darwin", reason="Core ML exists on macOS")
def test_unavailable_off_apple_names_the_platform():
    ok, why = CoreMLProvider.available()
    assert not ok
    assert sys.platform in why and "Apple" in why
    assert "CoreMLExecutionProvider" not in edgerun.get_available_providers()


def _node(op, inputs=("x",), outputs=("y",), domain="", **attrs):
    kinds = {int: AttrType.INT, float: AttrType.FLOAT, str: AttrType.STRING,
             list: AttrType.INTS}
    attributes = {k: Attribute(k, kinds[type(v)], v.encode() if isinstance(v, str) else v)
                  for k, v in attrs.items()}
    return Node(op, list(inputs), list(outputs), attributes, domain=domain, name=f"{op}_n")


@pytest.mark.parametrize("node, opset, reason", [
    (_node("MaxPool", outputs=("y", "idx"), kernel_shape=[2, 2]), 13, "Indices output"),
    (_node("BatchNormalization", inputs="xsbmv", training_mode=1), 15, "training_mode=1"),
    (_node("ArrayFeatureExtractor", inputs="xi", domain="ai.onnx.ml"), 1,
     "ai.onnx.ml::ArrayFeatureExtractor has no ML Program lowering"),
    (_node("Cast", to=8), 13, "Cast to element type 8"),
    (_node("Dropout", outputs=("y", "mask")), 13, "mask output"),
    (_node("AveragePool", kernel_shape=[2], dilations=[2]), 19, "dilations [2]"),
    (_node("Gelu", approximate="erf"), 20, "approximate='erf'"),
    (_node("Gelu"), 13, "opset 13; the lowering handles opset 20+"),
    (_node("FusedConv", inputs="xw", domain="com.edgerun", activation="Selu"), 1,
     "fused activation 'Selu'"),
    (_node("NonZero"), 13, "ai.onnx::NonZero has no ML Program lowering"),
])
def test_capability_refuses_with_the_reason(node, opset, reason):
    ok, why = CoreMLProvider().capability(node, opset)
    assert not ok
    assert reason in why, why


@pytest.mark.parametrize("op, attrs", [("Conv", {}), ("Gemm", {"transB": 1}),
                                       ("Softmax", {"axis": 1}), ("Relu", {}),
                                       ("MaxPool", {"kernel_shape": [3, 3]})])
def test_capability_claims(op, attrs):
    assert CoreMLProvider().capability(_node(op, **attrs), 13) == (True, "")


# ---- real models ----------------------------------------------------------------------

def _randomized(path: str, seed: int = 0) -> bytes:
    """The model with its constant weights made random (the light_* models fill every weight
    with one value, which would hide layout mistakes): Conv/Gemm weights He-scaled normal,
    other constants scaled by U(0.5, 1.5) elementwise (signs kept, variances positive)."""
    rng = np.random.default_rng(seed)
    model = onnx.load(path)
    graph = model.graph
    consts = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    weight_names = {n.input[1] for n in graph.node if n.op_type in ("Conv", "Gemm")}
    kept, made = [], {}
    for n in graph.node:
        if n.op_type == "ConstantOfShape" and n.input[0] in consts:
            fill = numpy_helper.to_array(n.attribute[0].t) if n.attribute else np.zeros(1)
            made[n.output[0]] = np.full(consts[n.input[0]].astype(np.int64), fill.reshape(-1)[0],
                                        dtype=fill.dtype)
        else:
            kept.append(n)
    consts.update(made)

    def shuffle(name, value):
        if value.dtype != np.float32 or value.size < 2:
            return value
        if name in weight_names and value.ndim >= 2:
            fan_in = int(np.prod(value.shape[1:])) if value.ndim > 2 else value.shape[-1]
            return (rng.standard_normal(value.shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        return (value * rng.uniform(0.5, 1.5, value.shape)).astype(np.float32)

    del graph.node[:]
    graph.node.extend(kept)
    del graph.initializer[:]
    graph.initializer.extend(numpy_helper.from_array(shuffle(k, v), k) for k, v in consts.items())
    return model.SerializeToString()


@pytest.mark.parametrize("name", CNN_MODELS)
def test_real_model_partitions_lower_validate_and_match_cpu(name, tmp_path):
    _need_coremltools()
    path, feeds = REAL_MODELS[name]()
    model = _randomized(path) if name.startswith("light_") else path
    coreml = _reference_provider(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)      # no partition may fall back
        sess = edgerun.InferenceSession(model, providers=[coreml, "cpu"])
        got = sess.run(None, feeds)
    expected = _cpu_outputs(model, feeds)
    for arg, g, e in zip(sess.get_outputs(), got, expected):
        assert g.dtype == e.dtype and g.shape == e.shape, arg.name
        np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL, err_msg=f"{name}: {arg.name}")
    if name.startswith("light_"):
        assert np.ptp(expected[0]) > 1e-4, "randomized weights should give varied outputs"
    placed = [n["provider"] for n in sess.explain()["nodes"]]
    assert placed.count("coreml") >= 0.8 * len(placed), placed
    assert coreml.partitions, "nothing was lowered"
    for record in coreml.partitions:
        assert os.path.isdir(record["mlpackage"]), record
        assert record["specification_version"] >= 6          # iOS15 ML Program
        assert record["saved_ops"], record                     # the MIL re-parsed from disk


# ---- lowering details on small graphs ----------------------------------------------------

def _model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]
                             ).SerializeToString()


def _f(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


RNG = np.random.default_rng(3)
SMALL = {
    # SAME_UPPER with stride 2 on an odd size: pads depend on the stride (not MIL's "same")
    "conv_same_upper_stride2": (
        [helper.make_node("Conv", ["x", "w", "b"], ["y"], auto_pad="SAME_UPPER", strides=[2, 2])],
        [_f("x", [1, 3, 7, 9])], [_f("y", None)],
        [_init("w", RNG.standard_normal((4, 3, 3, 2)).astype(np.float32)),
         _init("b", RNG.standard_normal(4).astype(np.float32))], 17),
    "conv_asymmetric_pads_grouped_dilated": (
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[0, 1, 2, 1], group=2,
                          dilations=[2, 1])],
        [_f("x", [2, 4, 8, 8])], [_f("y", None)],
        [_init("w", RNG.standard_normal((6, 2, 3, 3)).astype(np.float32))], 17),
    "maxpool_ceil_asymmetric": (
        [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                          pads=[0, 0, 1, 1], ceil_mode=1)],
        [_f("x", [1, 2, 8, 9])], [_f("y", None)], [], 17),
    "avgpool_exclude_pad": (
        [helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
        [_f("x", [1, 2, 5, 5])], [_f("y", None)], [], 17),
    "gemm_transA_alpha_beta": (
        [helper.make_node("Gemm", ["x", "w", "c"], ["y"], transA=1, alpha=0.5, beta=2.0)],
        [_f("x", [5, 3])], [_f("y", None)],
        [_init("w", RNG.standard_normal((5, 4)).astype(np.float32)),
         _init("c", RNG.standard_normal((1, 4)).astype(np.float32))], 17),
    "softmax_opset11_axis1_rank3": (
        [helper.make_node("Softmax", ["x"], ["y"], axis=1)],
        [_f("x", [2, 3, 4])], [_f("y", None)], [], 11),
    "slice_negative_step_transpose_concat": (
        [helper.make_node("Slice", ["x", "s", "e", "a", "st"], ["t"]),
         helper.make_node("Transpose", ["t"], ["u"], perm=[1, 0, 2]),
         helper.make_node("Concat", ["u", "u"], ["y"], axis=-1)],
        [_f("x", [3, 4, 5])], [_f("y", None)],
        [_init("s", np.array([-1, 4], np.int64)), _init("e", np.array([-100, 0], np.int64)),
         _init("a", np.array([1, 2], np.int64)), _init("st", np.array([-1, -2], np.int64))], 17),
    "layernorm_gather_reduce_argmax": (
        [helper.make_node("LayerNormalization", ["x", "g", "bb"], ["n"], axis=-1),
         helper.make_node("Gather", ["n", "i"], ["h"], axis=1),
         helper.make_node("ReduceMean", ["h"], ["y"], axes=[-1], keepdims=0),
         helper.make_node("ArgMax", ["n"], ["z"], axis=2, keepdims=0)],
        [_f("x", [2, 4, 6])], [_f("y", None), helper.make_tensor_value_info(
            "z", TensorProto.INT64, None)],
        [_init("g", RNG.standard_normal(6).astype(np.float32)),
         _init("bb", RNG.standard_normal(6).astype(np.float32)),
         _init("i", np.array([-1, 0, 2], np.int64))], 17),
    "batchnorm_runtime_stats_clip_lrn": (
        [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["n"]),
         helper.make_node("Clip", ["n", "lo", "hi"], ["c"]),
         helper.make_node("LRN", ["c"], ["y"], size=3, alpha=0.01, beta=0.6, bias=1.5)],
        [_f("x", [1, 3, 4, 4]), _f("m", [3]), _f("v", [3])], [_f("y", None)],
        [_init("s", np.array([1.0, 0.5, 2.0], np.float32)),
         _init("b", np.array([0.1, -0.2, 0.3], np.float32)),
         _init("lo", np.array(-0.5, np.float32)), _init("hi", np.array(0.7, np.float32))], 17),
}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_small_graph_lowering_matches_cpu(name, tmp_path):
    _need_coremltools()
    nodes, inputs, outputs, inits, opset = SMALL[name]
    model = _model(nodes, inputs, outputs, inits, opset)
    feeds = {}
    for i, v in enumerate(inputs):
        shape = [d.dim_value for d in v.type.tensor_type.shape.dim]
        value = np.random.default_rng(i).standard_normal(shape).astype(np.float32)
        feeds[v.name] = np.abs(value) + 0.1 if v.name == "v" else value
    coreml = _reference_provider(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        got = edgerun.InferenceSession(model, providers=[coreml, "cpu"]).run(None, feeds)
    for g, e in zip(got, _cpu_outputs(model, feeds)):
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL, err_msg=name)
    assert len(coreml.partitions) == 1


@pytest.mark.parametrize("nodes, x, needle", [
    ([helper.make_node("Add", ["x", "x"], ["y"])],
     helper.make_tensor_value_info("x", TensorProto.INT8, [2, 3]), "dtype int8"),
    ([helper.make_node("Reshape", ["x", "s"], ["r"]), helper.make_node("Relu", ["r"], ["y"])],
     _f("x", [64]), "rank 6"),
])
def test_what_an_ml_program_cannot_hold_falls_back_to_cpu_with_the_reason(nodes, x, needle,
                                                                           tmp_path):
    _need_coremltools()
    inits = [_init("s", np.array([2] * 6, np.int64))]
    out = helper.make_tensor_value_info("y", x.type.tensor_type.elem_type, None)
    model = _model(nodes, [x], [out], inits)
    dtype = np.int8 if x.type.tensor_type.elem_type == TensorProto.INT8 else np.float32
    feed = {"x": np.arange(int(np.prod([d.dim_value for d in x.type.tensor_type.shape.dim])))
            .reshape([d.dim_value for d in x.type.tensor_type.shape.dim]).astype(dtype) - 3}
    coreml = _reference_provider(tmp_path)
    sess = edgerun.InferenceSession(model, providers=[coreml, "cpu"])
    with pytest.warns(RuntimeWarning, match=needle):
        got = sess.run(None, feed)
    np.testing.assert_array_equal(got[0], _cpu_outputs(model, feed)[0])
