"""Broken and hostile inputs get edgerun's errors, naming the problem, before anything large
is allocated: each case a fuzzer or a user found once (the file format's own cases are in
test_onnx_format.py, pack and serve in test_pack.py and test_cli.py, RunOptions.terminate in
test_session_api.py)."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import edgerun
from edgerun import Fail


def _session(nodes, inputs=(), initializers=(), opset=17, options=None):
    graph = helper.make_graph(nodes, "g", list(inputs),
                              [onnx.ValueInfoProto(name=nodes[-1].output[0])],
                              list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return edgerun.InferenceSession(model.SerializeToString(), options)


def _int64(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


X = helper.make_tensor_value_info("x", TensorProto.FLOAT, None)
HUGE = [10 ** 6, 10 ** 5, 1000]        # 364 TiB of float32


@pytest.mark.parametrize("nodes,inits,feeds", [
    ([helper.make_node("Expand", ["x", "s"], ["y"])], [_int64("s", HUGE)],
     {"x": np.ones(1, np.float32)}),
    ([helper.make_node("ConstantOfShape", ["s"], ["y"])], [_int64("s", HUGE)], {}),
    ([helper.make_node("Tile", ["x", "s"], ["y"])], [_int64("s", [10 ** 10])],
     {"x": np.ones(10, np.float32)}),
    ([helper.make_node("Range", ["a", "b", "c"], ["y"])],
     [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in
      (("a", 0), ("b", 1e12), ("c", 1))], {}),
    ([helper.make_node("Pad", ["x", "p"], ["y"])], [_int64("p", [0, 10 ** 12])],
     {"x": np.ones(3, np.float32)}),
    ([helper.make_node("OneHot", ["x", "d", "v"], ["y"])],
     [_int64("d", 10 ** 12), numpy_helper.from_array(np.array([0, 1], np.float32), "v")],
     {"x": np.ones(3, np.float32)}),
], ids=["Expand", "ConstantOfShape", "Tile", "Range", "Pad", "OneHot"])
def test_huge_outputs_fail_before_allocating(nodes, inits, feeds):
    session = _session(nodes, [X] if feeds else [], inits)
    with pytest.raises(Fail, match=r"would take .* more than SessionOptions.max_tensor_bytes"):
        session.run(None, feeds)


def test_the_allocation_limit_is_a_session_option():
    options = edgerun.SessionOptions()
    options.max_tensor_bytes = 1000
    session = _session([helper.make_node("Expand", ["x", "s"], ["y"])], [X], [_int64("s", [300])],
                       options=options)
    with pytest.raises(Fail, match=r"1200 bytes, more than .*\(1000 bytes\)"):
        session.run(None, {"x": np.ones(1, np.float32)})
    options.max_tensor_bytes = 4000
    session = _session([helper.make_node("Expand", ["x", "s"], ["y"])], [X], [_int64("s", [300])],
                       options=options)
    assert session.run(None, {"x": np.ones(1, np.float32)})[0].shape == (300,)


def test_conv_with_zero_strides_names_them():
    w = numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "w")
    session = _session([helper.make_node("Conv", ["x", "w"], ["y"], strides=[0, 1])], [X], [w])
    with pytest.raises(Fail, match=r"strides \[0, 1\].* must be positive"):
        session.run(None, {"x": np.ones((1, 1, 5, 5), np.float32)})


def test_slice_with_a_huge_constant_axis_is_a_clear_error():
    """The inlined Slice built an index list of 10**15 entries first (MemoryError)."""
    session = _session([helper.make_node("Slice", ["x", "s", "e", "a"], ["y"])], [X],
                       [_int64("s", [0]), _int64("e", [1]), _int64("a", [10 ** 15])])
    with pytest.raises(Fail, match="out of range"):
        session.run(None, {"x": np.ones(3, np.float32)})


@pytest.mark.parametrize("provider", ["cpu", "wasm"])
def test_an_image_of_width_zero_is_refused_not_nan(provider):
    """ppocr's classifier fed a width-0 image returned NaN logits (onnxruntime refuses)."""
    from real_models import REAL_MODELS

    path, _ = REAL_MODELS["ppocr_mobile_cls"]()
    session = edgerun.InferenceSession(path, providers=[provider])
    with pytest.raises(Fail, match="empty spatial axis"):
        session.run(None, {"x": np.zeros((1, 3, 48, 0), np.float32)})


def test_fuzzed_models_give_only_edgerun_errors():
    """A fixed-seed sample of the mutation fuzzer (python -m edgerun.tools.fuzz): every
    mutated model loads and runs, or is refused with one of edgerun's errors; none escapes
    as another exception or hangs."""
    from edgerun.tools import fuzz

    seeds = fuzz.seed_models()
    findings, outcomes = [], set()
    for index in range(3000):
        name, data, how, rng = fuzz.make_case(seeds, 20261126, index)
        outcome, detail = fuzz.run_case(data, rng)
        outcomes.add(outcome)
        if outcome in (fuzz.ESCAPED, fuzz.HANG):
            findings.append(f"i{index} [{name}: {how}] {outcome}: {detail}")
    assert not findings, "\n".join(findings)
    assert outcomes == {fuzz.OK, fuzz.REFUSED}       # both kinds of mutation were made


def test_eight_threads_share_one_session():
    """A soak: 8 threads run one session 40 times each with their own inputs; every result
    is the one a single thread gets."""
    import threading

    from real_models import REAL_MODELS

    path, _ = REAL_MODELS["ppocr_mobile_cls"]()
    session = edgerun.InferenceSession(path)
    rng = np.random.default_rng(0)
    inputs = [rng.random((1, 3, 48, 96 + 16 * i)).astype(np.float32) for i in range(8)]
    expected = [session.run(None, {"x": x})[0] for x in inputs]
    errors = []

    def worker(i):
        try:
            for _ in range(40):
                got = session.run(None, {"x": inputs[i]})[0]
                np.testing.assert_array_equal(got, expected[i])
        except Exception as e:   # noqa: BLE001 - reported below
            errors.append(f"thread {i}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
