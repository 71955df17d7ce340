"""ir/unary_ops.py: one row per unary operator, and every provider built from it.

- Every row is an operator on cpu, wasm and webgpu and in shape inference; the C switch
  (wasm_kernels/unary_ops.h) is the one the table gives.
- The CPU kernels written by hand (activations.py) agree with their rows' formulas.
- The rows that only the table defines, ONNX's experimental Affine, ScaledTanh and
  ParametricSoftplus (opset 1-9, kept by onnxruntime), match onnxruntime on every provider,
  alone on it (explain(): no node elsewhere), standalone and as an RNN activation.
Tolerances: rtol 1e-5 / atol 1e-6 for cpu and wasm (float32 math; wasm computes in double),
rtol 1e-4 / atol 1e-5 for WebGPU (lavapipe's exp/tanh).
"""
import os
import sys
import warnings

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper

import edgerun
from conftest import usable_provider
from edgerun.ir.unary_ops import UNARY_OPS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOLERANCE = {"cpu": (1e-5, 1e-6), "wasm": (1e-5, 1e-6), "webgpu": (1e-4, 1e-5)}
LEGACY = {"Affine": {"alpha": 1.7, "beta": -0.3}, "ScaledTanh": {"alpha": 1.5, "beta": 0.7},
          "ParametricSoftplus": {"alpha": 0.8, "beta": 2.5}}


def _x(shape=(3, 37), seed=0):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * 4
    x.flat[:6] = [0.0, -0.0, 30.0, -30.0, 1e-7, -1e-7]      # zeros, saturation, tiny
    return x


def _one_node(op, x, opset, **attrs):
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, x.shape)], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model.SerializeToString()


def _run_alone(model, feeds, provider):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)      # a skipped provider fails
        sess = edgerun.InferenceSession(model, providers=[usable_provider(provider)])
    placed = {n["provider"] for n in sess.explain()["nodes"]}
    assert placed == {provider}, placed
    return sess.run(None, feeds)


def _onnxruntime(model, feeds):
    return onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)


def test_every_row_is_an_operator_everywhere():
    import edgerun.providers.webgpu.kernels  # noqa: F401  (registers the GPU operators)
    from edgerun.providers.cpu.registry import lookup
    from edgerun.providers.wasm.ops import lookup as wasm_lookup
    from edgerun.providers.webgpu.kernels.registry import lookup as gpu_lookup
    from edgerun.shape_inference.registry import lookup as infer_lookup

    for name in UNARY_OPS:
        assert len(UNARY_OPS[name].params) <= 2, name
        assert lookup(name, "", 9) is not None, f"cpu: {name}"
        assert wasm_lookup(name, "") is not None, f"wasm: {name}"
        assert gpu_lookup(name, "") is not None, f"webgpu: {name}"
        assert infer_lookup(name, "", 9) is not None, f"shape inference: {name}"


def test_the_c_switch_is_the_tables():
    sys.path.insert(0, os.path.join(ROOT, "wasm_kernels"))
    try:
        import build
    finally:
        sys.path.pop(0)
    with open(build.UNARY_HEADER) as f:
        assert f.read() == build.unary_header(), "run python wasm_kernels/build.py"


@pytest.mark.parametrize("name", sorted(UNARY_OPS))
def test_cpu_kernel_matches_its_formula(name):
    """The hand-written kernels (and the compiled ones) against the row's formula in float64."""
    from edgerun.providers.cpu.ops.unary import formula
    from edgerun.providers.cpu.registry import lookup

    row = UNARY_OPS[name]
    x = _x()
    if name in ("Log", "Sqrt", "Acosh"):
        x = np.abs(x) + 1
    if name in ("Asin", "Acos", "Atanh"):
        x = np.tanh(x) * 0.99
    params = {attribute: default * 1.25 for attribute, default in row.params}
    run = lookup(name, "", 18)
    with np.errstate(all="ignore"):
        got = run(_Ctx(), x, **params)
        want = formula(name)(x.astype(np.float64), *(list(params.values()) + [0.0, 0.0])[:2])
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


class _Ctx:
    opset = 18


@pytest.mark.parametrize("provider", ["cpu", "wasm", "webgpu"])
@pytest.mark.parametrize("op", sorted(LEGACY))
def test_experimental_operator_matches_onnxruntime(op, provider):
    x = _x()
    model = _one_node(op, x, 9, **LEGACY[op])
    want = _onnxruntime(model, {"x": x})
    got = _run_alone(model, {"x": x}, provider)
    np.testing.assert_allclose(got[0], want[0], *TOLERANCE[provider])


@pytest.mark.parametrize("provider", ["cpu", "wasm"])
def test_rnn_activations_from_the_table(provider):
    """ScaledTanh and Affine as an RNN's activations, with activation_alpha/beta."""
    rng = np.random.default_rng(3)
    seq, batch, inputs, hidden = 4, 2, 3, 5
    x = rng.standard_normal((seq, batch, inputs)).astype(np.float32)
    w = rng.standard_normal((2, hidden, inputs)).astype(np.float32) * 0.5
    r = rng.standard_normal((2, hidden, hidden)).astype(np.float32) * 0.5
    node = helper.make_node("RNN", ["x", "w", "r"], ["y"], hidden_size=hidden,
                            direction="bidirectional", activations=["ScaledTanh", "Affine"],
                            activation_alpha=[1.3, 0.5], activation_beta=[0.6, 0.1])
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.ravel()),
                     helper.make_tensor("r", TensorProto.FLOAT, r.shape, r.ravel())])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    model.ir_version = 8
    model = model.SerializeToString()
    want = _onnxruntime(model, {"x": x})
    got = _run_alone(model, {"x": x}, provider)
    np.testing.assert_allclose(got[0], want[0], *TOLERANCE[provider])
