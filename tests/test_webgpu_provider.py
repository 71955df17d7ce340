"""The WebGPU provider (native half: wgpu-py on Mesa lavapipe through Vulkan).

Parity with the CPU provider (rtol 1e-3, atol 1e-3) on every ONNX conformance case whose
nodes it claims and on real models; one command encoder per run; buffers and pipelines
reused across runs; errors that name the kernel. lavapipe is slow: the models here are the
small ones.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper

import edgerun
from conftest import ROOT, WEBGPU_INSTALL, need, webgpu_session

RTOL, ATOL = 1e-3, 1e-3




def _assert_close(got, expected, what):
    assert len(got) == len(expected), what
    for g, e in zip(got, expected):
        g, e = np.asarray(g), np.asarray(e)
        assert g.dtype == e.dtype and g.shape == e.shape, f"{what}: {g.dtype}{g.shape} vs {e.dtype}{e.shape}"
        np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL, err_msg=what)


def test_adapter_is_vulkan_not_the_gl_fallback(gpu):
    need(gpu.device.backend == "Vulkan", f"a Vulkan driver (wgpu chose {gpu.device.backend}: "
         f"{gpu.device.description}, the slower GL fallback)", WEBGPU_INSTALL)
    assert "WebGpuExecutionProvider" in edgerun.get_available_providers()


# Runs with WGPU_BACKEND_TYPE=OpenGL (wgpu's fallback where a machine has no Vulkan driver):
# Mod on int32 with negative operands (both fmod), on the webgpu provider alone, against
# numpy; prints the backend and the problems found.
GL_REMAINDERS = r"""
import json, numpy as np, edgerun
from onnx import TensorProto as T, helper
from edgerun.providers.webgpu.provider import shared_context
problems = []
a = np.arange(-50, 50, dtype=np.int32).reshape(1, 100)
b = np.array([7, -7, 3, -3, 9] * 20, np.int32).reshape(1, 100)
for fmod in (0, 1):
    g = helper.make_graph([helper.make_node("Mod", ["a", "b"], ["y"], fmod=fmod)], "g",
        [helper.make_tensor_value_info(n, T.INT32, [1, 100]) for n in "ab"],
        [helper.make_tensor_value_info("y", T.INT32, [1, 100])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    s = edgerun.InferenceSession(m.SerializeToString(), providers=["webgpu"])
    got = s.run(None, {"a": a, "b": b})[0]
    want = np.fmod(a, b) if fmod else np.mod(a, b)
    if not np.array_equal(got, want):
        problems.append(f"Mod fmod={fmod}: {int((got != want).sum())} wrong")
print(json.dumps({"backend": shared_context().device.backend, "problems": problems}))
"""


def test_integer_remainders_are_right_on_the_opengl_backend_too(gpu):
    """WGSL's % on i32 reaches GLSL as %, which GLSL leaves undefined for negative operands
    (Mesa's OpenGL gave wrong Mod results): the kernels use rem_i32 (an unsigned remainder)
    instead. Checked on wgpu's OpenGL backend, where a machine without a Vulkan driver ends."""
    env = {**os.environ, "WGPU_BACKEND_TYPE": "OpenGL"}
    out = subprocess.run([sys.executable, "-c", GL_REMAINDERS], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=300)
    need(out.returncode == 0 or "adapter" not in out.stderr.lower(),
         "an OpenGL adapter for wgpu", "apt-get install -y libgl1-mesa-dri libegl1")
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["backend"] == "OpenGL", result
    assert result["problems"] == [], result


# what the WGSL kernels do not cover yet, by reason: conformance cases whose kernels refuse
# their inputs at run time, so the next provider (cpu here) runs the node. Parity of every case on webgpu alone is
# tests/test_conformance.py::test_node_case_on_webgpu (one id per case).
FALLBACK_REASONS = {
    "3-D pooling": ["test_averagepool_3d_default", "test_averagepool_3d_dilations_small",
                    *[f"test_averagepool_3d_dilations_large_count_include_pad_is_{p}_ceil_mode_"
                      f"is_{c}" for p in (0, 1) for c in ("True", "False")],
                    "test_maxpool_3d_default", "test_maxpool_3d_dilations",
                    "test_maxpool_3d_dilations_use_ref_impl",
                    "test_maxpool_3d_dilations_use_ref_impl_large", "test_lppool_3d_default"],
    "dilated AveragePool": ["test_averagepool_2d_dilations"],
    "Dropout in training mode": [f"test_training_dropout{s}" for s in (
        "_default", "_default_mask", "", "_mask", "_zero_ratio", "_zero_ratio_mask")],
    "an integer Pow operand": ["test_pow_types_int64_float32", "test_pow_types_int32_float32"],
    # 8/16-bit tensors live on the GPU (one word an element) since quantized models run there;
    # kernels that would compute on them in 32 bits refuse them (the provider's narrow guard)
    "an 8/16-bit operand": ["test_bitwise_or_i16_4d", "test_bitwise_not_4d",
                            "test_bitwise_and_ui8_bcast_4v3d", "test_bitwise_or_ui8_bcast_4v3d",
                            "test_bitwise_xor_ui8_bcast_4v3d", "test_linear_attention_fp16"],
    "an empty reduction": [f"test_reduce_{op}_empty_set{x}" for op, xs in (
        ("log_sum", ("", "_expanded")), ("l1", ("", "_expanded")), ("l2", ("", "_expanded")),
        ("max", ("",)), ("min", ("",)), ("prod", ("",)), ("sum", ("",)), ("log_sum_exp", ("",)),
        ("sum_square", ("", "_expanded"))) for x in xs],
}


def test_nodes_refused_at_run_time_are_exactly_the_listed_ones(gpu):
    """Refused by the WGSL kernel at run time, so the next provider (cpu) ran the node."""
    from edgerun.tools import conformance

    expected_failures = conformance.expected_failures("webgpu")
    fell_back = set()
    for case in conformance.load_cases():
        if case["name"] in expected_failures:
            continue                        # not claimed wholly (or listed as failing)
        before = gpu.stats["fallbacks"]
        ok, reason = conformance.run_case(case, "webgpu")
        assert ok, f"{case['name']}: {reason}"
        if gpu.stats["fallbacks"] > before:
            fell_back.add(case["name"])
    listed = {name for names in FALLBACK_REASONS.values() for name in names}
    assert fell_back == listed, (f"new fallbacks: {sorted(fell_back - listed)}; "
                                 f"no longer falling back: {sorted(listed - fell_back)}")


def _real_model(name):
    """(path, feeds) of a model of the real-model set, or of MiniLM-L6 (exported once by
    bench/models/export_minilm.py; it needs torch the first time)."""
    if name == "minilm_l6":
        from bench.models import export_minilm as ex

        need(ex.is_cached() or not ex.missing_tools(), "torch, transformers and tokenizers "
             "(to export MiniLM once)", ex.INSTALL)
        path = ex.ensure_minilm()
        return path, dict(np.load(ex.feeds_path(16)))
    from real_models import REAL_MODELS

    return REAL_MODELS[name]()


def _all_real_models():
    from real_models import REAL_MODELS

    return sorted(REAL_MODELS) + ["minilm_l6"]


def _copied_values(sess) -> list:
    """The values the main graph copies between host and GPU each run (the executor's copy
    steps are named 'copy NAME SRC->DST')."""
    return [step.node.name.split(" ")[1] for step in sess._executor.plan.steps
            if step.provider == "copy"]


def _subgraph_reads(sess) -> set:
    """Values of the main graph that If/Loop bodies read: the executor hands them to
    subgraphs on the host (runtime/executor.py), a copy that is not the provider's."""
    from edgerun.ir.walk import subgraph_reads

    reads = set()
    for node in sess._executor.graph.nodes:
        reads |= subgraph_reads(node)
    return reads


@pytest.mark.parametrize("name", _all_real_models())
def test_real_models_place_every_node_on_the_gpu(gpu, name):
    """Zero CPU fallbacks, and copies only of graph inputs and outputs (plus the values the
    executor passes to If bodies on the host, in the silero models that branch)."""
    path, _ = _real_model(name)
    sess = webgpu_session(path)
    explain = sess.explain()
    on_cpu = [(n["node"], n["op_type"], n["refused_by"]) for n in explain["nodes"]
              if n["provider"] != "webgpu"]
    assert not on_cpu, on_cpu
    io = {v.name for v in sess.get_inputs()} | {v.name for v in sess.get_outputs()}
    copied = _copied_values(sess)
    assert len(copied) == explain["copies_per_run"]
    to_subgraphs = _subgraph_reads(sess)
    assert set(copied) <= io | to_subgraphs, set(copied) - io
    if not to_subgraphs:
        assert sorted(copied) == sorted(io)


# Parity runs (lavapipe is slow: the lighter models, one of each kind). Nested Ifs (silero_vad)
# read back at every If boundary, which the executor places on the host: no readback count.
RUN = {"digits_mlp": True, "light_squeezenet": True, "light_bvlc_alexnet": True, "magika": True,
       "ppocr_mobile_cls": True, "silero_vad": False, "silero_vad_op18_ifless": True,
       "silero_vad_16k_sequence": True, "minilm_l6": True}


def _run_variants():
    from real_models import variant_ids
    ids = [v for v in variant_ids() if v.split("/")[0] in RUN]
    return ids + ["minilm_l6/batch1_seq16", "minilm_l6/batch2_seq9"]


@pytest.mark.parametrize("variant", _run_variants())
def test_real_model_parity(gpu, variant):
    """At batch 1 and a larger batch, dynamic dimensions varied (real_models.py)."""
    name = variant.split("/")[0]
    if name == "minilm_l6":
        path, feeds = _real_model(name)
        if variant.endswith("batch2_seq9"):      # two sentences of 9 tokens
            feeds = {k: np.ascontiguousarray(np.concatenate([v[:, :9], v[:, :9]]))
                     for k, v in feeds.items()}
    else:
        from real_models import model_variant
        path, feeds = model_variant(*variant.split("/"))
    sess = webgpu_session(path)
    expected = edgerun.InferenceSession(path, providers=["cpu"]).run(None, feeds)
    before = dict(gpu.stats)
    _assert_close(sess.run(None, feeds), expected, name)
    assert gpu.stats["fallbacks"] == before["fallbacks"], gpu.fallback_log[-3:]
    if RUN[name]:          # the outputs are the only values read back
        assert gpu.stats["downloads"] - before["downloads"] == len(expected)


def test_integer_and_bool_tensors_stay_on_the_gpu(gpu):
    """Token ids (int64, more than the host keeps) index an embedding on the GPU; comparisons,
    Where, Cast and ArgMax run there; int64 results come back widened from int32."""
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 80])
    emb = helper.make_tensor("emb", TensorProto.FLOAT, [50, 3],
                             np.linspace(-2, 2, 150).astype(np.float32).tolist())
    zero = helper.make_tensor("zero", TensorProto.INT64, [], [0])
    nodes = [helper.make_node("Gather", ["emb", "ids"], ["e"]),
             helper.make_node("Greater", ["ids", "zero"], ["pos"]),
             helper.make_node("Not", ["pos"], ["notpos"]),
             helper.make_node("Unsqueeze", ["notpos", "ax"], ["m"]),
             helper.make_node("Where", ["m", "e", "e2"], ["w"]),
             helper.make_node("ArgMax", ["w"], ["best"], axis=2, keepdims=0),
             helper.make_node("Cast", ["best"], ["bestf"], to=TensorProto.FLOAT),
             helper.make_node("Cast", ["w"], ["wi"], to=TensorProto.INT32),
             helper.make_node("Neg", ["e"], ["e2"])]
    ax = helper.make_tensor("ax", TensorProto.INT64, [1], [2])
    outs = [helper.make_tensor_value_info("best", TensorProto.INT64, None),
            helper.make_tensor_value_info("bestf", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("wi", TensorProto.INT32, None),
            helper.make_tensor_value_info("pos", TensorProto.BOOL, None)]
    graph = helper.make_graph(nodes, "g", [ids], outs, initializer=[emb, zero, ax])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    feeds = {"ids": np.random.default_rng(0).integers(-50, 50, (2, 80)).astype(np.int64)}
    sess = webgpu_session(model.SerializeToString())
    assert {n["provider"] for n in sess.explain()["nodes"]} == {"webgpu"}
    before = dict(gpu.stats)
    got = sess.run(None, feeds)
    _assert_close(got, edgerun.InferenceSession(model.SerializeToString()).run(None, feeds),
                  "int graph")
    assert gpu.stats["fallbacks"] == before["fallbacks"], gpu.fallback_log[-3:]
    assert gpu.stats["downloads"] - before["downloads"] == len(outs)


def test_weights_larger_than_one_binding_are_split(gpu, monkeypatch):
    """A Gemm weight over the adapter's binding limit is uploaded as row blocks; the output
    columns are computed block by block (no CPU fallback)."""
    from edgerun.providers.webgpu.memory import GpuTensorParts

    rng = np.random.default_rng(0)
    w = rng.standard_normal((37, 24)).astype(np.float32)
    b = rng.standard_normal(37).astype(np.float32)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 24])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = _single_node("Gemm", [x], [y], [helper.make_tensor("w", TensorProto.FLOAT, [37, 24],
                                                               w.ravel().tolist()),
                                            helper.make_tensor("b", TensorProto.FLOAT, [37],
                                                               b.tolist())], transB=1)
    monkeypatch.setattr(gpu.device, "max_binding_size", 10 * 24 * 4)   # 10 rows a block
    sess = webgpu_session(model)
    executors = [sess._executor, *sess._executor.subgraphs.values()]   # captured: the body's
    assert any(isinstance(v, GpuTensorParts) and len(v.parts) == 5
               for e in executors for v in e.device_constants.values())
    xv = rng.standard_normal((5, 24)).astype(np.float32)
    before = gpu.stats["fallbacks"]
    _assert_close(sess.run(None, {"x": xv}), [xv @ w.T + b], "Gemm in parts")
    assert gpu.stats["fallbacks"] == before


def test_one_submit_per_run_and_nothing_recreated_on_the_second_run(gpu):
    from real_models import REAL_MODELS

    path, feeds = REAL_MODELS["light_squeezenet"]()
    sess = webgpu_session(path)
    sess.run(None, feeds)
    flushes, pipelines, buffers = gpu.stats["flushes"], gpu.stats["pipelines"], gpu.pool.created
    sess.run(None, feeds)
    assert gpu.stats["flushes"] == flushes + 1          # one command encoder for the run
    assert gpu.stats["pipelines"] == pipelines          # pipelines cached
    assert gpu.pool.created == buffers                  # buffers pooled


def _single_node(op, inputs, outputs, initializers=(), opset=17, **attrs):
    graph = helper.make_graph([helper.make_node(op, [i.name for i in inputs] +
                                                [t.name for t in initializers],
                                                [o.name for o in outputs], name="the_node",
                                                **attrs)],
                              "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]
                             ).SerializeToString()


def _placement(sess, node_name: str) -> dict:
    """explain()'s entry for a node."""
    return next(n for n in sess.explain()["nodes"] if n["node"] == node_name)


def _conv3d_model() -> tuple:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3, 4, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = helper.make_tensor("w", TensorProto.FLOAT, [3, 2, 1, 2, 2],
                           np.linspace(-1, 1, 24).tolist())
    model = _single_node("Conv", [x], [y], [w])          # 3-D convolution: no WGSL layout
    return model, np.random.default_rng(0).standard_normal((1, 2, 3, 4, 5)).astype(np.float32)


def test_unsupported_layouts_run_on_the_next_provider(gpu):
    """The WGSL kernel refuses the layout at run time; the executor runs the node on the next
    provider that claims it (runtime/refusals.py): cpu here, counted and logged."""
    model, xv = _conv3d_model()
    before = gpu.stats["fallbacks"]
    sess = webgpu_session(model)
    assert _placement(sess, "the_node")["falls_back_to"] == "cpu"
    got = sess.run(None, {"x": xv})
    _assert_close(got, edgerun.InferenceSession(model).run(None, {"x": xv}), "Conv3D")
    assert gpu.stats["fallbacks"] == before + 1
    assert "the_node" in gpu.fallback_log[-1] and "3-D convolution" in gpu.fallback_log[-1]


def test_a_refused_node_runs_on_wasm_where_wasm_follows(gpu):
    """As in a page: ["webgpu", "wasm"] sends what the GPU refuses to the wasm kernels, not
    to a CPU kernel inside the GPU provider."""
    from edgerun.providers.wasm.provider import WasmProvider

    model, xv = _conv3d_model()
    wasm = WasmProvider()
    sess = edgerun.InferenceSession(model, providers=["webgpu", wasm, "cpu"])
    assert _placement(sess, "the_node")["falls_back_to"] == "wasm"
    before = gpu.stats["fallbacks"]
    got = sess.run(None, {"x": xv})
    _assert_close(got, edgerun.InferenceSession(model).run(None, {"x": xv}), "Conv3D")
    assert gpu.stats["fallbacks"] == before + 1
    assert wasm.dev.fallbacks == {}


def test_refusals_say_why(gpu):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.DOUBLE, [2, 3])
    sess = webgpu_session(_single_node("Cast", [x], [y], to=TensorProto.DOUBLE))
    (node,) = sess.explain()["nodes"]
    assert node["provider"] == "cpu"
    assert "Cast to tensor(double)" in node["refused_by"][0]


def test_kernel_errors_name_the_kernel_and_node(gpu, tmp_path):
    from edgerun.providers.webgpu.device import GpuError
    from edgerun.providers.webgpu.gpu import GpuContext
    from edgerun.providers.webgpu.shaders import ShaderLibrary, kernel_dir

    for shared in ("snippets.wgsl", "lanes.wgsl"):
        (tmp_path / shared).write_text(open(f"{kernel_dir()}/{shared}").read())
    (tmp_path / "broken.wgsl").write_text("//! kernel bad\nfn main() { let x: u32 = 1.5; }\n")
    ctx = GpuContext(gpu.device, ShaderLibrary(str(tmp_path)))
    ctx.label = "node 'n1' (Relu)"
    out = ctx.empty((4,))
    with pytest.raises(GpuError, match=r"n1.*broken/bad"):
        ctx.dispatch("broken", "bad", out, [], [], 4)
    with pytest.raises(KeyError, match=r"elementwise/unary needs a value for \{\{EXPR\}\}"):
        gpu.dispatch("elementwise", "unary", out, [out], [0.0, 0.0], 4,
                     {"T": "f32", "OT": "f32"})


def test_size_classes_bound_waste():
    from edgerun.providers.webgpu.memory import size_class

    for n in [1, 255, 256, 257, 1000, 4096, 5000, 123457, 10**7]:
        c = size_class(n)
        assert c >= n and c % 256 == 0
        assert c <= max(256, 1.25 * n + 256), (n, c)
    assert size_class(5000) == size_class(5100)           # neighbours share a class


def test_webgpu_ahead_of_wasm_without_numpy_keeps_every_node_on_the_gpu(gpu):
    """As the digits demo asks in a browser (["webgpu", "wasm"], no numpy): wasm's graph
    capture must not wrap nodes webgpu picks first (they would get wasm tensors)."""
    digits = os.path.join(ROOT, "examples", "digits")
    code = ("import sys, json; sys.modules['numpy'] = None\n"
            "import struct, warnings; warnings.simplefilter('ignore')\n"
            "import edgerun\n"
            "from edgerun.ir.host_tensor import HostTensor\n"
            "s = edgerun.InferenceSession(sys.argv[1], providers=['webgpu', 'wasm'])\n"
            "x = HostTensor(1, (2, 64), sys.stdin.buffer.read())\n"
            "label, prob = s.run(None, {'input': x})\n"
            "print(json.dumps({'placed': sorted({n['provider'] for n in s.explain()['nodes']}),"
            " 'label': list(struct.unpack('2q', label.data)),"
            " 'prob': list(struct.unpack('20f', prob.data))}))\n")
    x = np.load(os.path.join(digits, "digits_holdout.npz"))["X"][:2].astype(np.float32)
    out = subprocess.run([sys.executable, "-c", code, os.path.join(digits, "digits_mlp.onnx")],
                         input=x.tobytes(), capture_output=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    got = json.loads(out.stdout.decode().strip().splitlines()[-1])
    label, prob = edgerun.InferenceSession(os.path.join(digits, "digits_mlp.onnx"),
                                           providers=["cpu"]).run(None, {"input": x})
    assert got["placed"] == ["webgpu"], got["placed"]
    assert got["label"] == label.tolist()
    np.testing.assert_allclose(np.array(got["prob"]).reshape(2, 10), prob, rtol=RTOL, atol=ATOL)


def _float16_and_int8_models() -> dict:
    """name -> (model bytes, feeds): an embedding lookup and product on float16 weights, and
    quantize_dynamic's integer product form."""
    from onnx import numpy_helper

    rng = np.random.default_rng(12)
    f16 = helper.make_graph(
        [helper.make_node("Gather", ["E", "ids"], ["e"]),
         helper.make_node("MatMul", ["e", "W"], ["m"]),
         helper.make_node("Add", ["m", "b"], ["a"]),
         helper.make_node("Relu", ["a"], ["r"]),
         helper.make_node("Cast", ["r"], ["y"], to=TensorProto.FLOAT)], "f16",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4])],
        [numpy_helper.from_array(rng.standard_normal((10, 8)).astype(np.float16), "E"),
         numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float16), "W"),
         numpy_helper.from_array(rng.standard_normal(4).astype(np.float16), "b")])
    int8 = helper.make_graph(
        [helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"]),
         helper.make_node("MatMulInteger", ["q", "W", "z", "wz"], ["acc"]),
         helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
         helper.make_node("Mul", ["s", "ws"], ["scale"]),
         helper.make_node("Mul", ["accf", "scale"], ["scaled"]),
         helper.make_node("Add", ["scaled", "b"], ["y"])], "int8",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
        [numpy_helper.from_array(rng.integers(-127, 128, (8, 4)).astype(np.int8), "W"),
         numpy_helper.from_array(np.array(0, np.int8), "wz"),
         numpy_helper.from_array(np.array(0.05, np.float32), "ws"),
         numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")])
    models = {}
    for graph, feeds in ((f16, {"ids": np.array([[1, 7, 3]], np.int64)}),
                         (int8, {"x": rng.standard_normal((3, 8)).astype(np.float32)})):
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        models[graph.name] = (model.SerializeToString(), feeds)
    return models


def test_float16_and_int8_models_in_a_page_without_numpy(gpu):
    """In a page (no numpy) no CPU kernel can run inside a WebGPU node, so nodes whose WGSL
    kernel would compute on float16 or 8-bit tensors in 32 bits are refused up front and the
    next provider, wasm, runs them. 8/16-bit tensors themselves live on the GPU: the quantize
    kernels (DynamicQuantizeLinear, MatMulIntegerToFloat) run there, as do moves and casts.
    The results match onnxruntime. From the extended optimization level on, a float16 model
    computes in float32 (float16_as_float32): all its nodes then run on the GPU."""
    import base64

    import onnxruntime

    code = ("import sys, json, base64; sys.modules['numpy'] = None\n"
            "import warnings; warnings.simplefilter('ignore')\n"
            "import edgerun\n"
            "from edgerun.ir.host_tensor import HostTensor\n"
            "out = {}\n"
            "for name, (model, feeds, level) in json.load(sys.stdin).items():\n"
            "    opts = edgerun.SessionOptions()\n"
            "    opts.graph_optimization_level = level\n"
            "    s = edgerun.InferenceSession(base64.b64decode(model), sess_options=opts,\n"
            "                                 providers=['webgpu', 'wasm'])\n"
            "    y = s.run(None, {k: HostTensor(t, shape, base64.b64decode(b))\n"
            "                     for k, (t, shape, b) in feeds.items()})[0]\n"
            "    out[name] = {'placed': sorted({(n['op_type'], n['provider'])\n"
            "                                   for n in s.explain()['nodes']}),\n"
            "                 'y': [list(y.shape), base64.b64encode(bytes(y.data)).decode()]}\n"
            "print(json.dumps(out))\n")
    models = _float16_and_int8_models()
    models["f16 as f32"] = models["f16"]
    levels = {"f16": 1, "int8": 99, "f16 as f32": 99}     # basic keeps float16 compute
    job = {name: [base64.b64encode(model).decode(),
                  {k: [helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape),
                       base64.b64encode(v.tobytes()).decode()] for k, v in feeds.items()},
                  levels[name]]
           for name, (model, feeds) in models.items()}
    out = subprocess.run([sys.executable, "-c", code], input=json.dumps(job), text=True,
                         capture_output=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    for name, (model, feeds) in models.items():
        shape, data = got[name]["y"]
        y = np.frombuffer(base64.b64decode(data), np.float32).reshape(shape)
        want = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
            None, feeds)[0]
        np.testing.assert_allclose(y, want, rtol=4e-3, atol=4e-3, err_msg=name)
    f16 = dict(got["f16"]["placed"])            # float16 arithmetic: wasm; the lookup: GPU
    assert f16["MatMul"] == f16["Add"] == f16["Relu"] == "wasm", f16
    assert f16["Gather"] == "webgpu", f16
    assert set(dict(got["f16 as f32"]["placed"]).values()) == {"webgpu"}, got["f16 as f32"]
    int8 = dict(got["int8"]["placed"])
    # the page's optimizer fuses MatMulInteger + Cast + Mul into MatMulIntegerToFloat
    assert set(int8.values()) == {"webgpu"} and "MatMulIntegerToFloat" in int8, int8


# ---- differential checks of the kernels added for issue #20 (against the CPU provider) ----

_TYPES = {np.float32: TensorProto.FLOAT, np.int32: TensorProto.INT32,
          np.int64: TensorProto.INT64, np.bool_: TensorProto.BOOL, np.uint8: TensorProto.UINT8}


def _on_gpu_matches_cpu(gpu, op, feeds: dict, opset=24, n_outputs=1, initializers=(),
                        what="", **attrs):
    """`op` over `feeds` (numpy arrays, strided views welcome) runs wholly on the GPU, without
    a CPU-kernel fallback, and matches the CPU provider."""
    inputs = [helper.make_tensor_value_info(k, _TYPES[v.dtype.type], None)
              for k, v in feeds.items()]
    outputs = [helper.make_tensor_value_info(f"y{i}", TensorProto.UNDEFINED, None)
               for i in range(n_outputs)]
    model = _single_node(op, inputs, outputs, list(initializers), opset, **attrs)
    return _model_on_gpu_matches_cpu(gpu, model, feeds, f"{op} {what} {attrs}")


def _model_on_gpu_matches_cpu(gpu, model: bytes, feeds: dict, what: str):
    """Every node of `model` on the GPU, no CPU-kernel fallback, outputs as the CPU's."""
    sess = webgpu_session(model)
    assert {n["provider"] for n in sess.explain()["nodes"]} == {"webgpu"}, \
        sess.explain()["nodes"]
    before = gpu.stats["fallbacks"]
    got = sess.run(None, feeds)
    assert gpu.stats["fallbacks"] == before, gpu.fallback_log[-1:]
    _assert_close(got, edgerun.InferenceSession(model, providers=["cpu"]).run(None, feeds),
                  what)
    return got


def _rng_values(rng, shape, low=-3.0, high=3.0, strided=False):
    if strided:        # a non-contiguous view: every other column of a wider array
        wide = rng.uniform(low, high, tuple(shape[:-1]) + (2 * shape[-1],))
        return wide.astype(np.float32)[..., ::2]
    return rng.uniform(low, high, shape).astype(np.float32)


@pytest.mark.parametrize("op, low, high, attrs", [
    ("Tan", -1.2, 1.2, {}), ("Asin", -0.99, 0.99, {}), ("Acos", -0.99, 0.99, {}),
    ("Atan", -5, 5, {}), ("Sinh", -4, 4, {}), ("Cosh", -4, 4, {}), ("Asinh", -5, 5, {}),
    ("Acosh", 1.0, 6, {}), ("Atanh", -0.95, 0.95, {}), ("Celu", -4, 4, {"alpha": 0.7}),
    ("Shrink", -2, 2, {"lambd": 0.8, "bias": 0.3}), ("Mish", -25, 25, {}),
    ("Swish", -6, 6, {"alpha": 1.5})])
def test_unary_math_kernels_match_the_cpu_provider(gpu, op, low, high, attrs):
    rng = np.random.default_rng(7)
    for shape, strided in (((1, 37), False), ((3, 5, 16), True)):
        x = _rng_values(rng, shape, low, high, strided)
        _on_gpu_matches_cpu(gpu, op, {"x": x}, what=str(shape), **attrs)


def test_mod_bitwise_and_cast_like_match_the_cpu_provider(gpu):
    rng = np.random.default_rng(3)
    a = rng.integers(-50, 50, (4, 1, 40)).astype(np.int32)      # > 64 elements: on the GPU
    b = rng.integers(1, 9, (3, 40)).astype(np.int32) * rng.choice([-1, 1], (3, 40)).astype(
        np.int32)
    for fmod in (0, 1):
        _on_gpu_matches_cpu(gpu, "Mod", {"a": a, "b": b}, what="int32", fmod=fmod)
        x, y = _rng_values(rng, (2, 3, 30), -9, 9), _rng_values(rng, (3, 30), 0.5, 4, True)
        _on_gpu_matches_cpu(gpu, "Mod", {"a": x, "b": -y}, what="float32", fmod=fmod)
    for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor"):
        _on_gpu_matches_cpu(gpu, op, {"a": a, "b": b[:1]}, what="int32 broadcast")
    _on_gpu_matches_cpu(gpu, "BitwiseNot", {"a": a})
    for op in ("Neg", "Abs", "Sign"):                        # integer unary rows
        _on_gpu_matches_cpu(gpu, op, {"a": a.astype(np.int64)}, what="int64")
    x = _rng_values(rng, (5, 30), -20, 20)
    for like in (a, a.astype(np.int64), a > 0, x[:1]):
        _on_gpu_matches_cpu(gpu, "CastLike", {"x": x, "like": like}, what=str(like.dtype))


def test_layer_and_rms_normalization_with_statistics_match_the_cpu_provider(gpu):
    rng = np.random.default_rng(11)
    for shape, axis in (((1, 7, 16), -1), ((2, 3, 4, 5), 1), ((6, 10), 0)):
        x = _rng_values(rng, shape, strided=True)
        cols = shape[axis:]
        scale, bias = _rng_values(rng, cols), _rng_values(rng, cols)
        _on_gpu_matches_cpu(gpu, "LayerNormalization", {"x": x, "s": scale, "b": bias},
                            n_outputs=3, what=str(shape), axis=axis, epsilon=1e-3)
        _on_gpu_matches_cpu(gpu, "LayerNormalization", {"x": x, "s": np.full([1], 2, np.float32)},
                            what=f"{shape} one scale", axis=axis)
        _on_gpu_matches_cpu(gpu, "RMSNormalization", {"x": x, "s": scale}, what=str(shape),
                            axis=axis)
    x = _rng_values(rng, (3, 4, 6), strided=True)
    _on_gpu_matches_cpu(gpu, "ReduceLogSumExp", {"x": x * 30}, opset=13, axes=[0, 2])
    for p in (1, 2):
        _on_gpu_matches_cpu(gpu, "LpNormalization", {"x": x}, opset=13, axis=1, p=p)


@pytest.mark.parametrize("n_idx", [6, 90])       # host indices, and indices on the GPU
def test_index_kernels_match_the_cpu_provider(gpu, n_idx):
    rng = np.random.default_rng(n_idx)
    data = _rng_values(rng, (5, 4, 9), strided=True)
    for axis in range(3):
        shape = [3, 4, 9][:]
        shape[axis] = 2 if n_idx < 64 else 4
        idx = rng.integers(-data.shape[axis], data.shape[axis], shape).astype(np.int64)
        _on_gpu_matches_cpu(gpu, "GatherElements", {"d": data, "i": idx}, opset=13,
                            what=f"axis {axis}", axis=axis)
        upd = _rng_values(rng, shape)
        for reduction in ("none", "add", "mul", "max", "min"):
            if reduction == "none":     # duplicates would make the result order-dependent
                idx = np.broadcast_to(np.arange(shape[axis]).reshape(
                    [-1 if d == axis else 1 for d in range(3)]), shape).astype(np.int64)
            _on_gpu_matches_cpu(gpu, "ScatterElements", {"d": data, "i": idx, "u": upd},
                                opset=18, what=f"axis {axis}", axis=axis,
                                reduction=reduction)
    rows = max(n_idx // 9, 2)
    nd_idx = np.stack([rng.integers(-5, 5, rows), rng.integers(0, 4, rows)], 1).astype(
        np.int64)
    for reduction in ("add", "max"):
        _on_gpu_matches_cpu(gpu, "ScatterND", {"d": data, "i": nd_idx,
                                               "u": _rng_values(rng, (rows, 9))},
                            opset=18, reduction=reduction)
    ints = rng.integers(-9, 9, (2, n_idx)).astype(np.int32)
    for x in (data, ints):
        for upper in (0, 1):
            for k in (-2, 0, 3):
                _on_gpu_matches_cpu(gpu, "Trilu", {"x": x, "k": np.array(k, np.int64)},
                                    opset=14, upper=upper)
        for exclusive, reverse in ((0, 0), (1, 0), (0, 1), (1, 1)):
            _on_gpu_matches_cpu(gpu, "CumSum", {"x": x, "a": np.array(-1, np.int32)},
                                opset=14, exclusive=exclusive, reverse=reverse)
        for largest in (0, 1):
            _on_gpu_matches_cpu(gpu, "TopK", {"x": x, "k": np.array([2], np.int64)},
                                n_outputs=2, opset=11, axis=-1, largest=largest)
    ties = np.repeat(_rng_values(rng, (4, 3)), 4, axis=1)     # equal values: lower index first
    _on_gpu_matches_cpu(gpu, "TopK", {"x": ties, "k": np.array([5], np.int64)}, n_outputs=2,
                        opset=11, axis=1)
    for axis in (0, 1, -1):
        _on_gpu_matches_cpu(gpu, "Hardmax", {"x": ties}, opset=13, axis=axis)
    hot = rng.integers(-6, 6, (n_idx,)).astype(np.int64)
    for values in (np.array([0.5, 2.0], np.float32), np.array([-1, 7], np.int64)):
        _on_gpu_matches_cpu(gpu, "OneHot", {"i": hot, "d": np.array(5, np.int64),
                                            "v": values}, opset=11, axis=0)


def _attention_model(inputs: dict, n_outputs: int, opset: int, **attrs):
    """One Attention node over `inputs` (name -> array, None for an absent input), in the
    operator's input order."""
    order = ["q", "k", "v", "mask", "past_k", "past_v", "nonpad"]
    names = [n if inputs.get(n) is not None else "" for n in order]
    while names and not names[-1]:
        names.pop()
    values = [helper.make_tensor_value_info(n, _TYPES[inputs[n].dtype.type], None)
              for n in names if n]
    outs = [f"y{i}" for i in range(n_outputs)]
    graph = helper.make_graph([helper.make_node("Attention", names, outs, **attrs)], "g",
                              values, [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                                       for o in outs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]
                             ).SerializeToString()


@pytest.mark.parametrize("case", [
    dict(layout=4, hq=2, hkv=2, s=1, l=5),                                    # batch-1 decode
    dict(layout=4, hq=4, hkv=2, s=6, l=6, causal=1, mask="bool4"),            # GQA, causal
    dict(layout=3, hq=3, hkv=1, s=5, l=7, mask="float2", scale=0.3, softcap=2.0),
    dict(layout=3, hq=2, hkv=2, s=3, l=4, past=3, causal=1, mode=3, mask="bool2short"),
    dict(layout=4, hq=2, hkv=1, s=4, l=4, past=2, mode=2, mask="float4", strided=True),
    dict(layout=4, hq=2, hkv=2, s=2, l=6, nonpad=True, causal=1),
    dict(layout=4, hq=2, hkv=2, s=5, l=5, left=1, right=1, mode=0, softcap=1.5)])
def test_attention_matches_the_cpu_provider(gpu, case):
    rng = np.random.default_rng(len(str(case)))
    b, dqk, dv = 2, 8, 6
    hq, hkv, s, l, past = case["hq"], case["hkv"], case["s"], case["l"], case.get("past", 0)
    strided = case.get("strided", False)

    def heads(h, n, d):
        shape = (b, h, n, d) if case["layout"] == 4 else (b, n, h * d)
        return _rng_values(rng, shape, strided=strided)

    total = l + past
    inputs = {"q": heads(hq, s, dqk), "k": heads(hkv, l, dqk), "v": heads(hkv, l, dv)}
    mask = case.get("mask", "")
    if mask:
        shape = {"4": (b, hq, s, total), "2": (s, total), "2short": (s, total - 1)}[
            mask.lstrip("boolfat")]
        m = rng.uniform(-2, 2, shape).astype(np.float32)
        if mask.startswith("bool"):
            m = m > -1.0
            m[..., 0] = True                    # every row attends something
        else:
            m[..., 1] = -np.inf
        inputs["mask"] = m
    if past:
        inputs["past_k"] = _rng_values(rng, (b, hkv, past, dqk))
        inputs["past_v"] = _rng_values(rng, (b, hkv, past, dv))
    opset = 23
    if case.get("nonpad"):
        inputs["nonpad"], opset = np.array([l, l - 2], np.int64), 24
    attrs = {"is_causal": case.get("causal", 0)}
    if case["layout"] == 3:
        attrs.update(q_num_heads=hq, kv_num_heads=hkv)
    for key, attr in (("scale", "scale"), ("softcap", "softcap"), ("mode", "qk_matmul_output_mode"),
                      ("left", "left_window_size"), ("right", "right_window_size")):
        if key in case:
            attrs[attr] = case[key]
    n_outputs = 4 if "mode" in case else (3 if past else 1)
    model = _attention_model(inputs, n_outputs, opset, **attrs)
    feeds = {k: v for k, v in inputs.items() if v is not None}
    _model_on_gpu_matches_cpu(gpu, model, feeds, f"Attention {case}")


@pytest.mark.parametrize("n", [1, 40])        # host labels, and labels on the GPU (> 64)
def test_losses_match_the_cpu_provider(gpu, n):
    rng = np.random.default_rng(n)
    scores = _rng_values(rng, (n, 5, 3), strided=True)
    labels = rng.integers(0, 5, (n, 3)).astype(np.int64)
    labels[0, 0] = -1                                     # the ignored label below
    weight = rng.uniform(0.5, 2, (5,)).astype(np.float32)
    for reduction in ("none", "sum", "mean"):
        for extra in ({}, {"w": weight}):
            _on_gpu_matches_cpu(gpu, "SoftmaxCrossEntropyLoss",
                                {"x": scores, "t": labels, **extra}, opset=13, n_outputs=2,
                                reduction=reduction, ignore_index=-1)
            _on_gpu_matches_cpu(gpu, "NegativeLogLikelihoodLoss",
                                {"x": scores, "t": np.maximum(labels, 0), **extra}, opset=13,
                                reduction=reduction)


def test_uint32_bit_shift_on_gpu_tensors(gpu):
    """uint32 tensors reach the GPU only beside GPU operands (or in a page, without numpy):
    the kernel, called on uploaded tensors, matches numpy, shifts of 32 and more giving 0."""
    from edgerun.providers.webgpu.kernels.elementwise import bit_shift

    rng = np.random.default_rng(5)
    x = rng.integers(0, 2**32, (3, 40), dtype=np.uint64).astype(np.uint32)
    y = rng.integers(0, 40, (40,)).astype(np.uint32)
    for direction, expected in (("LEFT", np.left_shift(x, y)), ("RIGHT", np.right_shift(x, y))):
        expected = np.where(y >= 32, np.uint32(0), expected)
        got = bit_shift(gpu, None, gpu.upload(x), gpu.upload(y), direction=direction)
        np.testing.assert_array_equal(gpu.download(got), expected)


def test_rotary_swiglu_cumprod_and_grouped_norms_match_the_cpu_provider(gpu):
    rng = np.random.default_rng(21)
    pos = rng.integers(0, 20, (2, 5)).astype(np.int64)
    for interleaved in (0, 1):
        for rot in (0, 4):
            angles = _rng_values(rng, (20, (rot or 8) // 2))
            c, s = np.cos(angles), np.sin(angles)
            attrs = dict(interleaved=interleaved, rotary_embedding_dim=rot)
            _on_gpu_matches_cpu(gpu, "RotaryEmbedding", {"x": _rng_values(rng, (2, 3, 5, 8),
                                                                           strided=True),
                                                         "c": c, "s": s, "p": pos},
                                opset=23, what="4-D", **attrs)
            _on_gpu_matches_cpu(gpu, "RotaryEmbedding", {"x": _rng_values(rng, (2, 5, 24)),
                                                         "c": c, "s": s, "p": pos},
                                opset=23, what="3-D", num_heads=3, **attrs)
            _on_gpu_matches_cpu(gpu, "RotaryEmbedding", {"x": _rng_values(rng, (1, 2, 5, 8)),
                                                         "c": c[None, :5], "s": s[None, :5]},
                                opset=23, what="batch 1, no position_ids", **attrs)
    a, b = _rng_values(rng, (3, 33), -8, 8, strided=True), _rng_values(rng, (3, 33))
    _on_gpu_matches_cpu(gpu, "SwiGLU", {"a": a, "b": b}, opset=28, alpha=1.7)
    x = _rng_values(rng, (4, 30), 0.5, 1.5)
    for exclusive, reverse in ((0, 0), (1, 1)):
        _on_gpu_matches_cpu(gpu, "CumProd", {"x": x, "a": np.array(1, np.int64)}, opset=26,
                            exclusive=exclusive, reverse=reverse)
    x = _rng_values(rng, (2, 6, 3, 5), strided=True)
    scale, bias = _rng_values(rng, (6,)), _rng_values(rng, (6,))
    _on_gpu_matches_cpu(gpu, "InstanceNormalization", {"x": x, "s": scale, "b": bias},
                        opset=22, epsilon=1e-3)
    _on_gpu_matches_cpu(gpu, "GroupNormalization", {"x": x, "s": scale, "b": bias}, opset=21,
                        num_groups=3)
    _on_gpu_matches_cpu(gpu, "GroupNormalization", {"x": x, "s": scale[:2], "b": bias[:2]},
                        opset=18, num_groups=2)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_resize_modes_match_the_cpu_provider(gpu, mode):
    rng = np.random.default_rng(len(mode))
    x = _rng_values(rng, (1, 2, 5, 7), strided=True)
    scales = np.array([1, 1, 1.6, 0.6], np.float32)
    for coord in ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel",
                  "half_pixel_symmetric"):
        _on_gpu_matches_cpu(gpu, "Resize", {"x": x, "r": np.zeros(0, np.float32),
                                            "s": scales},
                            opset=19, mode=mode, coordinate_transformation_mode=coord,
                            exclude_outside=int(mode == "cubic"), cubic_coeff_a=-0.5)
    roi = np.array([0.2, 0.1, 0.9, 1.2], np.float32)
    _on_gpu_matches_cpu(gpu, "Resize",
                        {"x": x, "r": roi, "s": np.array([2.0, 1.5], np.float32)}, opset=19,
                        mode=mode, axes=[3, 2], extrapolation_value=-7.0,
                        coordinate_transformation_mode="tf_crop_and_resize")
    for policy in ("stretch", "not_larger", "not_smaller"):
        _on_gpu_matches_cpu(gpu, "Resize", {"x": x, "r": np.zeros(0, np.float32),
                                            "s": np.zeros(0, np.float32),
                                            "z": np.array([9, 4], np.int64)},
                            opset=19, mode=mode, axes=[2, 3], keep_aspect_ratio_policy=policy)


def test_conv_transpose_grid_sample_and_lp_pool_match_the_cpu_provider(gpu):
    rng = np.random.default_rng(33)
    for rank, attrs in ((1, dict(strides=[2], pads=[1, 0])),
                        (2, dict(strides=[2, 3], dilations=[1, 2], group=2,
                                 output_padding=[1, 0])),
                        (2, dict(strides=[2, 2], auto_pad="SAME_UPPER")),
                        (2, dict(strides=[3, 2], output_shape=[11, 8])),
                        (3, dict(strides=[1, 2, 1], pads=[0, 1, 1, 1, 0, 0]))):
        spatial = (5, 4, 3)[:rank]
        x = _rng_values(rng, (1 if rank == 2 else 2, 4) + spatial, strided=True)
        w = _rng_values(rng, (4, 3) + (3, 2, 2)[:rank])
        _on_gpu_matches_cpu(gpu, "ConvTranspose", {"x": x, "w": w, "b": _rng_values(rng, (
            3 * attrs.get("group", 1),))}, opset=11, what=f"{rank}-D", **attrs)
    x = _rng_values(rng, (2, 3, 5, 6), strided=True)
    grid = rng.uniform(-1.3, 1.3, (2, 4, 7, 2)).astype(np.float32)
    x3, grid3 = _rng_values(rng, (1, 2, 3, 4, 5)), rng.uniform(-1.2, 1.2, (1, 2, 3, 2, 3))
    for mode in ("nearest", "linear", "cubic"):
        for padding in ("zeros", "border", "reflection"):
            for corners in (0, 1):
                _on_gpu_matches_cpu(gpu, "GridSample", {"x": x, "g": grid}, opset=20,
                                    mode=mode, padding_mode=padding, align_corners=corners)
                if mode != "cubic":
                    _on_gpu_matches_cpu(gpu, "GridSample", {"x": x3,
                                                            "g": grid3.astype(np.float32)},
                                        opset=20, mode=mode, padding_mode=padding,
                                        align_corners=corners)
    for p in (1, 2, 3):
        _on_gpu_matches_cpu(gpu, "LpPool", {"x": x}, opset=18, p=p, kernel_shape=[2, 3],
                            strides=[1, 2], pads=[1, 0, 0, 1], dilations=[2, 1])
        _on_gpu_matches_cpu(gpu, "GlobalLpPool", {"x": x}, opset=2, p=p)


def test_causal_conv_and_linear_attention_match_the_cpu_provider(gpu):
    rng = np.random.default_rng(44)
    for length, k in ((6, 4), (2, 4), (5, 1)):
        x = _rng_values(rng, (2, 3, length), strided=True)
        w, b = _rng_values(rng, (3, 1, k)), _rng_values(rng, (3,))
        past = _rng_values(rng, (2, 3, k - 1))
        _on_gpu_matches_cpu(gpu, "CausalConvWithState", {"x": x, "w": w, "b": b, "p": past},
                            opset=26, n_outputs=2, activation="silu")
        _on_gpu_matches_cpu(gpu, "CausalConvWithState", {"x": x, "w": w}, opset=26,
                            n_outputs=2)
    batch, steps, hq, hkv, dk, dv = 2, 5, 4, 2, 3, 5
    q = _rng_values(rng, (batch, steps, hq * dk), -1, 1, strided=True)
    key = _rng_values(rng, (batch, steps, hkv * dk), -1, 1)
    v = _rng_values(rng, (batch, steps, hkv * dv), -1, 1)
    past = _rng_values(rng, (batch, hkv, dk, dv), -1, 1)
    heads = dict(q_num_heads=hq, kv_num_heads=hkv)
    for rule, extra in (("linear", {}),
                        ("gated", {"d": _rng_values(rng, (batch, steps, hkv * dk), -1, 0)}),
                        ("delta", {"beta": _rng_values(rng, (batch, steps, 1), 0, 1)}),
                        ("gated_delta", {"d": _rng_values(rng, (batch, steps, hkv), -1, 0),
                                         "beta": _rng_values(rng, (batch, steps, hkv), 0, 1)})):
        feeds = {"q": q, "k": key, "v": v, "p": past, **extra}
        if "d" not in feeds and "beta" in feeds:
            feeds["d"] = None
        names = ["q", "k", "v", "p", "d", "beta"]
        inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
                  for n in names if feeds.get(n) is not None]
        node = helper.make_node("LinearAttention",
                                [n if feeds.get(n) is not None else "" for n in names
                                 if n in feeds], ["y", "s"], update_rule=rule, **heads)
        model = helper.make_model(helper.make_graph(
            [node], "g", inputs, [helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
                                  for n in ("y", "s")]),
            opset_imports=[helper.make_opsetid("", 27)]).SerializeToString()
        feeds = {n: a for n, a in feeds.items() if a is not None}
        _model_on_gpu_matches_cpu(gpu, model, feeds, f"LinearAttention {rule}")


def test_layout_and_gather_operators_match_the_cpu_provider(gpu):
    rng = np.random.default_rng(55)
    x = _rng_values(rng, (3, 4, 5), strided=True)
    ints = rng.integers(-9, 9, (3, 40)).astype(np.int64)
    _on_gpu_matches_cpu(gpu, "Tile", {"x": x, "r": np.array([2, 1, 3], np.int64)}, opset=13)
    _on_gpu_matches_cpu(gpu, "Tile", {"x": ints, "r": np.array([1, 2], np.int64)}, opset=13)
    _on_gpu_matches_cpu(gpu, "Tile", {"x": x.reshape(3, 2, 2, 5), "r": np.array([2, 3, 2, 2],
                                                                              np.int64)},
                        opset=13, what="four repeated dims: two copies")
    _on_gpu_matches_cpu(gpu, "CenterCropPad", {"x": x, "s": np.array([6, 3], np.int64)},
                        opset=18, axes=[0, 2])
    cond = np.array([1, 0, 1, 1], bool)
    _on_gpu_matches_cpu(gpu, "Compress", {"x": x, "c": cond}, opset=11, axis=1)
    _on_gpu_matches_cpu(gpu, "Compress", {"x": x, "c": cond}, opset=11)
    for b in (0, 1):
        idx = np.stack([rng.integers(-3 + b, 3 - b, (3, 7)), rng.integers(0, 4, (3, 7))],
                       -1).astype(np.int64)
        _on_gpu_matches_cpu(gpu, "GatherND", {"x": x, "i": idx[:, :, :2 - b]}, opset=13,
                            batch_dims=b)
    _on_gpu_matches_cpu(gpu, "EyeLike", {"x": x[0]}, opset=9, k=2)
    _on_gpu_matches_cpu(gpu, "EyeLike", {"x": ints}, opset=9, k=-1, dtype=TensorProto.INT32)
    lens = np.array([2, 5, 0, 1], np.int64)
    _on_gpu_matches_cpu(gpu, "ReverseSequence", {"x": x.transpose(2, 1, 0).copy(), "l": lens},
                        opset=10, batch_axis=1, time_axis=0)


def test_window_functions_without_numpy_match_the_cpu_provider(gpu, monkeypatch):
    """Windows are host values (sized by a host scalar): in a page, without numpy, the
    provider computes them in plain Python."""
    from edgerun.providers.webgpu import host_values
    from edgerun.providers.webgpu.kernels import lookup
    from edgerun.ir.host_tensor import HostTensor

    for op in ("HannWindow", "HammingWindow", "BlackmanWindow"):
        for periodic in (0, 1):
            model = _single_node(op, [helper.make_tensor_value_info("n", TensorProto.INT64, [])],
                                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                                 opset=17, periodic=periodic)
            (expected,) = edgerun.InferenceSession(model, providers=["cpu"]).run(
                None, {"n": np.array(10, np.int64)})
            with monkeypatch.context() as m:
                m.setattr(host_values, "np", None)
                got = lookup(op, "").run(gpu, None, HostTensor(7, (), np.int64(10).tobytes()),
                                         periodic=periodic)
            assert isinstance(got, HostTensor)
            np.testing.assert_allclose(np.frombuffer(got.data, np.float32), expected,
                                       atol=1e-6, err_msg=op)


@pytest.mark.parametrize("op, gates", [("GRU", 3), ("RNN", 1), ("LSTM", 4)])
def test_recurrent_layers_match_the_cpu_provider(gpu, op, gates):
    rng = np.random.default_rng(gates)
    steps, batch, inputs, hidden = 4, 3, 5, 6
    for direction, layout in (("forward", 0), ("bidirectional", 1), ("reverse", 0)):
        dirs = 2 if direction == "bidirectional" else 1
        shape = (batch, steps, inputs) if layout else (steps, batch, inputs)
        state = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
        feeds = {"x": _rng_values(rng, shape, -1, 1, strided=True),
                 "w": _rng_values(rng, (dirs, gates * hidden, inputs), -0.5, 0.5),
                 "r": _rng_values(rng, (dirs, gates * hidden, hidden), -0.5, 0.5),
                 "b": _rng_values(rng, (dirs, 2 * gates * hidden), -0.5, 0.5)}
        names = ["x", "w", "r", "b", "", "h0"]
        feeds["h0"] = _rng_values(rng, state, -1, 1)
        if op == "LSTM":
            names.append("c0")
            feeds["c0"] = _rng_values(rng, state, -1, 1)
        attrs = dict(hidden_size=hidden, direction=direction, layout=layout)
        if op == "GRU":
            attrs["linear_before_reset"] = layout
        if op == "RNN" and layout:
            attrs["activations"] = ["Relu"] * dirs
        inputs_info = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
                       for n in names if n]
        outs = ["y", "y_h"] + (["y_c"] if op == "LSTM" else [])
        model = helper.make_model(helper.make_graph(
            [helper.make_node(op, names, outs, **attrs)], "g", inputs_info,
            [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs]),
            opset_imports=[helper.make_opsetid("", 14)]).SerializeToString()
        _model_on_gpu_matches_cpu(gpu, model, feeds, f"{op} {attrs}")


@pytest.mark.parametrize("equation, shapes", [
    ("bij,bjk->bik", [(1, 3, 4), (1, 4, 5)]), ("ij->ji", [(3, 4)]), ("ij->i", [(3, 4)]),
    ("...ii->...i", [(2, 3, 4, 4)]), ("i,i", [(7,), (7,)]), ("bhqd,bhkd->bhqk", [(2, 2, 3, 4),
                                                                             (2, 2, 5, 4)]),
    ("ij,kj", [(3, 4), (2, 4)]), ("...j,jk->...k", [(2, 3, 4), (4, 6)])])
def test_einsum_matches_the_cpu_provider(gpu, equation, shapes):
    rng = np.random.default_rng(len(equation))
    feeds = {f"x{i}": _rng_values(rng, s, strided=i == 0) for i, s in enumerate(shapes)}
    _on_gpu_matches_cpu(gpu, "Einsum", feeds, opset=12, equation=equation)


def test_dft_and_stft_match_the_cpu_provider(gpu):
    rng = np.random.default_rng(66)
    real, cplx = _rng_values(rng, (2, 12, 3, 1), strided=True), _rng_values(rng, (2, 12, 3, 2))
    for x in (real, cplx):
        for inverse, onesided in ((0, 0), (1, 0), (0, 1), (1, 1)):
            if inverse and onesided and x is real:
                continue
            for length in (None, 9, 16):
                feeds = {"x": x, "n": np.array(length, np.int64)} if length else {"x": x}
                _on_gpu_matches_cpu(gpu, "DFT", feeds, opset=17, axis=1, inverse=inverse,
                                    onesided=onesided, what=f"length {length}")
    _on_gpu_matches_cpu(gpu, "DFT", {"x": real, "n": np.array(8, np.int64),
                                     "a": np.array(-2, np.int64)}, opset=20)
    signal = _rng_values(rng, (2, 64, 1))
    _on_gpu_matches_cpu(gpu, "STFT", {"s": signal, "step": np.array(8, np.int64),
                                      "w": np.hanning(16).astype(np.float32)}, opset=17)
    _on_gpu_matches_cpu(gpu, "STFT", {"s": _rng_values(rng, (1, 40, 2)),
                                      "step": np.array(5, np.int64),
                                      "w": np.ones(12, np.float32)}, opset=17, onesided=0)


def test_tensor_scatter_affine_grid_col2im_and_mvn_match_the_cpu_provider(gpu):
    rng = np.random.default_rng(77)
    cache = _rng_values(rng, (3, 2, 6, 4), strided=True)
    update = _rng_values(rng, (3, 2, 3, 4))
    for mode, starts in (("linear", [0, 3, 1]), ("circular", [4, 5, 0])):
        _on_gpu_matches_cpu(gpu, "TensorScatter", {"c": cache, "u": update,
                                                   "i": np.array(starts, np.int64)},
                            opset=24, mode=mode)
    for rank in (2, 3):
        theta = _rng_values(rng, (2, rank, rank + 1))
        size = np.array([2, 3, 4, 5, 6][:rank + 2], np.int64)
        for corners in (0, 1):
            _on_gpu_matches_cpu(gpu, "AffineGrid", {"t": theta, "s": size}, opset=20,
                                align_corners=corners)
    for image, block, attrs in (([5, 6], [2, 3], dict(strides=[1, 2], pads=[1, 0, 0, 1])),
                                ([4, 7], [2, 2], dict(dilations=[1, 2])),
                                ([3, 4, 5], [2, 2, 2], {})):
        rank = len(image)
        strides, dilations = attrs.get("strides", [1] * rank), attrs.get("dilations", [1] * rank)
        pads = attrs.get("pads", [0] * 2 * rank)
        blocks = int(np.prod([(i + pads[d] + pads[d + rank] - (b - 1) * dilations[d] - 1)
                              // strides[d] + 1 for d, (i, b) in enumerate(zip(image, block))]))
        cols = _rng_values(rng, (2, 3 * int(np.prod(block)), blocks))
        _on_gpu_matches_cpu(gpu, "Col2Im", {"x": cols, "i": np.array(image, np.int64),
                                            "b": np.array(block, np.int64)}, opset=18, **attrs)
    _on_gpu_matches_cpu(gpu, "MeanVarianceNormalization",
                        {"x": _rng_values(rng, (2, 3, 4, 5), strided=True)}, opset=13)
    _on_gpu_matches_cpu(gpu, "MeanVarianceNormalization",
                        {"x": _rng_values(rng, (2, 3, 4))}, opset=13, axes=[1])


def test_maxpool_indices_and_training_optimizers_match_the_cpu_provider(gpu):
    rng = np.random.default_rng(88)
    x = _rng_values(rng, (2, 3, 7, 6), strided=True)
    for order in (0, 1):
        _on_gpu_matches_cpu(gpu, "MaxPool", {"x": x}, opset=12, n_outputs=2,
                            kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 1, 1],
                            storage_order=order)
    # windows of padding only (length-1 axis, dilated kernel): index = plane offset - 1
    _on_gpu_matches_cpu(gpu, "MaxPool", {"x": _rng_values(rng, (2, 3, 1))}, opset=12,
                        n_outputs=2, kernel_shape=[2], pads=[1, 1], dilations=[2])
    training = "ai.onnx.preview.training"
    rate, step = np.array(0.3, np.float32), np.array(3, np.int64)
    params = [_rng_values(rng, (2, 40)), _rng_values(rng, (5,))]
    grads = [_rng_values(rng, p.shape) for p in params]
    states = [np.abs(_rng_values(rng, p.shape)) for p in params]
    for op, groups, attrs in (
            ("Adagrad", [states], dict(decay_factor=0.1, epsilon=1e-5, norm_coefficient=1e-3)),
            ("Momentum", [states], dict(alpha=0.9, beta=0.2, mode="nesterov",
                                        norm_coefficient=1e-2)),
            ("Adam", [states, [s * 2 for s in states]],
             dict(alpha=0.9, beta=0.8, epsilon=1e-2, norm_coefficient=1e-3,
                  norm_coefficient_post=0.1))):
        tensors = params + grads + [s for g in groups for s in g]
        feeds = {"r": rate, "t": step, **{f"v{i}": v for i, v in enumerate(tensors)}}
        outs = [f"o{i}" for i in range(len(tensors) - len(params))]
        node = helper.make_node(op, list(feeds), outs, domain=training, **attrs)
        model = helper.make_model(helper.make_graph(
            [node], "g", [helper.make_tensor_value_info(k, _TYPES[v.dtype.type], None)
                          for k, v in feeds.items()],
            [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs]),
            opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(training, 1)]
        ).SerializeToString()
        _model_on_gpu_matches_cpu(gpu, model, feeds, op)


def test_batch_normalization_in_training_mode_matches_the_cpu_provider(gpu):
    rng = np.random.default_rng(99)
    x = _rng_values(rng, (1, 3, 4, 5), strided=True)
    params = {k: _rng_values(rng, (3,), 0.5, 1.5) for k in ("s", "b", "m", "v")}
    for outputs in (1, 3):
        _on_gpu_matches_cpu(gpu, "BatchNormalization", {"x": x, **params}, opset=15,
                            n_outputs=outputs, training_mode=1, momentum=0.8, epsilon=1e-3)
    _on_gpu_matches_cpu(gpu, "BatchNormalization", {"x": x, **params}, opset=15)


# ---- Resize reads per-axis taps computed on the host (ir/resize_rules.py, float64) ----------

def _resize_on_gpu_and_cpu(gpu, feeds: dict, opset: int, **attrs):
    """(webgpu output, CPU-provider output) of one Resize node over `feeds`, asserting that
    the node ran wholly on the GPU (no CPU-kernel fallback inside the provider)."""
    inputs = [helper.make_tensor_value_info(k, _TYPES[v.dtype.type], None)
              for k, v in feeds.items()]
    model = _single_node("Resize", inputs,
                         [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                         opset=opset, **attrs)
    sess = webgpu_session(model)
    assert {n["provider"] for n in sess.explain()["nodes"]} == {"webgpu"}
    before = gpu.stats["fallbacks"]
    (got,) = sess.run(None, feeds)
    assert gpu.stats["fallbacks"] == before, gpu.fallback_log[-1:]
    (expected,) = edgerun.InferenceSession(model, providers=["cpu"]).run(None, feeds)
    assert got.dtype == expected.dtype and got.shape == expected.shape, (got.shape,
                                                                         expected.shape)
    return got, expected


def test_resize_source_pixels_are_the_cpu_kernels_float64_ones(gpu):
    """Nearest with align_corners where n * scale is not a whole number: 9 -> 12 at scale
    1.3333334 divides by 9 * 1.3333334 - 1 = 11.0000006, so the last column reads input
    column 7 (88 / 11.0000006 = 7.99999956, floored), where f32 coordinates in the shader
    picked 8. Then random shapes, modes and coordinate transformations: nearest results
    equal the CPU provider's exactly; linear and cubic (same taps, same summation order,
    f32 arithmetic that may fuse into FMAs) to rtol 1e-5, atol 1e-5."""
    rng = np.random.default_rng(1166)
    x = _rng_values(rng, (1, 2, 3, 9))
    scales = np.array([1, 1, 1.5, 1.3333334], np.float32)
    got, expected = _resize_on_gpu_and_cpu(
        gpu, {"x": x, "r": np.zeros(0, np.float32), "s": scales}, 13, mode="nearest",
        coordinate_transformation_mode="align_corners", nearest_mode="floor")
    np.testing.assert_array_equal(got, expected)
    lengths = [n * float(s) for n, s in zip((3, 9), scales[2:])]
    rows, cols = [np.floor(np.arange(o) * (n - 1) / (length - 1)).astype(int)
                  for o, n, length in ((4, 3, lengths[0]), (12, 9, lengths[1]))]
    assert cols[-1] == 7
    np.testing.assert_array_equal(got, x[:, :, rows][:, :, :, cols])

    transforms = ["half_pixel", "asymmetric", "pytorch_half_pixel", "align_corners",
                  "half_pixel_symmetric", "tf_crop_and_resize"]
    choices = [0.5, 0.6, 0.75, 4 / 3, 1.3333334, 1.5, 1.7, 2.0, 2.5, 3.0]
    for case in range(48):
        mode = ["nearest", "linear", "cubic"][case % 3]
        coord = transforms[rng.integers(len(transforms))]
        shape = (int(rng.integers(1, 3)), int(rng.integers(1, 4)),
                 int(rng.integers(1, 13)), int(rng.integers(1, 13)))
        x = _rng_values(rng, shape)
        attrs = {"mode": mode, "coordinate_transformation_mode": coord}
        if mode == "nearest":
            attrs["nearest_mode"] = ["round_prefer_floor", "round_prefer_ceil", "floor",
                                     "ceil"][rng.integers(4)]
        else:
            attrs["antialias"] = int(rng.random() < 0.3)
        if mode == "cubic":
            attrs.update(cubic_coeff_a=[-0.75, -0.5][rng.integers(2)],
                         exclude_outside=int(rng.integers(2)))
        axes = [2, 3] if rng.random() < 0.5 else [3, 2]   # the CPU resizes in axes order
        attrs["axes"] = axes
        feeds = {"x": x}
        if coord == "tf_crop_and_resize":
            starts = rng.uniform(-0.2, 0.5, 2)
            feeds["r"] = np.concatenate([starts, starts + rng.uniform(0.3, 1.2, 2)]
                                        ).astype(np.float32)
            attrs["extrapolation_value"] = -1.5
        else:
            feeds["r"] = np.zeros(0, np.float32)
        if rng.random() < 0.6:
            feeds["s"] = np.array([choices[i] for i in rng.integers(len(choices), size=2)],
                                  np.float32)
        else:
            feeds["s"] = np.zeros(0, np.float32)
            feeds["z"] = rng.integers(1, 25, size=2).astype(np.int64)
        got, expected = _resize_on_gpu_and_cpu(gpu, feeds, 19, **attrs)
        what = f"case {case}: {shape} {attrs} {feeds.get('s', feeds.get('z'))}"
        if mode == "nearest":
            np.testing.assert_array_equal(got, expected, err_msg=what)
        else:
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5, err_msg=what)

    # Resize-10: asymmetric; nearest truncates, or rounds up when shrinking (onnxruntime's
    # and the CPU kernel's legacy rule), per axis
    x = _rng_values(rng, (1, 2, 7, 10))
    for s in ([1, 1, 0.6, 1.5], [1, 1, 2.5, 0.75]):
        got, expected = _resize_on_gpu_and_cpu(gpu, {"x": x, "s": np.array(s, np.float32)},
                                               10, mode="nearest")
        np.testing.assert_array_equal(got, expected, err_msg=str(s))


def test_runs_after_the_first_reuse_their_bind_groups(gpu):
    """A plan's dispatches bind the same pooled buffers run after run: once the pool has
    settled, a run makes (almost) no new bind groups, and its results do not change."""
    rng = np.random.default_rng(12)
    nodes, inputs = [], "x"
    inits = []
    for i in range(12):
        w = helper.make_tensor(f"w{i}", TensorProto.FLOAT, [32, 32],
                               (rng.standard_normal(1024) * 0.2).astype(np.float32).tolist())
        inits.append(w)
        nodes += [helper.make_node("MatMul", [inputs, f"w{i}"], [f"m{i}"]),
                  helper.make_node("Tanh", [f"m{i}"], [f"t{i}"])]
        inputs = f"t{i}"
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [4, 32])], [helper.make_tensor_value_info(
            inputs, TensorProto.FLOAT, [4, 32])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    session = webgpu_session(model.SerializeToString())
    x = rng.standard_normal((4, 32)).astype(np.float32)
    cache = gpu.device._bind_groups
    first = session.run(None, {"x": x})[0]
    for _ in range(3):
        session.run(None, {"x": x})
    before, dispatches = cache.made, gpu.stats["dispatches"]
    again = session.run(None, {"x": x})[0]
    made, recorded = cache.made - before, gpu.stats["dispatches"] - dispatches
    assert recorded >= 12 and made <= recorded // 4, (made, recorded)
    np.testing.assert_array_equal(again, first)


# ---- 8/16-bit tensors on the GPU (quantized and float16 models, issue #21) ----------------

def _narrow_model(nodes, inputs, outputs, initializers=(), opset=21) -> bytes:
    """IR 10 (opset 21's): onnx's helper writes its newest IR, which onnxruntime releases
    older than the one pinned here refuse (1.30 on the GPU machine read at most IR 13)."""
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    helper.make_opsetid("com.microsoft", 1)],
                              ir_version=10)
    return model.SerializeToString()


def _wholly_on_gpu_as_onnxruntime(gpu, model: bytes, feeds: dict, int_atol=0, float_rtol=0.0,
                                  float_atol=0.0, options=None):
    """Every node on the GPU with no CPU-kernel fallback; the outputs equal onnxruntime's
    (8/16-bit and int32 outputs within int_atol steps, floats within float_rtol/atol)."""
    import onnxruntime

    sess = edgerun.InferenceSession(model, options, providers=["webgpu"])
    placed = {n["provider"] for n in sess.explain()["nodes"]}
    assert placed == {"webgpu"}, sess.explain()["nodes"]
    before = gpu.stats["fallbacks"]
    got = sess.run(None, feeds)
    assert gpu.stats["fallbacks"] == before, gpu.fallback_log[-1:]
    want = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
        None, feeds)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        if w.dtype.kind in "iu":
            np.testing.assert_allclose(g.astype(np.int64), w.astype(np.int64), rtol=0,
                                       atol=int_atol)
        else:
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64),
                                       rtol=float_rtol, atol=float_atol)
    return got


@pytest.mark.parametrize("qtype", [np.uint8, np.int8, np.uint16, np.int16])
@pytest.mark.parametrize("layout", ["tensor", "axis"])
def test_quantize_and_dequantize_on_the_gpu_match_onnxruntime(gpu, qtype, layout):
    """QuantizeLinear then DequantizeLinear, per tensor and per axis, batch 1 and 3, element
    counts that leave a partial packed word (the 8/16-bit tensors move packed): the quantized
    values within one step (WGSL's f32 division may round a tie the other way; on lavapipe
    they are equal), the dequantized ones within that step's scale."""
    rng = np.random.default_rng(np.dtype(qtype).itemsize * 10 + len(layout))
    code = helper.np_dtype_to_tensor_dtype(np.dtype(qtype))
    info = np.iinfo(qtype)
    for batch in (1, 3):
        shape = (batch, 5, 7)
        pshape = () if layout == "tensor" else (5,)
        scale = rng.uniform(0.01, 0.2, pshape).astype(np.float32)
        zp = rng.integers(max(info.min, -3), min(info.max, 3) + 1, pshape).astype(qtype)
        nodes = [helper.make_node("QuantizeLinear", ["x", "scale", "zp"], ["q"], axis=1),
                 helper.make_node("DequantizeLinear", ["q", "scale", "zp"], ["y"], axis=1)]
        model = _narrow_model(
            nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
            [helper.make_tensor_value_info("q", code, None),
             helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
            [helper.make_tensor("scale", TensorProto.FLOAT, list(pshape), scale.reshape(-1)),
             helper.make_tensor("zp", code, list(pshape), zp.tobytes(), raw=True)])
        x = (rng.standard_normal(shape) * 40).astype(np.float32)
        x.flat[:3] = [1e9, -1e9, np.nan]       # saturated both ways; NaN: the lowest value
        got = _wholly_on_gpu_as_onnxruntime(gpu, model, {"x": x}, int_atol=1,
                                            float_atol=float(scale.max()) * 1.0001)
        assert got[0].flat[:3].tolist() == [info.max, info.min, info.min]


@pytest.mark.parametrize("layout", ["tensor", "axis"])
def test_fused_quantize_dequantize_pairs_run_on_the_gpu_with_constants_kept(gpu, layout):
    """A QDQ model's activation pairs: QuantizeLinear -> DequantizeLinear with the same
    parameters fuse into com.edgerun QuantizeDequantize on the GPU (one dispatch a pair) and
    match onnxruntime's two nodes within one quantization step. More pairs than upload_small's
    cache holds, each with its own zero point: their GPU copies are kept, so a second run
    uploads nothing but its feed (they used to be evicted and re-uploaded every run)."""
    from edgerun.providers.webgpu.gpu import SMALL_CACHE

    rng = np.random.default_rng(len(layout))
    pairs = SMALL_CACHE + 20
    pshape = () if layout == "tensor" else (5,)
    nodes, inits, value = [], [], "x"
    for i in range(pairs):
        qtype = (np.uint8, np.int8)[i % 2]
        info = np.iinfo(qtype)
        scale = rng.uniform(0.05, 0.2, pshape).astype(np.float32)
        zp = rng.integers(max(info.min, -3), min(info.max, 3) + 1, pshape).astype(qtype)
        inits += [helper.make_tensor(f"s{i}", TensorProto.FLOAT, list(pshape), scale.reshape(-1)),
                  helper.make_tensor(f"z{i}", helper.np_dtype_to_tensor_dtype(zp.dtype),
                                     list(pshape), zp.tobytes(), raw=True)]
        nodes += [helper.make_node("QuantizeLinear", [value, f"s{i}", f"z{i}"], [f"q{i}"]),
                  helper.make_node("DequantizeLinear", [f"q{i}", f"s{i}", f"z{i}"], [f"d{i}"]),
                  helper.make_node("Mul", [f"d{i}", "gain"], [f"y{i}"])]
        value = f"y{i}"
    inits.append(helper.make_tensor("gain", TensorProto.FLOAT, [], [1.01]))
    model = _narrow_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                          [helper.make_tensor_value_info(value, TensorProto.FLOAT, None)], inits)
    x = (rng.standard_normal((1, 5, 7)) * 8).astype(np.float32)
    x.flat[:2] = [1e9, np.nan]
    options = edgerun.SessionOptions()
    sess = edgerun.InferenceSession(model, options, providers=["webgpu"])
    fused = [n for n in sess.explain()["nodes"] if n["op_type"] == "QuantizeDequantize"]
    assert len(fused) == pairs and {n["provider"] for n in fused} == {"webgpu"}
    # the chain compounds each pair's step: compare pair by pair through onnxruntime's
    # own values at the end only loosely, and exactly against the CPU provider's fused kernel
    cpu = edgerun.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = _wholly_on_gpu_as_onnxruntime(gpu, model, {"x": x}, float_rtol=0.05, float_atol=0.5)
    np.testing.assert_allclose(got[0], cpu[0], rtol=1e-6, atol=1e-6)
    uploads, dispatches = gpu.stats["uploads"], gpu.stats["dispatches"]
    sess.run(None, {"x": x})
    assert gpu.stats["uploads"] - uploads <= 1
    assert gpu.stats["dispatches"] - dispatches <= 2 * pairs + 2


@pytest.mark.parametrize("n", [1, 9, 4099])
def test_dynamic_quantize_and_integer_products_on_the_gpu_match_onnxruntime(gpu, n):
    """DynamicQuantizeLinear (its range over more elements than the first step's 1,024 work
    items, and over one), MatMulInteger with a zero point per column of B (uint8 x int8),
    and com.microsoft MatMulIntegerToFloat with a scale and bias per column, on A of rank 1
    to 3 and batch 1: exact against onnxruntime (the floats within an fma's rounding); a
    zero point per row of A as the CPU's."""
    rng = np.random.default_rng(n)
    k, cols = (n, 3) if n < 100 else (37, 21)
    a_shape = {1: (k,), 9: (1, 2, k)}.get(n, (n // k + 1, 1, k))
    x = rng.standard_normal(a_shape).astype(np.float32) * 3
    w = rng.integers(-128, 128, (k, cols)).astype(np.int8)
    w_zp = rng.integers(-3, 4, cols).astype(np.int8)
    rows = a_shape[-2] if len(a_shape) > 1 else 1
    a_zp = rng.integers(0, 256, rows).astype(np.uint8)
    inits = [helper.make_tensor("w", TensorProto.INT8, list(w.shape), w.tobytes(), raw=True),
             helper.make_tensor("wzp", TensorProto.INT8, [cols], w_zp.tobytes(), raw=True),
             helper.make_tensor("ws", TensorProto.FLOAT, [cols],
                                rng.uniform(0.01, 0.02, cols).astype(np.float32)),
             helper.make_tensor("bias", TensorProto.FLOAT, [cols],
                                rng.standard_normal(cols).astype(np.float32))]
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"]),
             helper.make_node("MatMulIntegerToFloat", ["q", "w", "s", "ws", "z", "wzp", "bias"],
                              ["y"], domain="com.microsoft")]
    outputs = [("q", TensorProto.UINT8), ("s", TensorProto.FLOAT), ("z", TensorProto.UINT8),
               ("y", TensorProto.FLOAT)]
    inits.append(helper.make_tensor("azp", TensorProto.UINT8, [], a_zp[:1].tobytes(), raw=True))
    nodes.append(helper.make_node("MatMulInteger", ["q", "w", "azp", "wzp"], ["acc"]))
    outputs.append(("acc", TensorProto.INT32))
    model = _narrow_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                          [helper.make_tensor_value_info(nm, t, None) for nm, t in outputs],
                          inits)
    # a real GPU may contract the scale's product and the bias into one fma (WGSL allows
    # it): one rounding fewer, within half an ulp of the largest output (|y| < 64 here)
    _wholly_on_gpu_as_onnxruntime(gpu, model, {"x": x}, float_rtol=1e-6, float_atol=4e-6)
    if rows > 1:             # a zero point per row of A (edgerun's, not onnxruntime's): as cpu
        inits[-1] = helper.make_tensor("azp", TensorProto.UINT8, [rows], a_zp.tobytes(),
                                       raw=True)
        model = _narrow_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                    None)],
                              [helper.make_tensor_value_info(nm, t, None) for nm, t in outputs],
                              inits)
        _model_on_gpu_matches_cpu(gpu, model, {"x": x}, "MatMulInteger per-row zero point")


def test_casts_to_and_from_8_and_16_bit_types_on_the_gpu_match_onnxruntime(gpu):
    """float32 -> float16 (nearest even, past the range infinity, NaN, subnormals) -> float32,
    and int32 -> int8 / uint8 / int16 / uint16 (wrapping) -> int32, with an odd element
    count (a partial packed word): equal to onnxruntime's."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(101) * 3000).astype(np.float32)
    x[:8] = [65504, 65520, 65519.99, -1e9, np.inf, np.nan, 3e-7, -6e-8]
    i = rng.integers(-70000, 70000, 101).astype(np.int32)
    nodes = [helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16),
             helper.make_node("Cast", ["h"], ["hf"], to=TensorProto.FLOAT)]
    outputs = [("h", TensorProto.FLOAT16), ("hf", TensorProto.FLOAT)]
    for t in (TensorProto.INT8, TensorProto.UINT8, TensorProto.INT16, TensorProto.UINT16):
        name = f"n{t}"
        nodes += [helper.make_node("Cast", ["i"], [name], to=t),
                  helper.make_node("Cast", [name], [name + "_back"], to=TensorProto.INT32)]
        outputs += [(name, t), (name + "_back", TensorProto.INT32)]
    model = _narrow_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, None),
                                  helper.make_tensor_value_info("i", TensorProto.INT32, None)],
                          [helper.make_tensor_value_info(nm, t, None) for nm, t in outputs])
    opts = edgerun.SessionOptions()      # the float16 pass would fold the round trip away
    opts.graph_optimization_level = edgerun.GraphOptimizationLevel.ORT_DISABLE_ALL
    _wholly_on_gpu_as_onnxruntime(gpu, model, {"x": x, "i": i}, options=opts)


def test_int8_and_float16_minilm_run_wholly_on_the_gpu(gpu):
    """onnxruntime's quantize_dynamic and float16 conversions of MiniLM: every node on the
    GPU (explain()), no CPU-kernel fallback, and the outputs as onnxruntime's: float16 within
    its precision, int8 within 1e-4 (lavapipe gives 1.4e-6, onnxruntime's own spread between
    its optimized and unoptimized runs)."""
    from bench import cases
    from bench.models import export_minilm as ex

    need(ex.is_cached() or not ex.missing_tools(), "torch, transformers and tokenizers "
         "(to export MiniLM once)", ex.INSTALL)
    for variant, atol in (("int8", 1e-4), ("fp16", 5e-3)):
        path, feeds = cases.all_cases()[f"minilm_l6_{variant}_seq16"]()
        _wholly_on_gpu_as_onnxruntime(gpu, path, feeds, float_atol=atol)


@pytest.mark.parametrize("x_shape,w_shape,attrs", [
    ((1, 3, 9, 8), (8, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 4, 7, 7), (4, 1, 3, 3), {"group": 4, "strides": [2, 2]}),
    ((1, 6, 5, 5), (6, 6, 1, 1), {}),
    ((1, 2, 11), (3, 2, 4), {"dilations": [2]}), ((1, 2, 10), (3, 2, 3), {"auto_pad": "SAME_UPPER"})])
def test_conv_integer_on_the_gpu_matches_onnxruntime(gpu, x_shape, w_shape, attrs):
    """ConvInteger (uint8 x int8) on conv.wgsl's i32 convolution, both operands centered
    first: padding, groups, depthwise, strides, 1x1, 1-D with dilation and with SAME_UPPER,
    batch 1 and 2: exact against onnxruntime (per-tensor zero points), and against the CPU
    provider with a zero point per output channel (which onnxruntime does not take)."""
    rng = np.random.default_rng(sum(x_shape) + sum(w_shape))
    x = rng.integers(0, 256, x_shape).astype(np.uint8)
    w = rng.integers(-128, 128, w_shape).astype(np.int8)
    for w_zero in (np.array(3, np.int8), rng.integers(-4, 5, w_shape[0]).astype(np.int8)):
        model = _narrow_model(
            [helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], **attrs)],
            [helper.make_tensor_value_info("x", TensorProto.UINT8, None)],
            [helper.make_tensor_value_info("y", TensorProto.INT32, None)],
            [helper.make_tensor("w", TensorProto.INT8, w_shape, w.tobytes(), raw=True),
             helper.make_tensor("xz", TensorProto.UINT8, [], [131]),
             helper.make_tensor("wz", TensorProto.INT8, list(w_zero.shape), w_zero.tobytes(),
                                raw=True)], opset=13)
        if w_zero.ndim == 0:
            _wholly_on_gpu_as_onnxruntime(gpu, model, {"x": x})
        else:
            _model_on_gpu_matches_cpu(gpu, model, {"x": x}, "ConvInteger per channel")


@pytest.mark.parametrize("lanes", [2, 16, 64])
def test_matmul_tiles_shared_along_k_match_the_cpu(gpu, monkeypatch, lanes):
    """On a GPU, few 4x4 tiles (or integer products' elements) share K between lanes of a
    workgroup (kernels/matmul.py's k_lanes; software adapters take 1): forced here, the vec4
    and the strided kernel, K not a multiple of the lanes, edge tiles, batches, Gemm's
    transposed operands and bias, a fused activation, MatMulInteger and a direct Conv (lanes
    over its input channels) match the CPU provider."""
    from edgerun.providers.webgpu.kernels import matmul as gpu_matmul
    from edgerun.providers.webgpu.kernels import quantization as gpu_quantization

    from edgerun.providers.webgpu.kernels import conv as gpu_conv

    for module in (gpu_matmul, gpu_quantization, gpu_conv):
        monkeypatch.setattr(module, "k_lanes", lambda gpu, tiles, steps: lanes)
    rng = np.random.default_rng(lanes)
    for channels in (1, 3, 24):          # conv2d_oc4: lanes split the input channels
        _on_gpu_matches_cpu(gpu, "Conv", {"x": _rng_values(rng, (2, channels, 9, 7)),
                                          "w": _rng_values(rng, (8, channels, 3, 2))},
                            opset=11, pads=[1, 0, 1, 1], strides=[2, 1],
                            what=f"{channels} channels")
    # int32 sums: the same in any order. K and N multiples of 4 take integer_tiles.wgsl's 4x4
    # tiles (edge tiles where 2 x M rows are not), the others integer_matmul.wgsl's elements
    for m, k, n in [(1, 384, 40), (7, 64, 12), (7, 30, 5), (4, 8, 6)]:
        a = rng.integers(0, 256, (2, m, k), dtype=np.uint8)
        b = rng.integers(0, 256, (k, n), dtype=np.uint8)
        zero = np.array(rng.integers(0, 256), np.uint8)
        _on_gpu_matches_cpu(gpu, "MatMulInteger", {"a": a, "b": b, "za": zero, "zb": zero},
                            opset=10, what=f"{m}x{k}x{n}")
        _model_on_gpu_matches_cpu(gpu, _integer_to_float_model(rng, k, n), {"a": a},
                                  f"MatMulIntegerToFloat {m}x{k}x{n}")
    for m, k, n in [(1, 384, 384), (5, 20, 8), (16, 1000, 12), (3, 7, 5), (2, 1, 3)]:
        _on_gpu_matches_cpu(gpu, "MatMul", {"a": _rng_values(rng, (2, m, k)),
                                            "b": _rng_values(rng, (k, n))}, what=f"{m}x{k}x{n}")
    _on_gpu_matches_cpu(gpu, "Gemm", {"a": _rng_values(rng, (40, 9)),
                                      "b": _rng_values(rng, (11, 40)),
                                      "c": _rng_values(rng, (11,))},
                        transA=1, transB=1, alpha=0.5, beta=2.0)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["t"]), helper.make_node("Relu", ["t"], ["y"])],
        "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [6, 64]),
              helper.make_tensor_value_info("b", TensorProto.FLOAT, [64, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    _model_on_gpu_matches_cpu(gpu, model.SerializeToString(),
                              {"a": _rng_values(rng, (6, 64)), "b": _rng_values(rng, (64, 16))},
                              "MatMul + Relu")


def _integer_to_float_model(rng, k: int, n: int) -> bytes:
    """com.microsoft MatMulIntegerToFloat of uint8 A by a constant int8 B [k, n], zero points
    and scales one a column of B, a bias."""
    inits = [helper.make_tensor("b", TensorProto.INT8, [k, n],
                                rng.integers(-128, 128, (k, n)).astype(np.int8).tobytes(),
                                raw=True),
             helper.make_tensor("zb", TensorProto.INT8, [n],
                                rng.integers(-3, 4, n).astype(np.int8).tobytes(), raw=True),
             helper.make_tensor("za", TensorProto.UINT8, [], [131]),
             helper.make_tensor("sa", TensorProto.FLOAT, [], [0.02]),
             helper.make_tensor("sb", TensorProto.FLOAT, [n], rng.uniform(0.01, 0.02, n)),
             helper.make_tensor("bias", TensorProto.FLOAT, [n], rng.standard_normal(n))]
    node = helper.make_node("MatMulIntegerToFloat", ["a", "b", "sa", "sb", "za", "zb", "bias"],
                            ["y"], domain="com.microsoft")
    return _narrow_model([node], [helper.make_tensor_value_info("a", TensorProto.UINT8, None)],
                         [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)


def _as_a_gpu(monkeypatch) -> None:
    """Software adapters (lavapipe here) taken for GPUs: kernels get more than one lane, the
    shared_lanes text of lanes.wgsl (workgroup memory, barriers), as on a real GPU."""
    from edgerun.providers.webgpu.device import GpuDevice

    monkeypatch.setattr(GpuDevice, "software", property(lambda self: False))


def test_software_adapters_get_kernels_without_barriers(gpu, monkeypatch):
    """Workgroup memory and barriers are written only in lanes.wgsl's shared_lanes section,
    which a kernel gets only with LANES > 1; and on a CPU adapter (lavapipe, SwiftShader)
    every dispatch has one lane, so its kernels hold neither (SwiftShader crashed a Chromium
    renderer in CI on barrier-holding kernels). A GPU gets lanes where they pay."""
    from edgerun.providers.webgpu import shaders

    folder = shaders._kernel_folder()
    for path in sorted(folder.iterdir()):
        if path.suffix != ".wgsl":
            continue
        text = path.read_text(encoding="utf-8")
        if path.name == "lanes.wgsl":
            text = text[:text.index("//! kernel shared_lanes")]
        for shared in ("workgroupBarrier", "var<workgroup>"):
            assert shared not in text, f"{path.name} uses {shared} outside lanes.wgsl"
    lanes = []
    real = type(gpu).dispatch

    def recorded(self, *args, **kwargs):
        subs = kwargs.get("subs", args[6] if len(args) > 6 else None) or {}
        lanes.append(subs.get("LANES", 1))
        return real(self, *args, **kwargs)
    monkeypatch.setattr(type(gpu), "dispatch", recorded)
    rng = np.random.default_rng(5)
    x = _rng_values(rng, (2, 7, 300))
    _on_gpu_matches_cpu(gpu, "Softmax", {"x": x}, opset=13, axis=-1)
    _on_gpu_matches_cpu(gpu, "MatMul", {"a": _rng_values(rng, (1, 384)),
                                        "b": _rng_values(rng, (384, 8))})
    _on_gpu_matches_cpu(gpu, "DynamicQuantizeLinear", {"x": x}, opset=11, n_outputs=3)
    assert lanes, "nothing was dispatched"
    if gpu.device.software:
        assert set(lanes) == {1}, lanes
    else:
        assert max(lanes) > 1, f"a GPU ({gpu.device.adapter_type}) took one lane everywhere"


@pytest.mark.parametrize("length", [1, 3, 64, 100, 1000])
def test_rows_shared_by_lanes_match_the_cpu(gpu, length, monkeypatch):
    """rows.wgsl on a GPU: a reduction, Softmax (over the last axis and a strided middle one)
    and LayerNormalization whose rows are shared by up to a workgroup's lanes (a power of two
    no larger than the row), with a partial last workgroup; and DynamicQuantizeLinear's
    range folded by a workgroup's lanes."""
    _as_a_gpu(monkeypatch)
    rng = np.random.default_rng(length)
    x = _rng_values(rng, (3, 5, length))
    for op in ("ReduceSum", "ReduceMax", "ReduceLogSumExp", "ReduceL2"):
        _on_gpu_matches_cpu(gpu, op, {"x": x}, opset=11, axes=[2], keepdims=0)
    _on_gpu_matches_cpu(gpu, "ReduceMean", {"x": x}, opset=11, axes=[0, 2])
    for axis in (-1, 1):
        _on_gpu_matches_cpu(gpu, "Softmax", {"x": x}, opset=13, axis=axis)
        _on_gpu_matches_cpu(gpu, "LogSoftmax", {"x": x}, opset=13, axis=axis)
    _on_gpu_matches_cpu(gpu, "LayerNormalization", {"x": x, "s": _rng_values(rng, (length,)),
                                                    "b": _rng_values(rng, (length,))},
                        opset=17, n_outputs=3, axis=-1)
    _on_gpu_matches_cpu(gpu, "DynamicQuantizeLinear", {"x": x}, opset=11, n_outputs=3)
