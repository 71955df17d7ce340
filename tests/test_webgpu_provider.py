"""The WebGPU provider (native half: wgpu-py on Mesa lavapipe through Vulkan).

Parity with the CPU provider (rtol 1e-3, atol 1e-3) on every ONNX conformance case whose
nodes it claims and on real models; one command encoder per run; buffers and pipelines
reused across runs; errors that name the kernel. lavapipe is slow: the models here are the
small ones.
"""
import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper

import edgerun
from conftest import need

RTOL, ATOL = 1e-3, 1e-3
INSTALL = ("apt-get install -y --no-install-recommends mesa-vulkan-drivers libvulkan1 && "
           "pip install wgpu==0.32.0")


@pytest.fixture(scope="module")
def gpu():
    try:
        import wgpu  # noqa: F401
    except ImportError:
        need(False, "wgpu", INSTALL)
    from edgerun.providers.webgpu.provider import WebGpuProvider, shared_context
    ok, why = WebGpuProvider.available()
    need(ok, f"a WebGPU adapter ({why})", INSTALL)
    return shared_context()


def _session(model, providers=("webgpu", "cpu")):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)      # webgpu must not be skipped
        return edgerun.InferenceSession(model, providers=list(providers))


def _assert_close(got, expected, what):
    assert len(got) == len(expected), what
    for g, e in zip(got, expected):
        g, e = np.asarray(g), np.asarray(e)
        assert g.dtype == e.dtype and g.shape == e.shape, f"{what}: {g.dtype}{g.shape} vs {e.dtype}{e.shape}"
        np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL, err_msg=what)


def test_adapter_is_vulkan_not_the_gl_fallback(gpu):
    assert gpu.device.backend == "Vulkan", gpu.device.description
    assert "WebGpuExecutionProvider" in edgerun.get_available_providers()


def test_conformance_parity_on_every_claimed_case(gpu):
    from edgerun.tools.conformance import _shape_only, load_cases

    claimed, on_gpu, failures = 0, 0, []
    for case in load_cases():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sess = edgerun.InferenceSession(case["model"], providers=["webgpu", "cpu"])
        except Exception:   # noqa: BLE001 - cases edgerun itself cannot load are not ours
            continue
        if any(n["provider"] != "webgpu" for n in sess.explain()["nodes"]):
            continue
        claimed += 1
        ref = edgerun.InferenceSession(case["model"], providers=["cpu"])
        names = [i.name for i in sess.get_inputs()]
        before = gpu.stats["dispatches"]
        try:
            for inputs, _ in case["data_sets"]:
                feeds = dict(zip(names, inputs))
                got, expected = sess.run(None, feeds), ref.run(None, feeds)
                if _shape_only(case):
                    assert [np.shape(g) for g in got] == [np.shape(e) for e in expected]
                else:
                    _assert_close(got, expected, case["name"])
        except Exception as e:   # noqa: BLE001 - collect every failing case
            failures.append(f"{case['name']}: {type(e).__name__}: {str(e)[:200]}")
        on_gpu += gpu.stats["dispatches"] > before
    assert not failures, "\n".join(failures)
    assert claimed >= 600, claimed          # 623 when written
    assert on_gpu >= 430, on_gpu            # cases that ran WGSL kernels (450 when written)


# name -> whether every node runs on the GPU (then copies per run = inputs + outputs)
REAL = {"digits_mlp": False, "light_squeezenet": True, "ppocr_mobile_cls": False}


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_model_parity(gpu, name):
    from real_models import REAL_MODELS

    path, feeds = REAL_MODELS[name]()
    sess = _session(path)
    expected = edgerun.InferenceSession(path, providers=["cpu"]).run(None, feeds)
    fallbacks = gpu.stats["fallbacks"]
    _assert_close(sess.run(None, feeds), expected, name)
    assert gpu.stats["fallbacks"] == fallbacks, gpu.fallback_log[-3:]
    explain = sess.explain()
    placed = [n["provider"] for n in explain["nodes"]]
    assert placed.count("webgpu") >= 0.6 * len(placed), explain["nodes"]
    if REAL[name]:
        assert set(placed) == {"webgpu"}
        assert explain["copies_per_run"] == len(sess.get_inputs()) + len(sess.get_outputs())


def test_one_submit_per_run_and_nothing_recreated_on_the_second_run(gpu):
    from real_models import REAL_MODELS

    path, feeds = REAL_MODELS["light_squeezenet"]()
    sess = _session(path)
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


def test_unsupported_layouts_fall_back_to_the_cpu_kernel(gpu):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3, 4, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = helper.make_tensor("w", TensorProto.FLOAT, [3, 2, 1, 2, 2],
                           np.linspace(-1, 1, 24).tolist())
    model = _single_node("Conv", [x], [y], [w])          # 3-D convolution: no WGSL layout
    xv = np.random.default_rng(0).standard_normal((1, 2, 3, 4, 5)).astype(np.float32)
    before = gpu.stats["fallbacks"]
    got = _session(model).run(None, {"x": xv})
    _assert_close(got, edgerun.InferenceSession(model).run(None, {"x": xv}), "Conv3D")
    assert gpu.stats["fallbacks"] == before + 1
    assert "the_node" in gpu.fallback_log[-1] and "3-D convolution" in gpu.fallback_log[-1]


def test_refusals_say_why(gpu):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, [2, 3])
    sess = _session(_single_node("Cast", [x], [y], to=TensorProto.INT64))
    (node,) = sess.explain()["nodes"]
    assert node["provider"] == "cpu"
    assert "Cast to tensor(int64)" in node["refused_by"][0]


def test_kernel_errors_name_the_kernel_and_node(gpu, tmp_path):
    from edgerun.providers.webgpu.device import GpuError
    from edgerun.providers.webgpu.gpu import GpuContext
    from edgerun.providers.webgpu.shaders import ShaderLibrary, kernel_dir

    (tmp_path / "snippets.wgsl").write_text(open(f"{kernel_dir()}/snippets.wgsl").read())
    (tmp_path / "broken.wgsl").write_text("//! kernel bad\nfn main() { let x: u32 = 1.5; }\n")
    ctx = GpuContext(gpu.device, ShaderLibrary(str(tmp_path)))
    ctx.label = "node 'n1' (Relu)"
    out = ctx.empty((4,))
    with pytest.raises(GpuError, match=r"n1.*broken/bad"):
        ctx.dispatch("broken", "bad", out, [], [], 4)
    with pytest.raises(KeyError, match=r"elementwise/unary needs a value for \{\{EXPR\}\}"):
        gpu.dispatch("elementwise", "unary", out, [out], [0.0, 0.0], 4)


def test_size_classes_bound_waste():
    from edgerun.providers.webgpu.memory import size_class

    for n in [1, 255, 256, 257, 1000, 4096, 5000, 123457, 10**7]:
        c = size_class(n)
        assert c >= n and c % 256 == 0
        assert c <= max(256, 1.25 * n + 256), (n, c)
    assert size_class(5000) == size_class(5100)           # neighbours share a class
