"""onnxruntime's contrib operators (com.microsoft) against onnxruntime's own kernels.

edgerun defines each once as standard nodes (engine/edgerun/optimizer/contrib_ops.py), so
every provider runs them: each case is a one-node com.microsoft model with random inputs,
run by onnxruntime and by edgerun on cpu, wasm and webgpu (each alone: explain() shows no
node elsewhere), at every optimization level for the CPU provider. Tolerances: rtol 1e-4,
atol 1e-5 (float32 reassociation), 2e-4 for MatMulNBits' dot products.
"""
import warnings

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper

import edgerun
from conftest import need

MS = "com.microsoft"
RTOL, ATOL = 1e-4, 1e-5


def _model(op, inputs: dict, outputs: list, opset=17, domain=MS, **attrs):
    """A one-node com.microsoft model; `inputs` name -> array ('' names skip an input)."""
    names = list(inputs)
    node = helper.make_node(op, names, [o for o, _ in outputs], domain=domain, **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for n, v in inputs.items() if n],
        [helper.make_tensor_value_info(o, t, None) for o, t in outputs if o])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    helper.make_opsetid(MS, 1)])
    return model.SerializeToString(), {n: v for n, v in inputs.items() if n}


def _rand(*shape, seed=0, scale=1.0):
    return (np.random.default_rng(seed + sum(shape)).standard_normal(shape) * scale).astype(
        np.float32)


def _matmul_nbits(n, k, block, bits, zero_points, bias):
    rng = np.random.default_rng(n + k + bits)
    blocks = -(-k // block)
    names = ["a", "b", "scales", "zp", "", "bias"]
    values = [_rand(2, 3, k, seed=bits),
              rng.integers(0, 256, (n, blocks, block * bits // 8), dtype=np.uint8),
              (rng.random(n * blocks) * 0.1 + 0.01).astype(np.float32),
              rng.integers(0, 256, (n, -(-blocks * bits // 8)), dtype=np.uint8)
              if zero_points else None, None, _rand(n, seed=5) if bias else None]
    last = max(i for i, v in enumerate(values) if v is not None)
    node_inputs = [nm if v is not None else "" for nm, v in zip(names, values)][:last + 1]
    node = helper.make_node("MatMulNBits", node_inputs, ["y"], domain=MS, K=k, N=n, bits=bits,
                            block_size=block)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(nm, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for nm, v in zip(names, values) if v is not None],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(MS, 1)])
    return model.SerializeToString(), {nm: v for nm, v in zip(names, values) if v is not None}


F = TensorProto.FLOAT
CASES = {
    "SkipLayerNormalization": lambda: _model(
        "SkipLayerNormalization", {"x": _rand(2, 5, 16), "skip": _rand(2, 5, 16, seed=1),
                                   "gamma": _rand(16, seed=2), "beta": _rand(16, seed=3),
                                   "bias": _rand(16, seed=4)},
        [("y", F), ("", F), ("", F), ("sum", F)], epsilon=1e-5),
    "SkipLayerNormalization_no_beta": lambda: _model(
        "SkipLayerNormalization", {"x": _rand(1, 4, 32), "skip": _rand(1, 4, 32, seed=1),
                                   "gamma": _rand(32, seed=2)}, [("y", F)]),
    "SkipSimplifiedLayerNormalization": lambda: _model(
        "SkipSimplifiedLayerNormalization",
        {"x": _rand(2, 3, 16), "skip": _rand(2, 3, 16, seed=1), "gamma": _rand(16, seed=2),
         "bias": _rand(16, seed=3)}, [("y", F), ("", F), ("", F), ("sum", F)], epsilon=1e-6),
    "SimplifiedLayerNormalization": lambda: _model(
        "SimplifiedLayerNormalization", {"x": _rand(2, 3, 16), "scale": _rand(16, seed=2)},
        [("y", F)], domain="", axis=-1, epsilon=1e-6),     # onnxruntime has it in ai.onnx
    "BiasGelu": lambda: _model("BiasGelu", {"a": _rand(2, 5, 16, scale=2),
                                            "b": _rand(16, seed=1)}, [("y", F)]),
    "FastGelu": lambda: _model("FastGelu", {"x": _rand(2, 5, 16, scale=2),
                                            "bias": _rand(16, seed=1)}, [("y", F)]),
    "Gelu": lambda: _model("Gelu", {"x": _rand(3, 7, scale=3)}, [("y", F)]),
    "QuickGelu": lambda: _model("QuickGelu", {"x": _rand(3, 7, scale=3)}, [("y", F)],
                                alpha=1.5),
    "BiasAdd": lambda: _model("BiasAdd", {"x": _rand(2, 4, 320), "bias": _rand(320, seed=1),
                                          "skip": _rand(2, 4, 320, seed=2)}, [("y", F)]),
    "FusedMatMul": lambda: _model("FusedMatMul", {"a": _rand(2, 3, 4), "b": _rand(2, 5, 4)},
                                  [("y", F)], transB=1, alpha=0.5),
    "FusedMatMul_transA": lambda: _model("FusedMatMul", {"a": _rand(4, 3), "b": _rand(4, 6)},
                                         [("y", F)], transA=1),
    "MatMulNBits_4bit": lambda: _matmul_nbits(24, 64, 32, 4, False, False),
    "MatMulNBits_4bit_zero_points_bias": lambda: _matmul_nbits(20, 80, 32, 4, True, True),
    "MatMulNBits_8bit_zero_points": lambda: _matmul_nbits(12, 48, 16, 8, True, False),
}


def _provider(name):
    if name == "wasm":
        from edgerun.providers.wasm.provider import WasmProvider
        ok, why = WasmProvider.available()
        need(ok, "the wasm provider", "pip install wasmtime==50.0.1")
    if name == "webgpu":
        from conftest import WEBGPU_INSTALL
        from edgerun.providers.webgpu.provider import WebGpuProvider
        ok, why = WebGpuProvider.available()
        need(ok, f"a WebGPU adapter ({why})", WEBGPU_INSTALL)
    return name


# onnxruntime's CPU build lacks BiasAdd (CUDA only): its documented formula instead
REFERENCES = {"BiasAdd": lambda f: [f["x"] + f["bias"] + f["skip"]]}


@pytest.mark.parametrize("provider", ["cpu", "wasm", "webgpu"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_contrib_op_matches_onnxruntime(case, provider):
    model, feeds = CASES[case]()
    atol = 2e-4 if case.startswith("MatMulNBits") else ATOL
    if case in REFERENCES:
        want = REFERENCES[case](feeds)
    else:
        want = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
            None, feeds)
    levels = ("disabled", "all") if provider == "cpu" else ("all",)
    for level in levels:
        opts = edgerun.SessionOptions()
        opts.graph_optimization_level = getattr(edgerun.GraphOptimizationLevel,
                                                f"ORT_{'DISABLE_ALL' if level == 'disabled' else 'ENABLE_ALL'}")
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)      # a skipped provider fails
            sess = edgerun.InferenceSession(model, opts, providers=[_provider(provider)])
        placed = {n["provider"] for n in sess.explain()["nodes"]}
        assert placed == {provider}, placed
        got = sess.run(None, feeds)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape)
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=atol, err_msg=f"{case} {level}")


def test_matmul_nbits_weights_fold_into_one_float_matrix():
    """With the optimizer on, constant 4-bit weights are dequantized once at load: the
    session's graph holds a MatMul of a float initializer and nothing of the unpacking."""
    model, feeds = _matmul_nbits(24, 64, 32, 4, True, False)
    from onnx import numpy_helper, load_from_string
    proto = load_from_string(model)
    for name in ("b", "scales", "zp"):           # the quantized parts become initializers
        value = feeds.pop(name)
        proto.graph.initializer.append(numpy_helper.from_array(value, name))
        proto.graph.input.remove(next(i for i in proto.graph.input if i.name == name))
    data = proto.SerializeToString()
    sess = edgerun.InferenceSession(data, providers=["cpu"])
    assert [n["op_type"] for n in sess.explain()["nodes"]] == ["MatMul"]
    want = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_allclose(sess.run(None, feeds)[0], want[0], rtol=RTOL, atol=2e-4)


def test_unsupported_forms_are_named():
    from edgerun.errors import InvalidGraph

    model, _ = _model("FusedMatMul", {"a": _rand(2, 3, 4), "b": _rand(2, 4, 5)}, [("y", F)],
                      transBatchA=1)
    with pytest.raises(InvalidGraph, match="transBatchA"):
        edgerun.InferenceSession(model, providers=["cpu"])


# ---- onnxruntime's tools on a real model ---------------------------------------------------

def _bert_optimized(src: str, dst: str) -> None:
    from onnxruntime.transformers.optimizer import optimize_model

    optimize_model(src, model_type="bert", num_heads=12, hidden_size=384).save_model_to_file(dst)


def _matmul_nbits(src: str, dst: str) -> None:
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    quantizer = MatMulNBitsQuantizer(onnx.load(src), block_size=32, is_symmetric=False)
    quantizer.process()
    quantizer.model.save_model_to_file(dst)


# variant -> (how onnxruntime's tools make it, com.microsoft operators it must contain)
MINILM_VARIANTS = {"bert_optimized": (_bert_optimized, {"SkipLayerNormalization", "BiasGelu"}),
                   "matmul_nbits_4bit": (_matmul_nbits, {"MatMulNBits"})}


@pytest.fixture(scope="module")
def minilm_variants(tmp_path_factory):
    """The MiniLM export (bench/models/export_minilm.py) through onnxruntime's transformer
    optimizer and its 4-bit weight quantizer, as users make them."""
    import onnx

    from bench.models import export_minilm as ex

    need(ex.is_cached() or not ex.missing_tools(), "torch, transformers and tokenizers "
         "(to export MiniLM once)", ex.INSTALL)
    src = ex.ensure_minilm()
    folder = tmp_path_factory.mktemp("minilm_variants")
    paths = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, (make, ops) in MINILM_VARIANTS.items():
            paths[name] = str(folder / f"{name}.onnx")
            make(src, paths[name])
            made = {n.op_type for n in onnx.load(paths[name]).graph.node if n.domain == MS}
            assert ops <= made, f"{name}: onnxruntime's tool made {made}"
    return paths, dict(np.load(ex.feeds_path(16)))


@pytest.mark.parametrize("provider", ["cpu", "wasm", "webgpu"])
@pytest.mark.parametrize("variant", sorted(MINILM_VARIANTS))
def test_onnxruntime_tool_variants_of_minilm_run_wholly_on_each_provider(minilm_variants,
                                                                          variant, provider):
    """What onnxruntime's transformer optimizer and 4-bit quantizer make of MiniLM runs with
    every node on the provider and equals onnxruntime's output (atol 1e-4)."""
    paths, feeds = minilm_variants
    want = onnxruntime.InferenceSession(paths[variant], providers=["CPUExecutionProvider"]).run(
        None, feeds)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        sess = edgerun.InferenceSession(paths[variant], providers=[_provider(provider)])
    assert {n["provider"] for n in sess.explain()["nodes"]} == {provider}
    for g, w in zip(sess.run(None, feeds), want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
