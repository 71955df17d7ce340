"""Every CPU fast path, forced on random shapes of its own, matches onnxruntime.

The cost models pick Conv's method (pointwise, gather, Winograd, native depthwise, row
mixing, depthwise, chunked, taps, flat, windows) and the pools' reduction path (whole input, per window, flat
planes, axis by axis) from shape, stride, batch and size thresholds, so the shapes of the
test models reach only some of them. Here each is forced (conv.forced_method,
pool.forced_path) on the difftest generator's random graphs, whose inputs arrive strided,
transposed, reversed, broadcast or read-only, at batch 1 and more, and the result is
compared with onnxruntime (tolerances as in the difftest). Each method must have run on
enough cases for the test to mean something.

The generated plan code, its inlined ops and the remembered shape results are compared
with the executor's plain loop in tests/test_difftest.py (the `cpu-plain` provider), with
a decoy run before each checked one.
"""
import numpy as np
import pytest

from edgerun.providers.cpu.ops import conv as conv_ops
from edgerun.providers.cpu.ops import pool as pool_ops
from edgerun.tools.difftest import generate, run_case
from edgerun.tools.difftest.runner import INVALID, ORT_DEPARTS, PASSED, REFUSED

SEED = 41
MIN_RUNS = 30        # cases in which the forced method must have run
MAX_CASES = 1500     # random graphs tried per method to get there


def _run_forced(monkeypatch, module, chooser_name, family, force):
    """Runs CASES graphs of `family` with `force` active; returns (failures, runs), counting
    the cases in which the forced choice was the one taken."""
    original = getattr(module, chooser_name)
    taken = []

    def recording(*args, **kwargs):
        result = original(*args, **kwargs)
        taken.append(result)
        return result

    monkeypatch.setattr(module, chooser_name, recording)
    failures, runs, index = [], 0, 0
    while runs < MIN_RUNS and index < MAX_CASES:      # (MIN_RUNS runs, or every case tried)
        case = generate(SEED, index, [family])
        taken.clear()
        (outcome,) = run_case(case, ["cpu"])
        if outcome.status not in (PASSED, ORT_DEPARTS, REFUSED, INVALID):
            failures.append(f"i{index} {outcome.status}: {case.summary}\n    {outcome.detail}")
        runs += any(_name(t) == force for t in taken)
        index += 1
    return failures, runs


def _name(choice) -> str:
    return choice if isinstance(choice, str) else choice.method


@pytest.mark.parametrize("method", conv_ops.CONV_METHODS)
def test_conv_method_forced_on_random_graphs(method, monkeypatch):
    conv_ops._conv_plan.cache_clear()
    with conv_ops.forced_method(method):
        failures, runs = _run_forced(monkeypatch, conv_ops, "_plan_for", "conv", method)
    conv_ops._conv_plan.cache_clear()
    assert not failures, f"Conv method {method}:\n" + "\n".join(failures[:10])
    assert runs >= MIN_RUNS, f"{method} ran on only {runs} of {MAX_CASES} random convs"


@pytest.mark.parametrize("path", pool_ops.REDUCE_PATHS)
def test_pool_path_forced_on_random_graphs(path, monkeypatch):
    with pool_ops.forced_path(path):
        failures, runs = _run_forced(monkeypatch, pool_ops, "_reduce_path", "pool", path)
    assert not failures, f"pool path {path}:\n" + "\n".join(failures[:10])
    minimum = 10 if path == "whole" else MIN_RUNS   # a kernel covering the input is rare
    assert runs >= minimum, f"{path} ran on only {runs} of {MAX_CASES} random pools"


def test_forcing_an_unknown_method_names_the_methods():
    with pytest.raises(ValueError, match="pointwise"):
        with conv_ops.forced_method("fft"):
            pass
    with pytest.raises(ValueError, match="axes"):
        with pool_ops.forced_path("sideways"):
            pass


def test_strided_input_through_the_flat_in_place_layout():
    """The magika bug: a Transpose's output (a strided view) fed to a conv whose flat layout
    uses the input in place; the tap columns assumed contiguous rows (error 237 at batch 1)."""
    import onnxruntime
    from onnx import TensorProto, helper, numpy_helper

    import edgerun

    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 32, 5, 1)).astype(np.float32)
    for batch in (1, 2, 8):
        graph = helper.make_graph(
            [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 3, 1, 2]),
             helper.make_node("Conv", ["t", "w"], ["y"])], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 40, 1, 32])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
            [numpy_helper.from_array(w, "w")])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        data = model.SerializeToString()
        x = rng.standard_normal((batch, 40, 1, 32)).astype(np.float32)
        want = onnxruntime.InferenceSession(data).run(None, {"x": x})[0]
        for method in ("flat", "taps", "chunked", "windows", "gather"):
            with conv_ops.forced_method(method):
                got = edgerun.InferenceSession(data).run(None, {"x": x})[0]
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4,
                                       err_msg=f"batch {batch}, {method}")


@pytest.mark.parametrize("provider", ["cpu", "wasm", "webgpu"])
def test_maxpool_windows_of_padding_only_give_the_lowest_float(provider, request):
    """A dilated kernel with large pads has windows that read only padding: onnxruntime's
    value there is the lowest float (the reference gives NaN, the spec says nothing); an
    input's -inf elsewhere stays -inf (onnxruntime floors it too, the spec does not)."""
    import onnxruntime
    from onnx import TensorProto, helper

    import edgerun

    if provider == "webgpu":
        request.getfixturevalue("gpu")
    graph = helper.make_graph(
        [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], pads=[1, 1, 1, 1],
                          dilations=[3, 3])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)])
    model.ir_version = 7
    x = np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2)
    want = onnxruntime.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    got = edgerun.InferenceSession(model.SerializeToString(), providers=[provider]).run(
        None, {"x": x})[0]
    assert (want == np.finfo(np.float32).min).any()
    np.testing.assert_array_equal(got, want)
