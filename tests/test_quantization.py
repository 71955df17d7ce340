"""edgerun.quantization against onnxruntime.quantization (the reference it mirrors).

- quantize_dynamic: the quantized weights, scales and zero points are the initializers
  onnxruntime's quantize_dynamic writes (same names, types, integers), the nodes are the same,
  and the file runs in onnxruntime and in edgerun (cpu; wasm with every node on wasm) with the
  same outputs; also for Gemm (rewritten to MatMul as onnxruntime does), Conv (ConvInteger)
  and Gather/Transpose (8-bit tables, DequantizeLinear before float readers).
- The same file bytes with numpy blocked (the pure-Python path a page without numpy takes).
- quantize_static (QDQ): calibrated in edgerun over held-out rows, the same nodes and weights
  as onnxruntime's quantize_static with the same reader; top-1 agreement with the float model
  and with onnxruntime's quantized model printed and checked.

Tolerances: on the same file and batch, edgerun's outputs equal onnxruntime's within float32
rounding (probabilities atol 1e-5; the labels exactly). Activation scales of quantize_static
depend on calibration, where edgerun's float MatMul/Conv may differ from onnxruntime's in the
last bit: scales rtol 1e-5, int32 biases within 1.
"""
import json
import logging
import os
import subprocess
import sys
import warnings

import edgerun
import numpy as np
import pytest
from conftest import ROOT, usable_provider
from edgerun import quantization as eq

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
oq = pytest.importorskip("onnxruntime.quantization")
helper, numpy_helper, TensorProto = onnx.helper, onnx.numpy_helper, onnx.TensorProto

logging.getLogger().setLevel(logging.ERROR)          # onnxruntime's "consider pre-processing"

DIGITS = os.path.join(ROOT, "examples", "digits", "digits_mlp.onnx")
HOLDOUT = os.path.join(ROOT, "examples", "digits", "digits_holdout.npz")
CALIBRATION_ROWS = 100          # held-out rows the static quantizers calibrate on (batches of 10)


@pytest.fixture(scope="module")
def holdout():
    data = np.load(HOLDOUT)
    return data["X"], data["y"]


def _reader(base, x, rows=CALIBRATION_ROWS, batch=10, name="input"):
    class Reader(base):
        def __init__(self):
            self.i = 0

        def get_next(self):
            if self.i >= rows:
                return None
            feed = {name: x[self.i:self.i + batch]}
            self.i += batch
            return feed

        def rewind(self):
            self.i = 0

    return Reader()


def _initializers(path) -> dict:
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}


def _nodes(path) -> list:
    """Every node as (op, domain, name, inputs, outputs, attributes), order-free."""
    out = []
    for n in onnx.load(path).graph.node:
        attrs = tuple(sorted((a.name, str(helper.get_attribute_value(a))) for a in n.attribute))
        out.append((n.op_type, n.domain, n.name, tuple(n.input), tuple(n.output), attrs))
    return sorted(out)


def _ort_run(path, feeds):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, feeds)


_WASM = []


def _wasm_provider():
    """One wasm provider for the module (its engine outlives the sessions, as in
    test_wasm_provider.py)."""
    if not _WASM:
        from edgerun.providers.wasm.provider import WasmProvider

        ok, why = WasmProvider.available()
        assert ok, why
        _WASM.append(WasmProvider())
    return _WASM[0]


def _edgerun_run(path, feeds, provider):
    """Outputs on one edgerun provider; on wasm and webgpu every node must be placed there
    and no CPU kernel run inside it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if provider == "wasm":
            wasm = _wasm_provider()
            before = dict(wasm.dev.fallbacks)
            sess = edgerun.InferenceSession(path, providers=[wasm])
            out = sess.run(None, feeds)
            off = sorted({n["op_type"] for n in sess.explain()["nodes"] if n["provider"] != "wasm"})
            assert not off, f"{off} ran off wasm"
            assert wasm.dev.fallbacks == before, f"CPU kernels ran in wasm: {wasm.dev.fallbacks}"
            return out
        if provider == "webgpu":
            from edgerun.providers.webgpu.provider import shared_context

            sess = edgerun.InferenceSession(path, providers=[usable_provider("webgpu")])
            before = shared_context().stats["fallbacks"]
            out = sess.run(None, feeds)
            off = sorted({n["op_type"] for n in sess.explain()["nodes"]
                          if n["provider"] != "webgpu"})
            assert not off, f"{off} ran off webgpu"
            assert shared_context().stats["fallbacks"] == before, shared_context().fallback_log
            return out
        return edgerun.InferenceSession(path, providers=[provider]).run(None, feeds)


def _assert_same_initializers(ours: dict, theirs: dict, scale_rtol=0.0, bias_atol=0):
    assert sorted(ours) == sorted(theirs)
    for name, want in theirs.items():
        got = ours[name]
        assert got.dtype == want.dtype and got.shape == want.shape, name
        if want.dtype == np.float32 and name.endswith("_scale"):
            np.testing.assert_allclose(got, want, rtol=scale_rtol, atol=0, err_msg=name)
        elif want.dtype == np.int32 and bias_atol:
            assert np.abs(got.astype(np.int64) - want).max() <= bias_atol, name
        elif want.dtype in (np.int8, np.uint8) and scale_rtol and not name.endswith("_quantized"):
            # an activation's zero point follows its calibrated range
            assert np.abs(got.astype(np.int64) - want).max() <= 1, name
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)


# --- names ---------------------------------------------------------------------------------

def test_names_and_values_mirror_onnxruntime():
    for ours, theirs in ((eq.QuantType, oq.QuantType), (eq.QuantFormat, oq.QuantFormat),
                         (eq.CalibrationMethod, oq.CalibrationMethod)):
        assert {m.name: m.value for m in ours} == {m.name: m.value for m in theirs}
    assert eq.QuantType.QInt8.tensor_type == TensorProto.INT8
    assert eq.QuantType.QUInt8.tensor_type == TensorProto.UINT8
    assert eq.QuantType.from_string("QUInt8") is eq.QuantType.QUInt8

    class Duck:
        def get_next(self):
            return None

    assert isinstance(Duck(), eq.CalibrationDataReader)    # onnxruntime's subclass hook
    reader = _reader(eq.CalibrationDataReader, np.zeros((20, 64), np.float32), rows=20)
    assert sum(1 for _ in reader) == 2
    reader.rewind()
    assert reader.get_next()["input"].shape == (10, 64)


# --- quantize_dynamic on the digits model ----------------------------------------------------

DYNAMIC_CASES = {"default": {}, "per_channel": {"per_channel": True},
                 "reduce_range": {"reduce_range": True},
                 "per_channel_reduce_range": {"per_channel": True, "reduce_range": True},
                 "quint8": {"weight_type": "QUInt8"}}


def _dynamic_pair(tmp_path, src, kwargs, tag="m"):
    ours, theirs = str(tmp_path / f"{tag}_edgerun.onnx"), str(tmp_path / f"{tag}_ort.onnx")
    e_kwargs, o_kwargs = dict(kwargs), dict(kwargs)
    if "weight_type" in kwargs:
        e_kwargs["weight_type"] = getattr(eq.QuantType, kwargs["weight_type"])
        o_kwargs["weight_type"] = getattr(oq.QuantType, kwargs["weight_type"])
    eq.quantize_dynamic(src, ours, **e_kwargs)
    oq.quantize_dynamic(src, theirs, **o_kwargs)
    return ours, theirs


@pytest.mark.parametrize("case", list(DYNAMIC_CASES))
def test_dynamic_digits_weights_and_nodes_are_onnxruntimes(tmp_path, case):
    ours, theirs = _dynamic_pair(tmp_path, DIGITS, DYNAMIC_CASES[case])
    _assert_same_initializers(_initializers(ours), _initializers(theirs))
    assert _nodes(ours) == _nodes(theirs)
    onnx.checker.check_model(onnx.load(ours))


def test_dynamic_digits_runs_in_onnxruntime_and_edgerun(tmp_path, holdout):
    x, y = holdout
    ours, theirs = _dynamic_pair(tmp_path, DIGITS, {})
    feeds = {"input": x}
    on_ours = _ort_run(ours, feeds)
    on_theirs = _ort_run(theirs, feeds)
    float_labels = _ort_run(DIGITS, feeds)[0]
    np.testing.assert_array_equal(on_ours[1], on_theirs[1])        # equivalent files
    for provider in ("cpu", "wasm"):
        got = _edgerun_run(ours, feeds, provider)
        np.testing.assert_array_equal(got[0], on_ours[0])
        np.testing.assert_allclose(got[1], on_ours[1], rtol=0, atol=1e-5)
    labels = _edgerun_run(ours, feeds, "cpu")[0]
    agreement = float((labels == on_theirs[0]).mean())
    print(f"\nquantize_dynamic (digits, {len(y)} held-out rows): top-1 agreement of edgerun's "
          f"quantized model (run by edgerun) with onnxruntime's (run by onnxruntime) "
          f"{agreement:.2%}; accuracy float {(float_labels == y).mean():.2%}, edgerun int8 "
          f"{(labels == y).mean():.2%}, onnxruntime int8 {(on_theirs[0] == y).mean():.2%}")
    assert agreement >= 0.99


# --- Gemm, Conv, Gather ------------------------------------------------------------------


def _gemm_model(path):
    rng = np.random.default_rng(0)

    def f(*shape):
        return rng.standard_normal(shape).astype(np.float32)
    nodes = [helper.make_node("Gemm", ["x", "W1", "b1"], ["g1"], "gemm1", transB=1),
             helper.make_node("Relu", ["g1"], ["r1"], "relu1"),
             helper.make_node("Gemm", ["r1", "W2"], ["g2"], "gemm2"),
             helper.make_node("MatMul", ["g2", "W3"], ["m3"], "mm3"),
             helper.make_node("MatMul", ["g2", "W3"], ["m4"]),          # unnamed, shared weight
             helper.make_node("Add", ["m3", "m4"], ["y"], "add")]
    inits = [numpy_helper.from_array(f(16, 8), "W1"), numpy_helper.from_array(f(16), "b1"),
             numpy_helper.from_array(f(16, 12) * 3, "W2"), numpy_helper.from_array(f(12, 5), "W3")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         ["N", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path, "x", (8,)


FUSED_PRODUCTS = {"MatMulIntegerToFloat", "DynamicQuantizeMatMul"}


@pytest.mark.parametrize("kwargs", [{}, {"per_channel": True}, {"reduce_range": True}],
                         ids=["default", "per_channel", "reduce_range"])
@pytest.mark.parametrize("rows", [1, 5])
def test_dynamic_products_fuse_into_matmul_integer_to_float(tmp_path, kwargs, rows):
    """onnxruntime's quantize_dynamic writes MatMulInteger -> Cast -> Mul(scale) [-> Add(bias)]
    per product. The optimizer runs each as one com.microsoft MatMulIntegerToFloat on cpu and
    wasm, the Mul of the dynamic scale by the weight's going with it (its factors are the
    fused node's a_scale and b_scale); on cpu a product that alone reads its
    DynamicQuantizeLinear takes it in, as DynamicQuantizeMatMul. Values equal to the unfused
    chain's (basic level), and
    the optimized file loads in onnxruntime, which agrees with its own run of the quantized
    model."""
    src, name, shape = _gemm_model(str(tmp_path / "gemm.onnx"))
    _, theirs = _dynamic_pair(tmp_path, src, kwargs, "gemm")
    products = sum(n.op_type == "MatMulInteger" for n in onnx.load(theirs).graph.node)
    feeds = {name: _feed("gemm", shape, rows, 3)}
    expected = _ort_run(theirs, feeds)
    saved = str(tmp_path / "optimized.onnx")
    for provider in ("cpu", "wasm"):
        target = _wasm_provider() if provider == "wasm" else provider
        outputs = {}
        for level in (edgerun.GraphOptimizationLevel.ORT_ENABLE_BASIC,
                      edgerun.GraphOptimizationLevel.ORT_ENABLE_ALL):
            options = edgerun.SessionOptions()
            options.graph_optimization_level = level
            if provider == "cpu" and level == edgerun.GraphOptimizationLevel.ORT_ENABLE_ALL:
                options.optimized_model_filepath = saved
            sess = edgerun.InferenceSession(theirs, options, providers=[target])
            nodes = sess.explain()["nodes"]
            assert {n["provider"] for n in nodes} == {provider}
            fused = sum(n["op_type"] in FUSED_PRODUCTS for n in nodes)
            full = level == edgerun.GraphOptimizationLevel.ORT_ENABLE_ALL
            assert fused == (products if full else 0), (provider, level, fused, products)
            assert not full or not any(n["op_type"] == "Mul" for n in nodes), nodes
            outputs[int(level)] = sess.run(None, feeds)
        for unfused, fused in zip(outputs[1], outputs[99]):
            np.testing.assert_array_equal(fused, unfused)
        for got, want in zip(outputs[99], expected):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert FUSED_PRODUCTS & {n.op_type for n in onnx.load(saved).graph.node}
    for got, want in zip(_ort_run(saved, feeds), expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _conv_model(path):
    rng = np.random.default_rng(1)

    def f(*shape):
        return rng.standard_normal(shape).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c1"], "conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], "relu1"),
             helper.make_node("MaxPool", ["r1"], ["p1"], "pool", kernel_shape=[2, 2],
                              strides=[2, 2]),
             helper.make_node("Conv", ["p1", "W2"], ["c2"], "conv2"),
             helper.make_node("Flatten", ["c2"], ["fl"], "flat"),
             helper.make_node("Gemm", ["fl", "Wf", "bf"], ["y"], "fc", transB=1)]
    inits = [numpy_helper.from_array(f(4, 3, 3, 3), "W"), numpy_helper.from_array(f(4), "B"),
             numpy_helper.from_array(f(6, 4, 3, 3), "W2"),
             numpy_helper.from_array(f(10, 24), "Wf"), numpy_helper.from_array(f(10), "bf")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path, "x", (3, 8, 8)


def _embedding_model(path):
    """Gather from a float table, Transpose, MatMul; the gathered value also read by a float
    Add and the transposed one a graph output (where quantize_dynamic adds DequantizeLinear)."""
    rng = np.random.default_rng(4)
    table = rng.standard_normal((50, 8)).astype(np.float32)
    weight = rng.standard_normal((4, 6)).astype(np.float32)
    nodes = [helper.make_node("Gather", ["E", "ids"], ["emb"], "gather"),
             helper.make_node("Transpose", ["emb"], ["t"], "transpose", perm=[0, 2, 1]),
             helper.make_node("MatMul", ["t", "W"], ["m"], "mm"),
             helper.make_node("Add", ["emb", "emb"], ["s"], "add")]
    outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, None)
               for name in ("m", "s", "t")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "ids", TensorProto.INT64, ["N", 4])], outputs,
        [numpy_helper.from_array(table, "E"), numpy_helper.from_array(weight, "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path, "ids", (4,)


SMALL_MODELS = {"gemm": _gemm_model, "conv": _conv_model, "embedding": _embedding_model}


def _feed(model, shape, rows, seed):
    rng = np.random.default_rng(seed)
    if model == "embedding":
        return rng.integers(0, 50, (rows,) + shape).astype(np.int64)
    return rng.standard_normal((rows,) + shape).astype(np.float32)


@pytest.mark.parametrize("kwargs", [{}, {"per_channel": True}, {"reduce_range": True}],
                         ids=["default", "per_channel", "reduce_range"])
@pytest.mark.parametrize("model", list(SMALL_MODELS))
def test_dynamic_small_models_are_onnxruntimes(tmp_path, model, kwargs):
    src, name, shape = SMALL_MODELS[model](str(tmp_path / f"{model}.onnx"))
    ours, theirs = _dynamic_pair(tmp_path, src, kwargs, model)
    _assert_same_initializers(_initializers(ours), _initializers(theirs))
    assert _nodes(ours) == _nodes(theirs)
    feeds = {name: _feed(model, shape, 4, 2)}
    expected = _ort_run(theirs, feeds)
    for got, want in zip(_ort_run(ours, feeds), expected):
        np.testing.assert_array_equal(got, want)
    for provider in ("cpu", "wasm", "webgpu"):
        for got, want in zip(_edgerun_run(ours, feeds, provider), expected):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# --- without numpy -------------------------------------------------------------------------

NUMPY_FREE = r'''
import hashlib, json, sys
sys.modules["numpy"] = None
from edgerun.quantization import quantize_dynamic, quantize_static, QuantType
from edgerun.ir.host_tensor import HostTensor
job = json.loads(sys.stdin.read())
out = {}
for tag, src, kwargs in job["dynamic"]:
    if "weight_type" in kwargs:
        kwargs["weight_type"] = getattr(QuantType, kwargs["weight_type"])
    out[tag] = hashlib.sha256(quantize_dynamic(src, None, **kwargs)).hexdigest()
raw = open(job["rows"], "rb").read()

class Reader:
    i = 0
    def get_next(self):
        if self.i >= 100:
            return None
        feed = {"input": HostTensor(1, (10, 64), raw[self.i * 256:(self.i + 10) * 256])}
        self.i += 10
        return feed

out["static"] = hashlib.sha256(quantize_static(job["static"], None, Reader())).hexdigest()
print(json.dumps(out))
'''


def test_numpy_free_path_writes_the_same_bytes(tmp_path, holdout):
    import hashlib

    x, _ = holdout
    gemm = _gemm_model(str(tmp_path / "gemm.onnx"))[0]
    conv = _conv_model(str(tmp_path / "conv.onnx"))[0]
    embedding = _embedding_model(str(tmp_path / "embedding.onnx"))[0]
    jobs = [(f"digits_{case}", DIGITS, kw) for case, kw in DYNAMIC_CASES.items()]
    jobs += [("gemm_per_channel", gemm, {"per_channel": True}), ("conv", conv, {}),
             ("embedding", embedding, {"reduce_range": True})]
    expected = {}
    for tag, src, kwargs in jobs:
        kw = dict(kwargs)
        if "weight_type" in kw:
            kw["weight_type"] = getattr(eq.QuantType, kw["weight_type"])
        expected[tag] = hashlib.sha256(eq.quantize_dynamic(src, None, **kw)).hexdigest()
    rows = tmp_path / "rows.bin"
    rows.write_bytes(np.ascontiguousarray(x[:CALIBRATION_ROWS]).tobytes())
    # numpy absent, calibration runs on wasm: compare with numpy's path calibrated on wasm too
    expected["static"] = hashlib.sha256(eq.quantize_static(
        DIGITS, None, _reader(eq.CalibrationDataReader, x),
        calibration_providers=["wasm"])).hexdigest()
    job = {"dynamic": jobs, "rows": str(rows), "static": DIGITS}
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "engine"))
    proc = subprocess.run([sys.executable, "-c", NUMPY_FREE], input=json.dumps(job), check=False,
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == expected


# --- quantize_static (QDQ) -----------------------------------------------------------------

def _static_pair(tmp_path, src, x, kwargs=None, name="input", tag="m"):
    kwargs = dict(kwargs or {})
    ours, theirs = str(tmp_path / f"{tag}_qdq_edgerun.onnx"), str(tmp_path / f"{tag}_qdq_ort.onnx")
    eq.quantize_static(src, ours, _reader(eq.CalibrationDataReader, x, name=name), **kwargs)
    oq.quantize_static(src, theirs, _reader(oq.CalibrationDataReader, x, name=name), **kwargs)
    return ours, theirs


def test_static_qdq_digits_agrees_with_float_and_onnxruntime(tmp_path, holdout):
    x, y = holdout
    ours, theirs = _static_pair(tmp_path, DIGITS, x)
    onnx.checker.check_model(onnx.load(ours))
    assert _nodes(ours) == _nodes(theirs)
    _assert_same_initializers(_initializers(ours), _initializers(theirs), scale_rtol=1e-5)
    ops = {n[0] for n in _nodes(ours)}
    assert {"QuantizeLinear", "DequantizeLinear", "MatMul"} <= ops and "Relu" not in ops

    held_out = {"input": x[CALIBRATION_ROWS:]}                    # rows calibration never saw
    float_labels = _ort_run(DIGITS, held_out)[0]
    ort_labels = _ort_run(theirs, held_out)[0]
    on_ours = _ort_run(ours, held_out)
    for provider in ("cpu", "wasm"):
        got = _edgerun_run(ours, held_out, provider)
        assert (got[0] == on_ours[0]).mean() >= 0.99
    labels = on_ours[0]
    with_float = float((labels == float_labels).mean())
    with_ort = float((labels == ort_labels).mean())
    print(f"\nquantize_static QDQ (digits, calibrated on {CALIBRATION_ROWS} held-out rows, "
          f"measured on the other {len(labels)}): top-1 agreement with the float model "
          f"{with_float:.2%}, with onnxruntime's quantize_static output {with_ort:.2%}; "
          f"accuracy float {(float_labels == y[CALIBRATION_ROWS:]).mean():.2%}, edgerun QDQ "
          f"{(labels == y[CALIBRATION_ROWS:]).mean():.2%}")
    assert with_float >= 0.97
    assert with_ort >= 0.99


STATIC_CASES = {"default": {}, "per_channel": {"per_channel": True},
                "quint8_reduce_range": {"activation_type": "QUInt8", "weight_type": "QUInt8",
                                        "reduce_range": True},
                "keep_relu_qdq_weights": {"extra_options": {"QDQKeepRemovableActivations": True,
                                                            "AddQDQPairToWeight": True}}}


@pytest.mark.parametrize("case", list(STATIC_CASES))
@pytest.mark.parametrize("model", list(SMALL_MODELS))
def test_static_qdq_small_models_are_onnxruntimes(tmp_path, model, case):
    src, name, shape = SMALL_MODELS[model](str(tmp_path / f"{model}.onnx"))
    x = _feed(model, shape, 40, 3)
    kwargs = dict(STATIC_CASES[case])
    e_kwargs, o_kwargs = dict(kwargs), dict(kwargs)
    for key in ("activation_type", "weight_type"):
        if key in kwargs:
            e_kwargs[key] = getattr(eq.QuantType, kwargs[key])
            o_kwargs[key] = getattr(oq.QuantType, kwargs[key])
    ours, theirs = str(tmp_path / "ours.onnx"), str(tmp_path / "theirs.onnx")
    eq.quantize_static(src, ours, _reader(eq.CalibrationDataReader, x, rows=40, name=name),
                       **e_kwargs)
    oq.quantize_static(src, theirs, _reader(oq.CalibrationDataReader, x, rows=40, name=name),
                       **o_kwargs)
    assert _nodes(ours) == _nodes(theirs)
    _assert_same_initializers(_initializers(ours), _initializers(theirs), scale_rtol=1e-5,
                              bias_atol=1)
    feeds = {name: x[:8]}
    np.testing.assert_allclose(_ort_run(ours, feeds)[0], _ort_run(theirs, feeds)[0],
                               rtol=0.05, atol=0.05)
    got = _edgerun_run(ours, feeds, "cpu")[0]
    np.testing.assert_allclose(got, _ort_run(ours, feeds)[0], rtol=0.05, atol=0.05)


# (activation type, weight type, per-column weight scales, weight zero point, rows, K, N):
# both 8-bit types each side, one scale or one per column, symmetric weights without a zero
# point, a single row, depths and widths off the native kernel's blocks
QDQ_MATMULS = [("uint8", "int8", False, True, 7, 64, 32), ("int8", "int8", True, False, 1, 100, 37),
               ("uint8", "uint8", True, True, 5, 33, 9), ("int8", "uint8", False, True, 3, 8, 130)]


@pytest.mark.parametrize("case", QDQ_MATMULS, ids=lambda c: "-".join(map(str, c)))
def test_qdq_matmul_runs_as_an_integer_product(case, tmp_path):
    """MatMul(DequantizeLinear(QuantizeLinear(x)), DequantizeLinear(W)) becomes
    MatMulIntegerToFloat (fuse_qdq_matmul) and agrees with onnxruntime, with and without its
    own optimizations (whose QDQ fusion does the same), within 1e-5 of the output's scale."""
    from onnx import TensorProto, helper, numpy_helper

    a_type, w_type, per_column, w_zero, rows, depth, width = case
    rng = np.random.default_rng(depth + width)
    w_info = np.iinfo(w_type)
    weights = rng.integers(w_info.min, w_info.max + 1, (depth, width)).astype(w_type)
    w_scale = rng.uniform(0.001, 0.01, width if per_column else ()).astype(np.float32)
    inits = [numpy_helper.from_array(weights, "w"), numpy_helper.from_array(w_scale, "ws"),
             numpy_helper.from_array(np.float32(0.02), "xs"),
             numpy_helper.from_array(np.array(3 if a_type == "uint8" else -2, a_type), "xz")]
    w_inputs = ["w", "ws"]
    if w_zero:
        zero = rng.integers(-3, 4, w_scale.shape).astype(w_type) if w_type == "int8" else \
            rng.integers(120, 136, w_scale.shape).astype(w_type)
        inits.append(numpy_helper.from_array(np.asarray(zero, w_type), "wz"))
        w_inputs.append("wz")
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "xs", "xz"], ["a"]),
             helper.make_node("DequantizeLinear", w_inputs, ["b"], axis=1),
             helper.make_node("MatMul", ["a", "b"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, rows, depth])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)
    path = str(tmp_path / "qdq_matmul.onnx")
    onnx.save(model, path)
    feeds = {"x": rng.uniform(-2, 2, (2, rows, depth)).astype(np.float32)}
    options = edgerun.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    got = edgerun.InferenceSession(path, options, providers=["cpu"]).run(None, feeds)[0]
    ops = {n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node}
    assert "MatMulIntegerToFloat" in ops and "MatMul" not in ops, ops
    scale = float(np.abs(got).max())
    for level in (ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
                  ort.GraphOptimizationLevel.ORT_ENABLE_ALL):
        so = ort.SessionOptions()
        so.graph_optimization_level = level
        want = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(
            None, feeds)[0]
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * scale, err_msg=str(level))


def test_integer_conv_prepares_its_weights_once(monkeypatch):
    """ConvInteger with per-channel weight zero points: the centered weights (and the conv's
    plan over them) are built in the first run only (they were rebuilt on every run while
    the zero point was reshaped into a fresh array per call)."""
    from onnx import TensorProto, helper, numpy_helper

    from edgerun.runtime.kernel_context import KernelContext

    rng = np.random.default_rng(2)
    inits = [numpy_helper.from_array(rng.integers(0, 255, (6, 3, 3, 3)).astype(np.uint8), "w"),
             numpy_helper.from_array(np.array(7, np.uint8), "xz"),
             numpy_helper.from_array(rng.integers(120, 130, 6).astype(np.uint8), "wz")]
    node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], pads=[1, 1, 1, 1])
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 3, 12, 12])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)
    feeds = {"x": rng.integers(0, 255, (1, 3, 12, 12)).astype(np.uint8)}
    sess = edgerun.InferenceSession(model.SerializeToString(), providers=["cpu"])
    first = sess.run(None, feeds)[0]
    builds = []
    real = KernelContext.prepared
    monkeypatch.setattr(KernelContext, "prepared", lambda self, key, sources, build: real(
        self, key, sources, lambda: builds.append(key) or build()))
    np.testing.assert_array_equal(sess.run(None, feeds)[0], first)
    assert not builds, builds


# --- refusals ------------------------------------------------------------------------------

def test_unsupported_requests_are_refused_by_name(tmp_path, holdout):
    x, _ = holdout
    reader = _reader(eq.CalibrationDataReader, x)
    with pytest.raises(NotImplementedError, match="QOperator"):
        eq.quantize_static(DIGITS, None, reader, quant_format=eq.QuantFormat.QOperator)
    with pytest.raises(NotImplementedError, match="QInt16"):
        eq.quantize_dynamic(DIGITS, None, weight_type=eq.QuantType.QInt16)
    with pytest.raises(ValueError, match="QUInt8"):
        eq.quantize_static(DIGITS, None, reader, activation_type=eq.QuantType.QInt8,
                           weight_type=eq.QuantType.QUInt8)
    with pytest.raises(NotImplementedError, match="external"):
        eq.quantize_dynamic(DIGITS, str(tmp_path / "x.onnx"), use_external_data_format=True)
    model = onnx.load(DIGITS)
    model.opset_import[0].version = 10
    with pytest.raises(NotImplementedError, match="opset 10"):
        eq.quantize_dynamic(model, None)
