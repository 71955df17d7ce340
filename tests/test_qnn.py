"""The QNN provider: capability reasons by backend, honest availability without the QNN
SDK, and lowering proven on real models: every partition becomes a QNN graph of qti.aisw
ops (NHWC, HWIO weights, static tensors, named params) that the reference interpreter runs.
On the CPU backend (float32) outputs must equal the CPU provider's (rtol 1e-3, atol 1e-4);
on HTP the interpreter rounds each op to float16, as htp_fp16_precision computes.
"""
import json
import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import edgerun
from edgerun.onnx import load_model
from edgerun.providers.qnn.provider import QNNProvider
from real_models import REAL_MODELS
from test_nnapi import edge_session

RTOL, ATOL = 1e-3, 1e-4

# Nodes after optimization: silero's If branches keep their Shape/Gather/Equal logic on
# the CPU, and the optimizer folds claimable slices of outer weights away.
CLAIMED = {   # model -> (nodes the adapter claims, nodes after optimization): exact, so
    # a change in what it claims names itself (update after checking docs/edge_adapters.md)
    "digits_mlp": (5, 8), "light_bvlc_alexnet": (15, 15), "light_densenet121": (308, 308),
    "light_inception_v1": (85, 85), "light_inception_v2": (95, 95), "light_resnet50": (90, 90),
    "light_shufflenet": (137, 137), "light_squeezenet": (39, 39), "light_vgg19": (26, 26),
    "light_zfnet512": (15, 15), "magika": (66, 94), "ppocr_v4_det": (147, 155), "ppocr_v4_rec": (167, 199),
    "ppocr_mobile_cls": (83, 88),
    "silero_vad": (64, 236), "silero_vad_16k_op15": (32, 116),
    "silero_vad_16k_sequence": (21, 22), "silero_vad_8k": (64, 236),
    "silero_vad_half": (32, 113), "silero_vad_op18_ifless": (68, 80),
    "silero_vad_openvino_16k": (31, 37)}


def reference_provider(**options):
    return QNNProvider({"execute": "reference", **options})


@pytest.mark.parametrize("name", sorted(REAL_MODELS))
def test_real_model_matches_cpu_provider(name):
    path, feeds = REAL_MODELS[name]()
    expected = edgerun.InferenceSession(path, providers=["cpu"]).run(None, feeds)
    qnn = reference_provider(backend_type="cpu")
    sess = edge_session(qnn, path)
    got = sess.run(None, feeds)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL, err_msg=name)
    nodes = sess.explain()["nodes"]
    claimed = sum(n["provider"] == "qnn" for n in nodes)
    lowered = [p for p in qnn.partitions if p.programs]
    print(f"{name}: qnn claimed {claimed}/{len(nodes)} nodes in {len(qnn.partitions)} "
          f"partitions ({len(lowered)} ran)")
    assert (claimed, len(nodes)) == CLAIMED[name]
    assert lowered, "no partition was lowered and run"
    for part in lowered:
        for graph in part.programs.values():
            json.dumps(graph.to_json())


def test_squeezenet_on_htp_in_fp16_and_graph_form():
    path, feeds = REAL_MODELS["light_squeezenet"]()
    expected = edgerun.InferenceSession(path, providers=["cpu"]).run(None, feeds)
    qnn = reference_provider()                           # backend htp, fp16 precision
    (got,) = edge_session(qnn, path).run(None, feeds)
    np.testing.assert_allclose(got, expected[0], rtol=0, atol=5e-3)   # fp16: 3 digits
    (part,) = qnn.partitions
    (graph,) = part.programs.values()
    doc = graph.to_json()
    conv = next(n for n in doc["graph"]["nodes"].values() if n["type"] == "Conv2d")
    assert conv["package"] == "qti.aisw"
    assert set(conv["tensor_params"]) == {"stride", "pad_amount", "dilation"}
    assert conv["scalar_params"]["group"] == {"QNN_DATATYPE_UINT_32": 1}
    weights = doc["graph"]["tensors"][conv["input_names"][1]]
    assert weights["type_name"] == "STATIC" and weights["dataType"] == 0x0232
    assert graph.op_counts()["Transpose"] == 2    # into NHWC once, back once


def _model(nodes, inputs, inits=()):
    y = helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "g", inputs, [y], initializer=list(inits))
    return load_model(helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())


def _capability(model, provider):
    provider.prepare_model(model)
    return {n.name: provider.capability(n, 17) for n in model.graph.nodes}


def test_capability_reasons_name_the_backend():
    x4 = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6, 4, 4])
    lrn = _model([helper.make_node("LRN", ["x"], ["y"], size=3, name="lrn")], [x4])
    assert _capability(lrn, reference_provider()) == {
        "lrn": (False, "LRN (Lrn) is not run by the QNN HTP backend")}
    assert _capability(lrn, reference_provider(backend_type="cpu")) == {"lrn": (True, "")}
    assert _capability(lrn, reference_provider(htp_fp16_precision=False))["lrn"] == (
        False, "'x' is float32: the HTP backend computes float graphs only with "
               "htp_fp16_precision (else quantized uint8/uint16 graphs)")
    x5 = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3, 4, 5])
    relu5 = _model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [x5])
    assert _capability(relu5, reference_provider(backend_type="gpu"))["relu"] == (
        False, "'x' has rank 5; QNN GPU supports rank <= 4")
    assert _capability(relu5, reference_provider(backend_type="cpu"))["relu"] == (True, "")
    w = numpy_helper.from_array(np.ones((6, 6, 3, 3), np.float32), "w")
    conv = _model([helper.make_node("Conv", ["x", "x"], ["y"], name="conv")], [x4], [w])
    assert _capability(conv, reference_provider())["conv"] == (
        False, "Conv input 1 ('x') must be a constant: QNN takes it as a static parameter")


def test_unavailable_without_the_sdk_and_skipped_by_default_sessions():
    ok, why = QNNProvider.available()
    assert not ok and why.startswith("libQnnHtp.so not found")
    with pytest.raises(RuntimeError, match="execute.*reference"):
        QNNProvider()
    path, _ = REAL_MODELS["light_squeezenet"]()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sess = edgerun.InferenceSession(path, providers=["QNNExecutionProvider"])
    assert sess.get_providers() == ["CPUExecutionProvider"]
    assert any("not available" in str(w.message) for w in caught)
    with pytest.raises(ValueError, match="backend_type"):
        reference_provider(backend_type="dsp")


@pytest.mark.parametrize("domain", ["", "com.edgerun"])
def test_hard_swish_lowers_at_both_domains(domain):
    from test_nnapi import _hard_swish_model

    model = _hard_swish_model(domain)
    feeds = {"x": np.linspace(-5, 5, 60, dtype=np.float32).reshape(1, 3, 4, 5)}
    (expected,) = edgerun.InferenceSession(model, providers=["cpu"]).run(None, feeds)
    qnn = reference_provider(backend_type="cpu")
    sess = edge_session(qnn, model)
    (got,) = sess.run(None, feeds)
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)
    assert [n["provider"] for n in sess.explain()["nodes"]] == ["qnn"]
    (part,) = qnn.partitions
    (graph,) = part.programs.values()
    assert graph.op_counts() == {"HardSwish": 1}
    json.dumps(graph.to_json())
    node = load_model(model).graph.nodes[0]
    gpu = reference_provider(backend_type="gpu")
    gpu.prepare_model(load_model(model))
    assert gpu.capability(node, 14) == (
        False, "HardSwish (HardSwish) is not run by the QNN GPU backend")
