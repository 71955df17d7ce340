"""The NNAPI provider: capability reasons by feature level, honest availability off Android,
and lowering proven on real models: every partition becomes an NNAPI model (operands,
operations with NNAPI codes, NHWC, fused activations) that the reference interpreter runs;
outputs must equal the CPU provider's (rtol 1e-3, atol 1e-4).
"""
import json
import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import edgerun
from edgerun.onnx import load_model
from edgerun.providers.nnapi import spec
from edgerun.providers.nnapi.provider import NnapiProvider
from real_models import REAL_MODELS

RTOL, ATOL = 1e-3, 1e-4

# Nodes after optimization: silero's If branches keep their Shape/Gather/Equal logic on
# the CPU, and the optimizer folds claimable slices of outer weights away.
CLAIMED = {   # model -> (nodes the adapter claims, nodes after optimization): exact, so
    # a change in what it claims names itself (update after checking docs/edge_adapters.md)
    "digits_mlp": (5, 8), "light_bvlc_alexnet": (15, 15), "light_densenet121": (308, 308),
    "light_inception_v1": (85, 85), "light_inception_v2": (95, 95), "light_resnet50": (90, 90),
    "light_shufflenet": (89, 137), "light_squeezenet": (39, 39), "light_vgg19": (26, 26),
    "light_zfnet512": (15, 15), "magika": (66, 94), "ppocr_v4_det": (147, 155), "ppocr_v4_rec": (153, 199),
    "ppocr_mobile_cls": (83, 88),
    "silero_vad": (62, 236), "silero_vad_16k_op15": (31, 116),
    "silero_vad_16k_sequence": (20, 22), "silero_vad_8k": (62, 236),
    "silero_vad_half": (31, 113), "silero_vad_op18_ifless": (66, 80),
    "silero_vad_openvino_16k": (30, 37)}


def edge_session(provider, model_or_path):
    """A session with the adapter first and the CPU provider as fallback (the session
    optimizes, then calls provider.prepare_model before partitioning)."""
    return edgerun.InferenceSession(model_or_path, providers=[provider, "cpu"])


def reference_provider(**options):
    return NnapiProvider({"execute": "reference", **options})


@pytest.mark.parametrize("name", sorted(REAL_MODELS))
def test_real_model_matches_cpu_provider(name):
    path, feeds = REAL_MODELS[name]()
    expected = edgerun.InferenceSession(path, providers=["cpu"]).run(None, feeds)
    nnapi = reference_provider()
    sess = edge_session(nnapi, path)
    got = sess.run(None, feeds)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL, err_msg=name)
    nodes = sess.explain()["nodes"]
    claimed = sum(n["provider"] == "nnapi" for n in nodes)
    lowered = [p for p in nnapi.partitions if p.programs]
    print(f"{name}: nnapi claimed {claimed}/{len(nodes)} nodes in {len(nnapi.partitions)} "
          f"partitions ({len(lowered)} ran)")
    assert (claimed, len(nodes)) == CLAIMED[name]
    assert lowered, "no partition was lowered and run"
    for part in lowered:
        for model in part.programs.values():
            json.dumps(model.to_json())          # the model form serializes


def test_alexnet_lowers_to_nhwc_with_fused_relu():
    path, feeds = REAL_MODELS["light_bvlc_alexnet"]()
    nnapi = reference_provider()
    edge_session(nnapi, path).run(None, feeds)
    (part,) = nnapi.partitions
    (model,) = part.programs.values()
    counts = model.operation_counts()
    # one transpose into NHWC, one back before the classifier; ReLUs fused into CONV_2D/FC
    assert counts["TRANSPOSE"] == 2 and "RELU" not in counts
    assert counts["CONV_2D"] + counts["GROUPED_CONV_2D"] == 5
    doc = model.to_json()
    conv = next(op for op in doc["operations"] if op["type"] == "CONV_2D")
    assert conv["code"] == 3
    fuse = doc["operands"][conv["inputs"][9]]
    assert fuse["type"] == "INT32" and fuse["value"] == spec.FUSE_RELU


def _int64_add_model():
    x = helper.make_tensor_value_info("x", TensorProto.INT64, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, None)
    graph = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"], name="add")], "g",
                              [x], [y])
    return load_model(helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())


def _conv_model(dilations=(1, 1), group=1, rank5=False):
    shape = [1, 4, 8, 8]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = numpy_helper.from_array(np.ones((4, 4 // group, 3, 3), np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], dilations=list(dilations),
                              group=group, name="conv"),
             helper.make_node("Sqrt", ["c"], ["y"], name="sqrt")]
    if rank5:
        nodes.append(helper.make_node("Unsqueeze", ["y", "axes"], ["y5"], name="unsq"))
        y = helper.make_tensor_value_info("y5", TensorProto.FLOAT, None)
    inits = [w, numpy_helper.from_array(np.array([0], np.int64), "axes")]
    graph = helper.make_graph(nodes, "g", [x], [y], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return load_model(model.SerializeToString())


def _refusals(model, provider):
    provider.prepare_model(model)
    return {n.name: provider.capability(n, 17) for n in model.graph.nodes}


def test_capability_reasons_name_the_feature_level():
    got = _refusals(_conv_model(dilations=(2, 2)), reference_provider(feature_level=2))
    assert got["conv"] == (False, "Conv with dilations [2, 2] needs NNAPI feature level 3, "
                                  "target is 2")
    assert got["sqrt"] == (False, "Sqrt (SQRT) needs NNAPI feature level 3, target is 2")
    got = _refusals(_conv_model(dilations=(2, 2)), reference_provider(feature_level=3))
    assert got["conv"] == (True, "") and got["sqrt"] == (True, "")
    got = _refusals(_conv_model(group=2), reference_provider(feature_level=2))
    assert got["conv"] == (False, "Conv with group 2 (GROUPED_CONV_2D) needs NNAPI feature "
                                  "level 3, target is 2")
    got = _refusals(_conv_model(), reference_provider(feature_level=1))
    assert got["conv"] == (False, "Conv (TRANSPOSE to NNAPI's NHWC) needs NNAPI feature "
                                  "level 2, target is 1")


def test_capability_refuses_int64_rank5_and_runtime_parameters():
    assert _refusals(_int64_add_model(), reference_provider())["add"] == (
        False, "'x' is int64; NNAPI tensors here are float, float16, int32, bool")
    got = _refusals(_conv_model(rank5=True), reference_provider())
    assert got["unsq"] == (False, "'y5' has rank 5; NNAPI supports rank <= 4")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    s = helper.make_tensor_value_info("s", TensorProto.INT64, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([helper.make_node("Reshape", ["x", "s"], ["y"], name="r")],
                              "g", [x, s], [y])
    model = load_model(helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    assert _refusals(model, reference_provider())["r"] == (
        False, "Reshape input 1 ('s') must be a constant: NNAPI takes it as a static parameter")


def test_capability_without_model_facts_says_what_is_missing():
    node = _conv_model().graph.nodes[0]
    ok, why = reference_provider().capability(node, 17)
    assert not ok and "prepare_model" in why


def test_unavailable_off_android_and_skipped_by_default_sessions():
    ok, why = NnapiProvider.available()
    assert not ok and why == "libneuralnetworks.so not found: NNAPI runs only on Android"
    with pytest.raises(RuntimeError, match="execute.*reference"):
        NnapiProvider()
    path, feeds = REAL_MODELS["light_squeezenet"]()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sess = edgerun.InferenceSession(path, providers=["NnapiExecutionProvider"])
    assert sess.get_providers() == ["CPUExecutionProvider"]
    assert any("not available" in str(w.message) for w in caught)


def test_options_are_checked():
    with pytest.raises(ValueError, match="feature_level"):
        reference_provider(feature_level=9)
    with pytest.raises(ValueError, match="execute"):
        NnapiProvider({"execute": "gpu"})


def _hard_swish_model(domain):
    """One HardSwish node: standard ONNX (opset 14) or com.edgerun's (opset 13), as
    optimizer/fuse_hard_swish.py writes them."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4, 5])
    node = helper.make_node("HardSwish", ["x"], ["y"], name="hs", domain=domain)
    opsets = [helper.make_opsetid("", 14 if domain == "" else 13)]
    if domain:
        opsets.append(helper.make_opsetid(domain, 1))
    graph = helper.make_graph([node], "g", [x], [y])
    return helper.make_model(graph, opset_imports=opsets).SerializeToString()


@pytest.mark.parametrize("domain", ["", "com.edgerun"])
@pytest.mark.parametrize("level, ops", [(4, {"HARD_SWISH": 1}), (1, {"ADD": 1, "MUL": 2})])
def test_hard_swish_lowers_at_both_domains(domain, level, ops):
    model = _hard_swish_model(domain)
    feeds = {"x": np.linspace(-5, 5, 60, dtype=np.float32).reshape(1, 3, 4, 5)}
    (expected,) = edgerun.InferenceSession(model, providers=["cpu"]).run(None, feeds)
    nnapi = reference_provider(feature_level=level)
    sess = edge_session(nnapi, model)
    (got,) = sess.run(None, feeds)
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)
    assert [n["provider"] for n in sess.explain()["nodes"]] == ["nnapi"]
    (part,) = nnapi.partitions
    (program,) = part.programs.values()
    assert program.operation_counts() == ops
    json.dumps(program.to_json())


def test_provider_options_in_onnxruntime_form_and_wrong_declared_shapes():
    """("NnapiExecutionProvider", {"execute": "reference"}) reaches the adapter (it runs
    anywhere then); a wrongly declared output shape is a warning, as in onnxruntime, and the
    model runs with the inferred shape on every edge adapter."""
    import warnings

    import onnxruntime
    from onnx import TensorProto, helper

    import edgerun

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 12])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    data = model.SerializeToString()
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    so = onnxruntime.SessionOptions()
    so.log_severity_level = 3
    want = onnxruntime.InferenceSession(data, so).run(None, {"x": x})[0]
    for provider, options in (("NnapiExecutionProvider", {"execute": "reference"}),
                              ("QNNExecutionProvider", {"execute": "reference"}),
                              ("CoreMLExecutionProvider", {"runner": "reference"})):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            session = edgerun.InferenceSession(data, providers=[(provider, options)])
            got = session.run(None, {"x": x})[0]
        assert session.get_providers()[0] == provider
        np.testing.assert_allclose(got, want, rtol=2e-3, atol=1e-3)    # QNN's HTP: float16
        if provider != "CoreMLExecutionProvider":
            assert any("inferred shape [2, 3, 4] but declared [2, 12]" in str(w.message)
                       for w in caught), provider
